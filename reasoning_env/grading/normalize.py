"""String normalisation of an extracted answer (model or gold) before matching and parsing.

Every rule below removes notation that does not change the answer's value, and each is here
because a public grading failure needed it (``../shared/cases/grading_cases.jsonl``; the
MATH-500 / GSM8K answer formats; Qwen2.5-Math ``strip_string``; lm-evaluation-harness
``normalize_final_answer``, whose substring unit stripping corrupted ``\\infty`` -> ``\\iny``:
units are only removed as whole words at the end of an answer here).

* math delimiters ``$..$``, ``\\(..\\)``, ``\\[..\\]``, ``\\displaystyle``; nested ``\\boxed{}``;
* ``\\left`` / ``\\right`` / ``\\big``-family sizing; ``\\dfrac``/``\\tfrac``/``\\cfrac`` ->
  ``\\frac``; ``\\dbinom`` -> ``\\binom``;
* LaTeX spacing (``\\!``, ``\\,``, ``\\;``, ``~``) and thousands idioms (``10,\\!080``,
  ``1{,}000``); ``\\quad`` and ``\\text{ and }`` / ``\\text{ or }`` become list commas;
* ``\\mathbb{R}`` -> ``(-\\infty,\\infty)`` (the real line is that interval);
* degrees (``^\\circ``, ``°``, ``\\degree``), ordinal suffixes (``12^{\\text{th}}``), currency
  (``\\$``, ``€``, ``£``), ``\\%`` -> ``%`` (the parser reads percent);
* trailing unit words after a number or expression (``864 \\mbox{ inches}^2``, ``5 apples``);
* text wrappers (``\\text{}``, ``\\mbox{}``, ``\\mathrm{}``, ``\\textbf{}``...) are unwrapped;
* trailing sentence punctuation; whitespace runs collapse to one space.

All operations are ``str.replace`` or regexes without nested quantifiers, applied to answers
capped at :data:`MAX_NORMALISE_CHARS` characters, so the cost is linear and small.
"""

from __future__ import annotations

import re

__all__ = ["normalize_answer", "match_key", "is_wrapped_text", "MAX_NORMALISE_CHARS", "UNIT_WORDS"]

#: Answers longer than this (characters) are not normalised beyond whitespace (they can only
#: match a gold answer verbatim); gold answers are far shorter.
MAX_NORMALISE_CHARS = 4000

_DELIMS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))

_SIMPLE_REPLACEMENTS = (
    ("\\dfrac", "\\frac"),
    ("\\tfrac", "\\frac"),
    ("\\cfrac", "\\frac"),
    ("\\dbinom", "\\binom"),
    ("\\tbinom", "\\binom"),
    ("\\displaystyle", " "),
    ("\\textstyle", " "),
    ("{,}", ","),
    ("\\lvert", "|"),
    ("\\rvert", "|"),
    ("\\vert", "|"),
    ("\\mathbb{R}", "(-\\infty,\\infty)"),  # the real line, as an interval
    ("\\mathbb R", "(-\\infty,\\infty)"),
    ("\\lbrace", "\\{"),
    ("\\rbrace", "\\}"),
    ("\\lbrack", "["),
    ("\\rbrack", "]"),
    ("\\%", "%"),
    ("\\$", ""),
    ("\\euro", ""),
    ("€", ""),
    ("£", ""),
    ("\u2212", "-"),  # unicode minus
    ("\u00d7", "\\times "),
    ("\u00b7", "\\cdot "),
    ("\u00f7", "\\div "),
    ("\u2264", "\\leq "),
    ("\u2265", "\\geq "),
    ("\u2260", "\\neq "),
    ("\u00b1", "\\pm "),
    ("\u03c0", "\\pi "),
    ("\u221e", "\\infty "),
    ("\u221a", "\\sqrt "),
    ("\u222a", "\\cup "),
)

_SIZING_RE = re.compile(r"\\(?:left|right|big|Big|bigg|Bigg)(?:[lrm])?(?![A-Za-z])\.?")
_THIN_THOUSANDS_RE = re.compile(r"(\d),\\!\s*(?=\d)")
# "\\\\" (a matrix row break) is matched first and kept, so "\\\\ " is not read as "\\ ".
_SPACING_RE = re.compile(r"\\\\|\\[!,;:> ]|~|\\(?:thinspace|medspace|thickspace|hfill|enspace)(?![A-Za-z])")
_QUAD_RE = re.compile(r"\\q?quad(?![A-Za-z])")
_AND_OR_RE = re.compile(r"\\(?:text|mbox|textrm|mathrm|textnormal)\{\s*(?:and|or|,)\s*\}")
_DEGREE_RE = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\circ(?![A-Za-z])|\\degree(?![A-Za-z])|°")
_ORDINAL_RE = re.compile(
    r"(\d)\s*(?:\^\s*)?(?:\{\s*)?(?:\\(?:text|mathrm|textrm|mbox)\{\s*)?(?:st|nd|rd|th)(?![A-Za-z])\s*\}?\s*\}?"
)
_WRAPPER_RE = re.compile(
    r"\\(?:text|textbf|textit|textrm|textnormal|textup|textsf|texttt|mathrm|mathbf|mathit|mathsf|"
    r"mathtt|mathnormal|mbox|hbox|operatorname|emph|boldsymbol|bm|mathbb|underline)\s*\{([^{}]*)\}"
)
_TEXT_UNIT_TAIL_RE = re.compile(
    r"\s*\\(?:text|mbox|mathrm|textrm|textnormal|textit|hbox)\s*\{\s*([A-Za-z][A-Za-z .\-/]*?)\s*\}"
    r"\s*(?:\^\s*\{?\s*[23]\s*\}?)?\s*$"
)
_DOLLAR_WORDS_RE = re.compile(r"(?<![A-Za-z])(?:USD|US\$)(?![A-Za-z])")
_PERCENT_WORD_RE = re.compile(r"\s*\\?(?:percent|per\s+cent)\s*$", re.IGNORECASE)
_TRAILING_PUNCT = " .,;:。"
_WS_RE = re.compile(r"\s+")
_THOUSANDS_RE = re.compile(r"^([-+]?)(\d{1,3}(?:,\d{3})+)(\.\d+)?(%?)$")
_NUMBER_THEN_WORDS_RE = re.compile(
    r"^([-+]?\s?\d[\d,]*(?:\.\d+)?%?)\s+([A-Za-z][A-Za-z .\-/]*?)(?:\s*\^\s*\{?\s*[23]\s*\}?)?\s*$"
)

#: Unit and count words stripped after a number (whole words only; case-insensitive).
UNIT_WORDS = frozenset(
    """
    cm m km mm in inch inches ft feet foot yd yard yards mi mile miles meter meters metre metres
    centimeter centimeters centimetre centimetres kilometer kilometers millimeter millimeters
    kg g mg gram grams kilogram kilograms lb lbs pound pounds oz ounce ounces ton tons
    s sec secs second seconds min mins minute minutes h hr hrs hour hours day days week weeks
    month months year years
    dollar dollars cent cents usd euro euros
    unit units sq square cubic degree degrees radian radians
    l ml liter liters litre litres gallon gallons quart quarts pint pints cup cups
    mph kph km/h m/s
    """.split()
)

# Words that are mathematics, never units (kept even after a number).
_MATH_WORDS = frozenset(
    "pi e i sin cos tan sec csc cot ln log exp sqrt and or infinity infty".split()
)


def _spacing_repl(m: "re.Match[str]") -> str:
    return m.group(0) if m.group(0) == "\\\\" else " "


def _strip_delimiters(s: str) -> str:
    for _ in range(4):
        before = s
        for left, right in _DELIMS:
            if len(s) >= len(left) + len(right) and s.startswith(left) and s.endswith(right):
                inner = s[len(left):len(s) - len(right)]
                # "$a$ and $b$" is not one delimited answer.
                if left == "$" and "$" in inner:
                    continue
                s = inner.strip()
        if s == before:
            break
    return s


def _unwrap_boxes(s: str) -> str:
    """Replace nested ``\\boxed{X}`` / ``\\fbox{X}`` by ``X`` (bounded number of passes)."""
    from reasoning_env.grading.extract import match_brace

    for _ in range(8):
        idx = -1
        for cmd in ("\\boxed", "\\fbox"):
            i = s.find(cmd + "{")
            if i != -1 and (idx == -1 or i < idx):
                idx = i
                cmd_len = len(cmd)
        if idx == -1:
            return s
        open_idx = idx + cmd_len
        close = match_brace(s, open_idx)
        if close == -1:
            return s
        s = s[:idx] + s[open_idx + 1:close] + s[close + 1:]
    return s


def _strip_unit_tail(s: str) -> str:
    """Drop trailing ``\\text{unit}`` groups (optionally squared/cubed) after a number/expression."""
    for _ in range(3):
        m = _TEXT_UNIT_TAIL_RE.search(s)
        if m is None:
            break
        head = s[:m.start()].rstrip()
        words = m.group(1).strip().lower()
        if not head or not any(ch.isdigit() for ch in head) or words in ("and", "or"):
            break
        s = head
    m = _NUMBER_THEN_WORDS_RE.match(s)
    if m is not None:
        words = m.group(2).strip().lower().split()
        if words and all(w not in _MATH_WORDS and len(w) >= 2 or w in UNIT_WORDS for w in words):
            s = m.group(1)
    return s


def normalize_answer(s: str) -> str:
    """Normalise an answer string (see the module docstring for the rules).

    Args:
        s: An extracted answer or a gold answer (LaTeX or plain text).
    Returns:
        The normalised string (single spaces, no surrounding delimiters). Idempotent on its own
        output for the rules above.
    Raises:
        TypeError: ``s`` is not a ``str``.
    """
    if not isinstance(s, str):
        raise TypeError(f"answer must be a str, got {type(s).__name__}")
    s = s.strip()
    if len(s) > MAX_NORMALISE_CHARS:
        return _WS_RE.sub(" ", s)
    s = _strip_delimiters(s)
    if "\\boxed" in s or "\\fbox" in s:
        s = _unwrap_boxes(s)
    for old, new in _SIMPLE_REPLACEMENTS:
        if old in s:
            s = s.replace(old, new)
    if "\\" in s:
        s = _SIZING_RE.sub("", s)
        s = _THIN_THOUSANDS_RE.sub(r"\1,", s)
        s = _SPACING_RE.sub(_spacing_repl, s)
        s = _QUAD_RE.sub(",", s)
        s = _AND_OR_RE.sub(",", s)
    s = _DEGREE_RE.sub("", s)
    if "th" in s or "st" in s or "nd" in s or "rd" in s:
        s = _ORDINAL_RE.sub(r"\1", s)
    if "$" in s:
        s = s.replace("$", "")
    if "US" in s:
        s = _DOLLAR_WORDS_RE.sub("", s)
    if "cent" in s:
        s = _PERCENT_WORD_RE.sub("%", s)
    s = s.strip()
    if "\\" in s or " " in s:
        s = _strip_unit_tail(s)
    if "\\" in s:
        for _ in range(6):
            new = _WRAPPER_RE.sub(r"\1", s)
            if new == s:
                break
            s = new
    s = _WS_RE.sub(" ", s).strip().rstrip(_TRAILING_PUNCT).strip()
    # After unwrapping, "5 apples" may have appeared.
    if " " in s:
        s = _strip_unit_tail(s)
    m = _THOUSANDS_RE.match(s)
    if m is not None:
        s = m.group(1) + m.group(2).replace(",", "") + (m.group(3) or "") + m.group(4)
    return s


# A space between digits that is not a thousands group ("1 1/2", "2 3"; "1 000" is one number).
_DIGITS_SPACE_RE = re.compile(r"(?<=\d) (?=\d)(?!\d{3}(?![\d/]))")


def match_key(normalised: str) -> str:
    """The exact-match key of a normalised answer: spaces removed, except one between two
    digits that is not a thousands separator (``1 1/2`` is a mixed number, not ``11/2``)."""
    if " " not in normalised:
        return normalised
    if _DIGITS_SPACE_RE.search(normalised) is not None:
        normalised = _DIGITS_SPACE_RE.sub("\u2423", normalised)
    return normalised.replace(" ", "")


_WRAPPED_TEXT_RE = re.compile(
    r"^\s*\$?\s*\\(?:text|textbf|textit|textrm|textnormal|mbox|mathrm)\s*\{\s*([A-Za-z][A-Za-z '\-]*)\s*\}\s*\.?\s*\$?\s*$"
)


def is_wrapped_text(raw: str) -> bool:
    """Whether a raw answer is one ``\\text{...}`` (or ``\\mbox``/``\\mathrm``...) holding only
    words: a word answer, even a short one (``\\text{No}``)."""
    return len(raw) < 200 and _WRAPPED_TEXT_RE.match(raw) is not None

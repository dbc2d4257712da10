"""String normalisation of an extracted answer (model or gold) before matching and parsing.

Every rule below removes notation that does not change the answer's value, and each is here
because a public grading failure needed it (the labelled cases of docs/grading.md, "Accuracy on
public bug reports"; the MATH-500 / GSM8K answer formats; Qwen2.5-Math ``strip_string``; lm-evaluation-harness
``normalize_final_answer``, whose substring unit stripping corrupted ``\\infty`` -> ``\\iny``:
units are only removed as whole words at the end of an answer here).

* math delimiters ``$..$``, ``\\(..\\)``, ``\\[..\\]`` (around the answer or inside it: ``\\(11\\)
  apples`` is ``11 apples`` as ``$11$ apples`` is), ``\\displaystyle``; nested ``\\boxed{}``;
* a time of day with a meridiem becomes its 24-hour time (``3:45 \\text{ p.m.}`` -> ``15:45``,
  ``9 AM`` -> ``9:00``), before units are dropped (``pm`` is also a picometre);
* ``\\left`` / ``\\right`` / ``\\big``-family sizing; ``\\dfrac``/``\\tfrac``/``\\cfrac`` ->
  ``\\frac``; ``\\dbinom`` -> ``\\binom``;
* LaTeX spacing (``\\!``, ``\\,``, ``\\;``, ``~``) and thousands idioms (``10,\\!080``,
  ``1\\,000\\,000``, ``1~000``,
  ``1{,}000``); ``\\quad`` and ``\\text{ and }`` / ``\\text{ or }`` become list commas;
* ``\\mathbb{R}`` -> ``(-\\infty,\\infty)`` (the real line is that interval);
* degrees (``^\\circ``, ``°``, ``\\degree``), ordinal suffixes (``12^{\\text{th}}``), currency
  (``\\$``, ``€``, ``£``), ``\\%`` -> ``%`` (the parser reads percent);
* trailing unit words after a number or expression (``864 \\mbox{ inches}^2``, ``5 apples``, and
  glued to the number, ``10weeks``, ``12km``: a word of two or more letters);
* text wrappers (``\\text{}``, ``\\mbox{}``, ``\\mathrm{}``, ``\\textbf{}``...) are unwrapped;
* percent spelt out (``25 percent``, ``25 per cent``, ``25 pct``, ``25 \\textbf{ percent}``) -> ``%``;
  ``≈`` -> ``\\approx``;
* trailing sentence punctuation and stray trailing backslashes (``12\\\\``); whitespace runs
  collapse to one space.

All operations are ``str.replace`` or regexes without nested quantifiers, applied to answers
capped at :data:`MAX_NORMALISE_CHARS` characters, so the cost is linear and small.
"""

from __future__ import annotations

import re

from reasoning_env.grading.text import MEANING_WORDS, match_brace

__all__ = [
    "normalize_answer",
    "normalize_with_unit",
    "MEANING_WORDS",
    "match_key",
    "is_wrapped_text",
    "MAX_NORMALISE_CHARS",
    "UNIT_WORDS",
]

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
    ("\u2248", "\\approx "),
    ("\u03c0", "\\pi "),
    ("\u221e", "\\infty "),
    ("\u221a", "\\sqrt "),
    ("\u222a", "\\cup "),
)

_SIZING_RE = re.compile(r"\\(?:left|right|big|Big|bigg|Bigg)(?:[lrm])?(?![A-Za-z])\.?")
# Thousands separated by a LaTeX space or a tie: "1\\,000\\,000", "1~000~000", "1\\ 000" (groups of
# exactly three digits after the first; "1\\,00\\,000" and "12~34" are not thousands).
_SPACED_THOUSANDS_RE = re.compile(
    r"(?<![\d.,;:~ \\])\d{1,3}(?:(?:\\[,;: ]|\\thinspace(?![A-Za-z])|~)[ ]?\d{3})+(?![\d])"
)
_THOUSANDS_SEP_RE = re.compile(r"\\[,;: ]|\\thinspace|~| ")


def _join_thousands(m: re.Match) -> str:
    return _THOUSANDS_SEP_RE.sub("", m.group(0))


_THIN_THOUSANDS_RE = re.compile(r"(\d),\\!\s*(?=\d)")
# "\\\\" (a matrix row break) is matched first and kept, so "\\\\ " is not read as "\\ ".
_SPACING_RE = re.compile(r"\\\\|\\[!,;:> ]|~|\\(?:thinspace|medspace|thickspace|hfill|enspace)(?![A-Za-z])")
_QUAD_RE = re.compile(r"\\q?quad(?![A-Za-z])")
# Plain "and" / "or" between two values: "3 and 4", "(1,2) or (3,4)", "1 or x = 2" (a list).
_PLAIN_AND_OR_RE = re.compile(r"(?<=[\d)\]}])\s+(?:and|or)\s+(?=[-\d(\[\\]|[A-Za-z]\s*=)")
_AND_OR_RE = re.compile(
    r"\\(?:text|mbox|textrm|mathrm|textnormal|textbf|mathbf|textsf|mathsf|textit|mathit|emph)\{\s*(?:and|or|,)\s*\}"
)
_DEGREE_RE = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\circ(?![A-Za-z])|\\degree(?![A-Za-z])|°")
_TRIG_RE = re.compile(r"\\(?:a?(?:sin|cos|tan|cot|sec|csc)h?)(?![A-Za-z])")
# A number with a degree mark: "30^\circ", "60^{\circ}", "45°", "{20}^\circ".
_TRIG_DEGREES_RE = re.compile(
    r"\{?(\d+(?:\.\d+)?)\}?\s*(?:\^\s*\{?\s*\\circ\s*\}?|\\circ(?![A-Za-z])|\\degree(?![A-Za-z])|°)"
)
_ORDINAL_RE = re.compile(
    r"(\d)\s*(?:\^\s*)?(?:\{\s*)?(?:\\(?:text|mathrm|textrm|mbox)\{\s*)?(?:st|nd|rd|th)(?![A-Za-z])\s*\}?\s*\}?"
)
_WRAPPER_RE = re.compile(
    r"\\(?:text|textbf|textit|textrm|textnormal|textup|textsf|texttt|mathrm|mathbf|mathit|mathsf|"
    r"mathtt|mathnormal|mbox|hbox|operatorname|emph|boldsymbol|bm|mathbb|underline)\s*\{([^{}]*)\}"
)
# Text-style commands whose braces hold words (a unit, a meridiem): "\\text{ apples}", "\\mathrm{PM}".
_TEXT_COMMANDS = (
    "text|mbox|mathrm|textrm|textnormal|textit|hbox|textbf|mathbf|textsf|mathsf|textup|mathit|emph|texttt|mathtt"
)
_TEXT_UNIT_TAIL_RE = re.compile(
    r"\s*\\(?:" + _TEXT_COMMANDS + r")"
    r"\s*\{\s*([A-Za-z][A-Za-z .\-/]*?)\s*\}"
    r"\s*(?:\^\s*\{?\s*([23])\s*\}?)?\s*$"
)
_NEQ_RE = re.compile(r"\\(?:neq|ne)(?![A-Za-z])\s*|\\not\s*=\s*")
_REAL_LINE_WORDS = frozenset(
    (
        "all real numbers",
        "all reals",
        "real numbers",
        "the real numbers",
        "all real values",
        "all real x",
        "all real numbers x",
    )
)
_DOLLAR_WORDS_RE = re.compile(r"(?<![A-Za-z])(?:USD|US\$)(?![A-Za-z])")
_PERCENT_WORD_RE = re.compile(r"\s*\\?(?:percent(?:age)?|per[\s\-]*cent|pct\.?)\s*$", re.IGNORECASE)
#: Spellings of "percent" in a trailing \text{...} (``25 \text{ pct}``, ``25 \textbf{ percent}``).
_PERCENT_TAILS = (["percent"], ["per", "cent"], ["per-cent"], ["pct"], ["pct."], ["percentage"])
_TRAILING_PUNCT = " .,;:。"
_WS_RE = re.compile(r"\s+")
_THOUSANDS_RE = re.compile(r"^([-+]?)(\d{1,3}(?:,\d{3})+)(\.\d+)?(%?)$")
# A number then unit words, spaced ("5 apples") or glued to it ("10weeks", "12km": a glued word
# has two letters or more, so "5m" and "2x" stay products).
_NUMBER_THEN_WORDS_RE = re.compile(
    r"^([-+]?\s?\d[\d,]*(?:\.\d+)?%?)(?:\s+|(?=[A-Za-z]{2}))([A-Za-z][A-Za-z .\-/]*?)"
    r"(?:\s*\^\s*\{?\s*([23])\s*\}?)?\s*$"
)
_GLUED_WORD_RE = re.compile(r"\d[A-Za-z]{2}")
# Math delimiters inside an answer ("\\(11\\) apples"), not the row break "\\\\[2pt]".
_INNER_MATH_DELIMS_RE = re.compile(r"(?<!\\)\\[()\[\]]")
# A time of day with a meridiem: "3:45 p.m.", "9\\!:\\!40 PM" (spaced by then), "9 AM", "3:45:30pm".
_MERIDIEM_RE = re.compile(r"(?<![A-Za-z\\])[AaPp]\.?\s*[Mm](?![A-Za-z])")
_TIME_OF_DAY_RE = re.compile(r"(\d{1,2})(?:\s*:\s*(\d{2})(?:\s*:\s*(\d{2}))?)?\s*([AaPp])\.?\s*[Mm]\.?")
_TIME_WRAPPER_RE = re.compile(r"\\(?:" + _TEXT_COMMANDS + r")\s*\{([^{}]*)\}")


def _time_of_day(s: str) -> str | None:
    """A whole answer that is a time of day with a meridiem, as its 24-hour time (``3:45
    \\text{ p.m.}`` -> ``15:45``, ``12:15 am`` -> ``0:15``, ``9 AM`` -> ``9:00``), else ``None``. A
    time without a meridiem is already on the 24-hour clock (``15:45``; ``3:45`` is a.m.)."""
    flat = _TIME_WRAPPER_RE.sub(r"\1", _TIME_WRAPPER_RE.sub(r"\1", s)).strip()
    m = _TIME_OF_DAY_RE.fullmatch(flat)
    if m is None:
        return None
    hour, minute, second = int(m.group(1)), int(m.group(2) or 0), m.group(3)
    if not 1 <= hour <= 12 or minute > 59 or (second is not None and int(second) > 59):
        return None
    hour = hour % 12 + (12 if m.group(4) in "Pp" else 0)
    return f"{hour}:{minute:02d}" + (f":{second}" if second is not None else "")


#: Known units: canonical name -> spellings (case-insensitive; plurals and abbreviations).
_UNIT_SPELLINGS = {
    "cm": "cm centimeter centimeters centimetre centimetres",
    "m": "m meter meters metre metres",
    "km": "km kilometer kilometers kilometre kilometres",
    "mm": "mm millimeter millimeters millimetre millimetres",
    "in": "in inch inches",
    "ft": "ft foot feet",
    "yd": "yd yard yards",
    "mi": "mi mile miles",
    "kg": "kg kilogram kilograms kilogramme kilogrammes",
    "g": "g gram grams gramme grammes",
    "mg": "mg milligram milligrams",
    "lb": "lb lbs pound pounds",
    "oz": "oz ounce ounces",
    "ton": "ton tons tonne tonnes",
    "s": "s sec secs second seconds",
    "min": "min mins minute minutes",
    "h": "h hr hrs hour hours",
    "day": "day days",
    "week": "week weeks",
    "month": "month months",
    "year": "year years yr yrs",
    "dollar": "dollar dollars usd",
    "cent": "cent cents",
    "euro": "euro euros",
    "deg": "degree degrees deg",
    "rad": "radian radians rad",
    "l": "l liter liters litre litres",
    "ml": "ml milliliter milliliters millilitre millilitres",
    "gal": "gallon gallons gal",
    "qt": "quart quarts qt",
    "pt": "pint pints",
    "cup": "cup cups",
    "mph": "mph",
    "km/h": "kph km/h",
    "m/s": "m/s",
}
_UNIT_CANON = {w: canon for canon, words in _UNIT_SPELLINGS.items() for w in words.split()}

#: Unit and count words stripped after a number (whole words only; case-insensitive).
UNIT_WORDS = frozenset(_UNIT_CANON) | frozenset("unit units sq square cubic per".split())

#: Unit modifiers that need a unit after them (``3 \text{ square}`` may mean 3 squared).
_UNIT_MODIFIERS = {"square": 2, "sq": 2, "cubic": 3}

# Words that are mathematics, never units (kept even after a number).
_MATH_WORDS = frozenset("pi e i sin cos tan sec csc cot ln log exp sqrt and or infinity infty".split())


def _is_meaning_word(w: str) -> bool:
    return (
        w in MEANING_WORDS
        or (w.endswith("s") and w[:-1] in MEANING_WORDS)
        or (w.endswith("es") and w[:-2] in MEANING_WORDS)
        or w.endswith(("illion", "illions", "illionth", "illionths"))  # quintillion, zillion...
    )


#: Single letters that are units (case-sensitive: ``m`` is metres, ``M`` is not; ``L`` litres).
#: Any other single letter after a number is mathematics (``3\mathrm{i}``, ``2\mathrm{e}``,
#: ``4\mathbf{j}``, ``5\mathbf{v}``), never a unit to drop.
_SINGLE_LETTER_UNITS = frozenset("m g s h l L".split())


def _math_symbol_word(w: str) -> bool:
    """Whether a word after a number is mathematics rather than a unit: a constant or function
    name (``i``, ``e``, ``pi``, ``sin``) or a single letter that is no unit (``\\mathbf{v}``, ``M``)."""
    return w.lower() in _MATH_WORDS or (len(w) == 1 and w not in _SINGLE_LETTER_UNITS)


def _unit_words(words: list) -> bool:
    """Whether a trailing group of words may be dropped: at most 3 words, none of which
    changes the meaning, and no unit modifier (``square``) without a unit after it."""
    return 0 < len(words) <= 3 and not any(_is_meaning_word(w) for w in words) and words[-1] not in _UNIT_MODIFIERS


def _canonical_unit(words: list, exponent: str | None) -> str | None:
    """The canonical unit of a trailing word group (``square inches`` -> ``in^2``), or None
    when a word is not a known unit (``apples``, ``units``)."""
    out = []
    pending = 1
    for w in words:
        if w in _UNIT_MODIFIERS:
            pending = _UNIT_MODIFIERS[w]
            continue
        if w == "per":
            out.append("/")
            continue
        canon = _UNIT_CANON.get(w)
        if canon is None:
            return None
        out.append(canon if pending == 1 else f"{canon}^{pending}")
        pending = 1
    if not out or out[-1] == "/":
        return None
    if exponent:
        last = out[-1]
        base, _, power = last.partition("^")
        out[-1] = f"{base}^{int(power or 1) * int(exponent)}"
    return " ".join(out)


def _spacing_repl(m: re.Match[str]) -> str:
    return m.group(0) if m.group(0) == "\\\\" else " "


def _strip_delimiters(s: str) -> str:
    for _ in range(4):
        before = s
        for left, right in _DELIMS:
            if len(s) >= len(left) + len(right) and s.startswith(left) and s.endswith(right):
                inner = s[len(left) : len(s) - len(right)]
                # "$a$ and $b$" is not one delimited answer.
                if left == "$" and "$" in inner:
                    continue
                s = inner.strip()
        if s == before:
            break
    return s


def _unwrap_boxes(s: str) -> str:
    """Replace nested ``\\boxed{X}`` / ``\\fbox{X}`` by ``X`` (bounded number of passes)."""
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
        s = s[:idx] + s[open_idx + 1 : close] + s[close + 1 :]
    return s


def _plain_unit_word(w: str) -> bool:
    """A word outside ``\\text`` that may be dropped after a number: a known unit, or a
    count noun (4+ letters, not a meaning word, not mathematics: ``apples``; never ``xy``,
    ``not``, ``million``, ``cosh``)."""
    if w in UNIT_WORDS:
        return True
    if len(w) < 4 or not w.isalpha() or _is_meaning_word(w) or w in _MATH_WORDS:
        return False
    from reasoning_env.grading.latex import NotMath, _word_tokens

    try:
        _word_tokens(w)
    except NotMath:
        return True
    return False


def _strip_unit_tail(s: str, units: list) -> str:
    """Drop trailing ``\\text{unit}`` groups (optionally squared/cubed) after a number or
    expression, and plain unit words after a number; append the canonical unit of each
    dropped group to ``units`` (``None`` for a count noun). ``\\text{ percent}`` becomes ``%``."""
    for _ in range(3):
        m = _TEXT_UNIT_TAIL_RE.search(s)
        if m is None:
            break
        head = s[: m.start()].rstrip()
        raw_words = m.group(1).strip().split()
        words = [w.lower() for w in raw_words]
        if not head or not any(ch.isdigit() for ch in head):
            break
        if any(_math_symbol_word(w) for w in raw_words):
            break  # 3 + 4\mathrm{i}, 2\mathrm{e}, 3\text{ pi}: mathematics, not a unit
        if words in _PERCENT_TAILS and not m.group(2):
            s = head + "%"
            break
        if not _unit_words(words):
            break
        units.append(_canonical_unit(words, m.group(2)))
        s = head
    m = _NUMBER_THEN_WORDS_RE.match(s)
    if m is not None:
        raw_words = m.group(2).strip().split()
        words = [w.lower() for w in raw_words]
        if (
            _unit_words(words)
            and all(_plain_unit_word(w) for w in words)
            and not any(_math_symbol_word(w) for w in raw_words)
        ):
            units.append(_canonical_unit(words, m.group(3)))
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
    return normalize_with_unit(s)[0]


def normalize_with_unit(s: str) -> tuple:
    """``(normalised, unit)``: :func:`normalize_answer` and the canonical unit it dropped
    (``"cm"``, ``"in^2"``, ``"deg"``), or ``None`` when no known unit was dropped. Two answers
    whose units are both known and differ are different answers (``5 m`` is not ``5 cm``).

    Raises:
        TypeError: ``s`` is not a ``str``.
    """
    if not isinstance(s, str):
        raise TypeError(f"answer must be a str, got {type(s).__name__}")
    s = s.strip()
    if len(s) > MAX_NORMALISE_CHARS:
        return _WS_RE.sub(" ", s), None
    s = _strip_delimiters(s)
    if "\\boxed" in s or "\\fbox" in s:
        s = _unwrap_boxes(s)
    if "{{" in s:
        s = _collapse_braces(s)
    for old, new in _SIMPLE_REPLACEMENTS:
        if old in s:
            s = s.replace(old, new)
    units: list = []
    if "\\" in s or "~" in s:
        s = _SPACED_THOUSANDS_RE.sub(_join_thousands, s)
    if "\\" in s:
        s = _SIZING_RE.sub("", s)
        s = _THIN_THOUSANDS_RE.sub(r"\1,", s)
        s = _SPACING_RE.sub(_spacing_repl, s)
        s = _QUAD_RE.sub(",", s)
        s = _AND_OR_RE.sub(",", s)
        if "\\n" in s:
            s = _NEQ_RE.sub("\\\\neq ", s)
    if "\\" in s and _TRIG_RE.search(s) is not None:
        # degrees inside a trigonometric function are an angle: \sin 30^\circ is sin(pi/6), 1/2
        s = _TRIG_DEGREES_RE.sub(r"{\\frac{\1\\pi}{180}}", s)
    s, n_deg = _DEGREE_RE.subn("", s)
    if n_deg:
        units.append("deg")
    if "th" in s or "st" in s or "nd" in s or "rd" in s:
        s = _ORDINAL_RE.sub(r"\1", s)
    if "$" in s:
        s = s.replace("$", "")
    if "\\(" in s or "\\[" in s:
        s = _INNER_MATH_DELIMS_RE.sub("", s)
    if _MERIDIEM_RE.search(s) is not None:
        clock = _time_of_day(s)
        if clock is not None:
            return clock, None
    if "US" in s:
        s = _DOLLAR_WORDS_RE.sub("", s)
    if "cent" in s or "pct" in s:
        s = _PERCENT_WORD_RE.sub("%", s)
    s = s.strip()
    if "\\" in s or " " in s or (s[-1:].isalpha() and _GLUED_WORD_RE.search(s) is not None):
        s = _strip_unit_tail(s, units)
    if "\\" in s:
        for _ in range(6):
            new = _WRAPPER_RE.sub(r"\1", s)
            if new == s:
                break
            s = new
    s = _WS_RE.sub(" ", s).strip().rstrip(_TRAILING_PUNCT).strip()
    if " and " in s or " or " in s:
        s = _PLAIN_AND_OR_RE.sub(", ", s)
    if s.endswith("\\"):  # a stray trailing backslash or row break: "12\\"
        s = s.rstrip("\\ ").rstrip(_TRAILING_PUNCT).strip()
    # After unwrapping, "5 apples" may have appeared.
    if " " in s:
        s = _strip_unit_tail(s, units)
        if s[:1] in "aAtTrR" and s.lower() in _REAL_LINE_WORDS:
            s = "(-\\infty,\\infty)"
    m = _THOUSANDS_RE.match(s)
    if m is not None:
        s = m.group(1) + m.group(2).replace(",", "") + (m.group(3) or "") + m.group(4)
    unit = None
    for u in units:
        if u is not None:
            unit = u
            break
    return s, unit


def _collapse_braces(s: str) -> str:
    """Remove redundant brace pairs: ``{{X}}`` -> ``{X}``, and braces around the whole
    answer (``{{{3}}}`` -> ``3``). One linear pass (escaped ``\\{`` ``\\}`` are not groups)."""
    n = len(s)
    match = [-1] * n
    stack = []
    i = 0
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            match[stack.pop()] = i
        i += 1
    drop = bytearray(n)
    for i in range(n - 1):
        j = match[i]
        if j != -1 and s[i + 1] == "{" and match[i + 1] == j - 1:
            drop[i] = drop[j] = 1  # the outer pair of "{{X}}" is redundant
    lo = 0
    while lo < n and drop[lo]:
        lo += 1
    hi = n - 1
    while hi > lo and drop[hi]:
        hi -= 1
    if lo < hi and s[lo] == "{" and match[lo] == hi:
        drop[lo] = drop[hi] = 1  # braces around the whole answer
    if not any(drop):
        return s
    return "".join(c for k, c in enumerate(s) if not drop[k])


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
    r"^\s*\$?\s*\\(?:text|textbf|textit|textrm|textnormal|mbox|mathrm)"
    r"\s*\{\s*([A-Za-z][A-Za-z '\-]*)\s*\}\s*\.?\s*\$?\s*$"
)


def is_wrapped_text(raw: str) -> bool:
    """Whether a raw answer is one ``\\text{...}`` (or ``\\mbox``/``\\mathrm``...) holding only
    words: a word answer, even a short one (``\\text{No}``)."""
    return len(raw) < 200 and _WRAPPED_TEXT_RE.match(raw) is not None

"""Final-answer extraction from model output and from dataset gold fields.

Pure string scanning: no recursion and no regex that can backtrack on unbounded input; the work
is linear in the length of the text, so megabyte-long adversarial responses are safe.

Rules, in priority order (``extract_final_answer``):

1. Qwen3-style ``<think>...</think>`` spans are removed first: text before the last ``</think>``
   is reasoning, and text after an opened but never closed ``<think>`` is unfinished reasoning.
2. The LAST ``\\boxed{...}`` / ``\\fbox{...}`` with matched braces outside fenced code (a box in
   code counts only when no box is outside it) (``\\{``/``\\}`` are escapes,
   not braces); ``\\boxed 5`` (one token after a space) counts too. If the last box is opened but
   never closed (a trace cut off while writing its answer), there is no final answer: earlier
   boxes are intermediate values, not the answer. One exception: a last box closed by a stray
   ``\\}`` (``\\boxed{12\\}``, no ``\\{`` in it) holds what comes before that backslash.
   Boxes that end the answer together, separated only by punctuation, spaces, ``$``, ``and`` /
   ``or`` or ``\\quad`` (``\\boxed{-3} and \\boxed{2}``; a ``x =`` written just before a box is
   kept with it), are one multi-part answer: :attr:`Extraction.parts` lists them and
   :attr:`Extraction.answer` joins them with commas (the grader then accepts them only when they
   are the gold together, or when each of them is the gold).
   Without a box: the last ``<answer>...</answer>`` pair (DeepSeek-R1's format), its content read
   as an answer line (:func:`last_tag_answer`); an unclosed or empty tag is no answer.
   The commitment rule for every format (:func:`hedge_after`): text after the answer that offers
   another value as a possible answer (``\\boxed{12}. It could also be 13.``, ``I get
   \\boxed{12}, or maybe \\boxed{13}``, ``13 is also possible``) sets :attr:`Extraction.hedge`,
   and the grader calls the answer a mismatch. A box named as rejected (``not \\boxed{13}``,
   ``\\boxed{13} is wrong``) is never the answer.
3. The LAST answer phrase: ``The answer is``, ``The final answer is``, ``Final answer:``,
   ``Answer:`` (markdown bold allowed), up to the end of its line (MetaMathQA's convention is
   ``The answer is: X``); a line that opens with a ``$...$`` span ending its sentence gives the
   span (Minerva's ``The final answer is $5$. I hope it is correct.``), and closing sentences of
   words only are dropped (``12,000,023. I hope it is correct.``; never ``5. Wait, no.``). A
   line in prose, ``The smallest $k$ is 12.``, gives the value after its last
   ``is``/``are``/``equals``/``was``/``=`` when the words before it hold no other verb, hedge or
   ``=`` (``The area of $PQRS$ is 48``; never ``x is 5 or y is 6``); ``approximately``/``about``
   there is ``\\approx``.
4. The LAST GSM8K ``#### N`` marker, up to the end of its line.
5. A closing statement: the response's last sentence ends with ``is|are|equals|be <number>``
   followed by optional unit words and a full stop (``... the total cost is $29.00.``). Only a
   complete sentence qualifies, so a trace cut off mid-computation (``... then 12 +``) has no
   answer.

No final answer means ``None``: we never fall back to "the last number in the text", which
would reward truncated traces for intermediate values (bug reports: lm-evaluation-harness
flexible-extract, simple-evals first-match; see the labelled cases of docs/grading.md).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from reasoning_env.grading.text import _BRACE_RE, MEANING_WORDS, match_brace

__all__ = [
    "Extraction",
    "extract_final_answer",
    "strip_think",
    "last_boxed",
    "last_boxed_group",
    "last_phrase_answer",
    "last_gsm8k_answer",
    "last_tag_answer",
    "hedge_after",
    "last_statement_answer",
    "match_brace",
    "gold_from_metamathqa",
    "gold_from_gsm8k",
    "gold_from_boxed",
]

_BOX_COMMANDS = ("\\boxed", "\\fbox")

# "The answer is: X", "The final answer is X", "Final answer: X", "**Answer:** X", "Answer: X".
# A bare "answer" needs a colon ("I answered 5" or "check the answer again" are not answers).
# (The lookahead skips, in one cheap test, the positions no phrase can start at: finding the
# last phrase of a 1 MB line took 1.1 s without it, 0.2 s with it.)
_PHRASE_RE = re.compile(
    r"(?=[TtFfAa])(?:\b(?:the\s+)?final\s+answer\s+is\b|\bthe\s+answer\s+is\b"
    r"|\bfinal\s+answer\b(?=[ \t]*(?:\*\*[ \t]*)?[:：])"
    r"|\banswer\b(?=[ \t]*(?:\*\*[ \t]*)?[:：]))"
    r"[ \t]*(?:\*\*[ \t]*)?(?:[:：][ \t]*)?(?:\*\*[ \t]*)?",
    re.IGNORECASE,
)
# "#### 55", and the separator some models put after the marker: "####: 55", "#### = 55"
# (a minus sign is the answer's own: "#### -55").
_GSM_RE = re.compile(r"####[ \t]*(?:[:：=][ \t]*)?")
# Sentence adverbs between an answer phrase and its value: "The answer is therefore \\(11\\).".
_ADVERB_RE = re.compile(r"(?:therefore|thus|hence|then|clearly|indeed|simply)\b,?[ \t]+", re.IGNORECASE)
# A closing statement's number written in inline math: "the total is \\(11\\)." / "$11$.".
_INLINE_NUMBER_RE = re.compile(
    r"(?:\\\(|\\\[|\$\$?)[ \t]*([-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)[ \t]*(?:\\\)|\\\]|\$\$?)"
)
# Math closed before an exclamation mark: the mark is the sentence's ("$11$!"), not a factorial.
_MATH_CLOSE_BANG_RE = re.compile(r"(?:\$|\\\)|\\\])[ \t]*!$")
# How far past a phrase that ends its line a display (\\[...\\], $$...$$) holding its answer may run.
MAX_DISPLAY_CHARS = 2000
# An answer line that opens with one $...$ span and ends that sentence, followed by more text
# (Minerva / MATH few-shot: "The final answer is $5$. I hope it is correct."): the span.
_MATH_THEN_SENTENCE_RE = re.compile(r"[ \t]*(\$[^$\n]+\$)[ \t]*[.!。][ \t]+\S")
# The end of a sentence followed by more text ("12,000,023. I hope it is correct.").
_SENTENCE_END_RE = re.compile(r"[.!?。](?:\*\*)?[ \t]+(?=\S)")
# Closing sentences of words only: nothing that could be (part of) a value.
_WORDS_ONLY_RE = re.compile(r"[^\d$\\{}=<>^_]*")
_VALUE_CHAR_RE = re.compile(r"[\d$\\{}=<>^_]")
# Closing words that take the answer back ("5. Wait, no."): the line is then not an answer.
_RETRACTION_RE = re.compile(
    r"(?<![A-Za-z])(?:no|not|nope|wait|maybe|perhaps|but|however|actually|wrong|incorrect|mistake|error|"
    r"hmm|or|unless|except|unsure|doubt|recheck|recount|redo)(?![A-Za-z])|n't(?![A-Za-z])",
    re.IGNORECASE,
)
# Prose answer line: "The smallest $k$ is 12", "The area of $PQRS$ is 48".
_PROSE_VERB_RE = re.compile(r"(?:(?<![A-Za-z])(?:is|are|equals|was|were)(?![A-Za-z])|=)[ \t]*")
_PROSE_REFUSED_RE = re.compile(
    r"(?<![A-Za-z])(?:is|are|was|were|equals?|or|either|nor|neither|not|no|maybe|perhaps|possibly|"
    r"probably|unless|if|except|but|between|than|guess|suppose|plus|minus|twice|double|half|reciprocal|squared|cubed)(?![A-Za-z])|[A-Za-z]n't(?![A-Za-z])|[=<>]"
    r"|\\(?:le|ge|ne|neq|leq|geq|approx|pm)(?![A-Za-z])",
    re.IGNORECASE,
)
# ("nearly"/"almost" say the value is not reached: they are hedges, never "\approx".)
_DOLLAR_RE = re.compile(r"(?<!\\)\$")
_COMMAND_RE = re.compile(r"\\[A-Za-z]+")
_LETTER_RE = re.compile(r"[A-Za-z]")
_APPROX_WORD_RE = re.compile(r"^(?:approximately|approx\.?|about|roughly|around)[ \t]+", re.IGNORECASE)
# Closing statement: "... is $29.00." / "... equals 42 dollars." at the very end of the text.
# Applied to the last 300 characters only (bounded work); the number may carry currency, a
# percent sign, thousands separators and markdown bold.
_STATEMENT_RE = re.compile(
    r"\b(?:is|are|equals|be|was|were)[ \t]+(?:\*\*)?[ \t]*"
    r"(?P<ans>[-+]?[ \t]?(?:\\?\$)?[ \t]?[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[ \t]?\\?%)?)"
    r"[ \t]*(?:\*\*)?(?:[ \t]+[A-Za-z]+){0,3}[ \t]*(?:\*\*)?[ \t]*[.!](?:\*\*)?[ \t\r\n]*$"
)


@dataclass(frozen=True)
class Extraction:
    """Result of answer extraction.

    Attributes:
        answer: The extracted answer string (stripped), or ``None`` when there is no final answer.
            For several boxes that end the answer together, their contents joined by ``", "``.
        method: ``"boxed"``, ``"answer_tag"``, ``"phrase"``, ``"gsm8k"``, ``"statement"`` or ``"none"``.
        parts: The contents of those boxes, in order and without repeats, when there are at
            least two different ones (``("-3", "2")`` for ``\\boxed{-3} and \\boxed{2}``);
            otherwise empty.
        hedge: The clause that offers another answer beside this one (``Or maybe 13``,
            ``although it could also be 13``, ``or maybe \\boxed{13}`` between two boxes), or
            ``None``. A hedged answer is not one answer: the grader calls it a ``mismatch``,
            unless every value offered is the answer's own value written another way.
        offered: The values the hedges offer (``("13",)``), for that check.
    """

    answer: str | None
    method: str
    parts: tuple = ()
    hedge: str | None = None
    offered: tuple = ()


def strip_think(text: str) -> str:
    """Remove ``<think>...</think>`` reasoning spans (Qwen3 hybrid thinking).

    Text before the last ``</think>`` is reasoning (chat templates often open ``<think>`` in the
    prompt, so the response may hold only the closing tag). An opened but never closed
    ``<think>`` means the model was still thinking: everything after it is dropped.
    """
    close = text.rfind("</think>")
    if close != -1:
        text = text[close + len("</think>") :]
    open_ = text.find("<think>")
    if open_ != -1:
        text = text[:open_]
    return text


def _box_starts(text: str):
    """Start indices (and command lengths) of ``\\boxed``/``\\fbox`` occurrences, last first.

    Each command is searched backwards from its own previous hit, so the whole iteration costs
    time linear in ``len(text)``.
    """
    pos = {cmd: text.rfind(cmd) for cmd in _BOX_COMMANDS}
    while True:
        cmd = max(pos, key=pos.__getitem__)
        start = pos[cmd]
        if start == -1:
            return
        yield start, len(cmd)
        pos[cmd] = text.rfind(cmd, 0, start)


def _box_at(text: str, start: int, cmd_len: int, limit: int | None = None) -> tuple | None:
    """The box whose command starts at ``start``: ``(content, end)`` with ``end`` just past it;
    ``("", end)`` for an empty or unusable box; ``None`` for an unclosed one; ``False`` when the
    command is a longer macro name (``\\boxedfoo``). A box not closed before ``limit`` is unclosed."""
    n = len(text)
    j = start + cmd_len
    if j < n and text[j].isalpha():
        return False
    k = j
    while k < n and text[k] in " \t":
        k += 1
    if k < n and text[k] == "{":
        close = match_brace(text, k, limit)
        if close == -1:
            return None
        return text[k + 1 : close].strip(), close + 1
    if j < k < n:
        m = k
        while m < n and not text[m].isspace() and text[m] != "$":
            m += 1
        content = text[k:m].rstrip(".,;")
        if content and (len(content) == 1 or any(ch.isdigit() for ch in content)):
            return content, m
    return "", j


def _stray_escape_close(text: str, open_idx: int) -> str | None:
    """Content of a box opened at ``open_idx`` that a stray ``\\}`` closes (``\\boxed{12\\}``): the
    first ``\\}`` at the box's own level, when no ``\\{`` comes before it; else ``None``."""
    depth = 0
    pos = open_idx
    search = _BRACE_RE.search
    while True:
        m = search(text, pos)
        if m is None:
            return None
        i = m.start()
        c = text[i]
        if c == "\\":
            nxt = text[i + 1 : i + 2]
            if nxt == "{":
                return None
            if nxt == "}" and depth == 1:
                return text[open_idx + 1 : i].strip() or None
            pos = i + 2
            continue
        depth += 1 if c == "{" else -1
        pos = i + 1


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` with matched braces.

    Returns ``None`` when there is no box, when the last box is opened but never closed (a
    truncated answer: earlier boxes are not the final answer), or when the last box is empty.
    ``\\boxed 5`` (a space, then one token holding a digit or a single character) yields ``"5"``;
    ``\\boxed{12\\}`` (closed by a stray ``\\}``) yields ``"12"``. ``\\boxedfoo`` is another macro
    and is skipped. Linear time.
    """
    for start, cmd_len in _box_starts(text):
        box = _box_at(text, start, cmd_len)
        if box is False:
            continue  # \boxedfoo is a different macro: keep looking further back.
        if box is None:
            return _stray_escape_close(text, text.index("{", start + cmd_len))
        return box[0] or None
    return None


#: Most boxes read as one multi-part answer (more ending the answer together: no answer).
MAX_BOX_PARTS = 16
#: Most boxes enclosing the last one that are followed outwards (each costs a scan of its text).
MAX_BOX_NESTING = 8
# Text allowed between the boxes of one multi-part answer.
_BOX_SEP_RE = re.compile(
    r"(?:\s|\$|\\[()\[\]]|[,;.&~/]|\\q?quad(?![A-Za-z])|\\[,;: !]|\\\\|(?<![A-Za-z])(?:and|or)(?![A-Za-z])"
    r"|\\(?:text|mbox|textrm|mathrm)\{\s*(?:and|or|,)?\s*\})*"
)
# A name written just before a box: "x = \boxed{3}", "$a_1 = \boxed{2}", "|PQ| = \boxed{5}".
_NAME_BEFORE_BOX_RE = re.compile(
    r"(?<![A-Za-z\\])(?P<name>[A-Za-z](?:_\{?[A-Za-z0-9]{1,3}\}?)?|[A-Z]{2,3}|\|[A-Z]{2,3}\|)\s*=\s*\$?\s*$"
)


def _name_before(text: str, lo: int, hi: int) -> tuple:
    """``(name, start)`` of a ``name =`` ending at ``hi`` (searched in ``text[lo:hi]``), or
    ``(None, hi)``."""
    m = _NAME_BEFORE_BOX_RE.search(text, max(lo, hi - 24), hi)
    return (m.group("name"), m.start()) if m is not None else (None, hi)


def last_boxed_group(text: str) -> tuple | None:
    """The boxes that end the answer together, oldest first, as ``(name, content)`` pairs (the
    name written just before a box, ``x = \\boxed{3}``, or ``None``; looked up only when there are
    several boxes); ``None`` under the same conditions as :func:`last_boxed`, when more than
    :data:`MAX_BOX_PARTS` boxes end the answer together, or when the last box is nested in more
    than :data:`MAX_BOX_NESTING` others. A box enclosing the last ones is the answer they belong
    to (``\\boxed{12, \\boxed{13}}`` is ``12, \\boxed{13}``, not ``13``). Linear time.
    """
    items = _boxed_group_items(text)
    return None if items is None else tuple((name, content) for _, _, content, name in reversed(items))


def _boxed_group_items(text: str) -> list | None:
    """:func:`last_boxed_group` with positions: ``[start, end, content, name]`` items, latest
    first (``start`` is ``-1`` for a last box closed by a stray ``\\}``)."""
    items: list = []  # [start, end, content, name], latest first
    nesting = 0
    for start, cmd_len in _box_starts(text):
        box = _box_at(text, start, cmd_len)
        if box is False:
            continue
        if not items:
            if box is None:
                content = _stray_escape_close(text, text.index("{", start + cmd_len))
                return None if content is None else [[-1, -1, content, None]]
            if not box[0]:
                return None
            items.append([start, box[1], box[0], None])
            continue
        if box is None or not box[0]:
            break  # unclosed or empty: not part of the group
        if box[1] > items[-1][0]:
            # This box encloses the latest ones: it is the answer they are part of.
            nesting += 1
            if nesting > MAX_BOX_NESTING:
                return None
            while items and items[-1][0] < box[1]:
                items.pop()
            if items and not _joins_group(text, box[1], items):
                break
            items.append([start, box[1], box[0], None])
            continue
        if not _joins_group(text, box[1], items):
            if _closes_then_joins(text, box[1], items[-1][0]):
                nesting += 1  # inside a brace group that closes just here: maybe a box enclosing it
                if nesting > MAX_BOX_NESTING:
                    return None
                continue
            break
        if len(items) >= MAX_BOX_PARTS:
            return None  # more boxes than any answer has: a list of guesses
        items.append([start, box[1], box[0], None])
    if not items:
        return None
    if len(items) > 1:
        items[-1][3] = _name_before(text, 0, items[-1][0])[0]
    return items


# The commitment rule (one rule for every answer format): a response is paid only for exactly one
# final value. Text after the answer that offers another value as a possible answer is a hedge:
# a value right after a hedge or modal word, with nothing but filler words between them ("or maybe
# 13", "it could also be 13", "(though 13 might work)", "Alternatively, the answer could be 13"),
# or a value followed by a possibility predicate ("13 is also possible", "13 would be plausible
# too"). A value in a computation ("3 \times 4 = 12"), one the answer already holds, or one after
# a verb that is not a filler ("we could also check it with 3 groups") is not offered.
_HEDGE_MARKER_RE = re.compile(
    r"(?<![A-Za-z'])(?:or|maybe|perhaps|possibly|probably|alternatively|either|might|could|may|likely|otherwise"
    r"|although|though|unless|whether|unsure|uncertain|sure|certain|doubt|again)(?![A-Za-z'])",
    re.IGNORECASE,
)
_HEDGE_FILLERS = frozenset(
    "be is it its it's that's thats there's the answer answer's final result value values could might may also "
    "even just instead actually really equal equals to was a an that this as well rather then so in fact maybe "
    "perhaps possibly probably would should been being get got we i i'm im you one correct right number total "
    "there are if whether true real be also even".split()
)
_HEDGE_POSSIBLE = frozenset("possible plausible likely possibility option alternative candidate acceptable".split())
_HEDGE_ALSO_RIGHT = frozenset("correct right valid works work fine answer answers".split())
_HEDGE_MODAL = frozenset("also too might could may maybe perhaps possibly probably".split())
_HEDGE_AFTER_WORDS = _HEDGE_FILLERS | _HEDGE_POSSIBLE | _HEDGE_ALSO_RIGHT | _HEDGE_MODAL | {"well", "as", "valid"}
_HEDGE_SENTENCE_END_RE = re.compile(r"[.!?](?=\s|$)|\n")
_NUMBER_WORDS = (
    r"(?<![A-Za-z])(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen"
    r"|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety"
    r"|hundred|thousand|million)(?![A-Za-z])"
)
# A value: a box, a number (not one inside a word or right after a letter: "x2"), a number word.
_HEDGE_VALUE_RE = re.compile(r"\\boxed|\\fbox|(?<![A-Za-z\d.])\d+(?:\.\d+)?|" + _NUMBER_WORDS, re.IGNORECASE)
_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")
# Between a hedge word and its value: words, spaces, math delimiters, punctuation, text commands.
_HEDGE_GAP_JUNK_RE = re.compile(r"\\(?:text|textbf|mathrm|emph|textit)\s*\{|\\[()\[\],;: !]|[\s$,:;()\[\]{}*\"`~—–-]")
_HEDGE_WORD_RE = re.compile(r"[A-Za-z][A-Za-z']*")
# An operator next to a number makes it part of a computation, not an answer offered.
_OPERATOR_AFTER_RE = re.compile(r"\s*\$?\s*(?:[=+*/^×÷<>≈]|\\(?:times|cdot|div|approx|le|ge|neq?|pm)(?![A-Za-z]))")
_OPERATOR_BEFORE_RE = re.compile(r"(?:[=+*/^×÷<>≈]|\\(?:times|cdot|div|approx|le|ge|neq?|pm))\s*\$?\s*$")
# A letter, bracket or command glued to a number: a term of an expression ("108n(n-1)", "2\\pi").
_TERM_AFTER_RE = re.compile(r"(?:[A-Za-z](?![A-Za-z])|[(\\_{])")
_VALUE_BEFORE_OR_RE = re.compile(r"(?<![A-Za-z\d.])(\d+(?:\.\d+)?)[\s,$]*$")
#: Characters after an answer searched for a hedge (bounded work on any response).
HEDGE_WINDOW = 300


def _number_key(s: str) -> str:
    return s.rstrip("0").rstrip(".") if "." in s else s


def _gap_is_filler(gap: str) -> bool:
    """Whether ``gap`` holds only filler words and punctuation (``also be``, ``, the answer could be``)."""
    rest = _HEDGE_GAP_JUNK_RE.sub(" ", gap)
    words = _HEDGE_WORD_RE.findall(rest)
    if _HEDGE_WORD_RE.sub("", rest).strip():
        return False  # a digit, an operator or a symbol between them
    return all(w.lower() in _HEDGE_FILLERS for w in words)


def _possibility_after(tail: str) -> bool:
    """Whether ``tail`` (after a value, to its sentence end) calls that value possible: filler words,
    then ``possible``/``plausible``... or a ``correct``/``works`` with ``also``/``too``/a modal."""
    rest = _HEDGE_GAP_JUNK_RE.sub(" ", tail)
    seen = []
    for m in re.finditer(r"[A-Za-z][A-Za-z']*|[^\sA-Za-z]", rest):
        w = m.group(0).lower()
        if w not in _HEDGE_AFTER_WORDS:
            break
        seen.append(w)
        if len(seen) > 8:
            break
    words = set(seen)
    return bool(words & _HEDGE_POSSIBLE) or bool(words & _HEDGE_ALSO_RIGHT and words & _HEDGE_MODAL)


def _is_list_or(text: str, lo: int, or_start: int, answer_numbers: set) -> bool:
    """Whether the ``or`` at ``or_start`` ends a list of values that are not the answer's (``2, 3, 4,
    or 6``); ``12 or 13`` after the answer 12 offers 13 beside it."""
    m = _VALUE_BEFORE_OR_RE.search(text, max(lo, or_start - 40), or_start)
    return m is not None and _number_key(m.group(1)) not in answer_numbers


def _offered(
    text: str, sent_start: int, v_start: int, v_end: int, sent_end: int, word_value: bool, answer_numbers: set
) -> bool:
    """Whether the value at ``text[v_start:v_end]`` is offered as a possible answer (see above)."""
    if _OPERATOR_AFTER_RE.match(text, v_end, sent_end) or _OPERATOR_BEFORE_RE.search(text, sent_start, v_start):
        return False
    if _TERM_AFTER_RE.match(text, v_end, sent_end):
        return False  # "108n(n-1)": a coefficient in an expression
    tail = text[v_end:sent_end]
    if word_value and tail.strip(" \t$)*.,;!?"):
        # "one more check", "two ways": a number word is a value only where it ends its clause
        if not _possibility_after(tail) and not re.match(r"\s*[,;:)]", tail):
            return False
    marker = None
    for m in _HEDGE_MARKER_RE.finditer(text, sent_start, v_start):
        if m.group(0).lower() == "or" and _is_list_or(text, sent_start, m.start(), answer_numbers):
            continue  # "divided by 2, 3, 4, or 6": a list, not another answer
        marker = m
    if marker is not None and _gap_is_filler(text[marker.end() : v_start]):
        return True
    return _possibility_after(tail)


def _another_value(text: str, m: re.Match, answer: str | None, answer_numbers: set) -> tuple | None:
    """``(start, end, word_value)`` of the value that ``m`` found when it differs from ``answer``;
    ``None`` when it is (a number of) the answer itself."""
    token = m.group(0)
    if token.startswith("\\"):
        box = _box_at(text, m.start(), len(token), m.start() + HEDGE_WINDOW)
        if not box:
            return None
        content = box[0]
        numbers = {_number_key(n) for n in _NUMBER_RE.findall(content)}
        if content == answer or (numbers and numbers <= answer_numbers) or not content:
            return None
        return m.start(), box[1], False
    if token[0].isdigit():
        return None if _number_key(token) in answer_numbers else (m.start(), m.end(), False)
    return m.start(), m.end(), True


#: Most offered values recorded after one answer (the rest of the window is not searched).
MAX_OFFERED = 8


def _hedges_in(text: str, lo: int, hi: int, answer: str | None, only_at: int | None = None) -> list:
    """``(sentence, value)`` for each value of ``text[lo:hi]`` other than ``answer`` that a sentence
    offers as a possible answer (at most :data:`MAX_OFFERED`); with ``only_at``, only a value
    starting there counts."""
    answer_numbers = {_number_key(n) for n in _NUMBER_RE.findall(answer or "")}
    found: list = []
    sent_start = lo
    while sent_start < hi and len(found) < MAX_OFFERED:
        end = _HEDGE_SENTENCE_END_RE.search(text, sent_start, hi)
        sent_end = end.start() if end is not None else hi
        pos = sent_start
        while len(found) < MAX_OFFERED:
            m = _HEDGE_VALUE_RE.search(text, pos, sent_end)
            if m is None:
                break
            value = _another_value(text, m, answer, answer_numbers)
            pos = m.end() if value is None else max(m.end(), min(value[1], sent_end))
            if value is None or (only_at is not None and value[0] != only_at):
                continue
            stop = max(sent_end, value[1])
            if _offered(text, sent_start, value[0], value[1], stop, value[2], answer_numbers):
                offered = text[value[0] : value[1]]
                if offered.startswith("\\"):
                    offered = _box_at(text, value[0], len(m.group(0)), value[1])[0]
                found.append((text[sent_start:stop].strip(), offered))
        sent_start = end.end() if end is not None else hi
    return found


def hedge_after(text: str, pos: int, answer: str | None = None) -> str | None:
    """The sentence after an answer ending at ``pos`` that offers another value as a possible
    answer, or ``None`` (the commitment rule above; a value of ``answer`` itself is not another,
    ``Either way, it's 12``). Looks at :data:`HEDGE_WINDOW` characters."""
    found = _hedges_in(text, pos, min(len(text), pos + HEDGE_WINDOW), answer)
    return found[0][0] if found else None


def _box_hedge(text: str, items: list) -> list:
    """The hedges (``(sentence, value)``, see :func:`_hedges_in`) after the last box group, or
    between the box before it and the group (``I get \\boxed{12}, or maybe \\boxed{13}``,
    ``\\boxed{12}. \\boxed{13} is also possible``) when that box holds another answer."""
    if items[0][0] < 0:
        return []
    pos = items[0][1]
    after = _hedges_in(text, pos, min(len(text), pos + HEDGE_WINDOW), ", ".join(item[2] for item in reversed(items)))
    if after:
        return after
    first = items[-1][0]
    for start, cmd_len in _box_starts(text[:first]):
        box = _box_at(text, start, cmd_len)
        if box is False:
            continue
        if not box or not box[0] or first - box[1] > HEDGE_WINDOW or box[0] == items[0][2]:
            return []
        # the group's own box must be the value offered beside the box before it, which is then
        # the other value
        found = _hedges_in(text, box[1], min(len(text), first + HEDGE_WINDOW), box[0], only_at=first)
        return [(sentence, box[0]) for sentence, _ in found]
    return []


# A box the response names as rejected: "not \boxed{13}", "rather than \boxed{13}", "\boxed{13} is
# wrong", "\boxed{13} isn't the answer". It is never the answer (an earlier box may be).
_REJECTED_BEFORE_RE = re.compile(
    r"(?:(?<![A-Za-z])(?:not|never|rather\s+than|instead\s+of|except|but\s+not)|n't|\\neq?|≠)"
    r"(?:\s+(?:just|simply|equal\s+to|the\s+answer(?:\s+is)?|the\s+final\s+answer(?:\s+is)?|be))*[\s$:(]*$",
    re.IGNORECASE,
)
_REJECTED_AFTER_RE = re.compile(
    r"[\s$)\]]*(?:\\[)\]])?[\s$]*(?:(?:is|was|would\s+be|are|seems)\s+)?(?:(?:definitely|clearly|also|actually)\s+)?"
    r"(?:wrong|incorrect|false|invalid|rejected|extraneous|impossible|a\s+mistake|an\s+error|ruled\s+out"
    r"|(?:is\s+)?not\s+(?:the\s+(?:final\s+)?answer|correct|right|valid|possible|a\s+solution)"
    r"|isn't\s+(?:the\s+(?:final\s+)?answer|correct|right|valid|possible))(?![A-Za-z])",
    re.IGNORECASE,
)


def _unrejected_end(text: str) -> int | None:
    """Where the text holding the answer ends: before the last boxes when the response names them as
    rejected (``\\boxed{12}, not \\boxed{13}`` ends before ``\\boxed{13}``); ``len(text)`` when the last
    box is not rejected; ``None`` when every box is (no answer). At most :data:`MAX_BOX_PARTS`
    boxes are looked at."""
    end = len(text)
    for count, (start, cmd_len) in enumerate(_box_starts(text)):
        if count >= MAX_BOX_PARTS:
            return end
        box = _box_at(text, start, cmd_len)
        if box is False:
            continue
        if not box or not box[0]:
            return end
        if not _is_rejected(text, start, box[1]):
            return end
        end = start
    return None if end < len(text) else end


def _is_rejected(text: str, start: int, end: int) -> bool:
    """Whether the box at ``text[start:end]`` is named as rejected (see above)."""
    if _REJECTED_BEFORE_RE.search(text, max(0, start - 40), start) is not None:
        return True
    return _REJECTED_AFTER_RE.match(text, end, end + 60) is not None


_CLOSING_BRACES_RE = re.compile(r"\s*\}[\s}]*")


def _closes_then_joins(text: str, end: int, nxt_start: int) -> bool:
    """Whether ``text[end:nxt_start]`` is closing braces followed only by separators (the box
    ending at ``end`` sits in a group, maybe a box, that would join the next box)."""
    m = _CLOSING_BRACES_RE.match(text, end, nxt_start)
    return m is not None and _BOX_SEP_RE.fullmatch(text, m.end(), nxt_start) is not None


def _joins_group(text: str, end: int, items: list) -> bool:
    """Whether a box ending at ``end`` is separated from the group's earliest box only by
    separators (a ``name =`` just before that box is recorded as its name)."""
    nxt = items[-1]
    name, name_start = _name_before(text, end, nxt[0])
    if _BOX_SEP_RE.fullmatch(text, end, name_start) is None:
        return False
    nxt[3] = name
    return True


def _has_real_box(text: str) -> bool:
    """True when some ``\\boxed``/``\\fbox`` occurrence is not part of a longer macro name."""
    n = len(text)
    for start, cmd_len in _box_starts(text):
        j = start + cmd_len
        if not (j < n and text[j].isalpha()):
            return True
    return False


def _clean_line_answer(s: str) -> str | None:
    s = s.strip()
    # Strip wrapping markdown bold / math delimiters and trailing sentence punctuation.
    for _ in range(4):
        before = s
        if s.startswith("**") and s.endswith("**") and len(s) > 4:
            s = s[2:-2].strip()
        if s.startswith("$$") and s.endswith("$$") and len(s) > 4:
            s = s[2:-2].strip()
        elif s.startswith("$") and s.endswith("$") and len(s) > 2 and s.count("$") == 2:
            s = s[1:-1].strip()
        if s.startswith("\\(") and s.endswith("\\)"):
            s = s[2:-2].strip()
        if s.startswith("\\[") and s.endswith("\\]"):
            s = s[2:-2].strip()
        s = s.rstrip(" .。")
        if s.endswith("!") and _MATH_CLOSE_BANG_RE.search(s) is not None:
            s = s[:-1].rstrip()
        if s.endswith("**"):
            s = s[:-2].rstrip()
        if s.startswith("**"):
            s = s[2:].lstrip()
        if s == before:
            break
    return s or None


def _line_after(text: str, pos: int) -> str:
    line_end = text.find("\n", pos)
    return text[pos:] if line_end == -1 else text[pos:line_end]


def last_phrase_answer(text: str) -> str | None:
    """Answer after the last answer phrase (``The answer is``, ``Final answer:``, ``Answer:``).

    The answer runs to the end of the phrase's line; a box on that line wins, and a ``$...$``
    span that ends its sentence (``$5$. I hope it is correct.``) is the answer. A phrase with
    nothing after it on its line (``**Final Answer**`` followed by a box on the next line is
    handled by the box rule) gives ``None``.
    """
    return _phrase_answer(text)[0]


def _phrase_answer(text: str) -> tuple:
    """:func:`last_phrase_answer` and where its line ends (``(None, -1)`` without a phrase)."""
    last = None
    for m in _PHRASE_RE.finditer(text):
        last = m
    if last is None:
        return None, -1
    line = _line_after(text, last.end())
    end = last.end() + len(line)
    if line.strip(" \t*:：") or end >= len(text):
        return _phrase_line_answer(line), end
    return _answer_below(text, end)


def _answer_below(text: str, pos: int) -> tuple:
    """The answer of a phrase that ends its line at ``pos`` (``So the answer is:``), and where it
    ends: the next non-empty line when it is a math display (``\\[ 11 \\]``, over several lines
    too, or ``$$11$$``), one math span (``$11$``, ``\\(11\\)``, ``**11**``) or the text's last line
    of at most three words (``11 apples``; not a sentence cut off by a token limit); anything else
    is work, not the answer (``(None, pos)``). Bounded: one line, or one display of at
    most :data:`MAX_DISPLAY_CHARS` characters."""
    start = pos
    n = len(text)
    while start < n and text[start] in " \t\r\n":
        start += 1
    if start >= n:
        return None, pos
    for opener, closer in (("\\[", "\\]"), ("$$", "$$")):
        if text.startswith(opener, start):
            close = text.find(closer, start + len(opener), start + MAX_DISPLAY_CHARS)
            if close == -1:
                return None, pos
            end = close + len(closer)
            rest = _line_after(text, end)
            if rest.strip(" \t.。"):
                return None, pos  # the display goes on in prose: not a lone answer
            block = " ".join(text[start:end].split())
            return _clean_line_answer(block), end + len(rest)
    line = _line_after(text, start)
    end = start + len(line)
    value = line.strip().rstrip(" .。")
    lone_span = (value.startswith("$") and value.endswith("$") and value.count("$") == 2) or (
        (value.startswith("\\(") and value.endswith("\\)")) or (value.startswith("**") and value.endswith("**"))
    )
    if lone_span or (len(value.split()) <= 3 and not text[end:].strip()):
        return _phrase_line_answer(line), end
    return None, pos


def _phrase_line_answer(line: str) -> str | None:
    """The answer on the line after an answer phrase."""
    m = _ADVERB_RE.match(line.lstrip(" \t"))
    if m is not None:
        line = line.lstrip(" \t")[m.end() :]
    inner = last_boxed(line)
    if inner is not None:
        return inner
    m = _MATH_THEN_SENTENCE_RE.match(line)
    if m is not None:  # Minerva: "The final answer is $5$. I hope it is correct."
        rest = m.end() - 1  # the regex read the first character of the next sentence
        if _WORDS_ONLY_RE.fullmatch(line, rest) is None or _changes_answer(line[rest:]):
            return None  # "$12$. Another answer is $13$.", "$12$. Or maybe 13.": not one answer
        return _clean_line_answer(m.group(1))
    line = _drop_closing_words(line)
    prose = _prose_value(line)
    return _clean_line_answer(prose if prose is not None else line)


def _drop_closing_words(line: str) -> str:
    """``line`` without closing sentences of words only (``12,000,023. I hope it is correct.``
    gives ``12,000,023``)."""
    # The first sentence end after the line's last character that could be part of a value
    # (one pass each: testing every sentence end's rest was quadratic, 11 s for 100 KB).
    last_value_char = -1
    for m in _VALUE_CHAR_RE.finditer(line):
        last_value_char = m.start()
    for m in _SENTENCE_END_RE.finditer(line, max(0, last_value_char)):
        if m.end() > last_value_char:
            if _changes_answer(line[m.end() :]):
                return line  # "5. Wait, no.", "12. Plus one.": taken back or changed
            return line[: m.start()]
    return line


# Words of a closing sentence that take the answer back or change it ("12. Plus one.", "12.
# Thousand.", "12. Just kidding.", "12. Also possible: thirteen."): the meaning words of a unit
# tail (text.MEANING_WORDS) but the few a closing courtesy uses, and a few verbs.
_CLOSING_HARMLESS = frozenset(
    "is are was were be being been am and true correct right yes if then positive single once".split()
)
_CLOSING_CHANGE_WORDS = (MEANING_WORDS - _CLOSING_HARMLESS) | frozenset(
    "also alternatively other could might kidding joking joke times divide multiply add subtract "
    "reverse reversed round base digits".split()
)
_WORD_RE = re.compile(r"[A-Za-z]+")


def _changes_answer(closing: str) -> bool:
    """Whether closing sentences of words only take back or change the answer before them."""
    if _RETRACTION_RE.search(closing) is not None:
        return True
    return any(w.lower() in _CLOSING_CHANGE_WORDS for w in _WORD_RE.findall(closing))


def _prose_value(line: str) -> str | None:
    """The value after the last ``is``/``are``/``equals``/``was``/``=`` of a prose answer line
    (``The smallest $k$ is 12.`` gives ``12``), or ``None``: the line must open with a word, and
    the words before that verb may hold no other verb, no hedge (``or``, ``maybe``, ``not``...)
    and no relation, so ``x is 5 or y is 6`` and ``12 is not 13, it is 14`` give nothing."""
    head = line.strip().lstrip("*").lstrip()
    if not head[:1].isalpha():
        return None
    # the verb must be outside $...$ math ("The smallest value is $x=5$" gives "$x=5$"); with an
    # odd number of "$" they are currency signs and every verb counts
    dollars = [m.start() for m in _DOLLAR_RE.finditer(head)]
    math_spans = len(dollars) % 2 == 0
    last = None
    for m in _PROSE_VERB_RE.finditer(head):
        if not (math_spans and bisect.bisect_left(dollars, m.start()) % 2 == 1):
            last = m
    if last is None:
        return None
    subject, value = head[: last.start()], head[last.end() :].strip()
    if not value or _PROSE_REFUSED_RE.search(subject) is not None:
        return None
    if last.group(0).startswith("=") and subject.rstrip().endswith("$"):
        return None  # "... $x$ = 5": an equation written in prose, not a named value
    m = _APPROX_WORD_RE.match(value)
    if m is not None:
        value = "\\approx " + value[m.end() :]
    last_side = _chain_last_side(value)
    return value if last_side is None else "$" + last_side + "$"


def _chain_last_side(value: str) -> str | None:
    """The last side of a prose value that is one ``$...$`` chain of equalities opening with a
    computation (``$\\binom{8}{3} = 56$`` gives ``56``: the prose subject names the chain, as a
    chain that opens with a name is its last side); ``None`` for anything else (``$x = 5$``,
    ``$5x - 7y + 4 = 0$`` keep their equation). Linear time."""
    v = value.rstrip(" \t.")
    if not (v.startswith("$") and v.endswith("$") and v.count("$") == 2) or "<" in v or ">" in v:
        return None
    sides = v[1:-1].split("=")
    if len(sides) < 2 or not sides[-1].strip() or _LETTER_RE.search(_COMMAND_RE.sub("", sides[0])) is not None:
        return None
    return sides[-1].strip()


_ANSWER_OPEN_RE = re.compile(r"<answer>", re.IGNORECASE)
_ANSWER_CLOSE_RE = re.compile(r"</answer>", re.IGNORECASE)


def last_tag_answer(text: str) -> Extraction | None:
    """The answer in the last ``<answer>...</answer>`` pair (DeepSeek-R1's format, which TRL's and
    many RL recipes' prompts ask for), or ``None`` when ``text`` has no ``<answer>`` tag.

    The content is read as an answer line (a phrase in it, ``The answer is 12``, gives its value;
    closing sentences of words only are dropped, never ``12. Or maybe 13``); content over several
    lines gives its GSM8K ``####`` or closing-statement answer. An opened but never closed tag (a
    truncated answer) or an empty one is *no answer* (``Extraction(None, "none")``), never an
    earlier value; a hedge right after ``</answer>`` (``</answer> Or maybe 13.``) is recorded as
    for a box. Linear time.
    """
    opened = None
    for m in _ANSWER_OPEN_RE.finditer(text):
        opened = m
    if opened is None:
        return None
    closed = _ANSWER_CLOSE_RE.search(text, opened.end())
    if closed is None:
        return Extraction(None, "none")  # cut off inside its answer
    content = text[opened.end() : closed.start()].strip()
    if not content:
        return Extraction(None, "none")
    answer = last_phrase_answer(content)
    if answer is None:
        if "\n" not in content:
            line = _drop_closing_words(content)
            prose = _prose_value(line)
            answer = _clean_line_answer(prose if prose is not None else line)
        else:
            answer = last_gsm8k_answer(content) or last_statement_answer(content)
    if answer is None:
        return Extraction(None, "none")
    return _with_hedges(Extraction(answer, "answer_tag"), text, closed.end())


def _with_hedges(ext: Extraction, text: str, pos: int) -> Extraction:
    """``ext`` with the hedges that follow its answer, which ends at ``pos`` in ``text``."""
    found = _hedges_in(text, pos, min(len(text), pos + HEDGE_WINDOW), ext.answer)
    if not found:
        return ext
    return Extraction(ext.answer, ext.method, ext.parts, found[0][0], tuple(v for _, v in found))


def last_gsm8k_answer(text: str) -> str | None:
    """Answer after the last GSM8K ``#### `` marker, to the end of its line."""
    return _gsm8k_answer(text)[0]


def _gsm8k_answer(text: str) -> tuple:
    """:func:`last_gsm8k_answer` and where its line ends (``(None, -1)`` without a marker)."""
    last = None
    for m in _GSM_RE.finditer(text):
        last = m
    if last is None:
        return None, -1
    line = _line_after(text, last.end())
    return _clean_line_answer(line), last.end() + len(line)


def last_statement_answer(text: str) -> str | None:
    """The number closing the response's final sentence (``... the total is $29.00.``).

    Only the last 300 characters are examined, and only a complete sentence (ending in ``.``
    or ``!``) whose verb ``is|are|equals|be|was|were`` is directly followed by a number (with
    optional currency, percent, thousands separators, bold and up to three unit words) counts.
    """
    tail = text[-300:]
    if "$" in tail or "\\(" in tail or "\\[" in tail:
        tail = _INLINE_NUMBER_RE.sub(r"\1", tail)
    m = _STATEMENT_RE.search(tail)
    if m is None:
        return None
    return m.group("ans").strip() or None


def _without_code(text: str) -> str:
    """``text`` without its fenced code blocks (an unclosed fence runs to the end) when a box stands
    outside them: a coder model's ``print(f"\\\\boxed{{{x}}}")`` after its answer is code, not the
    answer. ``text`` itself when every box is inside code. Linear time."""
    out = []
    pos, inside = 0, False
    while True:
        i = text.find("```", pos)
        if i == -1:
            if not inside:
                out.append(text[pos:])
            break
        if not inside:
            out.append(text[pos:i])
        inside, pos = not inside, i + 3
    stripped = "\n".join(out)
    return stripped if _has_real_box(stripped) else text


def extract_final_answer(text: str) -> Extraction:
    """Extract the final answer of a model response (see the module docstring for the rules).

    Args:
        text: The response (any length).
    Returns:
        An :class:`Extraction`; ``answer`` is ``None`` with method ``"none"`` when there is no
        final answer.
    Raises:
        TypeError: ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"response must be a str, got {type(text).__name__}")
    body = strip_think(text)
    if "```" in body:
        body = _without_code(body)
    if "\\boxed" in body or "\\fbox" in body:
        items = _boxed_group_items(body)
        if items is not None and items[0][0] >= 0 and _is_rejected(body, items[0][0], items[0][1]):
            cut = _unrejected_end(body)
            if cut is None:
                return Extraction(None, "none")  # its only boxes are named as rejected
            items = _boxed_group_items(body[:cut])
        if items is not None:
            hedges = _box_hedge(body, items)
            hedge = hedges[0][0] if hedges else None
            offered = tuple(v for _, v in hedges)
            group = tuple((name, content) for _, _, content, name in reversed(items))
            if len({content for _, content in group}) == 1:  # one box, or the same box repeated
                return Extraction(group[-1][1], "boxed", hedge=hedge, offered=offered)
            parts = tuple(dict.fromkeys(c if n is None else f"{n} = {c}" for n, c in group))
            return Extraction(", ".join(parts), "boxed", parts, hedge=hedge, offered=offered)
        # A box exists but the last one is unclosed, empty or unusable: no final answer.
        # Falling through to phrases would grade an earlier, intermediate value.
        if _has_real_box(body):
            return Extraction(None, "none")
    tagged = last_tag_answer(body)
    if tagged is not None:
        return tagged
    phrase, line_end = _phrase_answer(body)
    if phrase is not None:
        return _with_hedges(Extraction(phrase, "phrase"), body, line_end)
    gsm, line_end = _gsm8k_answer(body)
    if gsm is not None:
        return _with_hedges(Extraction(gsm, "gsm8k"), body, line_end)
    statement = last_statement_answer(body)
    if statement is not None:
        return Extraction(statement, "statement")
    return Extraction(None, "none")


# ---------------------------------------------------------------------- dataset gold answers
_METAMATH_RE = re.compile(r"The answer is:?\s*(.+?)\s*$", re.IGNORECASE | re.DOTALL)


def gold_from_metamathqa(response: str) -> str | None:
    """Gold answer of a MetaMathQA row: the text after the last ``The answer is:`` (dataset card)."""
    idx = response.lower().rfind("the answer is")
    if idx == -1:
        return None
    m = _METAMATH_RE.match(response[idx:])
    if not m:
        return None
    ans = m.group(1).strip()
    ans = _clean_line_answer(ans.split("\n")[0]) if ans else None
    return ans


def gold_from_gsm8k(answer: str) -> str | None:
    """Gold answer of a GSM8K row: the text after ``#### ``, thousands separators removed."""
    ans = last_gsm8k_answer(answer)
    if ans is None:
        return None
    return ans.replace(",", "").strip() or None


def gold_from_boxed(solution: str) -> str | None:
    """Gold answer of a MATH / NuminaMath row: the last ``\\boxed{}`` with matched braces."""
    return last_boxed(solution)

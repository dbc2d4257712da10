"""Text primitives that extraction, normalisation and LaTeX parsing share: brace matching and the
words that change what a number means. The lowest grading module: it imports none of the others, so
``extract``, ``normalize`` and ``latex`` import it and never each other in a circle.
"""

from __future__ import annotations

import re

__all__ = ["MEANING_WORDS", "match_brace"]

#: Words that change what a number means: never dropped as a "unit" (``3 \text{ thousand}``,
#: ``3 \text{ squared}``, ``3 \text{ is wrong}``, ``3 \text{ or four}``). An answer that keeps
#: one only counts as an exact match (:func:`has_meaning_words`).
MEANING_WORDS = frozenset(
    """
    zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty
    ninety hundred thousand million billion trillion quadrillion dozen dozens score gross
    half halves third thirds quarter quarters fourth fourths fifth fifths sixth sevenths
    eighth eighths ninth ninths tenth tenths hundredth hundredths thousandth thousandths
    millionth millionths percent percentage pct permille ppm single double triple quadruple
    twice thrice once k grand bn mn thou lakh lac crore myriad mille
    squared cubed power powers root roots sqrt exponent factorial reciprocal inverse
    plus minus multiplied divided over greater smaller larger bigger
    higher lower than above below under exceeding exceeds increased decreased added subtracted
    another negative positive
    not no none nothing never neither nor is isnt are was were be being been am or and but
    except maybe perhaps possibly probably wrong incorrect false true correct right either if
    iff then unless otherwise else implies without instead nope yes approx
    approximately roughly about around circa nearly almost ish rounded
    least most max maximum minimum minimal maximal
    loss losses deficit debt owed owing short shortfall
    """.split()
)
# (Bounds and qualifiers: ``5 \text{ at most}``, ``5 \text{ maximum}``, ``48 in most cases`` state a
# bound or a hedge, not the value; ``5 \text{ loss}``, ``5 \text{ deficit}`` flip its sign; ``5
# \text{ lakh}`` scales it. ``min`` stays a unit: minutes.)

# Braces and backslashes: the only characters the brace matcher needs to look at.
_BRACE_RE = re.compile(r"[\\{}]")


def match_brace(text: str, open_idx: int, limit: int | None = None) -> int:
    """Index of the ``}`` matching the ``{`` at ``open_idx``, or -1 if it does not close before
    ``limit`` (default: the end of ``text``). ``\\{``, ``\\}`` and ``\\\\`` are escapes.

    Jumps between brace/backslash characters with a compiled regex, so the cost is linear in
    ``limit - open_idx`` with a small constant.
    """
    end = len(text) if limit is None else min(limit, len(text))
    depth = 0
    pos = open_idx
    search = _BRACE_RE.search
    while True:
        m = search(text, pos, end)
        if m is None:
            return -1
        i = m.start()
        c = text[i]
        if c == "\\":
            pos = i + 2
            continue
        if c == "{":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return i
        pos = i + 1

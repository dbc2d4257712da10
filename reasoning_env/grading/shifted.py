"""Answers that are the gold plus a nonzero number: ``(2,4)+9`` for the gold ``(2,4)``.

The fast parser refuses arithmetic on a tuple, interval or set (``arithmetic on a non-scalar``),
so such an answer went to math-verify, which spends 20-300 ms of sympy on each new one to say
what is certain: ``X + c`` is not ``X`` when ``c`` is a nonzero number and no shift leaves
``X`` unchanged. Under every reading of ``X + c``: undefined (not an answer), elementwise
(``(11, 13)``), or the shifted set (Minkowski sum), a finite item moves by ``c``.

:func:`gold_plus_number` decides that, and only that, without sympy. The rule only ever
rejects, and only where the gold cannot be shift-invariant:

* a tuple or interval whose items are expressions, at least one of them finite (``(-\\infty,
  \\infty) + 1`` is the same set: not decided here);
* a set of finitely many expressions, none infinite (the sum of its items moves by ``n c``);
* not a word (``\\text{even} + 6``: the even numbers shifted by 6 are the even numbers), not a
  union of intervals (``(0,3) \\cup (1,2)`` shifted only in its last part can be itself), not a
  bare list (``1, 2 + 3`` is ``(1, 5)`` by precedence);
* ``x \\in S`` or ``x = S`` for such an ``S`` (``x \\in [-2,7]+6``: ``x`` in ``[4, 13]``, or nonsense).

The part before the ``+ c`` must be the gold itself (same normal form, or equal on the fast
path); an answer that merely looks like a tuple plus a number (``(1,3)+1`` against ``(2,4)``)
is left to the later stages.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from reasoning_env.grading.compare import compare
from reasoning_env.grading.gold import GoldInfo
from reasoning_env.grading.latex import ParseError, parse_answer
from reasoning_env.grading.normalize import match_key
from reasoning_env.grading.values import Assign, Seq, iter_nodes

__all__ = ["gold_plus_number"]

# "<the rest> + <number>" or "... - <number>": the last top-level sign before a trailing literal.
_PLUS_NUMBER_RE = re.compile(r"^(?P<rest>.*\S)\s*(?P<sign>[+-])\s*(?P<number>\d+(?:\.\d*)?|\.\d+)$", re.DOTALL)
_INF = ("c", "inf")


def _finite(node: Any) -> bool:
    return not any(n == _INF for n in iter_nodes(node))


def _never_shift_invariant(gold: Any) -> bool:
    """Whether adding a nonzero number to ``gold`` changes it under every reading."""
    if isinstance(gold, Assign):  # "x \in [-2,7]" + 6: x is in [4, 13] (or nonsense)
        gold = gold.value
    if not isinstance(gold, Seq) or not gold.items:
        return False
    if not all(isinstance(item, tuple) for item in gold.items):  # nested structures, words
        return False
    if gold.kind == "tuple":
        return any(_finite(item) for item in gold.items)
    if gold.kind == "set":
        return all(_finite(item) for item in gold.items)
    return False  # bare lists and ratios: a trailing "+ c" binds to their last item only


def gold_plus_number(normalised: str, info: GoldInfo, deadline: float) -> str | None:
    """Why the normalised answer is the gold plus a nonzero number (a short phrase), or ``None``
    when it is not, or when that cannot be shown without math-verify.

    Args:
        normalised: The answer, normalised (:func:`~reasoning_env.grading.normalize.normalize_with_unit`).
        info: The prepared gold.
        deadline: For the fast comparison of the rest with the gold (the grader's clock).
    """
    if info.value is None or not _never_shift_invariant(info.value):
        return None
    m = _PLUS_NUMBER_RE.match(normalised)
    if m is None or Fraction(m["number"]) == 0:
        return None
    rest = m["rest"]
    if match_key(rest) != info.key:
        try:
            value = parse_answer(rest, False)
        except (ParseError, RecursionError):
            return None
        if compare(value, info.value, deadline).equal is not True:
            return None
    return f"the gold {m['sign']} {m['number']}: adding a nonzero number to it changes it"

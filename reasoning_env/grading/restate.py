"""Answers that restate the question: a copy of one of its expressions is not an answer.

A value-based grader accepts any expression equal to the gold, so for "Compute X", "Simplify X"
or "Express X as a decimal" a policy that copies ``X`` from the question into its box earns
the reward without doing anything: on MATH-500, copying a ``$...$`` span of the question is
graded correct on 31 problems (``\\sqrt{242}`` for ``11\\sqrt2``, ``513^2 - 487^2`` for 26000,
``\\dbinom{31}{28}`` for 4495, ``\\frac{9}{2}`` for 4.5; math-verify accepts them too). RL finds
such a copy at once. With the question at hand (``Grader.grade(..., question=...)``), an answer
whose normalised text is one of the question's math spans (or a side of an ``=`` in one) and
that is not the gold itself (as text, or as the same parsed expression: ``\\frac{3}{4}`` for
``\\frac34``) is a mismatch. The rule only ever rejects.
"""

from __future__ import annotations

import re
from functools import lru_cache

from reasoning_env.grading.normalize import match_key, normalize_answer

__all__ = ["question_expressions", "restates_question"]

# $$...$$, $...$, \(...\), \[...\] (question texts are data, not model output; bounded below).
_SPAN_RE = re.compile(r"\$\$(.+?)\$\$|\$([^$]+)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
#: Longest question text scanned (characters); longer ones are scanned up to it.
MAX_QUESTION_CHARS = 20_000


@lru_cache(maxsize=4096)
def question_expressions(question: str) -> frozenset:
    """Match keys (:func:`~reasoning_env.grading.normalize.match_key`) of the math spans of a
    question and of the sides of each ``=`` in them (``$x = 99^2+99+1$`` gives the span, ``x``
    and ``99^2+99+1``). Cached per question text."""
    keys = set()
    for m in _SPAN_RE.finditer(question[:MAX_QUESTION_CHARS]):
        span = next(g for g in m.groups() if g is not None).strip()
        for text in [span] + (span.split("=") if "=" in span else []):
            key = match_key(normalize_answer(text))
            if key:
                keys.add(key)
    return frozenset(keys)


def restates_question(answer: str, question: str | None, gold_key: str, same_as_gold) -> bool:
    """Whether ``answer`` copies an expression of ``question`` that is not the gold.

    Args:
        answer: The extracted answer (one box).
        question: The question text, or ``None`` (then never).
        gold_key: The gold's match key (an answer with this key is the gold, not a copy).
        same_as_gold: ``callable(normalised_answer) -> bool``: whether the answer parses to the
            gold's own expression (``\\frac{3}{4}`` for ``\\frac34``).
    """
    if not question:
        return False
    normalised = normalize_answer(answer)
    key = match_key(normalised)
    if key == gold_key or key not in question_expressions(question):
        return False
    return not same_as_gold(normalised)

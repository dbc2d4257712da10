"""Answer grading: ``grade(response, gold) -> GradeResult``.

Modules, one job each:

- :mod:`~reasoning_env.grading.extract`: find the final answer in a response (last box, answer
  phrase, ``####``, closing statement; ``<think>`` spans ignored); gold helpers for datasets.
- :mod:`~reasoning_env.grading.normalize`: notation that does not change the value (``\\dfrac``,
  ``\\left``, units, currency, degrees, thousands separators...).
- :mod:`~reasoning_env.grading.latex`: a bounded parser of the answer subset of LaTeX.
- :mod:`~reasoning_env.grading.values`: the answer AST and its exact / high-precision evaluation.
- :mod:`~reasoning_env.grading.compare`: equivalence without sympy (numbers, expressions at random
  points, equations up to a factor, intervals, sets, tuples, matrices...).
- :mod:`~reasoning_env.grading.gold`: gold answers parsed once and cached; load-time reports.
- :mod:`~reasoning_env.grading.restate`: answers that copy an expression of the question.
- :mod:`~reasoning_env.grading.pool` (+ ``_worker.py``): math-verify in killable worker
  processes for what the fast path cannot decide.
- :mod:`~reasoning_env.grading.grader`: :class:`Grader`, :class:`GradeResult`, :data:`REASONS`.

No model text is ever evaluated as code: there is no ``eval``/``exec``/``sympify``/``parse_expr``
on it anywhere (math-verify runs with its LaTeX extractor only, in a worker process).
"""

from __future__ import annotations

from reasoning_env.grading.extract import Extraction, extract_final_answer
from reasoning_env.grading.gold import GoldInfo, GoldReport, log_gold_issues, prepare_gold
from reasoning_env.grading.grader import DEFAULT_TIMEOUT_S, REASONS, Grader, GradeResult
from reasoning_env.grading.normalize import normalize_answer

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "Extraction",
    "GoldInfo",
    "GoldReport",
    "GradeResult",
    "Grader",
    "REASONS",
    "extract_final_answer",
    "grade",
    "log_gold_issues",
    "normalize_answer",
    "prepare_gold",
]


def grade(
    response: str, gold: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, question: str | None = None
) -> GradeResult:
    """Grade one response against a gold answer (see :meth:`Grader.grade`).

    A :class:`Grader` is cheap to build: the gold cache and the worker pool are process-wide.

    Args:
        response: Full model output.
        gold: Gold answer string.
        timeout_s: Time limit (seconds).
        question: The question text, when known (a copy of one of its expressions is wrong).
    Raises:
        TypeError / ValueError: see :meth:`Grader.grade`.
    """
    return Grader(timeout_s).grade(response, gold, timeout_s=timeout_s, question=question)

"""The oracle allocation and the regret of an episode: one public function for evaluation, Play
and training.

The oracle knows every question's curve in advance and spends the budget the way that maximises
expected correct answers, under the environment's hard-cap rules (the exact plan of
:func:`~reasoning_env.policies.allocation.optimal_allocation`: one token resolution, early end
when fewer than ``min_tokens`` remain). A question may get as little as its shortest possible
response (``lows``, e.g. the tokens of ``\\boxed{gold}``), so the plan can be played by the
simulated solver (:class:`~reasoning_env.policies.simulated.OracleAllocationPolicy`).

The *regret* of an episode is the oracle's expected correct answers minus the policy's expected
correct answers under the same curves at the tokens it was charged (expected correct answers per
episode, not tokens)::

    from reasoning_env.policies import SolverCurves, episode_regret
    r = episode_regret(SolverCurves(), [("GSM8K", None), ("MATH-500", 4)], budget=600, tokens=[120, 380])
    r.expected_correct, r.oracle_expected_correct, r.regret

The name and signature of :func:`episode_regret` are stable (the training loop's in-training
evaluation calls it).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reasoning_env.policies.allocation import Allocation, optimal_allocation
from reasoning_env.policies.curves import SolverCurves

__all__ = ["EpisodeRegret", "OracleCache", "episode_regret", "oracle_lows", "oracle_plan"]

#: A question as the oracle sees it: ``(problem_type, difficulty or None)``.
QuestionKey = tuple[str | None, float | None]


def oracle_lows(minimal: Sequence[int], budget: int, cap: int) -> list[int]:
    """Per-question lower bounds of the oracle's plan (tokens): each question's shortest
    response clipped to ``[1, cap]``; all 1 when they do not fit in ``budget`` together."""
    lows = [max(1, min(int(m), int(cap))) for m in minimal]
    if sum(lows) > budget:
        lows = [1] * len(lows)
    return lows


def _key(questions: Sequence[QuestionKey]) -> tuple:
    return tuple(
        (str(p), None if d is None or (isinstance(d, float) and math.isnan(d)) else float(d)) for p, d in questions
    )


def oracle_plan(
    curves: SolverCurves,
    questions: Sequence[QuestionKey],
    budget: int,
    lows: Sequence[int] | None = None,
    *,
    cap: int = 2048,
    min_tokens: int = 10,
) -> Allocation:
    """The oracle's exact plan of ``budget`` tokens over ``(problem_type, difficulty)`` questions.

    Args:
        curves: The solver curves.
        questions: The episode's questions in order.
        budget: Episode budget (tokens).
        lows: Shortest response per question (tokens; default 1 each).
        cap: Per-question token cap (the config's ``max_tokens_per_step``).
        min_tokens: The hard-cap early-end threshold (the config's ``min_tokens``).

    Returns:
        An :class:`~reasoning_env.policies.Allocation` (``expected_correct`` is the bound).
    """
    qs = _key(questions)
    budget = int(budget)
    cap = max(1, min(int(cap), budget)) if budget > 0 else 1
    lo = oracle_lows(list(lows) if lows is not None else [1] * len(qs), budget, cap)
    fns = [curves.question_fn(p, d) for p, d in qs]
    return optimal_allocation(fns, budget, lo=lo, cap=cap, min_tokens=int(min_tokens))


class OracleCache:
    """Oracle plans per (questions, budget, lows), computed once (thread-safe).

    The evaluation shares one cache between the regret of every policy and the oracle policy
    itself, so each episode's plan is solved once.

    Args:
        curves: The solver curves.
        cap: Per-question token cap (the config's ``max_tokens_per_step``).
        min_tokens: The config's ``min_tokens``.
    """

    def __init__(self, curves: SolverCurves, *, cap: int, min_tokens: int) -> None:
        self.curves = curves
        self.cap = int(cap)
        self.min_tokens = int(min_tokens)
        self._cache: dict[tuple, Allocation] = {}
        self._lock = threading.Lock()
        #: Seconds spent solving plans (cache misses), so that callers can time them apart: the
        #: first policy of an evaluation solves every episode's plan for the ones after it.
        self.solve_s = 0.0

    def plan(self, questions: Sequence[QuestionKey], budget: int, lows: Sequence[int] | None = None) -> Allocation:
        """:func:`oracle_plan` of these questions, cached."""
        qs = _key(questions)
        key = (qs, int(budget), tuple(lows) if lows is not None else None)
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        t0 = time.perf_counter()
        alloc = oracle_plan(self.curves, qs, int(budget), lows, cap=self.cap, min_tokens=self.min_tokens)
        with self._lock:
            self._cache[key] = alloc
            self.solve_s += time.perf_counter() - t0
        return alloc

    def expected_correct(
        self, questions: Sequence[QuestionKey], budget: int, lows: Sequence[int] | None = None
    ) -> float:
        """Oracle expected correct answers for ``(problem_type, difficulty)`` questions, a budget
        (tokens) and per-question minimum lengths (tokens; default 1)."""
        return self.plan(questions, budget, lows).expected_correct


@dataclass(frozen=True)
class EpisodeRegret:
    """The regret of one episode (expected correct answers per episode).

    Attributes:
        expected_correct: ``sum_i p_i(tokens_i)`` of the policy (0 for a question with 0 tokens
            and for questions never answered).
        oracle_expected_correct: The oracle plan's expected correct answers.
        regret: ``oracle_expected_correct - expected_correct``.
        oracle_tokens: The oracle's plan (tokens per question).
    """

    expected_correct: float
    oracle_expected_correct: float
    regret: float
    oracle_tokens: tuple[int, ...] = ()


def expected_correct(curves: SolverCurves, questions: Sequence[QuestionKey], tokens: Sequence[Any]) -> float:
    """``sum_i p_i(tokens_i)`` over the answered questions (``tokens`` may be shorter than
    ``questions``: the rest were never answered); 0 for a 0-token answer."""
    total = 0.0
    for (p, d), t in zip(_key(questions), tokens):
        t = float(t)
        if t > 0:
            total += float(curves.p(t, p, d))
    return total


def episode_regret(
    curves: SolverCurves,
    questions: Sequence[QuestionKey],
    budget: int,
    tokens: Sequence[Any],
    *,
    lows: Sequence[int] | None = None,
    cap: int = 2048,
    min_tokens: int = 10,
    cache: OracleCache | None = None,
) -> EpisodeRegret:
    """Expected correct answers of a played episode, the oracle's, and the regret.

    Args:
        curves: The solver curves (the simulated solver's defaults or a calibrated file).
        questions: The episode's ``(problem_type, difficulty)`` in order (all of them, also
            those never answered).
        budget: The episode's budget (tokens).
        tokens: Tokens charged per answered question, in order (shape ``(answered,)``).
        lows: Shortest possible response per question (tokens; default 1).
        cap: Per-question cap (tokens). min_tokens: the hard-cap early-end threshold (tokens).
        cache: An :class:`OracleCache` to reuse plans (its ``cap`` / ``min_tokens`` win).

    Returns:
        :class:`EpisodeRegret`.

    Raises:
        ValueError: more token counts than questions, or a negative budget.
    """
    if len(tokens) > len(questions):
        raise ValueError(
            f"{len(tokens)} token counts for {len(questions)} questions: pass one count per answered question"
        )
    if budget < 0:
        raise ValueError(f"budget must be >= 0 tokens, got {budget}")
    exp = expected_correct(curves, questions, tokens)
    plan = (
        cache.plan(questions, budget, lows)
        if cache is not None
        else oracle_plan(curves, questions, budget, lows, cap=cap, min_tokens=min_tokens)
    )
    return EpisodeRegret(exp, plan.expected_correct, plan.expected_correct - exp, plan.tokens)

"""A reward as the objective of :func:`~reasoning_env.policies.allocation.optimal_allocation`.

The expected reward of spending ``t`` tokens on question ``i`` after ``s`` tokens were spent is

    E_i(t, s) = p_i(t) R(correct, t, s) + (1 - p_i(t)) R(wrong, t, s)

with ``R`` the reward's own vectorised step formula (:meth:`RewardShape.step_batch`: one formula
for the environment, re-scoring and this model) in the context of question ``i`` (its index,
difficulty and problem type, the episode's budget and size). A 0-token answer is a skip: it has
no answer (``has_answer = False``) and is wrong. Lengths are charged as generated
(``raw_tokens = tokens``). Episode terms (paid on the final step) are evaluated with the reward's
``episode_batch`` for every final spend and way of ending (all answered, or ran dry after
question ``i``: ``num_answered = i + 1``, ``ran_dry = True``), as ``a * K + b`` in the number of
correct answers ``K``; a term that is not affine in ``K`` is linearised through ``K = 0`` and
``K = num_answered`` and noted.

Rewards that read the spent budget (a remaining-budget share, soft-mode overspend) need a table
over ``(t, s)``. It is computed per token when it has at most :data:`FULL_TABLE_ROWS` rows;
otherwise the spend is cut into ``spent_cells`` cells and each cell is valued at the better of its
two ends (its start and the next cell's start) and, separately, at the worse. When the reward is
monotone in the spent budget within a cell, which holds for every registered shape (shares,
limits and overspend are monotone in it), the first envelope bounds the optimum from above and
the plan optimal on the second is safe; both plans are re-valued exactly, the better is
returned, and its distance to the upper bound is the reported ``bound``. Whether a reward reads
the spent budget is detected by evaluating it at several spends.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from reasoning_env.policies.tables import CurveFn, Tables
from reasoning_env.policies.tables import curve_values as _curve_values

__all__ = ["FULL_TABLE_ROWS", "correctness_signal", "reward_tables"]

#: Largest ``(lengths x spends)`` table computed per token for a reward that reads the spent budget.
FULL_TABLE_ROWS = 300_000


def _build(reward: Any):
    from reasoning_env.rewards import build_reward

    rw = build_reward(reward, context="rescore")
    if getattr(rw, "is_group", False):
        raise ValueError(
            "group rewards compare the rollouts of a GRPO group; a single policy's optimal "
            "allocation is not defined for them (use re-scoring)"
        )
    return rw


def _step_values(
    rw: Any,
    t: np.ndarray,
    s: np.ndarray,
    correct: bool,
    *,
    i: int,
    n: int,
    budget: int,
    hard: bool,
    difficulty: float | None,
    problem_type: str,
) -> np.ndarray:
    from reasoning_env.rewards import StepBatch, components_total

    batch = StepBatch.build(
        len(t),
        correct=correct,
        tokens=t,
        has_answer=t > 0,
        total_budget=budget,
        num_questions=n,
        spent_before=s,
        question_index=i,
        hard_cap_mode=hard,
        difficulty=difficulty,
        problem_type=problem_type,
    )
    return components_total(rw.step_batch(batch), len(t))


def _episode_coefficients(
    rw: Any, spends: np.ndarray, *, answered: int, n: int, budget: int, ran_dry: bool
) -> tuple[np.ndarray, np.ndarray, float]:
    """``a``, ``b`` (per final spend) and the largest deviation from affinity in ``K``."""
    from reasoning_env.rewards import EpisodeBatch, components_total

    def value(k: float) -> np.ndarray:
        eb = EpisodeBatch.build(
            len(spends),
            num_correct=k,
            num_answered=answered,
            num_questions=n,
            total_spent=spends,
            total_budget=budget,
            ran_dry=ran_dry,
        )
        return components_total(rw.episode_batch(eb), len(spends))

    g0 = value(0.0)
    if answered == 0:
        return np.zeros(len(spends)), g0, 0.0
    gk = value(float(answered))
    a = (gk - g0) / answered
    err = 0.0
    if answered >= 2:
        mid = answered // 2
        err = float(np.max(np.abs(value(float(mid)) - (g0 + a * mid))))
    return a, g0, err


def _contexts(questions: Sequence[tuple[float | None, str]] | None, n: int) -> list[tuple[float | None, str]]:
    if questions is None:
        return [(None, "")] * n
    qs = [
        (None if d is None or (isinstance(d, float) and math.isnan(d)) else float(d), str(pt or ""))
        for d, pt in questions
    ]
    if len(qs) != n:
        raise ValueError(f"need one (difficulty, problem_type) per question: {n} curves, {len(qs)} questions")
    return qs


def reward_tables(
    reward: Any,
    curves: Sequence[CurveFn],
    budget: int,
    lows: Sequence[int],
    cap: int,
    *,
    questions: Sequence[tuple[float | None, str]] | None = None,
    hard_cap_mode: bool = True,
    min_tokens: int = 0,
    soft_headroom: float = 2.0,
    spent_cells: int = 64,
) -> Tables:
    """The DP tables of a reward's expected episode reward (see the module docstring).

    Raises:
        ValueError: a group reward, bad ``spent_cells`` / ``soft_headroom``, or mismatched questions.
    """
    rw = _build(reward)
    n = len(curves)
    if spent_cells < 1:
        raise ValueError(f"spent_cells must be >= 1, got {spent_cells}")
    if not hard_cap_mode and not soft_headroom > 0:
        raise ValueError(f"soft_headroom must be > 0 budgets, got {soft_headroom}")
    ctx = _contexts(questions, n)
    S = min(budget, n * cap) if hard_cap_mode else min(int(math.floor(soft_headroom * budget)), n * cap)
    S1 = S + 1
    common = dict(n=n, budget=budget, hard=hard_cap_mode)
    lengths, ps, rows_c, rows_w = [], [], [], []
    probes = np.unique(np.array([0, S // 7, S // 3, S // 2, max(0, S - cap), S], dtype=float))
    reads_spent = False
    for i, (f, lo) in enumerate(zip(curves, lows)):
        t = np.arange(int(lo), min(cap, S) + 1)
        lengths.append(t)
        ps.append(_curve_values(f, t) * (t > 0))
        d, pt = ctx[i]
        tt = np.repeat(t.astype(float), len(probes))
        ss = np.tile(probes, len(t))
        rc = _step_values(rw, tt, ss, True, i=i, difficulty=d, problem_type=pt, **common).reshape(len(t), len(probes))
        rw_ = _step_values(rw, tt, ss, False, i=i, difficulty=d, problem_type=pt, **common).reshape(
            len(t), len(probes)
        )
        rows_c.append(rc)
        rows_w.append(rw_)
        if not (
            np.array_equal(rc, np.repeat(rc[:, :1], len(probes), axis=1))
            and np.array_equal(rw_, np.repeat(rw_[:, :1], len(probes), axis=1))
        ):
            reads_spent = True
    notes: list[str] = []
    cell_of = None
    values, lows_ = [], []
    if not reads_spent:
        for i in range(n):
            values.append(ps[i] * rows_c[i][:, 0] + (1 - ps[i]) * rows_w[i][:, 0])
    else:
        L = max(len(t) for t in lengths)
        if L * S1 <= FULL_TABLE_ROWS:
            width = 1
        else:
            width = max(1, math.ceil(S1 / spent_cells))
        # Cell k covers spends [k w, (k+1) w - 1]; it is valued at the better of k w and (k+1) w
        # (the next cell's start, or S for the last): an envelope of a slightly wider interval.
        starts = np.arange(0, S1, width)
        pts = starts if width == 1 else np.append(starts, S)
        cell_of = np.arange(S1) // width
        for i, t in enumerate(lengths):
            d, pt = ctx[i]
            tt = np.repeat(t.astype(float), len(pts))
            ss = np.tile(pts.astype(float), len(t))
            rc = _step_values(rw, tt, ss, True, i=i, difficulty=d, problem_type=pt, **common).reshape(len(t), len(pts))
            rwr = _step_values(rw, tt, ss, False, i=i, difficulty=d, problem_type=pt, **common).reshape(
                len(t), len(pts)
            )
            e = ps[i][:, None] * rc + (1 - ps[i][:, None]) * rwr
            values.append(e if width == 1 else np.maximum(e[:, :-1], e[:, 1:]))
            if width > 1:
                lows_.append(np.minimum(e[:, :-1], e[:, 1:]))
        if width > 1:
            notes.append(f"the reward reads the spent budget: read on {spent_cells} cells of it (bound reported)")
    # Episode terms per way of ending.
    spends = np.arange(S1, dtype=float)
    a_done, b_done, err = _episode_coefficients(
        rw, spends, answered=n, ran_dry=False, **{k: v for k, v in common.items() if k != "hard"}
    )
    worst = err
    terminal_from = None
    a_dry = b_dry = None
    if hard_cap_mode and min_tokens > 0 and n > 1:
        k = max(0, budget - min_tokens + 1)
        if k <= S:
            terminal_from = k
            a_dry = np.zeros((n - 1, S1))
            b_dry = np.zeros((n - 1, S1))
            for i in range(n - 1):
                a_i, b_i, e_i = _episode_coefficients(rw, spends[k:], answered=i + 1, ran_dry=True, n=n, budget=budget)
                a_dry[i, k:], b_dry[i, k:] = a_i, b_i
                worst = max(worst, e_i)
    if worst > 1e-9:
        notes.append(
            f"episode terms are not affine in the number correct (max deviation {worst:.3g}); they are linearised"
        )

    def exact_value(tokens: list[int], answered: list[bool]) -> float:
        asked = [i for i in range(n) if answered[i]]
        total, s, psum = 0.0, 0, 0.0
        for i in asked:
            t = int(tokens[i])
            p = float(_curve_values(curves[i], np.array([t]))[0]) if t > 0 else 0.0
            d, pt = ctx[i]
            arr_t, arr_s = np.array([float(t)]), np.array([float(s)])
            rc = float(_step_values(rw, arr_t, arr_s, True, i=i, difficulty=d, problem_type=pt, **common)[0])
            rwv = float(_step_values(rw, arr_t, arr_s, False, i=i, difficulty=d, problem_type=pt, **common)[0])
            total += p * rc + (1 - p) * rwv
            psum += p
            s += t
        ran_dry = len(asked) < n
        a, b, _e = _episode_coefficients(
            rw, np.array([float(s)]), answered=len(asked), n=n, budget=budget, ran_dry=ran_dry
        )
        return total + float(a[0]) * psum + float(b[0])

    tab = Tables(lengths, ps, values, cell_of, S1, terminal_from, a_done, b_done, a_dry, b_dry, exact_value, notes)
    tab.value_low = lows_ or None
    return tab


def correctness_signal(reward: Any, *, budget: int, num_questions: int, cap: int, hard_cap_mode: bool = True) -> bool:
    """Whether ``reward`` pays a right answer differently from a wrong one anywhere on
    ``0..cap`` tokens (step terms at several spends, and the episode terms). A reward without
    this signal (``format``, ``repetition``, ``dapo_overlong`` alone) cannot teach accuracy: the
    accuracy of its optimum is undefined, not 0."""
    rw = _build(reward)
    S = budget
    t = np.arange(0, cap + 1, dtype=float)
    for s in np.unique([0, S // 3, S // 2, max(0, S - cap)]):
        for i in sorted({0, num_questions // 2, num_questions - 1}):
            kw = dict(i=i, n=num_questions, budget=budget, hard=hard_cap_mode, difficulty=None, problem_type="")
            ss = np.full(len(t), float(s))
            if not np.array_equal(_step_values(rw, t, ss, True, **kw), _step_values(rw, t, ss, False, **kw)):
                return True
    a, _b, _e = _episode_coefficients(
        rw, np.linspace(0, budget, 11), answered=num_questions, n=num_questions, budget=budget, ran_dry=False
    )
    return bool(np.any(a != 0))

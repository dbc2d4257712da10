"""Splitting a token budget across questions with known accuracy-vs-tokens curves.

Problem: maximise ``sum_i p_i(t_i)`` subject to ``sum_i t_i <= B``, ``lo_i <= t_i <= cap``
(tokens), where each ``p_i`` is non-decreasing. The curves of :mod:`.curves` are logistic in
``ln t``, hence *convex* for small ``t`` (below the inflection) and concave above: marginal gains
are not decreasing, so a plain greedy is not optimal.

- :func:`optimal_allocation` (the oracle): exact dynamic programming over a token grid of unit
  ``g = ceil(B / max_units)`` tokens (``g = 1``, i.e. exact in tokens, when ``B <= max_units``).
  Levels are multiples of ``g``; costs are rounded up, so the plan is always feasible. Time
  ``O(n * U * L)`` with ``U = B / g`` budget units and ``L <= U`` levels per question.
- :func:`greedy_allocation`: marginal gains on each curve's upper concave envelope (the LP
  relaxation of the knapsack, solved greedily by decreasing slope; Dantzig 1957). Near-optimal,
  fast, and what a budget-aware policy can do on the fly.

Every question gets at least ``lo_i`` tokens (the shortest response, and at least the
environment's ``min_tokens`` so that a hard-cap episode never ends early). If even that does not
fit, questions are given ``lo_i`` in order until the budget runs out and the rest get 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Union

import numpy as np

__all__ = ["Allocation", "CurveFn", "greedy_allocation", "optimal_allocation", "upper_concave_envelope"]

#: A question's curve: token counts (1-D float array) -> probabilities of a correct answer.
CurveFn = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Allocation:
    """A budget split.

    Attributes:
        tokens: Tokens per question, in question order (ints).
        expected_correct: ``sum_i p_i(tokens_i)`` (expected number of correct answers).
        unit: Grid unit used (tokens).
    """

    tokens: tuple[int, ...]
    expected_correct: float
    unit: int = 1

    @property
    def total(self) -> int:
        """Tokens allocated in all."""
        return int(sum(self.tokens))


def _lows(n: int, lo: Union[int, Sequence[int]]) -> list[int]:
    if isinstance(lo, (int, np.integer)):
        return [int(lo)] * n
    lows = [int(x) for x in lo]
    if len(lows) != n:
        raise ValueError(f"need one lower bound per question: {n} curves, {len(lows)} bounds")
    return lows


def _fallback(curves: Sequence[CurveFn], budget: int, lows: list[int]) -> Allocation:
    tokens, left = [], budget
    for lo in lows:
        give = lo if left >= lo else 0
        tokens.append(give)
        left -= give
    exp = sum(float(f(np.array([t], dtype=float))[0]) if t > 0 else 0.0 for f, t in zip(curves, tokens))
    return Allocation(tuple(tokens), exp, 1)


def _checked(curves: Sequence[CurveFn], budget: int, lo: Union[int, Sequence[int]], cap: Optional[int]) -> Union[Allocation, tuple[int, int, int, list[int]]]:
    """Validate the allocators' arguments: ``(n, budget, cap, lows)``, or the final
    :class:`Allocation` when there is nothing to optimise (no question, or the lower bounds
    do not fit in the budget). Raises ``ValueError`` as :func:`optimal_allocation`."""
    n = len(curves)
    budget = int(budget)
    if budget < 0:
        raise ValueError(f"budget must be >= 0 tokens, got {budget}")
    if n == 0:
        return Allocation((), 0.0, 1)
    cap = budget if cap is None else int(cap)
    lows = _lows(n, lo)
    if any(lo_ > cap for lo_ in lows):
        raise ValueError(f"a lower bound exceeds the per-question cap ({max(lows)} > {cap})")
    if sum(lows) > budget:
        return _fallback(curves, budget, lows)
    return n, budget, cap, lows


def _grid(n: int, budget: int, cap: int, lows: Sequence[int], max_units: int) -> tuple[int, int]:
    """The token grid ``(unit, usable budget)`` of both allocators (tokens).

    Tokens beyond ``n x cap`` can never be spent, so the grid spans only ``min(budget, n x cap)``
    in at most ``max_units`` units; a unit no larger than ``cap - max(lows) + 1`` keeps every
    lower bound, rounded up to the grid, under the cap.
    """
    usable = min(budget, n * cap)
    g = max(1, math.ceil(usable / max(1, int(max_units))))
    return min(g, cap - max(lows) + 1), usable


def optimal_allocation(
    curves: Sequence[CurveFn],
    budget: int,
    *,
    lo: Union[int, Sequence[int]] = 1,
    cap: Optional[int] = None,
    max_units: int = 400,
) -> Allocation:
    """The allocation maximising expected correct answers (exact on the token grid).

    Args:
        curves: One :data:`CurveFn` per question (non-decreasing).
        budget: Total tokens ``B`` (>= 0).
        lo: Minimum tokens per question (int or one per question).
        cap: Maximum tokens per question (default: ``budget``).
        max_units: Grid resolution: the unit is ``ceil(min(budget, n x cap) / max_units)`` tokens
            (smaller if needed so that every lower bound fits under ``cap``).

    Returns:
        An :class:`Allocation` whose total is ``<= budget``.

    Raises:
        ValueError: negative budget, a lower bound above ``cap``, or mismatched lengths.
    """
    checked = _checked(curves, budget, lo, cap)
    if isinstance(checked, Allocation):
        return checked
    n, budget, cap, lows = checked
    g, usable = _grid(n, budget, cap, lows, max_units)
    U = usable // g
    lmax = min(cap, usable) // g
    NEG = -1e18
    V = np.zeros(U + 1)  # best value using at most s units over the questions so far
    choices = []
    s_idx = np.arange(U + 1)
    for f, lo_ in zip(curves, lows):
        lmin = math.ceil(lo_ / g)
        if lmin > lmax:
            raise ValueError(f"lower bound {lo_} does not fit under cap {cap} on the {g}-token grid")
        levels = np.arange(lmin, lmax + 1)
        vals = np.asarray(f(levels.astype(float) * g), dtype=float)
        prev = s_idx[:, None] - levels[None, :]
        ok = prev >= 0
        cand = np.where(ok, V[np.clip(prev, 0, U)] + vals[None, :], NEG)
        best = np.argmax(cand, axis=1)
        V = cand[s_idx, best]
        choices.append(levels[best])
    # Reconstruct from the full budget.
    s = U
    tokens = [0] * n
    for i in range(n - 1, -1, -1):
        lvl = int(choices[i][s])
        tokens[i] = lvl * g
        s -= lvl
    exp = float(sum(float(f(np.array([t], dtype=float))[0]) for f, t in zip(curves, tokens)))
    return Allocation(tuple(tokens), exp, g)


def upper_concave_envelope(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the points on the upper concave envelope of ``(x, y)`` (``x`` increasing),
    first and last point included (Andrew's monotone chain, upper hull)."""
    hull: list[int] = []
    for i in range(len(x)):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # b lies on or below the chord a -> i: drop it
            if (y[b] - y[a]) * (x[i] - x[a]) <= (y[i] - y[a]) * (x[b] - x[a]):
                hull.pop()
            else:
                break
        hull.append(i)
    return np.array(hull, dtype=int)


def greedy_allocation(
    curves: Sequence[CurveFn],
    budget: int,
    *,
    lo: Union[int, Sequence[int]] = 1,
    cap: Optional[int] = None,
    max_units: int = 400,
) -> Allocation:
    """Marginal-gain allocation on the curves' upper concave envelopes.

    Every question starts at its lower bound; then envelope segments are bought in order of
    decreasing slope (expected correct answers per token) while the budget lasts; the last
    segment may be bought in part. Arguments and errors as :func:`optimal_allocation`.
    """
    checked = _checked(curves, budget, lo, cap)
    if isinstance(checked, Allocation):
        return checked
    n, budget, cap, lows = checked
    g, usable = _grid(n, budget, cap, lows, max_units)
    lmax = min(cap, usable) // g
    units = [math.ceil(lo_ / g) for lo_ in lows]
    left = usable // g - sum(units)
    if left < 0:
        return _fallback(curves, budget, lows)
    segments = []  # (-slope, question, order, d_units)
    hulls: dict[tuple[int, int], list[tuple[float, int]]] = {}  # the same curve object is enveloped once
    for i, (f, lmin) in enumerate(zip(curves, units)):
        key = (id(f), lmin)
        if key not in hulls:
            levels = np.arange(lmin, lmax + 1)
            segs: list[tuple[float, int]] = []
            if len(levels) >= 2:
                vals = np.asarray(f(levels.astype(float) * g), dtype=float)
                hull = upper_concave_envelope(levels.astype(float), vals)
                for j in range(1, len(hull)):
                    du = int(levels[hull[j]] - levels[hull[j - 1]])
                    dv = float(vals[hull[j]] - vals[hull[j - 1]])
                    if dv <= 0:
                        break
                    segs.append((dv / du, du))
            hulls[key] = segs
        for j, (slope, du) in enumerate(hulls[key]):
            segments.append((-slope, i, j, du))
    segments.sort()
    for _neg_slope, i, _j, du in segments:
        if left <= 0:
            break
        take = min(du, left)
        units[i] += take
        left -= take
    tokens = [u * g for u in units]
    exp = float(sum(float(f(np.array([t], dtype=float))[0]) for f, t in zip(curves, tokens)))
    return Allocation(tuple(tokens), exp, g)

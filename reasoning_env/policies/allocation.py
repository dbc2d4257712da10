"""Splitting a token budget across an episode's questions: the one optimiser of the project.

Every "best allocation" in the project comes from :func:`optimal_allocation`: the oracle policy
and the evaluation's regret (objective: expected correct answers), Play's saved runs, and the
reward lab (objective: a reward's expected episode reward, :mod:`.objective`).

The problem. An episode serves questions ``0..n-1`` in order under a budget of ``B`` tokens. A
plan gives question ``i`` a length ``t_i`` (tokens) with ``lo_i <= t_i <= cap``; question ``i`` is
answered correctly with probability ``p_i(t_i)`` (its accuracy curve, :mod:`.curves`). The
environment's rules apply:

- hard-cap mode: the spend never exceeds what is left (``sum t_i <= B``) and, once fewer than
  ``min_tokens`` tokens remain after a question that is not the last, the episode ends: later
  questions are never asked and pay nothing (``min_tokens = 0``: no early end);
- soft mode: spending may exceed ``B`` (modelled up to ``soft_headroom * B`` in all) and no
  question is skipped by the rules.

The objective is the expected sum over asked questions of ``E_i(t_i, s_i)`` (``s_i``: tokens
spent before question ``i``) plus episode terms ``a(S) * K + b(S)`` that are affine in the number
of correct answers ``K`` and depend on the final spend ``S`` and on how the episode ended. For
accuracy ``E_i = p_i`` and there are no episode terms.

The method. Dynamic programming over (question, tokens spent) **at the resolution of one
token**: every integer plan is considered, so the result is exact at every budget (no grid, no
rounding: running dry, skipping and every off-grid budget are represented). Time
``O(n * S * L)`` with ``S = min(B, n x cap)`` spend states and ``L = cap`` lengths (about 0.1 s
for ten questions at ``B = 1,700``). Episode terms are handled with a parametric argument: for a
coefficient ``c`` the DP maximises ``sum E_i + c sum p_i`` for every final spend; the best value
``g_S(c)`` is convex in ``c``, so the passes already made give, for each final spend, an exact
lower bound (the value of a real plan) and an upper bound (the chord between neighbouring
passes). Passes are added where the upper bound is highest until the two meet within ``tol``
(typically 3 to 8 passes). Rewards that read the spent budget (e.g. a remaining-budget share)
are evaluated on ``spent_cells`` cells of it with a certified upper envelope (see
:mod:`.objective`); :attr:`Allocation.bound` then reports how far the optimum can be above the
returned plan.

:func:`greedy_allocation` (marginal gains on concave envelopes, the LP relaxation of the
knapsack; Dantzig 1957) is a fast heuristic a budget-aware policy can run on the fly; it is not
an optimiser and is never used to report a bound.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reasoning_env.policies.objective import reward_tables
from reasoning_env.policies.tables import CurveFn, Tables
from reasoning_env.policies.tables import curve_values as _curve_values

__all__ = [
    "Allocation",
    "CurveFn",
    "EXACT_TOL",
    "greedy_allocation",
    "optimal_allocation",
    "upper_concave_envelope",
]

#: Default optimality tolerance of the parametric passes (objective units).
EXACT_TOL = 1e-9
_MAX_PASSES = 48


@dataclass(frozen=True)
class Allocation:
    """A budget split and what it is worth.

    Attributes:
        tokens: Tokens per question, in question order (ints; 0 for a skipped question and for
            one never asked).
        expected_correct: ``sum_i p_i(tokens_i)`` over the questions asked (expected number of
            correct answers).
        unit: Token step of the plan: 1 (exact) unless a coarse ``max_units`` grid was asked for.
        answered: Whether each question is asked (False: the hard-cap episode ran dry before it).
        p: Probability of a correct answer of each question (0 when not asked).
        objective: The maximised value: the expected reward (or expected correct answers for
            the accuracy objective) of this plan, computed exactly under the environment's rules.
        bound: Certified optimality gap: no plan is worth more than ``objective + bound``
            (0 up to ``tol`` when solved exactly).
        passes: Parametric DP passes used (1 without episode terms).
        notes: Modelling caveats (e.g. episode terms that are not affine in the correct count).
    """

    tokens: tuple[int, ...]
    expected_correct: float
    unit: int = 1
    answered: tuple[bool, ...] = ()
    p: tuple[float, ...] = ()
    objective: float = math.nan
    bound: float = 0.0
    passes: int = 1
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        n = len(self.tokens)
        if not self.answered:
            object.__setattr__(self, "answered", (True,) * n)
        if math.isnan(self.objective):
            object.__setattr__(self, "objective", float(self.expected_correct))

    @property
    def total(self) -> int:
        """Tokens allocated in all."""
        return int(sum(self.tokens))

    @property
    def total_tokens(self) -> float:
        """Tokens spent over the episode (float, for tables)."""
        return float(self.total)

    @property
    def expected_accuracy(self) -> float:
        """Expected correct answers / questions (NaN for an empty episode)."""
        return self.expected_correct / len(self.tokens) if self.tokens else math.nan

    @property
    def exact(self) -> bool:
        """True when the plan is optimal to within :data:`EXACT_TOL`-scale rounding."""
        return self.bound <= 1e-7 * max(1.0, abs(self.objective))


# ----------------------------------------------------------------------------- arguments
def _lows(n: int, lo: int | Sequence[int]) -> list[int]:
    if isinstance(lo, (int, np.integer)):
        return [int(lo)] * n
    lows = [int(x) for x in lo]
    if len(lows) != n:
        raise ValueError(f"need one lower bound per question: {n} curves, {len(lows)} bounds")
    if any(x < 0 for x in lows):
        raise ValueError(f"lower bounds must be >= 0 tokens, got {lows}")
    return lows


def _fallback(curves: Sequence[CurveFn], budget: int, lows: list[int]) -> Allocation:
    tokens, left = [], budget
    for lo in lows:
        give = lo if left >= lo else 0
        tokens.append(give)
        left -= give
    p = tuple(float(_curve_values(f, np.array([t]))[0]) if t > 0 else 0.0 for f, t in zip(curves, tokens))
    return Allocation(
        tuple(tokens),
        float(sum(p)),
        1,
        p=p,
        notes=("the lower bounds do not fit in the budget: given in order until it ran out",),
    )


def _checked(
    curves: Sequence[CurveFn], budget: int, lo: int | Sequence[int], cap: int | None
) -> Allocation | tuple[int, int, int, list[int]]:
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
    if cap < 0:
        raise ValueError(f"cap must be >= 0 tokens, got {cap}")
    lows = _lows(n, lo)
    if any(lo_ > cap for lo_ in lows):
        raise ValueError(f"a lower bound exceeds the per-question cap ({max(lows)} > {cap})")
    if sum(lows) > budget:
        return _fallback(curves, budget, lows)
    return n, budget, cap, lows


def _grid(n: int, budget: int, cap: int, lows: Sequence[int], max_units: int) -> tuple[int, int]:
    """The token grid ``(unit, usable budget)`` of the greedy heuristic and of the coarse mode.

    Tokens beyond ``n x cap`` can never be spent, so the grid spans only ``min(budget, n x cap)``
    in at most ``max_units`` units; a unit no larger than ``cap - max(lows) + 1`` keeps every
    lower bound, rounded up to the grid, under the cap.
    """
    usable = min(budget, n * cap)
    g = max(1, math.ceil(usable / max(1, int(max_units))))
    return max(1, min(g, cap - max(lows) + 1)), usable


# ----------------------------------------------------------------------------- the DP
@dataclass
class _Pass:
    """One parametric pass: per end state, the best value of ``sum E + c sum p`` and the
    ``sum p`` (slope in ``c``) of the plan reaching it; the value arrays entering each question,
    from which a plan is rebuilt."""

    c: float
    value: np.ndarray  # (n_ends,)
    slope: np.ndarray  # (n_ends,) (zeros when not tracked)
    inputs: list  # per question: (S+1,) best value of each spend before it


def _gain(tab: Tables, i: int, j: int, hi: int, cvec: np.ndarray) -> np.ndarray:
    """``E_i + c p_i`` of length ``lengths[i][j]`` for source states ``0..hi-1`` (rows: c)."""
    ev, pv = tab.value[i], tab.p[i]
    if ev.ndim == 2:
        return ev[j][tab.cell_of[:hi]][None, :] + cvec * pv[j]
    return ev[j] + cvec * pv[j]


def _dp_passes(tab: Tables, cs: Sequence[float], *, slopes: bool = True) -> list[_Pass]:
    """Parametric passes for the coefficients ``cs``, computed together (one sweep over the
    lengths with a row per coefficient). ``slopes=False`` skips the ``sum p`` bookkeeping (one
    pass without episode terms needs no slope): two array operations per length."""
    n = len(tab.lengths)
    S1 = tab.n_states
    C = len(cs)
    cvec = np.asarray(cs, dtype=float)[:, None]
    V = np.full((C, S1), -np.inf)
    V[:, 0] = 0.0
    P = np.zeros((C, S1))
    inputs = []
    dry_vals, dry_slopes = [], []
    for i in range(n):
        inputs.append(V)
        newV = np.full((C, S1), -np.inf)
        newP = np.zeros((C, S1)) if slopes else P
        reach = np.flatnonzero(np.any(V > -np.inf, axis=0))
        smax = int(reach[-1]) if reach.size else -1
        for j, t in enumerate(tab.lengths[i]):
            t = int(t)
            hi = min(S1 - t, smax + 1)  # source states 0..hi-1 land on t..t+hi-1
            if hi <= 0:
                break
            val = V[:, :hi] + _gain(tab, i, j, hi, cvec)
            dst = newV[:, t : t + hi]
            if slopes:
                better = val > dst
                np.copyto(dst, val, where=better)
                np.copyto(newP[:, t : t + hi], P[:, :hi] + tab.p[i][j], where=better)
            else:
                np.maximum(dst, val, out=dst)
        if tab.terminal_from is not None and i < n - 1:
            k = tab.terminal_from
            dry_vals.append(newV[:, k:].copy())
            dry_slopes.append(newP[:, k:].copy() if slopes else np.zeros((C, S1 - k)))
            newV[:, k:] = -np.inf
        V, P = newV, newP
    value = np.concatenate([V] + dry_vals, axis=1)
    slope = np.concatenate([P if slopes else np.zeros((C, S1))] + dry_slopes, axis=1)
    return [_Pass(float(c), value[r], slope[r], [v[r] for v in inputs]) for r, c in enumerate(cs)]


def _end_coefficients(tab: Tables) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """``a``, ``b`` and ``(after question, final spend)`` of every end state, in the order of
    :func:`_dp_pass`'s values (``after = n - 1`` for a finished episode)."""
    n = len(tab.lengths)
    S1 = tab.n_states
    a = [tab.end_a_done]
    b = [tab.end_b_done]
    where = [(n - 1, s) for s in range(S1)]
    if tab.terminal_from is not None:
        k = tab.terminal_from
        for i in range(n - 1):
            a.append(tab.end_a_dry[i][k:])
            b.append(tab.end_b_dry[i][k:])
            where.extend((i, s) for s in range(k, S1))
    return np.concatenate(a), np.concatenate(b), where


def _bounds(passes: list[_Pass], a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per end state: lower bound (best real plan at its coefficient), index of the pass giving
    it, and the convexity upper bound."""
    cs = np.array([p.c for p in passes])
    G = np.stack([p.value for p in passes])  # (K, ends)
    D = np.stack([p.slope for p in passes])
    with np.errstate(invalid="ignore"):
        lin = G + (a[None, :] - cs[:, None]) * D
    lin = np.where(np.isfinite(G), lin, -np.inf)
    best_pass = np.argmax(lin, axis=0)
    lb = lin[best_pass, np.arange(lin.shape[1])]
    order = np.argsort(cs)
    cs_s, G_s = cs[order], G[order]
    pos = np.searchsorted(cs_s, a)
    ub = np.full(a.shape, np.inf)
    exact_hit = np.zeros(a.shape, dtype=bool)
    for k in range(len(cs_s)):
        hit = np.isclose(a, cs_s[k], rtol=0, atol=1e-15)
        ub = np.where(hit, G_s[k], ub)
        exact_hit |= hit
    inside = (~exact_hit) & (pos > 0) & (pos < len(cs_s))
    if inside.any():
        lo_i, hi_i = pos[inside] - 1, pos[inside]
        cl, cr = cs_s[lo_i], cs_s[hi_i]
        cols = np.flatnonzero(inside)
        gl, gr = G_s[lo_i, cols], G_s[hi_i, cols]
        with np.errstate(invalid="ignore"):
            chord = gl + (a[inside] - cl) * (gr - gl) / (cr - cl)
        chord = np.where(
            np.isfinite(gl) & np.isfinite(gr), chord, np.where(np.isneginf(gl) & np.isneginf(gr), -np.inf, np.inf)
        )
        ub[inside] = chord
    ub = np.where(np.isneginf(lb) & np.all(~np.isfinite(G), axis=0), -np.inf, ub)
    return lb + b, best_pass, ub + b


def _reconstruct(tab: Tables, pas: _Pass, after: int, s_end: int) -> list[int]:
    """The plan of pass ``pas`` ending at spend ``s_end`` after question ``after``: backwards,
    each question's length is the one whose predecessor value plus gain is largest."""
    n = len(tab.lengths)
    tokens = [0] * n
    s = s_end
    for i in range(after, -1, -1):
        lengths = tab.lengths[i]
        ok = np.flatnonzero(lengths <= s)
        if not ok.size:  # pragma: no cover - defensive: an end state is reachable by construction
            raise RuntimeError("allocation plan cannot be rebuilt")
        src = s - lengths[ok]
        if tab.value[i].ndim == 2:
            gains = tab.value[i][ok, tab.cell_of[src]] + pas.c * tab.p[i][ok]
        else:
            gains = tab.value[i][ok] + pas.c * tab.p[i][ok]
        cand = pas.inputs[i][src] + gains
        j = ok[int(np.argmax(cand))]
        tokens[i] = int(lengths[j])
        s -= int(lengths[j])
    return tokens


def solve(tab: Tables, *, tol: float = EXACT_TOL) -> tuple[list[int], int, float, float, int]:
    """Run the parametric DP on ``tab``: ``(tokens, index of the last asked question, value of
    the plan on the tables, certified upper bound on the tables, passes)``."""
    a, b, where = _end_coefficients(tab)
    reachable_a = a
    a_lo, a_hi = float(np.min(reachable_a)), float(np.max(reachable_a))
    if a_hi - a_lo <= 1e-15:
        cands = [a_lo]
    else:
        cands = list(np.linspace(a_lo, a_hi, 3))
    passes: list[_Pass] = _dp_passes(tab, cands, slopes=len(cands) > 1)
    while True:
        lb, best_pass, ub = _bounds(passes, a, b)
        k = int(np.argmax(lb))
        best, top = float(lb[k]), float(np.max(ub))
        if not math.isfinite(best):
            raise ValueError(
                "no plan satisfies the lower bounds and the budget (raise the budget or lower "
                "the per-question minimum)"
            )
        if top - best <= tol * max(1.0, abs(best)) or len(passes) >= _MAX_PASSES:
            break
        open_ = np.flatnonzero(ub > best + tol * max(1.0, abs(best)))
        order = open_[np.argsort(-ub[open_])]
        done = {p.c for p in passes}
        new = []
        for e in order:
            c = float(a[e])
            if all(abs(c - d) > 1e-15 for d in done) and c not in new:
                new.append(c)
            if len(new) >= 3:
                break
        if not new:
            break
        passes.extend(_dp_passes(tab, new))
    after, s_end = where[k]
    tokens = _reconstruct(tab, passes[int(best_pass[k])], after, s_end)
    return tokens, after, best, max(top, best), len(passes)


# ----------------------------------------------------------------------------- accuracy
def accuracy_tables(
    curves: Sequence[CurveFn],
    budget: int,
    lows: Sequence[int],
    cap: int,
    *,
    min_tokens: int = 0,
    max_spend: int | None = None,
) -> Tables:
    """Tables of the accuracy objective (expected correct answers): spend at most ``max_spend``
    tokens in all (default: the budget, the hard cap)."""
    n = len(curves)
    S = min(budget if max_spend is None else int(max_spend), n * cap)
    S1 = S + 1
    lengths, ps = [], []
    for f, lo in zip(curves, lows):
        t = np.arange(int(lo), min(cap, S) + 1)
        lengths.append(t)
        ps.append(_curve_values(f, t) * (t > 0))
    terminal_from = None
    zeros = np.zeros(S1)
    dry_a = dry_b = None
    if min_tokens > 0 and n > 1:
        k = max(0, budget - min_tokens + 1)  # remaining < min_tokens  <=>  spent > B - min_tokens
        if k <= S:
            terminal_from = k
            dry_a = np.zeros((n - 1, S1))
            dry_b = np.zeros((n - 1, S1))
    return Tables(lengths, ps, list(ps), None, S1, terminal_from, zeros, zeros, dry_a, dry_b)


def _plan_allocation(
    tab: Tables, tokens: list[int], after: int, objective: float, upper: float, passes: int, unit: int = 1
) -> Allocation:
    n = len(tab.lengths)
    answered = [i <= after for i in range(n)]
    p = []
    for i, t in enumerate(tokens):
        if not answered[i]:
            p.append(0.0)
            continue
        j = int(np.searchsorted(tab.lengths[i], t))
        p.append(float(tab.p[i][j]) if j < len(tab.lengths[i]) and tab.lengths[i][j] == t else 0.0)
    exact = tab.exact_value(tokens, answered) if tab.exact_value is not None else objective
    return Allocation(
        tuple(int(t) * unit for t in tokens),
        float(sum(p)),
        unit,
        tuple(answered),
        tuple(p),
        float(exact),
        float(max(0.0, upper - exact)),
        passes,
        tuple(tab.notes),
    )


def optimal_allocation(
    curves: Sequence[CurveFn],
    budget: int,
    *,
    lo: int | Sequence[int] = 1,
    cap: int | None = None,
    min_tokens: int = 0,
    reward: Any = None,
    questions: Sequence[tuple[float | None, str]] | None = None,
    hard_cap_mode: bool = True,
    soft_headroom: float = 2.0,
    spent_cells: int = 64,
    max_units: int | None = None,
    tol: float = EXACT_TOL,
) -> Allocation:
    """The plan maximising expected correct answers (default) or a reward's expected episode
    reward, exact in tokens (see the module docstring).

    Args:
        curves: One :data:`CurveFn` per question (non-decreasing probabilities, ``p(0) = 0``
            is assumed for a skipped question; when every question can have ``cap`` tokens,
            the accuracy objective's plan is the cap for all).
        budget: Episode budget ``B`` (tokens, >= 0).
        lo: Minimum tokens per asked question (int or one per question; 0 allows skipping).
        cap: Maximum tokens per question (default: ``budget``).
        min_tokens: Hard-cap early end: the episode ends when fewer tokens than this remain
            after a question that is not the last (the environment's ``min_tokens``; 0: never).
        reward: ``None`` for expected correct answers, or a reward spec / name / object
            (:func:`reasoning_env.rewards.build_reward`; not a group reward) for its expected
            episode reward (:mod:`.objective`).
        questions: ``(difficulty, problem_type)`` per question, the context a reward reads
            (default: unknown difficulty, empty type).
        hard_cap_mode: The environment's budget mode (soft: spending may exceed the budget).
        soft_headroom: Soft mode: largest total spend modelled, in budgets.
        spent_cells: Rewards that read the spent budget: number of cells it is read on when a
            table per token would be too large (the reported ``bound`` covers the difference).
        max_units: Coarse mode (accuracy, hard cap without early end only): lengths on a grid of
            ``ceil(min(B, n x cap) / max_units)`` tokens, with the certified ``bound`` of the
            grid; ``None`` (default): exact.
        tol: Optimality tolerance of the parametric passes (objective units, relative above 1).

    Returns:
        An :class:`Allocation` (its ``total <= budget`` in hard-cap mode).

    Raises:
        ValueError: negative budget or cap, a lower bound above ``cap``, mismatched lengths, a
            group reward, or ``max_units`` with a reward, soft mode or an early end.
    """
    checked = _checked(curves, budget, lo, cap)
    if isinstance(checked, Allocation):
        return checked
    n, budget, cap, lows = checked
    if min_tokens < 0:
        raise ValueError(f"min_tokens must be >= 0 tokens, got {min_tokens}")
    if max_units is not None:
        if reward is not None or not hard_cap_mode or min_tokens > 0:
            raise ValueError(
                "max_units (a coarse grid) applies to the accuracy objective under a hard cap "
                "without an early end; leave it unset for an exact plan"
            )
        return _coarse_accuracy(curves, budget, lows, cap, int(max_units))
    roomy = (
        n * cap <= budget and budget - (n - 1) * cap >= min_tokens
        if hard_cap_mode
        else n * cap <= math.floor(soft_headroom * budget)
    )
    if reward is None and roomy:
        # Every question can have the cap without an early end: with non-decreasing curves that is the optimum.
        p = tuple(float(_curve_values(f, np.array([cap]))[0]) if cap > 0 else 0.0 for f in curves)
        return Allocation((cap,) * n, float(sum(p)), 1, p=p)
    if reward is None:
        tab = accuracy_tables(
            curves,
            budget,
            lows,
            cap,
            min_tokens=min_tokens if hard_cap_mode else 0,
            max_spend=None if hard_cap_mode else int(math.floor(soft_headroom * budget)),
        )
    else:
        tab = reward_tables(
            reward,
            curves,
            budget,
            lows,
            cap,
            questions=questions,
            hard_cap_mode=hard_cap_mode,
            min_tokens=min_tokens,
            soft_headroom=soft_headroom,
            spent_cells=spent_cells,
        )
    tokens, after, value, upper, passes = solve(tab, tol=tol)
    best = _plan_allocation(tab, tokens, after, value, upper, passes)
    if tab.value_low is not None:  # the plan optimal on the lower envelope may be worth more
        low_tab = dataclasses.replace(tab, value=tab.value_low, value_low=None)
        t2, a2, v2, _u2, p2 = solve(low_tab, tol=tol)
        other = _plan_allocation(tab, t2, a2, v2, upper, passes + p2)
        if other.objective > best.objective:
            best = other
        else:
            best = dataclasses.replace(best, passes=passes + p2)
    return best


def _coarse_accuracy(curves: Sequence[CurveFn], budget: int, lows: list[int], cap: int, max_units: int) -> Allocation:
    """Accuracy on a grid of ``g`` tokens with its certified gap: the plan uses multiples of
    ``g``; the upper bound rounds every length down to the grid and values it at the top of its
    cell (monotone curves), a relaxation of the exact problem."""
    n = len(curves)
    g, usable = _grid(n, budget, cap, lows, max_units)
    U = usable // g
    lcap = cap // g

    def tables(upper: bool) -> Tables:
        S1 = U + 1
        lengths, ps = [], []
        for f, lo_ in zip(curves, lows):
            lmin = (lo_ // g) if upper else math.ceil(lo_ / g)
            lv = np.arange(lmin, min(lcap, U) + 1)
            toks = np.minimum(cap, lv * g + (g - 1)) if upper else lv * g
            lengths.append(lv)
            ps.append(_curve_values(f, toks) * (toks > 0))
        zeros = np.zeros(S1)
        return Tables(lengths, ps, list(ps), None, S1, None, zeros, zeros)

    tab = tables(False)
    if any(len(t) == 0 for t in tab.lengths):
        raise ValueError(f"a lower bound does not fit under cap {cap} on the {g}-token grid")
    tokens, after, value, _u, passes = solve(tab)
    ub_tab = tables(True)
    _t, _a, upper, _uu, _p = solve(ub_tab)
    alloc = _plan_allocation(tab, tokens, after, value, max(upper, value), passes, unit=g)
    return alloc


# ----------------------------------------------------------------------------- greedy heuristic
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
    lo: int | Sequence[int] = 1,
    cap: int | None = None,
    max_units: int = 400,
) -> Allocation:
    """Marginal-gain allocation on the curves' upper concave envelopes (a heuristic).

    Every question starts at its lower bound; then envelope segments are bought in order of
    decreasing slope (expected correct answers per token) while the budget lasts; the last
    segment may be bought in part. Lengths lie on a grid of ``ceil(min(budget, n x cap) /
    max_units)`` tokens. Arguments and errors as :func:`optimal_allocation`; ``bound`` is NaN
    (no optimality claim).
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
    p = tuple(float(_curve_values(f, np.array([t]))[0]) if t > 0 else 0.0 for f, t in zip(curves, tokens))
    return Allocation(tuple(tokens), float(sum(p)), g, p=p, bound=math.nan)

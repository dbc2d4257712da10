"""The oracle allocation against brute force, the greedy allocator, and the oracle policy."""

from __future__ import annotations

import itertools

import evalpol_fixtures as fx
import numpy as np
import pytest

from reasoning_env.policies import (
    Curve,
    OracleAllocationPolicy,
    SimulatedSolverPolicy,
    SolverCurves,
    greedy_allocation,
    optimal_allocation,
)
from reasoning_env.policies.allocation import upper_concave_envelope
from reasoning_env.policies.text import minimal_tokens
from reasoning_env.tokenization import get_tokenizer


def _logistic(k, t50, ceiling=1.0):
    c = Curve(k=k, t50=t50, growth=2.0, ceiling=ceiling)
    return lambda t: np.asarray(c.p(np.asarray(t, dtype=float), 1), dtype=float)


def _brute(curves, budget, lo, cap):
    best = -1.0
    for combo in itertools.product(range(lo, cap + 1), repeat=len(curves)):
        if sum(combo) <= budget:
            v = sum(float(f(np.array([t]))[0]) for f, t in zip(curves, combo))
            best = max(best, v)
    return best


@pytest.mark.parametrize("case", range(12))
def test_dp_matches_brute_force_on_small_cases(case):
    rng = np.random.default_rng(case)
    n = int(rng.integers(2, 4))
    curves = [
        _logistic(float(rng.uniform(0.8, 4.0)), float(rng.uniform(2, 15)), float(rng.uniform(0.5, 1.0)))
        for _ in range(n)
    ]
    budget = int(rng.integers(n * 2, 30))
    lo, cap = 1, int(rng.integers(5, 20))
    alloc = optimal_allocation(curves, budget, lo=lo, cap=cap, max_units=1000)
    assert alloc.unit == 1
    assert alloc.total <= budget and all(lo <= t <= cap for t in alloc.tokens)
    assert alloc.expected_correct == pytest.approx(_brute(curves, budget, lo, cap), abs=1e-12)


def test_dp_handles_non_concave_curves_where_greedy_can_fail():
    # Two steep logistic curves: spending everything on one beats splitting evenly.
    curves = [_logistic(6.0, 60.0), _logistic(6.0, 60.0)]
    opt = optimal_allocation(curves, 100, lo=1, cap=100, max_units=1000)
    even = sum(float(f(np.array([50.0]))[0]) for f in curves)
    assert opt.expected_correct > even + 0.3
    greedy = greedy_allocation(curves, 100, lo=1, cap=100, max_units=1000)
    assert greedy.expected_correct <= opt.expected_correct + 1e-12


def test_greedy_never_beats_dp_and_is_close_on_default_curves():
    sc = SolverCurves()
    rng = np.random.default_rng(3)
    gaps = []
    for _ in range(20):
        qs = [(str(rng.choice(["GSM8K", "MATH-500", "NuminaMath-TIR"])), int(rng.integers(1, 6))) for _ in range(10)]
        fns = [sc.question_fn(p, d) for p, d in qs]
        budget = int(rng.integers(500, 5000))
        opt = optimal_allocation(fns, budget, lo=10, cap=2048)
        gr = greedy_allocation(fns, budget, lo=10, cap=2048)
        assert gr.total <= budget and opt.total <= budget
        assert gr.expected_correct <= opt.expected_correct + 1e-9
        gaps.append(opt.expected_correct - gr.expected_correct)
    assert max(gaps) < 0.5


def test_grid_is_feasible_and_near_exact_for_large_budgets():
    fns = [_logistic(2.0, t) for t in (30, 60, 120, 240, 480)]
    coarse = optimal_allocation(fns, 3001, lo=10, cap=2048, max_units=100)
    fine = optimal_allocation(fns, 3001, lo=10, cap=2048, max_units=3001)
    assert coarse.unit == 31 and fine.unit == 1
    assert coarse.total <= 3001 and all(t >= 10 for t in coarse.tokens)
    assert coarse.expected_correct <= fine.expected_correct + 1e-12
    assert fine.expected_correct - coarse.expected_correct < 0.01


def test_a_budget_far_above_what_the_caps_allow_spends_every_cap():
    """A 10M-token budget with a 2,048-token cap per question used to fail ("lower bound does not fit
    under cap on the 10000-token grid"): the grid now spans only the spendable n x cap tokens."""
    fns = [_logistic(2.0, t) for t in (30, 60, 120, 240, 480)]
    alloc = optimal_allocation(fns, 10_000_000, lo=5, cap=2048)
    assert alloc.unit <= 2048 - 5 + 1 and all(5 <= t <= 2048 for t in alloc.tokens)
    capped = optimal_allocation(fns, 5 * 2048, lo=5, cap=2048)
    assert alloc.expected_correct == pytest.approx(capped.expected_correct)


def test_a_lower_bound_close_to_the_cap_still_fits_the_grid():
    fns = [_logistic(2.0, 50)] * 3
    alloc = optimal_allocation(fns, 3000, lo=7, cap=8, max_units=10)
    assert all(7 <= t <= 8 for t in alloc.tokens)


def test_infeasible_lower_bounds_fall_back_in_order():
    fns = [_logistic(2.0, 10)] * 4
    alloc = optimal_allocation(fns, 25, lo=10)
    assert alloc.tokens == (10, 10, 0, 0)
    with pytest.raises(ValueError):
        optimal_allocation(fns, 100, lo=50, cap=40)
    with pytest.raises(ValueError):
        optimal_allocation(fns, -1)


def test_upper_concave_envelope():
    x = np.array([0.0, 1, 2, 3, 4])
    y = np.array([0.0, 0.1, 0.8, 0.9, 0.95])
    assert upper_concave_envelope(x, y).tolist() == [0, 2, 3, 4]


def test_oracle_policy_plays_its_plan_and_bounds_the_others():
    from workbench.evaluate import OracleCache

    cfg = fx.config()
    env = fx.make_env(cfg)
    sc = SolverCurves()
    cache = OracleCache(sc, cap=cfg.max_tokens_per_step, min_tokens=cfg.min_tokens)
    tok = get_tokenizer(cfg.tokenizer_name)
    for seed in range(6):
        exp = {}
        for pol in (
            OracleAllocationPolicy(sc),
            SimulatedSolverPolicy("uniform", sc),
            SimulatedSolverPolicy("greedy", sc),
        ):
            _o, steps, obs = fx.play(env, pol, cfg, seed=seed)
            exp[pol.name] = sum(float(sc.p(s.tokens, s.problem_type, s.difficulty)) for s in steps)
        lows = [minimal_tokens(tok, q.gold_answer) for q in env.questions]
        bound = cache.expected_correct([(q.problem_type, q.difficulty) for q in env.questions], obs.total_budget, lows)
        assert exp["oracle_allocation"] == pytest.approx(bound, abs=0.01)
        for name, v in exp.items():
            assert v <= bound + 0.01, (name, v, bound)


def test_greedy_respects_the_cap_when_the_budget_far_exceeds_it():
    """Greedy shared the old grid: a 10M budget gave 25,000-token units, above a 2,048 cap."""
    fns = [_logistic(2.0, t) for t in (30, 60, 120, 240, 480)]
    alloc = greedy_allocation(fns, 10_000_000, lo=5, cap=2048)
    assert all(5 <= t <= 2048 for t in alloc.tokens)
    best = optimal_allocation(fns, 10_000_000, lo=5, cap=2048)
    assert alloc.expected_correct <= best.expected_correct + 1e-9

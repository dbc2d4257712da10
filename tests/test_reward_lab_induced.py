"""Induced behaviour: the DP optimum against brute force, the seed reward's known findings, figures."""

from __future__ import annotations

import itertools

import numpy as np
import plotly.graph_objects as go
import pytest

from reasoning_env.rewards import EpisodeContext, StepContext, build_reward
from workbench.reward_lab import (
    DEFAULT_CURVE,
    LogisticCurve,
    QuestionSpec,
    default_questions,
    induced_behaviour,
    optimal_allocation,
    oracle_allocation,
    oracle_frontier,
    spearman,
)
from workbench.reward_lab.figures import (
    induced_tokens_figure,
    pareto_figure,
    rescore_comparison_figure,
    reward_curves_figure,
    step_reward_curve,
)
from workbench.reward_lab.rescore import Rescorer
from workbench.reward_lab.synthetic import synthetic_steps


def expected_reward(spec, qs, budget, alloc_tokens, *, hard=True, min_tokens=10, curve=DEFAULT_CURVE):
    """Expected episode reward of an allocation (tokens per question), playing the environment's
    rules with the scalar reward path and enumerating every verdict outcome (true num_correct).
    Returns ``None`` for an allocation the rules forbid (hard cap exceeded, or tokens planned for
    questions after the budget ran dry)."""
    rw = build_reward(spec, context="rescore")
    n = len(qs)
    spent, steps, ran_dry = 0, [], False
    for i, t in enumerate(alloc_tokens):
        if hard and t > budget - spent:
            return None
        steps.append((i, t, spent))
        spent += t
        if hard and i < n - 1 and budget - spent < min_tokens:
            ran_dry = True
            break
    if any(alloc_tokens[len(steps):]):
        return None
    ps = [float(curve(np.array([t]), qs[i].difficulty, qs[i].problem_type)[0]) for i, t, _ in steps]
    value = 0.0
    for outcome in itertools.product([True, False], repeat=len(steps)):
        prob = float(np.prod([p if o else 1 - p for p, o in zip(ps, outcome)]))
        if prob == 0.0:
            continue
        r = 0.0
        for (i, t, s), o in zip(steps, outcome):
            r += sum(rw.step_components(StepContext(
                correct=o, has_answer=True, tokens=t, raw_tokens=t, total_budget=budget, num_questions=n,
                spent_before=s, question_index=i, hard_cap_mode=hard, difficulty=qs[i].difficulty,
                problem_type=qs[i].problem_type)).values())
        r += sum(rw.episode_components(EpisodeContext(
            num_correct=sum(outcome), num_answered=len(steps), num_questions=n, total_spent=spent,
            total_budget=budget, ran_dry=ran_dry)).values())
        value += prob * r
    return value


def brute_force(spec, qs, budget, unit, levels, *, hard=True, headroom=2.0):
    """Best expected reward over every allocation on the grid (and one allocation reaching it)."""
    k_max = budget // unit if hard else int(np.floor(headroom * budget / unit))
    best, best_alloc = -np.inf, None
    for alloc in itertools.product(range(levels + 1), repeat=len(qs)):
        if sum(alloc) > k_max:
            continue
        value = expected_reward(spec, qs, budget, [g * unit for g in alloc], hard=hard)
        if value is not None and value > best + 1e-12:
            best, best_alloc = value, alloc
    return best, best_alloc


CASES = [
    ("economics", True), ("economics", False), ("budget_aware", True),
    ({"type": "budget_aware", "share": "both", "gamma": 0.5, "beta": 0.5}, False),
    ("l1_exact", True), ("l1_max", False), ("cosine", True), ("accuracy", True),
    ({"type": "economics", "gamma": 0.5, "beta": 0.5, "wrong_reward": -0.5}, True),
    ({"type": "combined", "rewards": ["accuracy", {"type": "dapo_overlong", "l_max": 200, "l_cache": 100}]}, True),
]


@pytest.mark.parametrize("spec, hard", CASES)
def test_dp_matches_brute_force(spec, hard):
    qs = [QuestionSpec(1), QuestionSpec(4), QuestionSpec(2)]
    for budget in ((400, 230) if hard else (400,)):
        al = optimal_allocation(spec, qs, budget, resolution=8, max_tokens_per_step=250, hard_cap_mode=hard)
        levels = min(250 // al.unit, budget // al.unit if hard else int(2 * budget / al.unit))
        best, alloc = brute_force(spec, qs, budget, al.unit, levels, hard=hard)
        assert al.objective == pytest.approx(best, abs=1e-9), (spec, hard, budget, al.tokens, alloc)
        # the DP's allocation really earns that much when played (ties may pick another allocation)
        assert expected_reward(spec, qs, budget, list(al.tokens), hard=hard) == pytest.approx(best, abs=1e-9)
        assert al.expected_correct == pytest.approx(sum(
            float(DEFAULT_CURVE(np.array([t]), q.difficulty, "")[0]) for t, q, a in zip(al.tokens, qs, al.answered) if a))


def test_oracle_matches_brute_force():
    qs = [QuestionSpec(2), QuestionSpec(5), QuestionSpec(1), QuestionSpec(3)]
    al = oracle_allocation(qs, 300, resolution=6)
    best = max(
        sum(float(DEFAULT_CURVE(np.array([g * al.unit]), q.difficulty, "")[0]) for g, q in zip(alloc, qs))
        for alloc in itertools.product(range(7), repeat=4) if sum(alloc) * al.unit <= 300
    )
    assert al.expected_correct == pytest.approx(best, abs=1e-12)
    assert al.total_tokens <= 300


def test_seed_reward_tracks_the_oracle_and_triages():
    """FIELD_NOTES section 1: with default weights the seed's optimum matches the accuracy-optimal
    one closely, and at a tight budget it skips the hardest questions."""
    res = induced_behaviour({"seed": None}, [1000, 3500, 5000], orders=2)
    s = res.summary.set_index(["reward", "budget"])
    for b in (1000, 3500, 5000):
        assert s.loc[("seed", b), "regret_pct"] < 0.2, s.loc[("seed", b)]
    by = res.by_difficulty.set_index(["reward", "budget", "difficulty"])
    assert by.loc[("seed", 1000, 5), "give_up_rate"] == 1.0 and by.loc[("seed", 1000, 1), "give_up_rate"] == 0.0
    assert by.loc[("oracle", 1000, 5), "tokens"] == 0.0
    assert s.loc[("seed", 5000), "spearman"] > 0.9  # ample budget: harder questions get more tokens
    assert s.loc[("seed", 1000), "spearman"] < 0  # tight budget: triage


def test_larger_efficiency_weights_equalise_spend_and_the_budget_aware_share_helps():
    strong = {"gamma": 0.5, "beta": 0.5}
    res = induced_behaviour({
        "seed": None,
        "strong": {"type": "economics", "params": strong},
        "strong_remaining": {"type": "budget_aware", "params": dict(strong, share="remaining")},
    }, [2500], orders=2)
    s = res.summary.set_index("reward")
    assert s.loc["strong", "regret"] > s.loc["seed", "regret"] + 0.3
    assert s.loc["strong_remaining", "regret"] < s.loc["strong", "regret"]
    by = res.by_difficulty[res.by_difficulty["reward"] == "strong"].set_index("difficulty")["tokens"]
    assert by.loc[5] - by.loc[3] < 50  # near-equal spend on the hard questions


def test_results_are_consistent():
    res = induced_behaviour({"l1": "l1_max", "acc": "accuracy"}, [800, 2000], orders=3, seed=1)
    assert set(res.summary["reward"]) == {"oracle", "l1", "acc"}
    assert (res.summary["regret"] >= -1e-9).all()  # hard cap: nothing beats the accuracy oracle
    acc = res.summary[res.summary["reward"] == "acc"]
    assert np.allclose(acc["regret"], 0.0, atol=1e-9)  # paying accuracy only is the oracle
    spend = res.questions.groupby(["reward", "budget", "order"])["tokens"].sum().reset_index()
    assert (spend["tokens"] <= spend["budget"]).all()
    assert res.by_difficulty["n"].sum() == len(res.questions)
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert np.isnan(spearman([1, 2, 3], [5, 5, 5]))
    with pytest.raises(ValueError, match="group"):
        optimal_allocation("kimi_length", default_questions(), 1000)


def test_soft_mode_may_overspend_and_a_custom_curve_plugs_in():
    steep = LogisticCurve(k=4.0, t50_level1=100.0)
    al = optimal_allocation({"type": "economics", "soft_overspend_penalty": 0.0, "beta": 0.0, "gamma": 0.0, "lambda_ep": 0.0},
                            default_questions(4), 400, curve=steep, hard_cap_mode=False)
    assert al.total_tokens > 400  # nothing charges overspend: it spends beyond the budget
    al = optimal_allocation("economics", default_questions(4), 400, curve=lambda t, d, pt: np.minimum(1.0, t / 100.0))
    assert al.total_tokens <= 400 and al.expected_correct == pytest.approx(4.0)
    front = oracle_frontier([200, 800, 3200], questions=default_questions(5))
    assert front["accuracy"].is_monotonic_increasing


def test_figures_are_plotly_figures():
    specs = {"seed": "economics", "l1_max": "l1_max", "kimi": "kimi_length", "cosine": "cosine"}
    fig = reward_curves_figure(specs, total_budget=2000, num_questions=10)
    assert isinstance(fig, go.Figure) and len(fig.data) == 2 * len(specs)
    y = step_reward_curve("dapo_overlong", np.array([0.0, 1792.0, 3000.0]), correct=True)
    assert y.tolist() == pytest.approx([0.0, -0.5, -1.0])
    res = induced_behaviour({"seed": None, "l1_max": "l1_max"}, [1000, 3000])
    fig = induced_tokens_figure(res)
    assert isinstance(fig, go.Figure) and len(fig.data) == 3 * 2
    fig = pareto_figure(res, oracle_frontier([500, 1000, 3000, 6000]))
    assert isinstance(fig, go.Figure) and fig.data[0].name == "oracle frontier"
    rs = Rescorer(synthetic_steps(300, seed=2))
    fig = rescore_comparison_figure(rs.rescore(None), rs.rescore("l1_exact"))
    assert isinstance(fig, go.Figure) and len(fig.data[0].x) == rs.n_episodes
    fig.to_json()  # serialisable for the UI

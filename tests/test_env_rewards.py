"""The seed reward (``reference``): every component against hand-computed values, live in the env; and the
default reward (``economics``): the seed's formula without the cost penalty, a forfeit charged like a wrong answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_env_contract import make_pools

from reasoning_env import EnvConfig, ReasoningEconomicsEnv
from reasoning_env.rewards import EconomicsReward, EpisodeContext, ReferenceReward, StepContext, build
from reasoning_env.tokenization import get_tokenizer

TOK = get_tokenizer("Qwen/Qwen2.5-0.5B-Instruct")


def ctx(**kw):
    base = dict(
        correct=True,
        has_answer=True,
        tokens=50,
        raw_tokens=50,
        total_budget=1000,
        num_questions=10,
        spent_before=0,
        question_index=0,
        hard_cap_mode=True,
    )
    base.update(kw)
    return StepContext(**base)


def test_correct_under_fair_share():
    # fair share 100; r = 0.5 -> 1 + 0.1 * 0.5 = 1.05, no cost
    c = ReferenceReward().step_components(ctx(tokens=50))
    assert c == pytest.approx(
        {"correctness": 1.0, "efficiency_bonus": 0.05, "cost_penalty": 0.0, "overspend_penalty": 0.0}
    )


def test_correct_over_fair_share_pays_negative_efficiency_and_cost():
    # r = 3: efficiency 0.1 * (1 - 3) = -0.2; cost -0.05 * (3 - 1) = -0.1
    c = ReferenceReward().step_components(ctx(tokens=300))
    assert c["efficiency_bonus"] == pytest.approx(-0.2) and c["cost_penalty"] == pytest.approx(-0.1)
    assert sum(c.values()) == pytest.approx(0.7)


def test_wrong_answer_gets_minus_point_one_and_cost_only():
    c = ReferenceReward().step_components(ctx(correct=False, tokens=200))
    assert c == pytest.approx(
        {"correctness": -0.1, "efficiency_bonus": 0.0, "cost_penalty": -0.05, "overspend_penalty": 0.0}
    )


def test_exactly_fair_share_boundary():
    c = ReferenceReward().step_components(ctx(tokens=100))
    assert c["efficiency_bonus"] == 0.0 and c["cost_penalty"] == 0.0


def test_soft_overspend_is_cumulative_overspend_over_fair_share():
    # budget 1000, spent 950 before, 150 now -> overspend 100 -> -0.25 * 100/100 = -0.25
    c = ReferenceReward().step_components(ctx(hard_cap_mode=False, tokens=150, spent_before=950))
    assert c["overspend_penalty"] == pytest.approx(-0.25)
    # next step, already 100 over, 50 more -> overspend 150 -> -0.375
    c = ReferenceReward().step_components(ctx(hard_cap_mode=False, tokens=50, spent_before=1100))
    assert c["overspend_penalty"] == pytest.approx(-0.375)
    # hard-cap mode never pays it
    assert ReferenceReward().step_components(ctx(tokens=150, spent_before=950))["overspend_penalty"] == 0.0


def test_episode_bonus_peaks_at_target_utilisation():
    r = ReferenceReward()
    # accuracy 0.8, utilisation 0.9 -> 0.5 * 0.8 * 1 = 0.4
    assert r.episode_components(EpisodeContext(8, 10, 10, 900, 1000))["episode_bonus"] == pytest.approx(0.4)
    # utilisation 0.5 -> 1 - 0.4 = 0.6 -> 0.24
    assert r.episode_components(EpisodeContext(8, 10, 10, 500, 1000))["episode_bonus"] == pytest.approx(0.24)
    # utilisation 2.0 (soft overspend) -> max(0, 1 - 1.1) = 0
    assert r.episode_components(EpisodeContext(8, 10, 10, 2000, 1000))["episode_bonus"] == 0.0
    # accuracy counts unanswered questions as wrong (ran dry after 5)
    assert r.episode_components(EpisodeContext(5, 5, 10, 900, 1000, ran_dry=True))["episode_bonus"] == pytest.approx(
        0.25
    )


def test_live_episode_rewards_equal_hand_computation():
    """Play 4 questions with known token counts under ``reference`` and check every reward the env pays
    against the seed's formulas."""
    cfg = EnvConfig.build(sources=["builtin"], num_questions=4, reward={"type": "reference"})
    env = ReasoningEconomicsEnv(cfg, pools=make_pools())
    obs = env.reset(seed=11, total_budget=400)  # fair share 100
    plan = [(True, 10), (False, 40), (True, 120), (True, 5)]
    spent = 0
    total = 0.0
    for i, (right, filler) in enumerate(plan):
        q = env.questions[i]
        gold = q.gold_answer if right else str(int(q.gold_answer) + 7)
        resp = "step " * filler + f"\\boxed{{{gold}}}"
        n = TOK.count(resp)
        n_charged = min(n, 400 - spent)
        obs = env.step(resp)
        r = n_charged / 100
        expected = (1.0 if right else -0.1) + (0.1 * (1 - r) if right else 0.0) - 0.05 * max(0.0, r - 1)
        spent += n_charged
        if i == len(plan) - 1:
            acc = sum(1 for ok, _ in plan if ok) / 4
            expected += 0.5 * acc * max(0.0, 1 - abs(spent / 400 - 0.9))
        assert obs.last_step.tokens == n_charged
        assert obs.reward == pytest.approx(expected, abs=1e-12)
        total += obs.reward
    assert env.state.episode_reward == pytest.approx(total)
    assert obs.done


def test_config_weights_reach_the_env_reward():
    cfg = EnvConfig.build(sources=["builtin"], num_questions=2, beta=1.0, gamma=0.0, wrong_reward=-1.0)
    env = ReasoningEconomicsEnv(cfg, pools=make_pools())
    env.reset(seed=1, total_budget=20)  # fair share 10
    resp = "pad " * 30 + "\\boxed{nope}"
    obs = env.step(resp)
    r = obs.last_step.tokens / 10
    assert obs.last_step.reward_components["correctness"] == -1.0
    assert obs.last_step.reward_components["cost_penalty"] == pytest.approx(-(r - 1))


# ------------------------------------------------------------------------------ the default reward
def test_default_reward_has_no_cost_penalty_and_keeps_the_efficiency_bonus():
    # r = 3: efficiency 0.1 * (1 - 3) = -0.2 as in the seed; cost 0 (beta 0)
    c = EconomicsReward().step_components(ctx(tokens=300))
    assert c == pytest.approx(
        {"correctness": 1.0, "efficiency_bonus": -0.2, "cost_penalty": 0.0, "overspend_penalty": 0.0}
    )


def test_default_reward_charges_each_unasked_question_like_a_wrong_answer():
    # ran dry after 4 of 10 questions: 6 never asked, each -0.1 (= wrong_reward)
    comps = EconomicsReward().episode_components(EpisodeContext(2, 4, 10, 1000, 1000, ran_dry=True))
    assert comps["forfeit"] == pytest.approx(6 * -0.1)


def test_reference_pays_nothing_for_an_unasked_question():
    comps = ReferenceReward().episode_components(EpisodeContext(2, 4, 10, 1000, 1000, ran_dry=True))
    assert "forfeit" not in comps


def test_an_env_config_without_a_reward_spec_pays_the_default_reward():
    assert build(EnvConfig.build(sources=["builtin"])) == EconomicsReward()


def _episode_total(reward, answered_tokens, correct, num_questions, budget):
    """Episode reward when the listed answers are given (hard cap) and the rest are never asked."""
    total, spent = 0.0, 0
    for i, (t, ok) in enumerate(zip(answered_tokens, correct)):
        total += sum(
            reward.step_components(
                ctx(
                    correct=ok,
                    tokens=t,
                    raw_tokens=t,
                    total_budget=budget,
                    num_questions=num_questions,
                    spent_before=spent,
                    question_index=i,
                )
            ).values()
        )
        spent += t
    n = len(answered_tokens)
    ep = EpisodeContext(sum(correct), n, num_questions, spent, budget, ran_dry=n < num_questions)
    return total + sum(reward.episode_components(ep).values())


@pytest.mark.parametrize("budget", [200, 1000, 1672, 5000])
def test_under_the_default_reward_running_dry_never_pays_more_than_answering_wrong(budget):
    """Every prefix of answers (right or wrong, any spend): leaving the remaining questions unasked pays
    at most what answering each of them wrong with no tokens pays (the same spend, the same right answers)."""
    rw = EconomicsReward()
    n = 5
    for tokens in ([0, 0], [budget // 5, budget // 2], [budget, 0], [budget // 10]):
        for right in ([True] * len(tokens), [False] * len(tokens)):
            dry = _episode_total(rw, tokens, right, n, budget)
            wrong = _episode_total(
                rw, tokens + [0] * (n - len(tokens)), right + [False] * (n - len(tokens)), n, budget
            )
            assert dry <= wrong + 1e-12, (budget, tokens, right, dry, wrong)


def test_the_reference_reward_pays_running_dry_more_than_answering_wrong():
    """The seed's incentive the default removes: 3 questions left unasked pay 0.3 more than answered wrong."""
    dry = _episode_total(ReferenceReward(), [100, 100], [True, False], 5, 1000)
    wrong = _episode_total(ReferenceReward(), [100, 100, 0, 0, 0], [True, False, False, False, False], 5, 1000)
    assert dry - wrong == pytest.approx(0.3)


def test_live_default_episode_that_runs_dry_pays_the_forfeit():
    cfg = EnvConfig.build(sources=["builtin"], num_questions=3)
    env = ReasoningEconomicsEnv(cfg, pools=make_pools())
    env.reset(seed=3, total_budget=30)  # fair share 10
    obs = env.step("pad " * 60 + "\\boxed{nope}")  # charged all 30: the budget ran dry, 2 never asked
    comps = obs.last_step.reward_components
    assert obs.done and obs.last_step.tokens == 30
    assert comps["forfeit"] == pytest.approx(-0.2)
    assert obs.reward == pytest.approx(sum(comps.values()), abs=1e-12)


def test_the_manifest_reward_range_bounds_the_default_reward_per_step():
    """openenv.yaml declares the per-step range of the default config (hard cap, 10 questions); the default
    reward stays inside it and reaches its lower end (a wrong first answer that spends the whole budget)."""
    import yaml

    lo, hi = yaml.safe_load((Path(__file__).resolve().parents[1] / "openenv.yaml").read_text())["validation"][
        "reward"
    ]["range"]
    rw, n, budget = EconomicsReward(), 10, 1000
    paid = []
    for i in range(n):
        for spent in (0, 500, 1000 - 1):
            for t in (0, 1, 100, 999 - min(spent, 998)):
                for ok in (True, False):
                    step = sum(
                        rw.step_components(ctx(correct=ok, tokens=t, spent_before=spent, question_index=i)).values()
                    )
                    paid.append(step)
                    for correct in range(0, i + 2):
                        ep = EpisodeContext(correct, i + 1, n, spent + t, budget, ran_dry=i + 1 < n)
                        paid.append(step + sum(rw.episode_components(ep).values()))
    assert lo <= min(paid) and max(paid) <= hi
    assert min(paid) == pytest.approx(lo)

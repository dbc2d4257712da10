"""Every reward shape against hand-computed values at its boundaries; scalar == vectorised."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reasoning_env.rewards import (
    EconomicsReward,
    EpisodeBatch,
    EpisodeContext,
    GroupRewardError,
    ReferenceReward,
    StepBatch,
    StepContext,
    available,
    build_reward,
)
from reasoning_env.rewards.shapes import ngram_repetition


def ctx(**kw) -> StepContext:
    base = dict(
        correct=True,
        has_answer=True,
        tokens=100,
        raw_tokens=100,
        total_budget=1000,
        num_questions=10,
        spent_before=0,
        question_index=0,
        hard_cap_mode=True,
        problem_type="t",
        difficulty=3,
        response="",
    )
    base.update(kw)
    return StepContext(**base)


def step(spec, **kw) -> dict[str, float]:
    return build_reward(spec, context="rescore").step_components(ctx(**kw))


def group(spec, tokens, correct) -> dict[str, np.ndarray]:
    n = len(tokens)
    b = StepBatch.build(
        n, correct=correct, tokens=tokens, total_budget=1000, num_questions=10, group=np.zeros(n, dtype=int)
    )
    return build_reward(spec, context="rescore").step_batch(b)


# ---------------------------------------------------------------------- the seed (reference) and the default
def test_reference_keeps_the_seed_values():
    r = ReferenceReward()
    # fair share 100: at the share, efficiency 0 and no cost
    assert r.step_components(ctx(tokens=100)) == {
        "correctness": 1.0,
        "efficiency_bonus": 0.0,
        "cost_penalty": -0.0,
        "overspend_penalty": 0.0,
    }
    c = r.step_components(ctx(tokens=10))
    assert c["efficiency_bonus"] == pytest.approx(0.1 * 0.9)
    c = r.step_components(ctx(tokens=300, correct=False))
    assert c == {
        "correctness": -0.1,
        "efficiency_bonus": 0.0,
        "cost_penalty": pytest.approx(-0.05 * 2),
        "overspend_penalty": 0.0,
    }
    c = r.step_components(ctx(tokens=300))
    assert c["efficiency_bonus"] == pytest.approx(0.1 * (1 - 3))  # negative past the share, as in the seed
    # soft mode: cumulative overspend / fair share
    c = r.step_components(ctx(tokens=200, spent_before=950, hard_cap_mode=False))
    assert c["overspend_penalty"] == pytest.approx(-0.25 * 150 / 100)
    assert r.step_components(ctx(tokens=200, spent_before=950, hard_cap_mode=True))["overspend_penalty"] == 0.0
    # episode bonus: lambda * accuracy * max(0, 1 - |spent/budget - 0.9|)
    e = r.episode_components(
        EpisodeContext(num_correct=7, num_answered=10, num_questions=10, total_spent=900, total_budget=1000)
    )
    assert e == {"episode_bonus": pytest.approx(0.5 * 0.7)}
    e = r.episode_components(
        EpisodeContext(num_correct=7, num_answered=10, num_questions=10, total_spent=500, total_budget=1000)
    )
    assert e["episode_bonus"] == pytest.approx(0.5 * 0.7 * 0.6)
    e = r.episode_components(
        EpisodeContext(num_correct=7, num_answered=10, num_questions=10, total_spent=3000, total_budget=1000)
    )
    assert e["episode_bonus"] == 0.0
    # the exact value the environment paid before the registry (16,200 budget, 10 tokens)
    assert r.step_components(ctx(tokens=10, total_budget=16200))["efficiency_bonus"] == 0.09938271604938272


def test_budget_aware_shares():
    # the cost term shows the share; budget_aware's default beta is the default reward's 0, so set the seed's 0.05
    # remaining: (1000 - 600) / (10 - 6) = 100 -> at the share: no cost
    c = step(
        {"type": "budget_aware", "beta": 0.05, "share": "remaining"}, tokens=100, spent_before=600, question_index=6
    )
    assert c["cost_penalty"] == pytest.approx(0.0) and c["efficiency_bonus"] == pytest.approx(0.0)
    # saved budget raises the share: 200 tokens at (1000 - 200)/(10 - 6) = 200 cost nothing
    c = step(
        {"type": "budget_aware", "beta": 0.05, "share": "remaining"}, tokens=200, spent_before=200, question_index=6
    )
    assert c["cost_penalty"] == pytest.approx(0.0)
    # ... where the seed charges it against the uniform fair share of 100
    assert step("reference", tokens=200, spent_before=200, question_index=6)["cost_penalty"] == pytest.approx(-0.05)
    # floor: nothing left -> share = min_share * fair = 10 tokens
    c = step(
        {"type": "budget_aware", "beta": 0.05, "share": "remaining", "min_share": 0.1},
        tokens=30,
        spent_before=1000,
        question_index=9,
        hard_cap_mode=False,
    )
    assert c["cost_penalty"] == pytest.approx(-0.05 * (30 / 10 - 1))
    # difficulty: share = fair * 2^(d-3) / mean(2^(l-3), l=1..5) = 100 * 4 / 1.55 at level 5
    share5 = 100 * 4 / 1.55
    c = step({"type": "budget_aware", "beta": 0.05, "share": "difficulty"}, tokens=share5 * 2, difficulty=5)
    assert c["cost_penalty"] == pytest.approx(-0.05)
    c = step(
        {"type": "budget_aware", "beta": 0.05, "share": "difficulty"}, tokens=200, difficulty=None
    )  # unknown: fair share
    assert c["cost_penalty"] == pytest.approx(-0.05)
    c = step(
        {"type": "budget_aware", "beta": 0.05, "share": "both"},
        tokens=2 * 200 * 4 / 1.55,
        spent_before=200,
        question_index=6,
        difficulty=5,
    )
    assert c["cost_penalty"] == pytest.approx(-0.05)
    # same components and episode terms as the default reward
    rw = build_reward("budget_aware")
    assert rw.component_names == EconomicsReward().component_names
    e = EpisodeContext(num_correct=5, num_answered=10, num_questions=10, total_spent=800, total_budget=1000)
    assert rw.episode_components(e) == EconomicsReward().episode_components(e)


# ---------------------------------------------------------------------- simple shapes
def test_accuracy_and_format():
    assert step("accuracy") == {"accuracy": 1.0}
    assert step("accuracy", correct=False) == {"accuracy": 0.0}
    assert step({"type": "accuracy", "wrong_reward": -0.5}, correct=False) == {"accuracy": -0.5}
    assert step("format", response="so \\boxed{4}") == {"format": 1.0}
    assert step("format", response="the answer is 4") == {"format": 0.0}
    assert step("format", response="<think>\\boxed{4}</think> 4") == {"format": 0.0}  # box inside the reasoning
    assert step("format", response="\\boxed{") == {"format": 0.0}  # unclosed
    assert step({"type": "format", "check": "answer"}, response="", has_answer=True) == {"format": 1.0}
    assert step({"type": "format", "missing_reward": -1.0}, response="no box") == {"format": -1.0}
    # without texts the grader's verdict stands in
    b = StepBatch.build(2, correct=True, tokens=10, total_budget=100, num_questions=1, has_answer=[True, False])
    assert build_reward("format").step_batch(b)["format"].tolist() == [1.0, 0.0]


def test_repetition():
    assert ngram_repetition("a b c d", 3) == 0.0
    assert ngram_repetition("a b", 3) == 0.0
    assert ngram_repetition("a a a a a", 1) == pytest.approx(1 - 1 / 5)
    # 6 words -> 4 trigrams (x y z), (y z x), (z x y), (x y z): 3 distinct
    assert ngram_repetition("x y z x y z", 3) == pytest.approx(1 - 3 / 4)
    assert step("repetition", response="x y z x y z") == {"repetition": pytest.approx(-0.25)}
    assert step({"type": "repetition", "ngram_size": 1, "max_penalty": -2.0}, response="A a a a") == {
        "repetition": pytest.approx(-2.0 * 0.75)
    }
    b = StepBatch.build(1, correct=True, tokens=10, total_budget=100, num_questions=1)
    assert build_reward("repetition").step_batch(b)["repetition"].tolist() == [0.0]


def test_l1_exact():
    # target = fair share 100 by default
    assert step("l1_exact", raw_tokens=100) == {"correctness": 1.0, "length_penalty": pytest.approx(0.0)}
    assert step("l1_exact", raw_tokens=1100, correct=False) == {
        "correctness": 0.0,
        "length_penalty": pytest.approx(-0.0003 * 1000),
    }
    assert step("l1_exact", raw_tokens=0)["length_penalty"] == pytest.approx(-0.0003 * 100)
    c = step({"type": "l1_exact", "target": "fixed", "n_target": 512}, raw_tokens=12)
    assert c["length_penalty"] == pytest.approx(-0.15)
    c = step({"type": "l1_exact", "target": "remaining_share"}, raw_tokens=0, spent_before=600, question_index=8)
    assert c["length_penalty"] == pytest.approx(-0.0003 * 200)
    # length = raw (generated) tokens, not the clipped charge
    assert step("l1_exact", raw_tokens=100, tokens=50)["length_penalty"] == pytest.approx(0.0)


def test_l1_max_clip_boundaries():
    spec = {"type": "l1_max", "target": "fixed", "n_target": 1000, "alpha": 0.001, "delta": 0.5}
    assert step(spec, raw_tokens=1000) == {"l1_max": pytest.approx(0.5)}
    assert step(spec, raw_tokens=500) == {"l1_max": pytest.approx(1.0)}  # alpha*500 + 0.5 = 1: upper clip
    assert step(spec, raw_tokens=0) == {"l1_max": pytest.approx(1.0)}
    assert step(spec, raw_tokens=1500) == {"l1_max": pytest.approx(0.0)}  # lower clip reached
    assert step(spec, raw_tokens=4000) == {"l1_max": pytest.approx(0.0)}
    assert step(spec, raw_tokens=1250) == {"l1_max": pytest.approx(0.25)}
    assert step(spec, raw_tokens=500, correct=False) == {"l1_max": 0.0}


def test_l1_max_default_slope_is_the_official_codes():
    """The official L1 code's Max reward is (clip(0.002 (n_target - n), -1, 1) + 1) / 2 = the
    paper's form with alpha = 0.001 and delta = 0.5 (the paper's alpha = 0.0003 is L1-Exact's)."""
    from reasoning_env.rewards import describe

    for n in (0, 250, 400, 500, 600, 900, 2000):
        official = (min(1.0, max(-1.0, 0.002 * (500 - n))) + 1) / 2
        assert step({"type": "l1_max", "target": "fixed", "n_target": 500}, raw_tokens=n) == {
            "l1_max": pytest.approx(official)
        }
    assert "official code" in describe("l1_max")["source"]


def test_repetition_is_cited_as_open_r1s_scalar_penalty():
    from reasoning_env.rewards import describe

    src = describe("repetition")["source"]
    assert src.startswith("Open-R1") and "Not the penalty of Yeo et al.'s experiments" in src


def test_thinkprune_zeroes_answers_over_the_limit():
    """Hou et al. 2025: beyond the token limit unfinished thoughts and answers are discarded, a zero reward."""
    fixed = {"type": "thinkprune", "limit": "fixed", "n_limit": 300}
    assert step(fixed, raw_tokens=300) == {"thinkprune": 1.0}
    assert step(fixed, raw_tokens=301) == {"thinkprune": 0.0}
    assert step(fixed, raw_tokens=100, correct=False) == {"thinkprune": 0.0}
    # the default limit follows the episode budget: the remaining budget per remaining question
    assert step("thinkprune", raw_tokens=200, spent_before=600, question_index=8) == {
        "thinkprune": 1.0
    }  # 400 / 2 = 200
    assert step("thinkprune", raw_tokens=201, spent_before=600, question_index=8) == {"thinkprune": 0.0}
    assert step({"type": "thinkprune", "limit": "fair_share", "scale": 0.5}, raw_tokens=51) == {
        "thinkprune": 0.0
    }  # 0.5 x 100
    assert step({"type": "thinkprune", "limit": "remaining"}, raw_tokens=400, spent_before=600) == {"thinkprune": 1.0}
    assert step(
        {"type": "thinkprune", "wrong_reward": -0.5, "limit": "fixed", "n_limit": 10}, raw_tokens=5, correct=False
    ) == {"thinkprune": -0.5}


def test_dapo_overlong_boundaries():
    spec = {"type": "dapo_overlong", "l_max": 2048, "l_cache": 512}
    assert step(spec, raw_tokens=0) == {"dapo_overlong": 0.0}
    assert step(spec, raw_tokens=1536) == {"dapo_overlong": 0.0}
    assert step(spec, raw_tokens=1792) == {"dapo_overlong": pytest.approx(-0.5)}
    assert step(spec, raw_tokens=2048) == {"dapo_overlong": pytest.approx(-1.0)}
    assert step(spec, raw_tokens=2049) == {"dapo_overlong": -1.0}
    assert step(spec, raw_tokens=2049, correct=False) == {"dapo_overlong": -1.0}  # independent of the verdict
    hard = {"type": "dapo_overlong", "l_max": 100, "l_cache": 0}
    assert step(hard, raw_tokens=100) == {"dapo_overlong": 0.0}
    assert step(hard, raw_tokens=101) == {"dapo_overlong": -1.0}
    with pytest.raises(ValueError, match="l_cache"):
        build_reward({"type": "dapo_overlong", "l_max": 100, "l_cache": 200})


def test_cosine_boundaries():
    spec = {"type": "cosine", "l_max": 1000}
    assert step(spec, raw_tokens=0) == {"cosine": pytest.approx(2.0)}
    assert step(spec, raw_tokens=500) == {"cosine": pytest.approx(1.5)}
    assert step(spec, raw_tokens=999)["cosine"] == pytest.approx(1.0, abs=1e-4)
    assert step(spec, raw_tokens=1000) == {"cosine": -10.0}  # reached the limit: truncated
    assert step(spec, raw_tokens=0, correct=False) == {"cosine": pytest.approx(-10.0)}
    assert step(spec, raw_tokens=500, correct=False) == {"cosine": pytest.approx(-5.0)}
    assert step(spec, raw_tokens=999, correct=False)["cosine"] == pytest.approx(0.0, abs=1e-4)
    assert step(spec, raw_tokens=250)["cosine"] == pytest.approx(1 + (1 + math.cos(math.pi / 4)) / 2)


# ---------------------------------------------------------------------- group shapes
def test_kimi_length():
    out = group("kimi_length", [100, 200, 300], [True, True, True])["kimi_length"]
    assert out.tolist() == pytest.approx([0.5, 0.0, -0.5])
    out = group("kimi_length", [100, 200, 300], [False, False, False])["kimi_length"]
    assert out.tolist() == pytest.approx([0.0, 0.0, -0.5])
    out = group("kimi_length", [150, 150], [True, False])["kimi_length"]
    assert out.tolist() == [0.0, 0.0]  # all equal lengths: no penalty
    # two groups in one batch do not mix
    b = StepBatch.build(
        4, correct=True, tokens=[100, 300, 1000, 5000], total_budget=1000, num_questions=10, group=[0, 0, 1, 1]
    )
    assert build_reward("kimi_length", context="rescore").step_batch(b)["kimi_length"].tolist() == pytest.approx(
        [0.5, -0.5, 0.5, -0.5]
    )


def test_shorter_better():
    out = group("shorter_better", [100, 200, 400], [False, True, True])
    assert out["correctness"].tolist() == [0.0, 2.0, 2.0]
    assert out["length_penalty"].tolist() == pytest.approx([-0.001 * 100, 0.0, -0.001 * 200])  # SOL = 200
    out = group("shorter_better", [100, 200, 600], [False, False, False])  # no correct: SOL = mean = 300
    assert out["length_penalty"].tolist() == pytest.approx([-0.2, -0.1, -0.3])


def test_arora_zanette():
    out = group({"type": "arora_zanette", "alpha": 0.2}, [100, 300, 50], [True, True, False])["arora_zanette"]
    # correct lengths 100, 300: mean 200, std 100 -> z = -1, +1
    sig = lambda z: 1 / (1 + math.exp(-z))  # noqa: E731
    assert out.tolist() == pytest.approx([1 - 0.2 * sig(-1), 1 - 0.2 * sig(1), 0.0])
    out = group({"type": "arora_zanette", "alpha": 0.2}, [100, 300], [True, False])["arora_zanette"]
    assert out.tolist() == pytest.approx([0.9, 0.0])  # one correct: z = 0


def test_group_rewards_refuse_single_steps_and_groupless_batches():
    for name in ("kimi_length", "shorter_better", "arora_zanette"):
        rw = build_reward(name, context="rescore")
        with pytest.raises(GroupRewardError, match="training"):
            rw.step_components(ctx())
        with pytest.raises(GroupRewardError, match="no groups"):
            rw.step_batch(StepBatch.build(2, correct=True, tokens=10, total_budget=100, num_questions=1))
        with pytest.raises(ValueError, match="group reward"):
            build_reward(name)  # environment context


# ---------------------------------------------------------------------- composition
def test_combined_weights_and_names():
    spec = {
        "type": "combined",
        "rewards": [
            {"type": "accuracy"},
            {"type": "dapo_overlong", "weight": 0.5, "params": {"l_max": 200, "l_cache": 100}},
            {"type": "l1_exact", "label": "l1", "weight": 2.0},
        ],
    }
    c = step(spec, raw_tokens=150)
    assert c == {
        "accuracy": 1.0,
        "dapo_overlong": pytest.approx(-0.25),
        "l1.correctness": 2.0,
        "l1.length_penalty": pytest.approx(-2 * 0.0003 * 50),
    }
    # a single weighted reward keeps its own component names
    assert step({"type": "reference", "weight": 2.0}, tokens=300, correct=False) == {
        "correctness": -0.2,
        "efficiency_bonus": 0.0,
        "cost_penalty": pytest.approx(-0.2),
        "overspend_penalty": 0.0,
    }
    # episode components are relabelled the same way
    rw = build_reward({"type": "combined", "rewards": ["accuracy", "reference"]})
    e = rw.episode_components(
        EpisodeContext(num_correct=9, num_answered=10, num_questions=10, total_spent=900, total_budget=1000)
    )
    assert e == {"reference.episode_bonus": pytest.approx(0.45)}
    assert rw.component_names[-1] == "reference.episode_bonus"


# ---------------------------------------------------------------------- scalar path == vectorised path
STEP_SHAPES = [n for n in available() if n != "combined" and not build_reward(n, context="rescore").is_group]
contexts = st.builds(
    StepContext,
    correct=st.booleans(),
    has_answer=st.booleans(),
    tokens=st.integers(0, 5000),
    raw_tokens=st.integers(0, 6000),
    total_budget=st.integers(1, 50_000),
    num_questions=st.integers(1, 20),
    spent_before=st.integers(0, 60_000),
    question_index=st.integers(0, 19),
    hard_cap_mode=st.booleans(),
    problem_type=st.sampled_from(["GSM8K", "MATH-500"]),
    difficulty=st.one_of(st.none(), st.integers(1, 5)),
    response=st.sampled_from(["", "x \\boxed{3}", "a a a a a a", "Answer: 3"]),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(contexts, min_size=1, max_size=8))
def test_scalar_and_batch_paths_agree(ctxs):
    rewards = [build_reward(n, context="rescore") for n in STEP_SHAPES]
    rewards.append(
        build_reward({"type": "combined", "rewards": [{"type": n} for n in STEP_SHAPES]}, context="rescore")
    )
    batch = StepBatch.from_contexts(ctxs)
    for rw in rewards:
        vec = rw.step_batch(batch)
        for i, c in enumerate(ctxs):
            one = rw.step_components(c)
            assert list(one) == list(vec)
            for k, v in one.items():
                assert v == pytest.approx(float(vec[k][i]), abs=1e-12), (rw, k)
        eps = [
            EpisodeContext(
                num_correct=min(c.question_index, c.num_questions),
                num_answered=c.num_questions,
                num_questions=c.num_questions,
                total_spent=c.spent_before,
                total_budget=c.total_budget,
            )
            for c in ctxs
        ]
        evec = rw.episode_batch(EpisodeBatch.from_contexts(eps))
        for i, e in enumerate(eps):
            for k, v in rw.episode_components(e).items():
                assert v == pytest.approx(float(evec[k][i]), abs=1e-12)


def test_unasked_questions_pay_like_a_wrong_answer_by_default_and_nothing_in_the_reference():
    from reasoning_env.rewards import build_reward
    from reasoning_env.rewards.base import EpisodeContext

    ctx = EpisodeContext(
        num_correct=3, num_answered=7, num_questions=10, total_spent=100, total_budget=100, ran_dry=True
    )
    seed = build_reward("reference")
    assert "forfeit" not in seed.episode_components(ctx)  # the seed: a forfeit pays 0
    default = build_reward("economics")
    comps = default.episode_components(ctx)
    assert comps["forfeit"] == pytest.approx(3 * default.wrong_reward) == pytest.approx(3 * -0.1)
    assert comps["episode_bonus"] == pytest.approx(seed.episode_components(ctx)["episode_bonus"])

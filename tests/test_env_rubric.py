"""``env.rubric``: the configured reward as an OpenEnv rubric tree, paying exactly what the env pays.

Episodes are played with mixed answers (right, wrong, unboxed, repetitive, padded past the budget,
graded through ``metadata.grading_response``) under several reward specs; after every step the
rubric's root must equal the paid reward and every named child its component, bit for bit.
"""

from __future__ import annotations

import random

import pytest
from openenv.core.rubrics import Rubric, TrajectoryRubric
from test_env_contract import make_pools

from reasoning_env import EnvConfig, ReasoningEconomicsEnv
from reasoning_env.rewards.rubric import EpisodeComponentRubric, SumRubric

SPECS = {
    "default": dict(reward=None),
    "reference": dict(reward={"type": "reference"}),
    "economics_forfeit": dict(reward={"type": "economics", "params": {"unasked_reward": -0.1}}),
    "budget_aware_soft": dict(reward={"type": "budget_aware", "params": {"share": "both"}}, hard_cap_mode=False),
    "combined": dict(
        reward={
            "type": "combined",
            "rewards": [
                {"type": "accuracy"},
                {"type": "dapo_overlong", "weight": 0.5, "params": {"l_max": 40, "l_cache": 20}},
                {"type": "format"},
                {"type": "repetition"},
                {"type": "budget_aware", "label": "econ", "params": {"share": "remaining"}},
                {"type": "l1_exact", "label": "l1", "weight": 0.3},
            ],
        }
    ),
    "weighted_single": dict(reward={"type": "l1_max", "weight": 0.5}),
}


KINDS = ("right", "padded", "wrong", "grading_response", "unboxed", "repeat")


def _answer(rng: random.Random, gold: str, kind: str) -> str | dict:
    if kind == "right":
        return "step " * rng.randint(0, 30) + f"so \\boxed{{{gold}}}"
    if kind == "wrong":
        return f"I think \\boxed{{{int(gold) + 1}}}"
    if kind == "unboxed":
        return "no idea"
    if kind == "repeat":
        return "add the numbers " * 12 + f"\\boxed{{{gold}}}"
    if kind == "padded":  # long: clipped to the remaining budget in hard-cap mode (a paid prefix is graded)
        return "thinking " * rng.randint(60, 200) + f"\\boxed{{{gold}}}"
    return {"response": "scratch work " * 5, "metadata": {"grading_response": f"\\boxed{{{gold}}}"}}


def _play(spec: dict, seed: int, budget: int):
    """Play one episode; yield ``(env, obs)`` after every step."""
    cfg = EnvConfig.build(sources=["builtin"], num_questions=6, **{k: v for k, v in spec.items() if v is not None})
    env = ReasoningEconomicsEnv(cfg, pools=make_pools())
    obs = env.reset(seed=seed, total_budget=budget)
    rng = random.Random(seed)
    while not obs.done:
        kind = KINDS[(seed + obs.question_index) % len(KINDS)]
        obs = env.step(_answer(rng, env.questions[obs.question_index].gold_answer, kind))
        yield env, obs


def _leaves(rubric: Rubric) -> dict[str, Rubric]:
    return {name: r for name, r in rubric.named_rubrics() if not isinstance(r, SumRubric)}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_rubric_pays_what_the_env_pays_step_by_step(name):
    steps = 0
    for seed, budget in ((0, 400), (1, 60), (3, 2000)):  # 60: the padded answer runs the budget dry
        paid: dict[str, list[float]] = {}
        for env, obs in _play(SPECS[name], seed, budget):
            comps = obs.last_step.reward_components
            assert env.rubric.last_score == obs.reward  # exactly, not approximately
            leaves = _leaves(env.rubric)
            assert set(comps) <= set(leaves), f"components without a child: {set(comps) - set(leaves)}"
            for path, leaf in leaves.items():
                assert leaf.last_score == comps.get(path, 0.0), path
                paid.setdefault(path, []).append(comps.get(path, 0.0))
            for path, node in env.rubric.named_rubrics():
                if isinstance(node, SumRubric):
                    assert node.last_score == pytest.approx(
                        sum(v for k, v in comps.items() if k.startswith(path + ".")), abs=1e-12
                    )
            steps += 1
        # an episode leaf (a TrajectoryRubric) credits the final step only, as the env paid it
        for path, leaf in _leaves(env.rubric).items():
            if isinstance(leaf, EpisodeComponentRubric):
                assert leaf.compute_step_rewards() == paid[path]
    assert steps >= 6


SEED_COMPONENTS = ["correctness", "efficiency_bonus", "cost_penalty", "overspend_penalty", "episode_bonus"]


def test_reference_rubric_children_are_the_seed_components():
    cfg = EnvConfig.build(sources=["builtin"], num_questions=2, **SPECS["reference"])
    env = ReasoningEconomicsEnv(cfg, pools=make_pools())
    assert isinstance(env.rubric, Rubric)
    assert [n for n, _ in env.rubric.named_children()] == SEED_COMPONENTS
    assert isinstance(env.rubric.episode_bonus, TrajectoryRubric)
    assert not isinstance(env.rubric.correctness, TrajectoryRubric)


def test_default_rubric_children_are_the_seed_components_and_the_forfeit():
    env = ReasoningEconomicsEnv(EnvConfig.build(sources=["builtin"], num_questions=2), pools=make_pools())
    assert [n for n, _ in env.rubric.named_children()] == SEED_COMPONENTS + ["forfeit"]
    assert isinstance(env.rubric.forfeit, TrajectoryRubric)


def test_combined_rubric_paths_are_the_component_names():
    cfg = EnvConfig.build(sources=["builtin"], num_questions=2, **SPECS["combined"])
    env = ReasoningEconomicsEnv(cfg, pools=make_pools())
    obs = env.reset(seed=0)
    while not obs.done:
        obs = env.step(f"\\boxed{{{env.questions[obs.question_index].gold_answer}}}")
    assert set(_leaves(env.rubric)) == set(obs.last_step.reward_components)
    assert env.rubric.get_rubric("econ.correctness").last_score == obs.last_step.reward_components["econ.correctness"]
    assert [n for n, _ in env.rubric.named_children()] == [
        "accuracy",
        "dapo_overlong",
        "format",
        "repetition",
        "econ",
        "l1",
    ]


def test_forfeit_child_appears_only_when_the_spec_pays_it():
    def names(spec):
        cfg = EnvConfig.build(sources=["builtin"], num_questions=2, **spec)
        return set(_leaves(ReasoningEconomicsEnv(cfg, pools=make_pools()).rubric))

    assert "forfeit" in names(SPECS["economics_forfeit"])
    assert "forfeit" in names(SPECS["default"])
    assert "forfeit" not in names(SPECS["reference"])
    assert "forfeit" not in names(dict(reward={"type": "economics", "params": {"unasked_reward": 0.0}}))


def test_reset_clears_the_episode_trajectories():
    *_, (env, obs) = _play(SPECS["default"], seed=4, budget=500)
    assert len(env.rubric.episode_bonus.trajectory) == len(obs.history)
    env.reset(seed=5)
    assert env.rubric.episode_bonus.trajectory == []


def test_a_step_after_the_episode_scores_zero_everywhere():
    *_, (env, obs) = _play(SPECS["default"], seed=6, budget=500)
    after = env.step("\\boxed{1}")
    assert after.done_reason == "episode_already_done" and after.reward == 0.0
    assert env.rubric.last_score == 0.0
    assert all(r.last_score == 0.0 for _, r in env.rubric.named_rubrics())


def test_rubric_called_on_a_recorded_step_gives_the_same_numbers():
    """A trainer holding the (action, observation) of a step can score it again with the tree."""
    cfg = EnvConfig.build(sources=["builtin"], num_questions=3, **SPECS["combined"])
    env = ReasoningEconomicsEnv(cfg, pools=make_pools())
    obs = env.reset(seed=7)
    recorded = []
    rng = random.Random(7)
    while not obs.done:
        action = _answer(rng, env.questions[obs.question_index].gold_answer, KINDS[obs.question_index])
        obs = env.step(action)
        recorded.append((env._coerce_action(action), obs))
    for action, step_obs in recorded:
        assert env.rubric(action, step_obs) == step_obs.reward
        assert env.rubric.components(action, step_obs) == step_obs.last_step.reward_components


class _CountingReward:
    """A reward paying 0.25 a step and 1.0 on the final step, counting how often it is asked."""

    component_names = ("flat", "finish")

    def __init__(self, fail_at: int | None = None) -> None:
        self.step_calls = 0
        self.episode_calls = 0
        self.fail_at = fail_at

    def step_components(self, ctx):
        self.step_calls += 1
        if ctx.question_index == self.fail_at:
            raise ValueError("this reward cannot pay question 1")
        return {"flat": 0.25}

    def episode_components(self, ep):
        self.episode_calls += 1
        return {"finish": 1.0}


def _env_paying(reward) -> ReasoningEconomicsEnv:
    from reasoning_env.rewards.rubric import RewardRubric

    env = ReasoningEconomicsEnv(EnvConfig.build(sources=["builtin"], num_questions=3), pools=make_pools())
    env.rubric = RewardRubric(reward)
    return env


def test_the_env_pays_what_its_rubric_returns_computed_once_a_step():
    reward = _CountingReward()
    env = _env_paying(reward)
    reward.step_calls = reward.episode_calls = 0  # building the tree probed the reward's component names
    obs = env.reset(seed=1, total_budget=3000)
    rewards = []
    while not obs.done:
        obs = env.step("\\boxed{1}")
        rewards.append(obs.reward)
    assert rewards == [0.25, 0.25, 1.25]
    assert reward.step_calls == 3 and reward.episode_calls == 1  # the tree's children read what was paid
    assert env.rubric.finish.last_score == 1.0 and env.rubric.last_score == 1.25


def test_a_reward_that_raises_leaves_the_episode_as_it_was():
    env = _env_paying(_CountingReward(fail_at=1))
    env.reset(seed=2, total_budget=3000)
    env.step("\\boxed{1}")
    before = env.state
    with pytest.raises(ValueError, match="cannot pay"):
        env.step("\\boxed{1} " + "padding " * 20)
    assert env.state == before

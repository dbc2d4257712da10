"""Per-question advantages and the group-signal test (training/advantages.py; issue 29, F14/F4)."""

from __future__ import annotations

import numpy as np
import pytest

from training.advantages import (
    episode_component_names,
    group_has_signal,
    question_advantages,
    token_advantages,
    turn_credits,
)


def test_episode_components_of_the_default_reward_are_read_off_the_reward():
    from reasoning_env.config import EnvConfig
    from reasoning_env.rewards import build_reward

    # the default charges unasked questions on the final step (forfeit); the seed's reference pays no forfeit
    assert set(episode_component_names(build_reward(EnvConfig()))) == {"episode_bonus", "forfeit"}
    seed = EnvConfig(reward={"type": "reference"})
    assert episode_component_names(build_reward(seed)) == ("episode_bonus",)


def test_turn_credit_is_the_own_step_reward_plus_the_episode_terms():
    # two answered questions, one forfeit (context full); the final step carries the episode bonus
    rewards = [1.0, -0.15, -0.1 + 0.3]
    comps = [
        {"correctness": 1.0},
        {"correctness": -0.1, "cost_penalty": -0.05},
        {"correctness": -0.1, "episode_bonus": 0.3},
    ]
    credits = turn_credits(rewards, comps, 2, sum(rewards), ["episode_bonus"])
    terms = 0.3 - 0.1  # the bonus and the forfeited question's step reward
    assert credits == pytest.approx([1.0 + terms, -0.15 + terms])
    own = [c - terms for c in credits]
    assert sum(own) + terms == pytest.approx(sum(rewards))  # nothing lost, nothing counted twice


def test_the_episode_bonus_on_an_answered_final_step_is_not_that_answer_s_own():
    comps = [{"correctness": -0.1}, {"correctness": 1.0, "episode_bonus": 0.5}]
    credits = turn_credits([-0.1, 1.5], comps, 2, 1.4, ["episode_bonus"])
    assert credits == pytest.approx([-0.1 + 0.5, 1.0 + 0.5])


def test_turn_credits_refuse_inconsistent_input():
    with pytest.raises(ValueError, match="component dicts"):
        turn_credits([1.0], [], 1, 1.0, [])
    with pytest.raises(ValueError, match="num_answered"):
        turn_credits([1.0], [{}], 2, 1.0, [])


def test_advantages_are_normalised_per_question_within_the_group():
    # group 0: two members; member 0 right on Q1 wrong on Q2, member 1 the reverse: equal episode rewards,
    # opposite per-question advantages. group 1: member 2 ran dry after Q1 (no Q2 turn).
    credits = [[1.0, 0.0], [0.0, 1.0], [0.5], [0.1, 0.2]]
    groups = [0, 0, 1, 1]
    adv = question_advantages(credits, groups, "none")
    assert adv[0] == pytest.approx([0.5, -0.5]) and adv[1] == pytest.approx([-0.5, 0.5])
    assert adv[2] == pytest.approx([0.2]) and adv[3] == pytest.approx([-0.2, 0.0])  # Q2 of group 1: one member
    grp = question_advantages(credits, groups, "group")
    assert grp[0][0] == pytest.approx(0.5 / (np.std([1.0, 0.0], ddof=1) + 1e-4))
    batch = question_advantages(credits, groups, "batch")
    flat = [c for cs in credits for c in cs]
    assert batch[2][0] == pytest.approx(0.2 / (np.std(flat, ddof=1) + 1e-4))
    with pytest.raises(ValueError, match="scale"):
        question_advantages(credits, groups, "episode")


def test_a_tiny_cost_gap_stays_tiny_under_batch_scaling_but_not_group():
    credits = [[1.0], [1.001], [0.0], [1.0]]  # group 0 differs by a cost gap, group 1 in correctness
    groups = [0, 0, 1, 1]
    assert abs(question_advantages(credits, groups, "batch")[0][0]) < 0.01
    assert abs(question_advantages(credits, groups, "group")[0][0]) > 0.5


def test_token_advantages_put_each_turn_s_value_on_its_tokens():
    out = token_advantages([[0.5, -1.0], [2.0]], [[(0, 3), (5, 7)], [(0, 2)]], 8)
    assert out.shape == (2, 8) and out.dtype == np.float32
    assert out[0].tolist() == [0.5, 0.5, 0.5, 0.0, 0.0, -1.0, -1.0, 0.0]
    assert out[1].tolist() == [2.0, 2.0] + [0.0] * 6
    with pytest.raises(ValueError, match="outside"):
        token_advantages([[1.0]], [[(0, 9)]], 8)
    with pytest.raises(ValueError, match="turn spans"):
        token_advantages([[1.0, 2.0]], [[(0, 1)]], 8)


def test_group_signal():
    assert not group_has_signal([-0.15, -0.15, -0.15, -0.15])  # all cut at the same cap: nothing to learn
    assert group_has_signal([-0.15, -0.1489])  # a cost gap is a (small) signal
    assert not group_has_signal([0.2, 0.2 + 1e-9])
    # equal episode rewards, different per-question credits: a signal only for question advantages
    assert not group_has_signal([1.0, 1.0])
    assert group_has_signal([1.0, 1.0], credits=[[1.0, 0.0], [0.0, 1.0]])
    assert not group_has_signal([1.0, 0.5], credits=[[0.5, 0.5], [0.5]])  # Q2 answered by one member only

"""Episode sampling: even mix, weights, no replacement, determinism."""

from __future__ import annotations

import collections

import pytest

from reasoning_env.questions import Question
from reasoning_env.sampler import SamplingError, sample_episode


def _pools(types=("A", "B", "C", "D", "E", "F", "G", "H", "I"), size=30):
    return {t: [Question(f"{t}{i}", f"q {t}{i}", "1", t, "test") for i in range(size)] for t in types}


def test_even_mix_across_nine_types():
    for seed in range(50):
        qs = sample_episode(_pools(), 10, seed)
        counts = collections.Counter(q.problem_type for q in qs)
        assert len(qs) == 10
        assert set(counts) == set("ABCDEFGHI")  # every type present
        assert sorted(counts.values()) == [1] * 8 + [2]


def test_no_replacement_within_an_episode():
    qs = sample_episode(_pools(size=3), 27, seed=1)
    assert len({q.id for q in qs}) == 27


def test_weights_shift_the_mix():
    qs = sample_episode(_pools(("A", "B")), 10, seed=3, weights={"A": 4.0, "B": 1.0})
    counts = collections.Counter(q.problem_type for q in qs)
    assert counts == {"A": 8, "B": 2}
    qs = sample_episode(_pools(("A", "B")), 10, seed=3, weights={"B": 0})
    assert {q.problem_type for q in qs} == {"A"}


def test_small_pool_capacity_moves_to_other_types():
    pools = _pools(("A", "B"), size=20)
    pools["A"] = pools["A"][:2]
    qs = sample_episode(pools, 10, seed=0)
    counts = collections.Counter(q.problem_type for q in qs)
    assert counts == {"A": 2, "B": 8}


def test_same_seed_same_episode_and_different_seeds_differ():
    a = [q.id for q in sample_episode(_pools(), 10, 42)]
    b = [q.id for q in sample_episode(_pools(), 10, 42)]
    c = [q.id for q in sample_episode(_pools(), 10, 43)]
    assert a == b and a != c


def test_all_zero_weights_is_an_error():
    with pytest.raises(SamplingError):
        sample_episode(_pools(("A",)), 3, seed=0, weights={"A": 0})

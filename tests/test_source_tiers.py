"""The same reasoning-gym generator at two difficulties, and question ids that name two questions."""

from __future__ import annotations

import json

import pytest

from reasoning_env.sources import SourceError, load_pools


def _products(digits: int, difficulty: int, **extra) -> tuple[str, dict]:
    return (
        "reasoning_gym",
        {
            "datasets": ["products"],
            "size": 6,
            "seed": 0,
            "config": {"products": {"min_digits": digits, "max_digits": digits}},
            "difficulty": {"products": difficulty},
            **extra,
        },
    )


def test_same_generator_at_two_difficulties_keeps_both_sets_with_distinct_ids():
    pools = load_pools([_products(1, 1), _products(3, 3)], hub=False)
    qs = pools.pools["reasoning_gym/products"]
    assert len(qs) == 12 and len({q.id for q in qs}) == 12
    assert sorted({q.difficulty for q in qs}) == [1, 3]
    hard = [q for q in qs if q.difficulty == 3]
    assert all(len(q.text.split(":")[1].split("*")[0].strip()) == 3 for q in hard)  # "... : 141 * 365. ..."


def test_a_label_gives_the_tier_its_own_problem_type():
    pools = load_pools([_products(1, 1), _products(3, 3, label="hard")], hub=False)
    assert sorted(pools.pools) == ["reasoning_gym/products", "reasoning_gym/products/hard"]
    assert {q.difficulty for q in pools.pools["reasoning_gym/products/hard"]} == {3}


def test_an_unconfigured_generator_keeps_its_ids():
    pools = load_pools([("reasoning_gym", {"datasets": ["chain_sum"], "size": 2, "seed": 5})], hub=False)
    assert [q.id for q in pools.pools["reasoning_gym/chain_sum"]] == [
        "reasoning_gym/chain_sum/5/0",
        "reasoning_gym/chain_sum/5/1",
    ]


def test_a_bad_label_is_refused():
    with pytest.raises(SourceError, match="label must be"):
        load_pools([_products(1, 1, label="a b")], hub=False)


def test_one_id_for_two_different_questions_is_refused_not_dropped(tmp_path):
    for name, text in (("a.jsonl", "What is 1+1?"), ("b.jsonl", "What is 2+2?")):
        (tmp_path / name).write_text(json.dumps({"id": "q1", "question": text, "answer": "2"}) + "\n")
    specs = [("jsonl", {"data_files": str(tmp_path / f), "id_field": "id"}) for f in ("a.jsonl", "b.jsonl")]
    with pytest.raises(SourceError, match="names two different questions"):
        load_pools(specs, hub=False)


def test_the_same_question_listed_twice_is_kept_once():
    pools = load_pools([_products(1, 1), _products(1, 1)], hub=False)
    assert len(pools.pools["reasoning_gym/products"]) == 6

"""The share rule of the per-answer turn cap keeps a floor for every later question (issue 29, F3)."""

from __future__ import annotations

import pytest

from reasoning_env.policies.turn_cap import TurnCap


def _obs(remaining: int, left: int, step_cap: int | None = None) -> dict:
    return {
        "step_token_cap": remaining if step_cap is None else step_cap,
        "remaining_budget": remaining,
        "questions_remaining": left,
    }


@pytest.mark.parametrize("budget", [129, 200, 300, 480, 512])
def test_two_questions_factor_two_no_longer_give_the_first_the_whole_budget(budget):
    cap = TurnCap(factor=2.0)(_obs(budget, 2))
    assert cap == budget - 64  # the second question keeps its floor (the old rule gave the first all `budget`)


def test_the_second_to_last_question_leaves_a_floor_for_the_last():
    cap = TurnCap(factor=2.0, floor=64)
    for remaining in range(128, 3000, 37):
        assert cap(_obs(remaining, 2)) <= remaining - 64
        if remaining >= 3 * 64:  # the budget keeps a floor for each of the three
            assert cap(_obs(remaining, 3)) <= remaining - 2 * 64


def test_the_share_still_binds_when_it_is_below_the_reserve():
    assert TurnCap(factor=2.0)(_obs(1700, 10)) == 340  # 2 x 1700 / 10, far below 1700 - 9 x 64
    assert TurnCap(factor=1.0)(_obs(1000, 2)) == 500  # factor 1: the even share


def test_a_budget_too_small_for_every_floor_gives_the_floor():
    cap = TurnCap(factor=2.0, floor=64)
    assert cap(_obs(100, 2)) == 64  # 100 < 2 x 64: this answer gets the floor, the last one the 36 left
    assert cap(_obs(100, 10)) == 64
    assert cap(_obs(40, 2)) == 40  # never above what is left (step_token_cap)


def test_the_last_question_may_use_all_that_is_left():
    assert TurnCap(factor=2.0)(_obs(300, 1)) == 300

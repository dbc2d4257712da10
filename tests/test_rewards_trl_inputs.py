"""TRL reward callables on hostile batches: a malformed call fails with a message naming the column
and the fix; it never pays a silently wrong reward (a missing gold answer is not the text "None",
the string "False" is not a correct answer, a negative length earns no bonus)."""

from __future__ import annotations

import math

import pytest

from reasoning_env.rewards import trl_reward_function

BOXED = "so \\boxed{4}"


@pytest.fixture(scope="module")
def reward():
    return trl_reward_function()  # the default reward (economics)


def test_an_empty_batch_pays_nothing(reward) -> None:
    assert reward([], completion_ids=[], gold_answer=[]) == []


@pytest.mark.parametrize("completions", [None, BOXED, 5])
def test_completions_must_be_a_list(reward, completions) -> None:
    # a bare string would be read as one completion per character
    with pytest.raises(TypeError, match="completions must be a list"):
        reward(completions, completion_ids=[[1]] * 12, gold_answer=["4"] * 12)


def test_completion_ids_entries_must_be_token_lists(reward) -> None:
    with pytest.raises(TypeError, match=r"completion_ids\[0\] must be a sequence of token ids"):
        reward([BOXED], completion_ids=[None], gold_answer=["4"])


@pytest.mark.parametrize("gold", [None, math.nan, "", "  "])
def test_a_missing_gold_answer_is_an_error_not_the_text_none(reward, gold) -> None:
    # str(None) == "None": \boxed{None} would be graded correct against a missing gold
    with pytest.raises(ValueError, match=r"gold answer of completion 1 is missing"):
        reward([BOXED, "\\boxed{None}"], completion_ids=[[1], [1]], gold_answer=["4", gold])


@pytest.mark.parametrize("value", ["False", None, 2, 0.5])
def test_correct_column_holds_booleans(reward, value) -> None:
    # bool("False") is True: a string verdict would be paid as correct
    with pytest.raises(ValueError, match=r"column 'correct' must hold booleans"):
        reward(["x"], completion_ids=[[1]], correct=[value])


def test_numpy_and_integer_verdicts_are_accepted(reward) -> None:
    np = pytest.importorskip("numpy")
    ok = reward(["x", "y"], completion_ids=[[1], [1]], correct=np.array([True, False]))
    assert ok == reward(["x", "y"], completion_ids=[[1], [1]], correct=[1, 0])
    assert ok[0] > ok[1]


@pytest.mark.parametrize(
    ("column", "value", "match"),
    [
        ("tokens", -5, "column 'tokens' must hold finite numbers >= 0"),
        ("tokens", math.nan, "column 'tokens' must hold finite numbers >= 0"),
        ("total_budget", 0, "column 'total_budget' must hold finite numbers > 0"),
        ("total_budget", -5, "column 'total_budget' must hold finite numbers > 0"),
        ("total_budget", math.nan, "column 'total_budget' must hold finite numbers > 0"),
        ("num_questions", 0, "column 'num_questions' must hold finite numbers > 0"),
        ("spent_before", math.nan, "column 'spent_before' must hold finite numbers >= 0"),
        ("question_index", -1, "column 'question_index' must hold finite numbers >= 0"),
        ("difficulty", "hard", "column 'difficulty' must hold numbers or None"),
    ],
)
def test_budget_columns_are_checked(reward, column, value, match) -> None:
    kw = {"tokens": [10], "gold_answer": ["4"], column: [value]}
    with pytest.raises(ValueError, match=match):
        reward([BOXED], **kw)


def test_a_valid_batch_still_pays_as_before(reward) -> None:
    r = reward(
        [BOXED, "\\boxed{5}"], completion_ids=[[0] * 10, [0] * 10], gold_answer=["4", "4"], difficulty=[None, 2]
    )
    assert r[0] > 0 > r[1]

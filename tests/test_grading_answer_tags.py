"""DeepSeek-R1-style ``<answer>...</answer>`` tags as an answer format (after ``\\boxed{}``), and one
hedge rule for every answer format: a clause offering another value right after the answer
(``\\boxed{12}. Or maybe 13.``) is not one answer, whichever format carries it."""

from __future__ import annotations

import pytest

from reasoning_env.grading import Grader
from reasoning_env.grading.extract import extract_final_answer


@pytest.fixture(scope="module")
def grader():
    return Grader(timeout_s=2.0)


@pytest.mark.parametrize(
    "response",
    [
        "<answer>12</answer>",
        "<think>3 * 4 = 12</think>\n<answer>\n12\n</answer>",
        "<answer>The answer is 12</answer>",
        "<answer>$12$</answer>",
        "<answer>12. I hope it is correct.</answer>",
        "<ANSWER> 12 </ANSWER>",
        "<answer>\nFirst 5 + 7.\nSo the total is 12.\n</answer>",
        "<answer>\\boxed{12}</answer>",
        "<answer>12</answer>\n<|im_end|>",
    ],
)
def test_an_answer_tag_is_read_as_the_answer(grader, response):
    r = grader.grade(response, "12")
    assert r.correct, (response, r)


@pytest.mark.parametrize(
    "response",
    [
        "<answer>12",  # cut off inside the tag: no answer, never an earlier value
        "<answer></answer>",
        "The sum is 12. <answer>",
        "<think><answer>12</answer></think>",  # inside the reasoning
    ],
)
def test_an_unclosed_empty_or_reasoning_answer_tag_is_no_answer(grader, response):
    assert grader.grade(response, "12").reason == "no_answer"


def test_a_box_wins_over_an_answer_tag_as_docs_grading_orders_them():
    assert extract_final_answer("<answer>13</answer> so \\boxed{12}").answer == "12"


def test_an_answer_tag_wins_over_an_answer_line():
    ext = extract_final_answer("The answer is 13.\n<answer>12</answer>")
    assert (ext.answer, ext.method) == ("12", "answer_tag")


def test_a_copy_of_the_question_in_an_answer_tag_is_wrong(grader):
    r = grader.grade("<answer>\\frac{10}{2}</answer>", "5", question="Simplify $\\frac{10}{2}$.")
    assert not r.correct and "restates" in r.detail


@pytest.mark.parametrize(
    "response",
    [
        "\\boxed{12}. Or maybe 13.",
        "\\boxed{12}, although it could also be 13",
        "I get \\boxed{12}, or maybe \\boxed{13}",
        "The answer is \\boxed{12}. Alternatively, \\boxed{13}",
        "\\boxed{12}. Or maybe thirteen.",
        "<answer>12</answer> Or maybe 13.",
        "<answer>12. Or maybe 13</answer>",
        "The answer is 12. Or maybe 13.",
    ],
)
def test_a_hedge_after_any_answer_format_does_not_pay_for_either_value(grader, response):
    for gold in ("12", "13"):
        r = grader.grade(response, gold)
        assert not r.correct and r.reason == "mismatch", (response, gold, r)


@pytest.mark.parametrize(
    "response, gold",
    [
        ("\\boxed{12}. I hope it is correct.", "12"),
        ("$\\boxed{12}$. Either way, it's 12.", "12"),
        ("\\boxed{12}. Alternatively, we can check that 3 \\times 4 = 12.", "12"),
        ("\\boxed{12}. Alternatively, \\boxed{12}", "12"),
        ("\\boxed{12}. Maybe I erred. Redo: 6 + 7 = 13, so \\boxed{13}", "13"),  # a correction, not a hedge
        ("\\boxed{12}. Wait, no. \\boxed{13}", "13"),
        ("\\boxed{12}\n\nTo check: 3 groups of 4 make 12.", "12"),
        ("<answer>12</answer> I hope it is correct.", "12"),
    ],
)
def test_words_after_an_answer_that_offer_no_other_value_still_pay(grader, response, gold):
    r = grader.grade(response, gold)
    assert r.correct, (response, r)

"""The commitment rule (issue 32): a response is paid only for exactly one final value it commits to.

Text after the final answer that offers another value as a possible answer (a hedge, in any
wording) leaves the response committed to none of them; a value the response names as rejected
is never its answer. docs/grading.md states the rule with these examples.
"""

from __future__ import annotations

import pytest

from reasoning_env.grading import Grader
from reasoning_env.grading.extract import extract_final_answer


@pytest.fixture(scope="module")
def grader():
    return Grader(timeout_s=2.0)


# Hedges in wordings the opener-word rule of round two did not cover: another value offered by a
# modal ("could", "might"), in parentheses, after a dash, as the subject of "is also possible",
# after "not sure", "alternatively" with a bare number, and the same after every answer format.
HEDGED = [
    "\\boxed{12}. It could also be 13.",
    "\\boxed{12} (maybe 13)",
    "\\boxed{12} — or perhaps 13",
    "\\boxed{12}. 13 is also possible.",
    "\\boxed{12}. I'm not sure; it might be 13.",
    "\\boxed{12}. Alternatively, the answer could be 13.",
    "$\\boxed{12}$ (though 13 might also work)",
    "\\boxed{12}\n\nHmm, it may be 13 instead.",
    "So the total is \\boxed{12}, possibly 13 if we count the last day.",
    "\\boxed{12}. Then again, the answer might actually be thirteen.",
    "\\boxed{12}. But 13 is also a valid answer.",
    "\\boxed{12}. 13 would be plausible too.",
    "\\boxed{12}, or it could be \\boxed{13}.",
    "\\boxed{12}. It might also be \\boxed{13}.",
    "\\boxed{12}. \\boxed{13} is also possible.",
    "The answer is 12.\nIt could also be 13.",
    "Final Answer: 12\n(maybe 13)",
    "<answer>12</answer>\nI'm not sure, it might be 13.",
    "#### 12\nPossibly 13.",
]


@pytest.mark.parametrize("response", HEDGED)
def test_a_response_offering_another_value_after_its_answer_is_paid_for_neither(grader, response):
    for gold in ("12", "13"):
        r = grader.grade(response, gold)
        assert not r.correct and r.reason == "mismatch", (response, gold, r)


@pytest.mark.parametrize(
    "response", ["\\boxed{\\frac{1}{2}}, or 0.5", "The answer is $\\frac12$.\nIt could also be written 0.50."]
)
def test_the_same_value_offered_in_another_form_is_no_hedge(grader, response):
    assert grader.grade(response, "\\frac12").correct, response


def test_a_hedged_answer_says_so_and_quotes_the_hedge(grader):
    r = grader.grade("\\boxed{12}. I'm not sure; it might be 13.", "12")
    assert "hedged" in r.detail and "it might be 13" in r.detail


@pytest.mark.parametrize(
    "response",
    [
        "\\boxed{12}. Alternatively, we can check that 3 \\times 4 = 12.",
        "\\boxed{12}. We could also check it with 3 groups of 4.",
        "\\boxed{12}. Maybe 3 \\times 4 = 12 makes it clearer.",
        "\\boxed{12}. It might help to note that 5 + 7 = 12.",
        "\\boxed{12}. Either way, it's 12.",
        "\\boxed{12}. Perhaps one more check: 24 / 2 = 12.",
        "\\boxed{12}\n\nThis could be verified in 2 ways, both giving 12.",
        "\\boxed{12}. It could also be written as 12.0.",
        "\\boxed{12} (or \\boxed{12.0})",
        "\\boxed{12}, or perhaps 1.2 \\times 10^1 in scientific notation.",
        "\\boxed{12}, not 13.",
        "\\boxed{12}. 13 is not possible, since 13 is odd.",
        "The answer is 12.\nMaybe I should double check: 4 + 8 = 12.",
        "<answer>12</answer> We could also count 6 pairs.",
        # MATH-500 solutions: a list joined by "or", a coefficient in an expression after "or"
        "So $\\boxed{12}$ has a remainder of 1 when divided by 2, 3, 4, or 5.",
        "So $n = \\boxed{12}$ works, since $2n^2 = 288$, or $108n(n-1) < 6^n$ fails.",
        "\\boxed{12}\n\n```python\nx = 3 * 4\nprint(x)  # 12\n```",
    ],
)
def test_words_after_an_answer_that_propose_no_other_value_keep_it_paid(grader, response):
    r = grader.grade(response, "12")
    assert r.correct, (response, r)


@pytest.mark.parametrize(
    "response",
    [
        "\\boxed{12}, not \\boxed{13}",
        "\\boxed{12}; \\boxed{13} is wrong",
        "\\boxed{12} rather than \\boxed{13}",
        "\\boxed{12}, and the answer is not \\boxed{13}.",
        "\\boxed{12} (\\boxed{13} is incorrect)",
        "\\boxed{12}. Note that \\boxed{13} isn't the answer.",
        "$\\boxed{12}$ instead of $\\boxed{13}$",
    ],
)
def test_a_box_named_as_rejected_is_never_the_answer(grader, response):
    assert grader.grade(response, "12").correct, response
    r = grader.grade(response, "13")
    assert not r.correct, (response, r)


@pytest.mark.parametrize(
    "response",
    [
        "The answer is not \\boxed{12}.",
        "\\boxed{12} is wrong.",
        "It is definitely not $\\boxed{12}$",
    ],
)
def test_a_response_whose_only_box_is_rejected_has_no_answer(grader, response):
    r = grader.grade(response, "12")
    assert not r.correct and r.reason == "no_answer", (response, r)


def test_a_rejected_box_before_a_correction_leaves_the_correction():
    ext = extract_final_answer("\\boxed{12} is wrong. The answer is \\boxed{13}.")
    assert (ext.answer, ext.hedge) == ("13", None)


@pytest.mark.parametrize(
    "response", ["\\boxed{12} / \\boxed{13}", "\\boxed{12}/\\boxed{13}", "$\\boxed{12}$ / $\\boxed{13}$"]
)
def test_boxes_separated_by_a_slash_are_alternatives_not_one_answer(grader, response):
    for gold in ("12", "13"):
        assert not grader.grade(response, gold).correct, (response, gold)


@pytest.mark.parametrize(
    "response",
    [
        "The answer is 12.\n" + "maybe 3 or 4, " * 70_000,  # a 1 MB answer line: 1.1 s before
        "\\boxed{12}" + " or maybe 13." * 80_000,
        "\\boxed{1} is wrong. " * 50_000,
        "\\boxed{12} " + "1 " * 500_000,
    ],
    ids=["long-answer-line", "hedges", "rejected-boxes", "numbers"],
)
def test_the_commitment_rule_reads_a_bounded_window_of_a_megabyte_response(grader, response):
    r = grader.grade(response, "12")
    assert r.time_s < 0.5, r

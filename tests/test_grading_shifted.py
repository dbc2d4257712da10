"""An answer that is the gold plus a nonzero number (``(2,4)+9`` for ``(2,4)``) is a mismatch
decided without math-verify (reasoning_env/grading/shifted.py), and only where no shift can leave
the gold unchanged. Golds are real ones: the labelled cases of ../shared/cases/grading_cases.jsonl
(ids in the comments) and MATH-500's (the benchmark's wrong answers to them were such sums, and
math-verify spent 20-300 ms of sympy on each)."""

from __future__ import annotations

import pytest

from reasoning_env.grading import Grader

# Settled by the rule: tuples, intervals, finite sets, and "x in S" / "D = S" of them.
DECIDED = [
    "(2,4)",  # MATH-500
    "(8,-2)",  # MATH-500
    "(-\\infty, 0]",  # MATH-500: one finite end is enough for an interval
    "(5,\\infty)",  # MATH-500
    "\\left[ \\frac{\\pi^2}{8}, \\frac{5 \\pi^2}{4} \\right]",  # MATH-500 (280 ms of sympy)
    "\\left( 3, \\frac{\\pi}{2} \\right)",  # case qwen29-left-right
    "(1,\\frac{9}{2})",  # case mv2-tuple-mixed
    "(1,-16,-4,43)",  # MATH-500: a 4-tuple
    "\\{1,2,3\\}",  # case fmt-set-order
    "\\{1\\pm\\sqrt{5},-2\\}",  # MATH-500: a finite set
    "x \\in [-2,7]",  # MATH-500: membership
    "D = (0, 1)",  # case mv14-eq-interval: an assignment of an interval
]


@pytest.fixture(scope="module")
def fast() -> Grader:
    """A grader that never asks math-verify: what it leaves undecided says "undecided"."""
    return Grader(use_worker=False)


@pytest.mark.parametrize("gold", DECIDED)
@pytest.mark.parametrize("added", ["+7", " + 9", "-2", "- 0.5"])
def test_the_gold_plus_a_nonzero_number_is_a_mismatch_settled_without_math_verify(
    fast: Grader, gold: str, added: str
) -> None:
    result = fast.grade(f"So the answer is $\\boxed{{{gold}{added}}}$.", gold)
    assert result.correct is False
    assert result.reason == "mismatch"
    assert result.detail.startswith("the gold "), result.detail


def test_the_gold_written_another_way_plus_a_number_is_settled_too(fast: Grader) -> None:
    # the part before "+ 3" is the gold on the fast path, not as text
    result = fast.grade("\\boxed{\\left(2, \\frac{8}{2}\\right) + 3}", "(2,4)")
    assert (result.reason, result.detail[:9]) == ("mismatch", "the gold ")


@pytest.mark.parametrize(
    "answer, gold, why",
    [
        ("(1,3)+1", "(2,4)", "looks like a tuple plus a number, but its tuple is not the gold"),
        ("(3,4)+1", "(2,4)", "another tuple plus a number"),
        ("(2,4)+0", "(2,4)", "adding zero changes nothing"),
        ("(2,4)+0.0", "(2,4)", "adding zero changes nothing"),
        ("(-\\infty,\\infty)+1", "(-\\infty,\\infty)", "the real line shifted is itself"),
        ("\\text{even}+6", "\\text{even}", "the even numbers shifted by 6 are the even numbers"),
        ("\\text{east}+4", "\\text{east}", "a word may name a set: words are left alone"),
        (
            "(-\\infty,-5]\\cup[5,\\infty)+1",  # case lm4142-ft-infty's gold
            "(-\\infty,-5]\\cup[5,\\infty)",
            "a union shifted in its last part only can be itself",
        ),
    ],
)
def test_sums_the_rule_cannot_settle_are_left_to_math_verify(fast: Grader, answer: str, gold: str, why: str) -> None:
    result = fast.grade(f"\\boxed{{{answer}}}", gold)
    assert result.detail.startswith("undecided"), f"{why}: {result.detail}"


@pytest.mark.parametrize(
    "answer, gold",
    [
        ("(3, \\frac{\\pi}{2})", "\\left( 3, \\frac{\\pi}{2} \\right)"),  # case qwen29-left-right
        ("(1,4.5)", "(1,\\frac{9}{2})"),  # case mv2-tuple-mixed
        ("\\{3, 1, 2\\}", "\\{1,2,3\\}"),  # case fmt-set-order
    ],
)
def test_tuple_and_set_answers_equal_to_the_gold_stay_right(fast: Grader, answer: str, gold: str) -> None:
    result = fast.grade(f"\\boxed{{{answer}}}", gold)
    assert result.correct is True, result


def test_a_tuple_plus_a_number_that_is_not_the_gold_still_goes_to_math_verify() -> None:
    grader = Grader(timeout_s=10.0)
    grader.warm_up(wait_s=60.0)
    result = grader.grade("\\boxed{(1,3)+1}", "(2,4)")
    assert (result.reason, result.detail) == ("mismatch", "math-verify")

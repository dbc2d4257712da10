"""False positives, hedges and slow grades found by red-teaming the grader after issue 14.

Each row is ``(response, gold, expected)``: whole model responses as Qwen-, Llama- and
Minerva-style models write them, against golds of the kinds in MATH-500 and GSM8K. Every
``False`` row was graded correct before its fix (a false positive: an answer a careful human
grader marks wrong); the ``True`` rows pin the right answers next to it that must stay right.
The grader runs with its worker, so a row the fast path leaves undecided is checked against
math-verify's verdict too. docs/grading.md states each rule with an example.
"""

from __future__ import annotations

import pytest
from grading_responses import check_row, flatten, llama, minerva, qwen, row_ids, warm_grader

from reasoning_env.grading import Grader

CASES = {
    # A letter or constant after a number is mathematics, not a unit to drop: 3\mathrm{i} is the
    # imaginary number 3i, \mathbf{i}/\mathbf{j} are unit vectors; M is not metres.
    "math-symbols-are-not-units": [
        (qwen("Multiplying out, the product is purely imaginary:", "3\\mathrm{i}"), "3", False),
        (qwen("So the sum of the roots is", "3 + 4\\mathrm{i}"), "7", False),
        (llama("Collecting the real and imaginary parts,", "6 - 5\\mathrm{i}"), "1", False),
        (qwen("The vector is", "4\\mathbf{j}"), "4", False),
        (qwen("The velocity is", "3\\mathbf{v}"), "3", False),
        (qwen("So the limit is", "2\\mathrm{e}"), "2", False),
        (qwen("So the area is", "3\\text{ pi}"), "3", False),
        (llama("The company earns", "5\\,\\mathrm{M}"), "5", False),
        # the same answers are right for the values they write
        (llama("Collecting the real and imaginary parts,", "6 - 5\\mathrm{i}"), "6-5i", True),
        (qwen("So the limit is", "2\\mathrm{e}"), "2e", True),
        (qwen("The rod is", "5\\,\\mathrm{m}"), "5", True),
        (qwen("The time taken is", "12\\,\\mathrm{s}"), "12", True),
        (qwen("The jug holds", "3\\text{ L}"), "3", True),
    ],
    # Words after a number that scale it, flip its sign or state a bound are kept, so the answer
    # counts only as an exact match.
    "meaning-words-after-a-number": [
        (qwen("The population is", "5\\text{ lakh}"), "5", False),
        (qwen("The budget is", "5\\text{ crore}"), "5", False),
        (qwen("The count is", "5\\text{ quintillion}"), "5", False),
        (qwen("The store's result was", "20 \\text{ dollars loss}"), "20", False),
        (qwen("The account shows", "5\\text{ deficit}"), "5", False),
        (llama("The bus can carry", "5\\text{ at most}"), "5", False),
        (llama("She needs", "5\\text{ at least}"), "5", False),
        (qwen("The number of tables is", "5\\text{ maximum}"), "5", False),
        (qwen("The value is", "5\\text{ ish}"), "5", False),
        (qwen("The concentration is", "5\\text{ per mille}"), "5", False),
        (minerva("Estimating.", "The final answer is 48 in most cases."), "48", False),
        # units and count nouns are still dropped
        (qwen("The trip takes", "5\\text{ min}"), "5", True),
        (qwen("The distance is", "20 \\text{ miles per hour}"), "20", True),
        (qwen("She buys", "5\\text{ more apples}"), "5", True),
    ],
    # A box around other boxes is the answer they are part of: the outer box holds a list of
    # guesses, not the inner value. More boxes than any answer has are a list of guesses too.
    "nested-and-many-boxes": [
        ("Checking both candidates: $\\boxed{19, \\boxed{9}}$.", "9", False),
        ("So the answer is $\\boxed{\\boxed{9}, 19}$.", "9", False),
        ("So the answer is $\\boxed{\\boxed{12}}$, $\\boxed{2}$.", "2", False),
        (
            "It is one of " + ", ".join(f"$\\boxed{{{i}}}$" for i in range(1, 18)) + ".",
            ",".join(str(i) for i in range(2, 18)),
            False,
        ),
        ("So the answer is $\\boxed{\\boxed{9}}$.", "9", True),
        ("So the answer is $\\boxed{\\boxed{12}}$, $\\boxed{2}$.", "12, 2", True),
        ("So $\\boxed{\\boxed{1}, \\boxed{2}}$.", "1, 2", True),
        ("First $\\textbf{\\boxed{3}}$ is a step; the answer is $\\textbf{\\boxed{7}}$.", "7", True),
    ],
    # Named values stand for a tuple only in its conventional order, and several values of one
    # variable are never a point, nor values of several names.
    "names-and-tuples": [
        (qwen("Solving the system,", "y = 2, x = 3"), "(2,3)", False),  # for (x, y) this is (3, 2)
        ("So $y = \\boxed{2}$ and $x = \\boxed{3}$.", "(2,3)", False),
        (qwen("Reordering the unknowns,", "(y,x)=(2,3)"), "(2,3)", False),
        (qwen("Checking both cases.", "m=2,n=3; n=5,m=3"), "(2,3),(5,3)", False),
        (qwen("The roots are", "x = 2, 3"), "(2,3)", False),
        (qwen("The roots are", "x=2 \\text{ or } x=3"), "(2,3)", False),
        ("So $x = \\boxed{2}$ and $x = \\boxed{3}$.", "(2,3)", False),
        (qwen("The roots are", "x=2, x=3"), "x=2, y=3", False),
        (qwen("The roots are", "x=2, 3"), "x=2, y=3", False),
        (qwen("So", "(a,b) = [4,1]"), "(4,1)", False),
        # conventional orders still stand for the tuple; roots still match a list of roots
        (qwen("Solving the system,", "x = 3, y = 2"), "(3,2)", True),
        (qwen("So", "(a, b) = (4, 1)"), "(4,1)", True),
        (
            qwen("In spherical coordinates,", "(\\rho,\\theta,\\phi) = (2, \\pi, \\frac{\\pi}{4})"),
            "\\left(2, \\pi, \\frac{\\pi}{4}\\right)",
            True,
        ),
        (
            qwen("In polar coordinates,", "r = 3, \\theta = \\frac{\\pi}{2}"),
            "\\left( 3, \\frac{\\pi}{2} \\right)",
            True,
        ),
        (qwen("So", "\\alpha = 1, \\beta = 2, \\gamma = 3, \\delta = 4"), "(1,2,3,4)", True),
        (qwen("The terms are", "a_1 = 1, a_2 = 2, a_{10} = 3"), "(1,2,3)", True),
        (qwen("The roots are", "x=2, x=3"), "2, 3", True),
        (qwen("Checking both cases.", "m=2,n=3; m=5,n=3"), "(2,3),(5,3)", True),
    ],
    # An answer line is one answer: a Minerva "$...$." line followed by more values, or closing
    # words that change the value, is not; a prose subject that hedges or transforms is not a name.
    "answer-lines": [
        (minerva("Two values fit.", "The final answer is $9$. Another possibility is $19$."), "9", False),
        (minerva("Two values fit.", "The final answer is $9$. Or $19$."), "9", False),
        (minerva("Two values fit.", "The final answer is $12$. Or maybe 13."), "12", False),
        (minerva("Two values fit.", "The final answer is $12$. It could also be $13$."), "12", False),
        (minerva("Counting.", "The final answer is 12. Plus one."), "12", False),
        (minerva("Counting.", "The final answer is 12. Thousand."), "12", False),
        (minerva("Counting.", "The final answer is 12. Just kidding."), "12", False),
        (minerva("Counting.", "The final answer is 12. Possibly thirteen."), "12", False),
        (minerva("Counting.", "It isn't 47; it is 48."), "48", False),
        (minerva("Counting.", "I guess the area is 48."), "48", False),
        (minerva("Counting.", "The area is nearly 48."), "48", False),
        (minerva("Counting.", "The answer minus three is 9."), "9", False),
        (minerva("Counting.", "The result is 12 = 13."), "13", False),  # math-verify read 13
        # the usual closing courtesy, and a value after "is" outside the math, still count
        (minerva("Counting.", "The final answer is $9$. I hope it is correct."), "9", True),
        (minerva("Counting.", "The final answer is 12. I hope it is correct."), "12", True),
        (minerva("Minimising.", "The smallest possible value is $x=5$."), "x=5", True),
        (minerva("Counting.", "The number of ways is $\\binom{8}{3} = 56$."), "56", True),
        (minerva("Counting.", "The area is about 48."), "48", True),
    ],
    # What the fast path cannot grade goes to math-verify, except what math-verify would read one
    # number of: a sentence, an approximation, an answer ending in an operator.
    "not-for-math-verify": [
        (qwen("At least five,", "5\\text{+}"), "5", False),  # "5 or more"
        (qwen("So", "5+"), "5", False),
        (qwen("In base five,", "4210_{5} \\approx 4209_{5}"), "4210_{5}", False),
        (qwen("So", "\\text{the result is } 12 = 13"), "13", False),
        (qwen("Not sure:", "3 \\text{?}"), "3", False),
    ],
    # An inequality is the set it allows: bounds in the wrong order allow nothing.
    "inequalities": [
        (qwen("Both conditions together give", "5 < x < 3"), "(5,3)", False),
        (qwen("Both conditions together give", "5 < 2y < 3"), "(\\frac52,\\frac32)", False),
        (qwen("Both conditions together give", "5 < x < 3"), "\\emptyset", True),
        (qwen("Both conditions together give", "3 < x < 5"), "(3,5)", True),
    ],
    # A false negative of a common format (math-verify accepts it): a function's value at a number.
    "function-values": [
        (qwen("Substituting $x = 3$,", "f(3) = 7"), "7", True),
        (llama("Evaluating the polynomial,", "p(2) = -3"), "-3", True),
        (qwen("Substituting,", "g(-1) = 2(-1)+6 = 4"), "4", True),
        (qwen("Substituting $x = 3$,", "f(3) = 7"), "8", False),
        (qwen("So", "a(3) = 6"), "6", False),  # 3a = 6
        (qwen("So", "f(3) = 2x"), "2x", False),
        (qwen("So", "f(f(3)) = 7"), "8", False),
    ],
}

ROWS = flatten(CASES)


@pytest.fixture(scope="module")
def grader() -> Grader:
    return warm_grader()


@pytest.mark.parametrize("family,response,gold,expected", ROWS, ids=row_ids(ROWS))
def test_redteam_case(grader: Grader, family: str, response: str, gold: str, expected: bool) -> None:
    check_row(grader, family, response, gold, expected)


@pytest.mark.parametrize(
    "answer",
    [
        r"\prod_{k=1}^{3000} \sum_{n=1}^{\infty} \frac{1}{n^2}",  # took 18 s against a 2 s limit
        r"\sum_{a=1}^{5000}\sum_{b=1}^{5000}\sum_{n=1}^{\infty}\frac{1}{n^2}",  # never returned (25M series)
        r"\sum_{k=1}^{5000} k!",  # 0.8 s of exact factorials
        r"\sum_{k=1}^{6000} \binom{6000}{k}",  # 1.3 s
        r"\sum_{k=1}^{30000} \sin(k)",  # 1.6 s
        r"\sum_{k=1}^{20000} x^k",  # 1 s: evaluated at several random points
        r"\sum_{k=1}^{10000} (x+k)^2",
    ],
)
def test_sums_whose_evaluation_is_too_costly_are_refused_by_the_parser(answer: str) -> None:
    """The cost model counts what a term costs (a factorial or sine is dearer than a sum), the
    series nested in a sum, and the several points an answer with variables is evaluated at
    (values.MAX_SUM_WORK): these go to math-verify, which is killed at the deadline."""
    from reasoning_env.grading.latex import SUMS_TOO_LONG, ParseError, parse_answer

    with pytest.raises(ParseError, match=SUMS_TOO_LONG):
        parse_answer(answer)


def test_a_series_nested_in_a_sum_returns_within_the_limit() -> None:
    grader = Grader(timeout_s=2.0, use_worker=False)
    result = grader.grade(r"\boxed{\prod_{k=1}^{3000} \sum_{n=1}^{\infty} \frac{1}{n^2}}", "5")
    assert result.correct is False and result.time_s < 2.0, result


def test_several_boxes_whose_sums_together_are_too_long_are_not_graded_one_by_one() -> None:
    """Each box fits the sum budget, all of them do not: grading each would cost their sum."""
    boxes = [rf"\boxed{{\sum_{{{k}=1}}^{{1000}} (\sin^2 {k} + \cos^2 {k})}}" for k in "jkmn"]
    result = Grader(timeout_s=2.0, use_worker=False).grade("So " + ", ".join(boxes) + ".", "1000")
    assert result.correct is False and "too long to grade each" in result.detail, result


def test_long_exact_sums_fall_back_to_numeric_evaluation() -> None:
    """A sum whose exact terms grow past values.MAX_SUM_EXACT_TERM_BITS is evaluated at 256
    bits instead (still decided; ~20 ms instead of ~1 s for 5000 exact powers)."""
    result = Grader(use_worker=False).grade(r"\boxed{\sum_{k=1}^{5000} k^{5000}}", "5")
    assert result.correct is False and result.detail == "different numbers", result


def test_the_worker_gets_the_limit_less_the_time_to_kill_it() -> None:
    """A worker past its deadline is killed and reaped before verify() returns (10-60 ms on the
    loaded VM): the grader keeps that margin inside timeout_s (grades took 2.01-2.06 s at 2 s)."""
    from reasoning_env.grading.grader import KILL_MARGIN_S

    class RecordingPool:
        def __init__(self) -> None:
            self.timeouts: list = []

        def verify(self, pred: str, gold: str, timeout_s: float) -> tuple:
            self.timeouts.append(timeout_s)
            return "timeout", "killed"

    pool = RecordingPool()
    result = Grader(timeout_s=2.0, pool=pool).grade(r"\boxed{\int_0^1 2x\,dx}", "1")
    assert result.reason == "timeout" and len(pool.timeouts) == 1
    assert pool.timeouts[0] <= 2.0 - KILL_MARGIN_S
    Grader(timeout_s=0.2, pool=pool).grade(r"\boxed{\int_0^1 2x\,dx}", "1")
    assert 0 < pool.timeouts[1] <= 0.2 - 0.02  # a tenth of a short limit


def test_factorials_and_binomials_of_non_real_numbers_are_undefined() -> None:
    """Complex Gamma costs ~5 ms at 256 bits (a series with an (i)! factor took 1.2 s): no
    answer needs it, so it is undefined here, like a factorial of a negative integer."""
    from reasoning_env.grading.latex import parse_answer
    from reasoning_env.grading.values import EvalError, num_context, numeric_value

    for text in ("(1+i)!", r"\binom{2+i}{3}", r"\sum_{n=1}^{\infty} \frac{8}{n^4} (i)!"):
        with pytest.raises(EvalError):
            numeric_value(parse_answer(text), {}, num_context())


@pytest.mark.parametrize(
    "text",
    [
        "Final Answer: 12" + ". a" * 50_000 + " 5",  # every sentence end tested its whole rest: 11 s per 100 KB
        "Final Answer: The value is $=" + "a" * 200_000 + "<$",
    ],
    ids=["many-closing-sentences", "long-prose-chain"],
)
def test_answer_lines_are_read_in_linear_time(text: str) -> None:
    import time

    from reasoning_env.grading import extract_final_answer

    t0 = time.perf_counter()
    extract_final_answer(text)
    assert time.perf_counter() - t0 < 2.0


# --------------------------------------------------------------------------- restating the question
# Copying an expression of the question into the box: MATH-500 had 31 problems where it paid.
RESTATE = [
    ("Compute $513^2 - 487^2$.", "513^2 - 487^2", "26000", False),
    ("Compute $\\dbinom{31}{28}$.", "\\dbinom{31}{28}", "4495", False),
    ("Simplify $\\sqrt{242}$.", "\\sqrt{242}", "11\\sqrt2", False),
    ("Express $\\frac{9}{2}$ as a decimal.", "\\frac{9}{2}", "4.5", False),
    ("Evaluate $99^2+99+1$ in your head.", "99^2 + 99 + 1", "9901", False),
    ("Solve $441+2(21)(19)+361=x$.", "441+2(21)(19)+361", "1600", False),  # a side of the equation
    ("Compute $513^2 - 487^2$.", "26000", "26000", True),
    ("Compute $513^2 - 487^2$.", "(513-487)(513+487)", "26000", True),  # work shown, not a copy
    ("Which is larger, $\\frac{3}{4}$ or $0.7$?", "\\frac{3}{4}", "\\frac34", True),  # the gold itself
    ("What is $2 + 3$?", "5", "5", True),
]


@pytest.mark.parametrize("question,answer,gold,expected", RESTATE)
def test_a_copy_of_the_questions_expression_is_not_an_answer(
    question: str, answer: str, gold: str, expected: bool
) -> None:
    grader = Grader(use_worker=False)
    response = qwen("Working it out,", answer)
    result = grader.grade(response, gold, question=question)
    assert result.correct is expected, result
    assert grader.grade(response, gold).correct is True  # without the question it is a value match


def test_the_environment_grades_with_the_question() -> None:
    from reasoning_env import EnvConfig, ReasonBudgetAction, ReasoningEconomicsEnv
    from reasoning_env.questions import Question
    from reasoning_env.sources import PoolSet

    q = Question("copy-0", "Compute $513^2 - 487^2$.", "26000", "T0", "test", difficulty=1)
    pools = PoolSet(
        pools={"T0": (q,)}, sources_used=({"source": "test", "used": "test", "questions": 1, "reason": None},)
    )
    env = ReasoningEconomicsEnv(EnvConfig.build(sources=["builtin"], num_questions=1), pools=pools)
    for answer, right in (("513^2 - 487^2", False), ("26000", True)):
        env.reset(seed=1, total_budget=5000)
        obs = env.step(ReasonBudgetAction(response=f"So \\boxed{{{answer}}}."))
        assert obs.last_step.correct is right, obs.last_step


def test_trl_rewards_grade_with_the_prompt() -> None:
    from reasoning_env.rewards.trl import steps_from_completions

    batch = steps_from_completions(
        ["So \\boxed{513^2 - 487^2}.", "So \\boxed{26000}."],
        prompts=[[{"role": "user", "content": "Compute $513^2 - 487^2$."}]] * 2,
        tokens=[10, 10],
        answer=["26000", "26000"],
    )
    assert list(batch.correct) == [False, True]

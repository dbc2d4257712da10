"""The answer formats of issue 14, graded from whole model responses as Qwen-, Llama- and
Minerva-style models write them: right answers accepted, near misses and their adversarial
neighbours rejected (a false positive is worse than a false negative).

Each row is ``(response, gold, expected)``. The grader runs with its worker, so a row that the
fast path leaves undecided is also checked against math-verify's verdict.
"""

from __future__ import annotations

import pytest
from grading_responses import check_row, flatten, llama, minerva, qwen, row_ids, warm_grader

from reasoning_env.grading import Grader, extract_final_answer

FAMILIES = {
    "named-value": [
        (qwen("Solving the system gives $a = 4$ and $b = 1$.", "(a,b)=(4,1)"), "(4,1)", True),
        (qwen("Solving the system gives $a = 4$ and $b = 1$.", "(a, b) = (4, 1)"), "(a,b)=(4,1)", True),
        (llama("The pair is $(4,1)$.", "(4,1)"), "(a,b)=(4,1)", True),
        (qwen("By the distance formula, $|PQ| = \\sqrt{4} = 2$.", "|PQ|=2"), "2", True),
        (llama("So $PQ = 2$.", "2"), "|PQ| = 2", True),
        (
            qwen("By the angle bisector theorem the ratio is", "\\frac{AM}{MB}=\\frac{2}{\\sqrt3}"),
            "\\frac{2\\sqrt{3}}{3}",
            True,
        ),
        (qwen("Both segments follow from the similar triangles.", "PQ=3, RS=7"), "3, 7", True),
        (qwen("Checking both cases of $m$ gives two pairs.", "m=2,n=3; m=5,n=3"), "(2,3),(5,3)", True),
        (llama("The angle at $B$ is a third of $90^\\circ$.", "\\angle ABC = 30^\\circ"), "30", True),
        # adversarial neighbours
        (qwen("Solving the system gives $a = 4$ and $b = 1$.", "(a,b)=(4,1)"), "(1,4)", False),
        (qwen("Solving gives $a = 1$, $b = 4$.", "(a,b)=(1,4)"), "(b,a)=(1,4)", False),
        (llama("The pair is $(1,4)$.", "(1,4)"), "(a,b)=(4,1)", False),
        (qwen("By the distance formula,", "|PQ|=3"), "2", False),
        (qwen("So the ratio is", "\\frac{AM}{MB}=\\frac{\\sqrt3}{2}"), "\\frac{2\\sqrt{3}}{3}", False),
        (qwen("Both segments follow.", "PQ=3, RS=8"), "3, 7", False),
        (qwen("Three segments follow.", "PQ=3, RS=7, TU=9"), "3, 7", False),
        (qwen("Only one case works.", "m=2,n=3"), "(2,3),(5,3)", False),
        (qwen("Checking every case.", "m=2,n=3; m=5,n=3; m=1,n=1"), "(2,3),(5,3)", False),
        (qwen("Checking both cases.", "m=2,n=3; m=3,n=5"), "(2,3),(5,3)", False),
        (qwen("Dividing both sides by 2,", "2x=3"), "3", False),  # 2x = 3 says x = 3/2
        (qwen("Subtracting 1,", "x+1=3"), "3", False),
        (llama("Squaring,", "x^2 = 4"), "4", False),
        (llama("The ordered pair is $(3,5)$.", "(3,5)"), "x=5, y=3", False),  # (x, y) in order
    ],
    "equivalent-relations": [
        (qwen("Multiplying by $-1$ flips the inequality.", "-y < -2"), "y > 2", True),
        (llama("We keep the inequality as derived.", "-2y \\geq -4"), "y \\le 2", True),
        (qwen("So $-y < -2$.", "-y < -2"), "(2, \\infty)", True),
        (qwen("The range of $g$ is bounded by its extremes.", "-1 < g(t) < 2"), "(-1,2)", True),
        (llama("Both branches of the absolute value give", "[-5,-2]\\cup[2,5]"), "2 \\le |w| \\le 5", True),
        (qwen("Splitting the absolute value,", "2 \\le |w| \\le 5"), "[-5,-2]\\cup[2,5]", True),
        (qwen("So the distance to 1 is at most 2.", "|x - 1| \\le 2"), "[-1, 3]", True),
        # adversarial neighbours
        (qwen("Multiplying by $-1$,", "-y < -2"), "y < 2", False),
        (qwen("Multiplying by $-1$,", "-y < -2"), "x > 2", False),  # another variable
        (llama("So", "-2y \\geq -4"), "y \\ge 2", False),
        (llama("So", "-2y \\geq -4"), "y < 2", False),
        (qwen("The range is", "-1 < g(t) < 2"), "[-1,2)", False),
        (llama("Both branches give", "(-5,-2)\\cup(2,5)"), "2 \\le |w| \\le 5", False),
        (llama("Only the positive branch:", "[2,5]"), "2 \\le |w| \\le 5", False),
        (qwen("Squaring,", "x^2 < 4"), "(-2,2)", False),  # not linear: outside the subset
    ],
    "chained-equalities": [
        (qwen("Adding the parts: $y = 2+3 = 6 = 9$.", "y = 2+3 = 6 = 9"), "y = 9", True),
        (llama("We get", "t = 4+4 = 3"), "t = 1+2 = 3", True),
        (qwen("Collecting terms,", "x = 5+5+1 = 7 = 11"), "11", True),
        # adversarial neighbours: only the last side is the answer
        (qwen("Adding the parts:", "y = 2+3 = 6 = 9"), "y = 6", False),
        (qwen("So", "y = 9 = 6"), "9", False),
        (llama("We get", "t = 4+4 = 8"), "t = 1+2 = 3", False),
        (qwen("Without a name, a chain is only an equation:", "2+3 = 5"), "5", False),
    ],
    "approx": [
        (qwen("So the probability is two sevenths.", "y = 2/7 \\approx 0.29"), "\\frac27", True),
        (llama("The root is close to seven.", "y \\approx 7"), "7", True),
        (qwen("Numerically,", "x \\approx 0.2857"), "\\frac{2}{7}", True),
        (
            minerva(
                "We compute $\\sqrt{50}$.", "The final answer is $\\sqrt{50} \\approx 7.07$. I hope it is correct."
            ),
            "5\\sqrt{2}",
            True,
        ),
        (qwen("So the area is", "A = 16\\pi \\approx 50.27"), "16\\pi", True),
        # adversarial neighbours
        (llama("Numerically,", "y \\approx 0.35"), "\\frac27", False),  # the approximation of a wrong value
        (qwen("So", "\\frac{2}{7} \\approx 0.35"), "\\frac27", False),  # exact value, wrong approximation
        (qwen("So", "\\frac{3}{7} \\approx 0.43"), "\\frac27", False),
        (qwen("So", "y \\approx 0.29"), "\\frac27", False),  # two digits: too coarse to be 2/7
        (llama("The root is near seven.", "y \\approx 7"), "7.2", False),
        (qwen("Roughly,", "x \\approx 3"), "\\pi", False),
        (qwen("So", "x = 1/3 \\approx 1.3"), "\\frac13", False),
    ],
    "units-in-wrappers": [
        (qwen("The side is twelve centimetres.", "12\\textbf{ cm}"), "12", True),
        (llama("The mass is", "5\\,\\mathrm{kg}"), "5", True),
        (qwen("The length is", "8\\mathbf{ inches}"), "8", True),
        (qwen("The discount is", "25 \\text{ percent}"), "25\\%", True),
        (llama("The rate is", "25 \\textbf{ percent}"), "25\\%", True),
        (qwen("The rate is", "25 \\text{ pct}"), "25\\%", True),
        (minerva("The rate is a quarter.", "The rate is 25 percent."), "25\\%", True),
        (minerva("The rate is a quarter.", "The final answer is 25 per cent. I hope it is correct."), "25\\%", True),
        # adversarial neighbours
        (qwen("The rate is", "26 \\text{ pct}"), "25\\%", False),
        (llama("The length is", "5\\textbf{ m}"), "5\\text{ cm}", False),
        (qwen("In thousands,", "3\\mathbf{ thousand}"), "3", False),
        (qwen("In thousands,", "3\\textbf{ million}"), "3", False),
    ],
    "tuples-and-backslashes": [
        (qwen("The solutions repeat the first pair by symmetry.", "(2,3),(3,2),(2,3)"), "(2,3),(3,2)", True),
        (qwen("Both points share $x = 1$.", "(1, \\pm 2)"), "(1,2),(1,-2)", True),
        (qwen("The two equal points", "(0,0),(0,0)"), "(0,0)", True),
        (llama("So", "12\\\\"), "12", True),
        (qwen("So", "12\\"), "12", True),
        # adversarial neighbours
        (qwen("The solutions", "(2,3),(3,2),(3,3)"), "(2,3),(3,2)", False),
        (qwen("Counting the double root once", "2, 3"), "2, 2, 3", False),  # a repeat in the gold counts
        (qwen("Both points", "(1, \\pm 2)"), "(1,2)", False),
        (llama("So", "13\\\\"), "12", False),
        ("The answer is $\\boxed{12", "12", False),  # truncated: still no answer
    ],
    "prose-answer-lines": [
        (minerva("Trying $k = 1, \\dots, 12$ in turn.", "The smallest $k$ is 12."), "12", True),
        (minerva("Its sides are 6 and 8.", "The area of $PQRS$ is 48. I hope it is correct."), "48", True),
        (
            minerva("Summing the four terms.", "The final answer is 12,000,023. I hope it is correct."),
            "12000023",
            True,
        ),
        (minerva("We try each $n$.", "The largest $n$ is 34."), "34", True),
        (
            minerva("Counting the cases.", "The number of points that could be in the domain of $f(x)$ is 19."),
            "19",
            True,
        ),
        (minerva("Averaging.", "The mean is approximately 0.2857."), "\\frac27", True),
        # adversarial neighbours
        (minerva("Trying each $k$.", "The smallest $k$ is 13."), "12", False),
        (minerva("Trying each $k$.", "The smallest $k$ is not 12."), "12", False),
        (minerva("Two cases remain.", "$x$ is 5 or $y$ is 12."), "12", False),
        (minerva("Two cases remain.", "The area is either 48 or 50."), "48", False),
        (minerva("Not sure.", "The area is maybe 48."), "48", False),
        (minerva("Two areas.", "The area of $PQRS$ is 48 or 50."), "48", False),
        (minerva("Hedging.", "The final answer is 12. Maybe 13."), "13", False),
        (minerva("Taking it back.", "The final answer is 12. Wait, no."), "12", False),
        (minerva("Taking it back.", "The final answer is 12. That can't be right."), "12", False),
        (minerva("Roughly.", "The mean is approximately 0.29."), "\\frac27", False),
    ],
    "several-boxes": [
        ("The two solutions are $\\boxed{(1,4)}$ and $\\boxed{(3,5)}$.", "(1,4),(3,5)", True),
        ("So the roots are $x = \\boxed{-3}$ and $x = \\boxed{2}$.", "2,-3", True),
        ("The integers are \\boxed{-2} and \\boxed{1}.", "1,-2", True),
        ("Hence $\\boxed{a=7}, \\boxed{b=1}$.", "a=7, b=1", True),
        ("$\\boxed{1}\\boxed{2}$", "1,2", True),
        (
            "Expressed as a fraction, $d = \\boxed{15\\frac{39}{40}}$, or $\\boxed{\\frac{639}{40}}$ inches.",
            "\\frac{639}{40}",
            True,
        ),
        ("So \\boxed{840}.\n\n**Final Answer**\n\\boxed{840}", "840", True),
        # adversarial neighbours: no extra box, none missing, no hedging
        ("The solutions are $\\boxed{(1,4)}$, $\\boxed{(3,5)}$ and $\\boxed{(2,2)}$.", "(1,4),(3,5)", False),
        ("The solution is $\\boxed{(1,4)}$.", "(1,4),(3,5)", False),
        ("The roots are $\\boxed{-3}$ and $\\boxed{2}$.", "-3", False),
        ("It is one of $\\boxed{12}$, $\\boxed{13}$, or $\\boxed{14}$.", "13", False),
        ("It is one of $\\boxed{12}$, $\\boxed{13}$, or $\\boxed{14}$.", "14", False),
        ("Either $x = \\boxed{3}$ or $x = \\boxed{4}$.", "3", False),
        ("Hence $\\boxed{a=7}, \\boxed{b=1}$.", "a=1, b=7", False),
        ("Maybe $\\boxed{7}$? No - recounting gives $\\boxed{5}$.", "7", False),
    ],
    "number-words": [
        (qwen("Counting the handshakes one by one.", "\\text{five}"), "5", True),
        (minerva("Counting.", "The number of handshakes is twenty-one."), "21", True),
        (qwen("So", "\\text{one hundred and five}"), "105", True),
        (qwen("Counting", "\\text{six}"), "5", False),
        (qwen("Counting", "\\text{five hundred}"), "5", False),
        (qwen("Counting", "\\text{hundred}"), "100", False),  # not a canonical spelling
    ],
    "finite-sums": [
        (qwen("Using the formula for the sum,", "\\sum_{k=1}^{100} k"), "5050", True),
        (qwen("Rationalising each term telescopes:", "\\sum_{k=1}^{99} \\frac{1}{\\sqrt{k}+\\sqrt{k+1}}"), "9", True),
        (qwen("By Euler's result,", "\\sum_{n=1}^{\\infty} \\frac{1}{n^2}"), "\\frac{\\pi^2}{6}", True),
        (llama("By the Leibniz series,", "\\sum_{n=0}^{\\infty} \\frac{(-1)^n}{2n+1}"), "\\frac{\\pi}{4}", True),
        (qwen("A partial sum is not the series:", "\\sum_{k=1}^{10000} \\frac{1}{k^2}"), "\\frac{\\pi^2}{6}", False),
        (qwen("The harmonic series, summed anyway:", "\\sum_{n=1}^{\\infty} \\frac{1}{n}"), "2", False),
        (qwen("Off by one:", "\\sum_{k=1}^{100} k"), "5051", False),
    ],
}

ROWS = flatten(FAMILIES)


@pytest.fixture(scope="module")
def grader() -> Grader:
    return warm_grader()


@pytest.mark.parametrize("family,response,gold,expected", ROWS, ids=row_ids(ROWS))
def test_family(grader: Grader, family: str, response: str, gold: str, expected: bool) -> None:
    check_row(grader, family, response, gold, expected)


def test_each_family_has_both_directions() -> None:
    for family, rows in FAMILIES.items():
        verdicts = {expected for _, _, expected in rows}
        assert verdicts == {True, False}, family


def test_several_boxes_are_one_extraction_with_parts() -> None:
    ex = extract_final_answer("So the roots are $x = \\boxed{-3}$ and $x = \\boxed{2}$.")
    assert ex.parts == ("x = -3", "x = 2") and ex.answer == "x = -3, x = 2" and ex.method == "boxed"
    one = extract_final_answer("So $x = \\boxed{5}$.")
    assert one.answer == "5" and one.parts == ()  # a single box keeps its old meaning


def test_boxes_separated_by_words_are_not_a_group() -> None:
    ex = extract_final_answer("We first guessed $\\boxed{7}$, but recounting gives $\\boxed{5}$.")
    assert ex.answer == "5" and ex.parts == ()


def test_hedges_never_reach_math_verify() -> None:
    """A hedge or negation word is decided before the worker (it might read the number alone)."""
    g = Grader(timeout_s=2.0)
    for text in (
        "Final Answer: The smallest $k$ is not 12.",
        "Final Answer: The area is maybe 48.",
        "\\boxed{\\text{either } 12 \\text{ or } 13}",
    ):
        result = g.grade(text, "12" if "48" not in text else "48")
        assert result.correct is False and result.detail != "math-verify", result
    assert g._pool is None  # the worker pool was never touched

"""Property tests: random LaTeX-ish strings never make the grader raise or hang."""

from __future__ import annotations

import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reasoning_env.grading import Grader, extract_final_answer, normalize_answer
from reasoning_env.grading.compare import compare
from reasoning_env.grading.latex import ParseError, parse_answer

ATOMS = [
    "1",
    "2",
    "0",
    "9",
    "10",
    "0.5",
    ".",
    "3.14",
    "1e5",
    "1,000",
    "-",
    "+",
    "*",
    "/",
    "^",
    "_",
    "!",
    "%",
    "=",
    "<",
    ",",
    ":",
    "|",
    "&",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    " ",
    "x",
    "y",
    "e",
    "i",
    "a",
    "C",
    "pi",
    "sqrt(",
    "exp(",
    "\\pi",
    "\\frac",
    "\\dfrac",
    "\\sqrt",
    "\\{",
    "\\}",
    "\\infty",
    "\\cup",
    "\\pm",
    "\\cdot",
    "\\times",
    "\\le",
    "\\in",
    "\\sin",
    "\\log",
    "\\ln",
    "\\binom",
    "\\overline{3}",
    "\\lfloor",
    "\\rfloor",
    "\\left(",
    "\\right)",
    "^\\circ",
    "\\$",
    "\\%",
    "\\text{",
    "cm",
    "\\begin{pmatrix}",
    "\\end{pmatrix}",
    "\\\\",
    "\\boxed{",
    "\\fbox{",
    "<think>",
    "</think>",
    "The answer is: ",
    "#### ",
    "\n",
    "$",
    "\\mbox{",
    "\\!",
    "\\,",
    "9^{9^{9^9}}",
    "(10^{100})!",
    # issue 14's constructs: sums and series, approximations, names, groups, prose answer lines
    "\\sum_{k=1}^{",
    "\\sum_{n=0}^{\\infty}",
    "\\prod_{i=2}^{",
    "k",
    "n",
    "\\approx",
    "≈",
    ";",
    "\\angle ABC",
    "\\overline{AB}",
    "PQ",
    "\\textbf{",
    "pct",
    " is ",
    " or ",
    " not ",
    "Final Answer: The value of $x$ is ",
    "\\boxed{1} and \\boxed{2}",
    "\\}",
    "twenty-one",
    "(-1)^n",
    "10000}",
]
latexish = st.lists(st.sampled_from(ATOMS), min_size=0, max_size=25).map("".join)
GOLDS = [
    "5",
    r"\frac{1}{2}",
    "(1,2)",
    r"\{1,2\}",
    "x^2+1",
    r"\text{east}",
    "A",
    r"(-\infty, 3]",
    "y=2x+1",
    r"1 \pm \sqrt{2}",
]

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FAST = Grader(timeout_s=0.5, use_worker=False)


@SETTINGS
@given(body=latexish, gold=st.one_of(st.sampled_from(GOLDS), latexish.filter(lambda s: s.strip())))
def test_grade_never_raises_and_is_bounded(body: str, gold: str) -> None:
    for response in (body, "\\boxed{" + body + "}"):
        t0 = time.monotonic()
        result = FAST.grade(response, gold)
        assert time.monotonic() - t0 < 0.5 + 3.0
        assert isinstance(result.correct, bool)
        assert result.reason in ("exact", "numeric", "equivalent", "mismatch", "no_answer", "timeout", "error")


@SETTINGS
@given(text=latexish)
def test_parser_raises_only_parse_errors(text: str) -> None:
    try:
        value = parse_answer(normalize_answer(text))
    except ParseError:
        return
    # a parsed value always compares equal (or undecided) to itself, never "different"
    verdict = compare(value, value, time.perf_counter() + 1.0)
    assert verdict.equal is not False, (text, verdict)


@SETTINGS
@given(text=latexish)
def test_extraction_never_raises(text: str) -> None:
    ex = extract_final_answer(text)
    assert ex.answer is None or isinstance(ex.answer, str)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=latexish, gold=st.sampled_from(GOLDS))
def test_grade_with_worker_is_bounded(body: str, gold: str) -> None:
    grader = Grader(timeout_s=1.0)
    t0 = time.monotonic()
    result = grader.grade("\\boxed{" + body + "}", gold)
    assert time.monotonic() - t0 < 1.0 + 3.0
    assert isinstance(result.correct, bool)

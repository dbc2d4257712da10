"""Issue 32's last families: times of day, a unit glued to its number (``10weeks``), a function
named ``y`` or ``f(x)``, a separator after ``####`` (``####: 55``), and a final answer in inline
math (``so the answer is \\(11\\).``) in the usual wordings. Each was refused (or, for a time's
meridiem, paid) wrongly before its fix; docs/grading.md states each rule."""

from __future__ import annotations

import pytest

from reasoning_env.grading import Grader
from reasoning_env.grading.extract import extract_final_answer


@pytest.fixture(scope="module")
def grader():
    return Grader(timeout_s=5.0)


# ---------------------------------------------------------------------------- times of day
@pytest.mark.parametrize(
    "answer, gold",
    [
        ("3:45 \\text{ p.m.}", "3:45 PM"),
        ("3:45pm", "3:45 \\text{ P.M.}"),
        ("15:45", "3:45 \\text{ p.m.}"),
        ("3:45\\,\\mathrm{pm}", "15:45"),
        ("9\\!:\\!40 \\text{ p.m.}", "9:40 pm"),
        ("\\text{9 AM}", "9:00 \\text{ a.m.}"),
        ("9 a.m.", "9:00"),
        ("12:30 p.m.", "12:30"),
        ("12:15 \\text{ a.m.}", "0:15"),
        ("3:45:30 PM", "15:45:30"),
    ],
)
def test_a_time_of_day_matches_the_same_time_in_any_notation(grader, answer, gold):
    r = grader.grade(f"\\boxed{{{answer}}}", gold)
    assert r.correct, r


@pytest.mark.parametrize(
    "response",
    ["The train arrives at \\boxed{3:45 \\text{ PM}}.", "The answer is 3:45 p.m.", "#### 3:45 PM", "Answer: $15:45$"],
)
def test_a_time_of_day_is_read_in_every_answer_format(grader, response):
    r = grader.grade(response, "3:45 \\text{ p.m.}")
    assert r.correct, (response, r)


@pytest.mark.parametrize(
    "answer, gold",
    [
        ("3:45 \\text{ p.m.}", "3:45 \\text{ a.m.}"),  # both read as 3:45 before: paid
        ("3:45\\,\\mathrm{pm}", "3:45\\,\\mathrm{am}"),
        ("12:00 PM", "12:00 AM"),
        ("3:45 PM", "3:45"),  # a time without a meridiem is on the 24-hour clock
        ("3:45", "3:45 PM"),
        ("3:46 PM", "3:45 PM"),
        ("4:45 PM", "15:45"),
        ("3:45 PM", "\\frac{3}{45}"),
        ("9 PM", "9"),
    ],
)
def test_different_times_of_day_are_different(grader, answer, gold):
    assert not grader.grade(f"\\boxed{{{answer}}}", gold).correct


# ------------------------------------------------------------------ a unit glued to its number
@pytest.mark.parametrize(
    "answer, gold",
    [
        ("10weeks", "10"),
        ("10weeks", "10 \\text{ weeks}"),
        ("12km", "12"),
        ("12km", "12\\text{ km}"),
        ("5dollars", "5"),
        ("7apples", "7"),
        ("3.5hours", "3.5"),
        ("\\$18dollars", "18"),
    ],
)
def test_a_unit_glued_to_its_number_is_a_unit(grader, answer, gold):
    r = grader.grade(f"\\boxed{{{answer}}}", gold)
    assert r.correct, r


@pytest.mark.parametrize("response", ["The answer is 10weeks.", "#### 10weeks", "<answer>10weeks</answer>"])
def test_a_glued_unit_is_read_in_every_answer_format(grader, response):
    r = grader.grade(response, "10")
    assert r.correct, (response, r)


@pytest.mark.parametrize(
    "answer, gold",
    [
        ("3million", "3"),  # a number word changes the number
        ("3thousand", "3"),
        ("3xy", "3"),  # letters that are not a unit are mathematics
        ("2x", "2"),
        ("5m", "5"),  # a single letter glued to a number is a variable
        ("10weeks", "11"),
        ("5km", "5\\text{ m}"),  # known units that differ
    ],
)
def test_glued_words_that_are_not_units_keep_their_meaning(grader, answer, gold):
    assert not grader.grade(f"\\boxed{{{answer}}}", gold).correct


def test_a_glued_unit_does_not_change_a_gold_that_is_a_product():
    assert Grader(timeout_s=5.0).grade("\\boxed{5m}", "5m").correct


# ------------------------------------------------- a function's value named y or f(x)
@pytest.mark.parametrize(
    "answer, gold",
    [
        ("y = 2x+3", "f(x) = 2x+3"),
        ("f(x) = 2x+3", "y = 2x+3"),
        ("y = 3 + 2x", "f(x)=2x+3"),
        ("y = x^2+1", "p(x) = x^2+1"),
        ("h(t) = -16t^2 + 64t", "y = -16t^2+64t"),
        ("g(x) = \\frac{x-3}{2}", "f(x) = \\frac{x-3}{2}"),
    ],
)
def test_a_function_named_y_or_f_of_x_is_the_same_function(grader, answer, gold):
    r = grader.grade(f"\\boxed{{{answer}}}", gold)
    assert r.correct, r


@pytest.mark.parametrize(
    "answer, gold",
    [
        ("y = 2x+4", "f(x) = 2x+3"),
        ("f(x) = 2x+4", "y = 2x+3"),
        ("f(t) = 2t+3", "y = 2x+3"),  # another variable
        ("y = 5", "x = 5"),  # values of different variables stay apart
        ("x = 2y+3", "f(x) = 2x+3"),
        ("f(3) = 9", "y = 9"),  # a value at a number is not a function
    ],
)
def test_different_functions_or_variables_stay_apart(grader, answer, gold):
    assert not grader.grade(f"\\boxed{{{answer}}}", gold).correct


# ------------------------------------------------------------------ a separator after ####
@pytest.mark.parametrize(
    "response",
    [
        "5 + 50 = 55\n####: 55",
        "5 + 50 = 55\n#### : 55",
        "5 + 50 = 55\n####:55",
        "5 + 50 = 55\n#### = 55",
        "5 + 50 = 55\n####: **55**",
        "5 + 50 = 55\n####: $55",
        "5 + 50 = 55\n####： 55",
    ],
)
def test_a_separator_after_the_gsm8k_marker_is_not_the_answer(grader, response):
    r = grader.grade(response, "55")
    assert r.correct, (response, r)
    assert r.time_s < 0.1, r  # decided in the fast path, never sent to math-verify


@pytest.mark.parametrize(
    "response, gold",
    [
        ("####: 54", "55"),
        ("#### -55", "55"),
        ("####: -55", "55"),
        ("####: 55", "-55"),
        ("####: 55. Or maybe 56.", "56"),
    ],
)
def test_the_gsm8k_answer_after_a_separator_keeps_its_value_and_sign(grader, response, gold):
    assert not grader.grade(response, gold).correct


# ------------------------------------------------------------- inline math as the final answer
INLINE_RIGHT = [
    # the reported wording, at the very end, with and without its full stop
    "Adding gives 5 + 6, so the answer is \\(11\\).",
    "Adding gives 5 + 6, so the answer is \\(11\\)",
    "Adding gives 5 + 6, so the answer is \\( 11 \\).\n\n",
    # trailing words, a unit, an exclamation outside the math
    "Adding gives 5 + 6, so the answer is \\(11\\) apples.",
    "Adding gives 5 + 6, so the answer is \\[11\\] apples.",
    "Adding gives 5 + 6. Hence the answer is \\(11\\)!",
    "Adding gives 5 + 6. Hence the answer is $11$!",
    "Adding gives 5 + 6. So the answer is \\(11\\). I hope it is correct.",
    # the answer on the line after its phrase, as a display or a lone span
    "Adding gives 5 + 6. So the answer is:\n\\[\n11\n\\]",
    "Adding gives 5 + 6. So the final answer is:\n\n\\[ 11 \\]\n",
    "Adding gives 5 + 6. So the final answer is:\n\n$$11$$\n",
    "Adding gives 5 + 6. Therefore the answer is:\n\\(11\\)",
    # a closing statement whose value is inline math
    "Adding 5 and 6, the total is \\(11\\).",
    "Adding 5 and 6, the total is $11$.",
    "Adding 5 and 6, the number of apples is \\( 11 \\).",
    # an adverb between the phrase and the value
    "Adding gives 5 + 6. The answer is therefore \\(11\\).",
    "Adding gives 5 + 6. The answer is thus $11$.",
]


@pytest.mark.parametrize("response", INLINE_RIGHT)
def test_an_inline_math_final_answer_is_read_in_the_usual_wordings(grader, response):
    r = grader.grade(response, "11")
    assert r.correct, (response, r)


INLINE_WRONG = [
    ("So the answer is \\(11\\) thousand.", "11"),  # a number word after the math changes it
    ("Hence the answer is \\(11\\)! Or maybe 12.", "11"),  # hedged
    ("Hence the answer is \\(11\\)! Or maybe 12.", "12"),
    ("So the answer is:\n\\[\n11\n\\]\nOr maybe 12.", "11"),
    ("So the answer is:\n\\[\n11\n\\]\nOr maybe 12.", "12"),
    ("Adding 5 and 6, the total is \\(11\\).", "12"),
    ("So the answer is therefore not \\(11\\).", "11"),
    ("The answer is 11!", "11"),  # a bare 11! is a factorial
]


@pytest.mark.parametrize("response, gold", INLINE_WRONG)
def test_inline_math_answers_that_are_wrong_stay_wrong(grader, response, gold):
    assert not grader.grade(response, gold).correct


def test_a_phrase_ending_its_line_takes_only_a_math_line_or_the_last_line():
    # the line after the phrase is work, not an answer: the later #### line is
    ext = extract_final_answer("To find the answer:\nStep 1: 5 + 6 = 11 apples in all\n#### 11")
    assert ext.answer == "11", ext
    assert extract_final_answer("So the final answer is:\n\n**11**").answer == "11"

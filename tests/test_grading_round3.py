"""Issue 32's other families: values past the exact-integer limit, degrees inside trigonometric
functions, scientific notation of a decimal, a box inside trailing code, thousands written with
``~`` or a thin space. Each was paid wrongly or refused wrongly before its fix; docs/grading.md
states each rule."""

from __future__ import annotations

import pytest

from reasoning_env.grading import Grader


@pytest.fixture(scope="module")
def grader():
    g = Grader(timeout_s=5.0)
    g.warm_up(wait_s=90.0)
    return g


@pytest.mark.parametrize(
    "answer, gold",
    [
        ("10^{40000}", "10^{40000}+1"),
        ("10^{40000}+1", "10^{40000}"),
        ("2^{200000}", "2^{200000}-1"),
        ("10^{60} \\cdot \\pi", "10^{60} \\cdot \\pi + 1"),
    ],
)
def test_values_too_large_for_fifty_digits_are_never_equal_by_rounding(grader, answer, gold):
    r = grader.grade(f"\\boxed{{{answer}}}", gold)
    assert not r.correct, r


@pytest.mark.parametrize(
    "answer, gold",
    [("2^{200000}", "4^{100000}"), ("1e999999999", "10^{999999999}"), ("10^{60} \\cdot \\pi", "\\pi \\cdot 10^{60}")],
)
def test_large_values_that_are_equal_stay_equal(grader, answer, gold):
    r = grader.grade(f"\\boxed{{{answer}}}", gold)
    assert r.correct, r


@pytest.mark.parametrize(
    "answer, gold",
    [
        ("\\sin 30^\\circ", "\\frac12"),
        ("\\tan 45^\\circ", "1"),
        ("\\sin 70^\\circ", "\\cos 20^\\circ"),
        ("\\cos(60^{\\circ})", "\\frac{1}{2}"),
        ("\\cos 60°", "0.5"),
        ("2\\sin 30^\\circ \\cos 30^\\circ", "\\frac{\\sqrt3}{2}"),
        ("\\sin^2 45^\\circ", "\\frac12"),
    ],
)
def test_degrees_inside_a_trigonometric_function_are_degrees(grader, answer, gold):
    r = grader.grade(f"\\boxed{{{answer}}}", gold)
    assert r.correct, r


@pytest.mark.parametrize(
    "answer, gold",
    [("\\sin 30^\\circ", "\\sin 30"), ("\\sin 30^\\circ", "\\frac{\\sqrt3}{2}"), ("\\tan 45^\\circ", "\\tan 45")],
)
def test_a_trigonometric_function_of_degrees_is_not_one_of_radians(grader, answer, gold):
    assert not grader.grade(f"\\boxed{{{answer}}}", gold).correct


@pytest.mark.parametrize(
    "answer, gold",
    [
        ("2.314814814815\\times10^{-3}", "\\frac{1}{432}"),
        ("2.3148\\times 10^{-3}", "\\frac{1}{432}"),
        ("1.4142 \\times 10^{2}", "100\\sqrt2"),
        ("3.333\\cdot10^{-1}", "\\frac13"),
        ("2.3148e-3", "\\frac{1}{432}"),
    ],
)
def test_scientific_notation_of_a_decimal_rounds_like_the_decimal(grader, answer, gold):
    r = grader.grade(f"\\boxed{{{answer}}}", gold)
    assert r.correct, r


@pytest.mark.parametrize(
    "answer, gold",
    [
        ("2.3\\times10^{-3}", "\\frac{1}{432}"),
        ("2.3149\\times10^{-3}", "\\frac{1}{432}"),
        ("3.3\\times10^{-1}", "\\frac13"),
    ],
)
def test_scientific_notation_with_too_few_or_wrong_digits_is_wrong(grader, answer, gold):
    assert not grader.grade(f"\\boxed{{{answer}}}", gold).correct


@pytest.mark.parametrize(
    "response",
    [
        "The answer is \\boxed{12}.\n\n```python\nx = 3 * 4\nprint(f'\\\\boxed{{{x}}}')\n```",
        'So \\boxed{12}.\n```python\nresult = 12\nprint("\\\\boxed{" + str(result) + "}")\n```',
        "\\boxed{12}\n\n```\nprint(r'\\boxed{13}')\n```",
        "Answer: \\boxed{12}\n```python\ndef f():\n    return '\\\\boxed{%d}' % n\n```",
    ],
)
def test_a_box_inside_code_after_the_answer_is_code_not_the_answer(grader, response):
    r = grader.grade(response, "12")
    assert r.correct, (response, r)


def test_a_box_inside_code_is_still_an_answer_when_no_box_is_outside(grader):
    assert grader.grade("```\n\\boxed{12}\n```", "12").correct


@pytest.mark.parametrize(
    "answer, gold",
    [
        ("1~000~000", "1000000"),
        ("1\\,000\\,000", "10^6"),
        ("1\\,000\\,000", "1000000"),
        ("1\\;000\\;000", "10^6"),
        ("1\\ 000\\ 000", "1000000"),
        ("12~345.5", "12345.5"),
    ],
)
def test_thousands_written_with_a_tilde_or_a_thin_space_are_one_number(grader, answer, gold):
    r = grader.grade(f"\\boxed{{{answer}}}", gold)
    assert r.correct, r


@pytest.mark.parametrize("answer, gold", [("1\\,00\\,000", "100000"), ("12\\,34", "1234"), ("1~2", "12")])
def test_digit_groups_that_are_not_thousands_are_not_joined(grader, answer, gold):
    assert not grader.grade(f"\\boxed{{{answer}}}", gold).correct

"""Final-answer extraction: one behaviour per test."""

from __future__ import annotations

import time

import pytest

from reasoning_env.grading import grade
from reasoning_env.grading.extract import (
    Extraction,
    extract_final_answer,
    gold_from_boxed,
    gold_from_gsm8k,
    gold_from_metamathqa,
    last_boxed,
    strip_think,
)


def ans(text: str):
    return extract_final_answer(text).answer


def test_nested_braces_in_box_are_matched() -> None:
    assert ans(r"so $\boxed{\frac{1}{2}}$.") == r"\frac{1}{2}"


def test_deeply_nested_box_content() -> None:
    assert ans(r"\boxed{\frac{\sqrt{\frac{1}{2}}}{3}}") == r"\frac{\sqrt{\frac{1}{2}}}{3}"


def test_last_of_several_boxes_wins() -> None:
    assert ans(r"maybe \boxed{7}? no: \boxed{5}") == "5"


def test_fbox_counts_as_a_box() -> None:
    assert ans(r"\boxed{1} then \fbox{2}") == "2"


def test_boxed_with_space_and_single_token() -> None:
    assert ans(r"The answer is \boxed 5.") == "5"


def test_escaped_braces_do_not_close_the_box() -> None:
    assert ans(r"\boxed{\{1, 2\}}") == r"\{1, 2\}"


def test_unclosed_last_box_is_no_answer() -> None:
    # a truncated final answer must not fall back to an earlier (intermediate) box
    ex = extract_final_answer(r"first \boxed{7}, finally \boxed{12")
    assert ex.answer is None and ex.method == "none"


def test_empty_last_box_is_no_answer() -> None:
    assert ans(r"\boxed{3} and \boxed{}") is None


def test_macro_lookalike_is_not_a_box() -> None:
    assert ans(r"\boxedsymbol{3} The answer is: 4") == "4"


def test_metamath_answer_phrase() -> None:
    ex = extract_final_answer("Half of 36 is 18.\nThe answer is: 18")
    assert (ex.answer, ex.method) == ("18", "phrase")


def test_final_answer_phrase_with_bold() -> None:
    assert ans("work...\n\nFinal Answer: **73**") == "73"


def test_bold_answer_label() -> None:
    assert ans("so 8 - 4 = 4.\n\n**Answer:** 4.") == "4"


def test_last_answer_phrase_wins() -> None:
    assert ans("Answer: 7 (first guess)\nRecount.\nAnswer: 5") == "5"


def test_bare_word_answer_without_colon_is_not_a_phrase() -> None:
    assert ans("I answered 5 questions and then stopped") is None


def test_minerva_final_answer_line() -> None:
    # MATH / Minerva few-shot format: the $...$ span, not the closing courtesy sentence
    text = "Final Answer: The final answer is $\\frac{1}{2}$. I hope it is correct."
    assert extract_final_answer(text) == Extraction(r"\frac{1}{2}", "phrase")


def test_minerva_format_grades_correct() -> None:
    result = grade("Final Answer: The final answer is $5$. I hope it is correct.", "5")
    assert result.correct is True and result.extracted == "5", result


def test_gsm8k_marker() -> None:
    ex = extract_final_answer("2+40=42\n#### 42\n and more text after it")
    assert (ex.answer, ex.method) == ("42", "gsm8k")


def test_closing_statement_with_currency() -> None:
    ex = extract_final_answer("Adding everything up, the total cost is $29.00.")
    assert (ex.answer, ex.method) == ("$29.00", "statement")


def test_truncated_trace_has_no_answer() -> None:
    ex = extract_final_answer("Let me compute: 2 + 2 = 4, then 4 * 3 = 12, then 12 +")
    assert ex.answer is None and ex.method == "none"


def test_no_fallback_to_last_number() -> None:
    assert ans("After simplifying, the result is\n9^(9^(9^9))") is None


def test_think_span_is_not_graded() -> None:
    assert ans(r"<think>maybe \boxed{7}</think> The answer is \boxed{5}") == "5"


def test_answer_only_inside_think_is_no_answer() -> None:
    assert ans(r"<think>it is \boxed{7}</think> I am not sure.") is None


def test_unclosed_think_drops_the_rest() -> None:
    assert ans(r"The answer is \boxed{3} <think> hmm \boxed{4}") == "3"


def test_response_with_only_closing_think_tag() -> None:
    assert strip_think("reasoning... </think>final") == "final"


def test_non_string_response_raises_type_error() -> None:
    with pytest.raises(TypeError):
        extract_final_answer(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        "\\boxed{" * 200_000,
        "\\boxedx" * 100_000,
        "{" * 300_000,
        "answer" + " " * 1_000_000 + "x",
        "\\boxed{" + "{" * 100_000 + "1" + "}" * 100_000 + "}",
    ],
    ids=["many-unclosed-boxes", "macro-lookalikes", "open-braces", "long-whitespace", "100k-nesting"],
)
def test_extraction_is_fast_on_adversarial_text(text: str) -> None:
    t0 = time.perf_counter()
    extract_final_answer(text)
    assert time.perf_counter() - t0 < 2.0


def test_gold_helpers() -> None:
    assert gold_from_gsm8k("so 1,000 in all\n#### 1,000") == "1000"
    assert gold_from_metamathqa("Half is 18.\nThe answer is: 18") == "18"
    assert gold_from_boxed(r"so \boxed{\frac{1}{2}}.") == r"\frac{1}{2}"
    assert last_boxed("no box here") is None


def test_answer_phrase_with_two_choices_is_wrong() -> None:
    from reasoning_env.grading import Grader

    r = Grader(use_worker=False).grade("Answer: (A) or (B)", "A")
    assert r.extracted == "(A) or (B)" and r.correct is False, r


def test_everything_before_the_last_closing_think_is_reasoning() -> None:
    """Intended for Qwen3, whose prompt opens the think block: a box before the last
    </think> is reasoning, even after a completed <think>...</think> pair (docs/grading.md)."""
    assert ans(r"\boxed{4} <think>x</think>") is None

"""Whole model responses in the styles graders meet (Qwen, Llama, Minerva), and the check shared by
the tables of labelled rows in ``test_grading_families`` and ``test_grading_redteam``."""

from __future__ import annotations

from reasoning_env.grading import Grader


def qwen(steps: str, boxed: str) -> str:
    """Qwen2.5-Math style: reasoning, then a displayed box."""
    return f"{steps}\n\nTherefore, the final answer is:\n\\[\n\\boxed{{{boxed}}}\n\\]"


def llama(steps: str, boxed: str) -> str:
    """Llama-3 style: numbered steps, then 'The final answer is: $\\boxed{..}$'."""
    return f"## Step 1: Set up\n{steps}\n\n## Step 2: Conclude\nThe final answer is: $\\boxed{{{boxed}}}$"


def minerva(steps: str, line: str) -> str:
    """Minerva / MATH few-shot style: reasoning, then a 'Final Answer:' line."""
    return f"{steps}\nFinal Answer: {line}"


def flatten(table: dict[str, list[tuple[str, str, bool]]]) -> list[tuple[str, str, str, bool]]:
    """``{family: [(response, gold, expected)]}`` flattened to ``(family, response, gold, expected)``."""
    return [
        (family, response, gold, expected) for family, items in table.items() for response, gold, expected in items
    ]


def row_ids(flat: list[tuple[str, str, str, bool]]) -> list[str]:
    """Test ids ``family:index:expected``."""
    return [f"{r[0]}:{i}:{r[3]}" for i, r in enumerate(flat)]


def warm_grader() -> Grader:
    """A grader with its worker started (5 s per grade), so undecided rows reach math-verify."""
    g = Grader(timeout_s=5.0)
    g.warm_up(wait_s=90.0)
    return g


def check_row(grader: Grader, family: str, response: str, gold: str, expected: bool) -> None:
    """The row's verdict is ``expected``, reached within the grader's limit (not a timeout)."""
    result = grader.grade(response, gold)
    assert result.correct is expected, f"{family}: {response[-80:]!r} vs {gold!r}: {result}"
    assert result.reason != "timeout", result

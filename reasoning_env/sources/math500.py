"""MATH-500 (``HuggingFaceH4/MATH-500``, MIT; the PRM800K test subset of MATH).

Rows: ``problem``, ``solution``, ``answer``, ``subject``, ``level`` (1-5), ``unique_id``.
Gold answer: the ``answer`` field (equal to the solution's last ``\\boxed{}``; when ``answer`` is
missing the last box is used). Problem type ``"MATH-500"``; difficulty = ``level``; subject kept.
"""

from __future__ import annotations

from typing import Any

from reasoning_env.grading.extract import gold_from_boxed
from reasoning_env.questions import Question
from reasoning_env.sources.base import (
    HF_OPTIONS,
    LoadContext,
    QuestionSource,
    load_hf_rows,
    register_source,
    require_fields,
)

PROBLEM_TYPE = "MATH-500"


def _level(value: Any) -> Any:
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lower().startswith("level "):
        tail = value.strip()[6:]
        return int(tail) if tail.isdigit() else None
    return None


@register_source
class Math500Source(QuestionSource):
    name = "math500"
    description = "MATH-500 (HuggingFaceH4/MATH-500): competition math with level 1-5 and subject"
    options = dict(HF_OPTIONS)

    def load(self, options: dict[str, Any], ctx: LoadContext) -> list[Question]:
        rows, origin = load_hf_rows(
            source=self.name,
            options=options,
            ctx=ctx,
            hf_id="HuggingFaceH4/MATH-500",
            split="test",
            local_patterns=("math500*.jsonl", "MATH-500*.jsonl", "math500*.parquet"),
        )
        out = []
        for i, row in enumerate(rows):
            require_fields(self.name, row, ("problem", "solution"), origin)
            gold = row.get("answer") or gold_from_boxed(str(row["solution"]))
            if not gold:
                continue
            out.append(
                Question(
                    id=str(row.get("unique_id") or f"math500/{i}"),
                    text=str(row["problem"]),
                    gold_answer=str(gold),
                    problem_type=PROBLEM_TYPE,
                    source=self.name,
                    difficulty=_level(row.get("level")),
                    subject=row.get("subject"),
                    metadata={"solution": str(row["solution"]), "origin": origin},
                )
            )
        return out

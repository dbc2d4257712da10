"""NuminaMath-TIR (``AI-MO/NuminaMath-TIR``, Apache-2.0): rows ``problem``, ``solution``, ``messages``.

Gold answer: the solution's last ``\\boxed{}`` with matched braces (dataset card).
Problem type: ``"NuminaMath-TIR"``. Difficulty: not in the data (``None``).
"""

from __future__ import annotations

import hashlib
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

PROBLEM_TYPE = "NuminaMath-TIR"
FIELDS = ("problem", "solution")


def questions_from_rows(rows: list[dict], *, source: str, origin: str) -> list[Question]:
    """Convert NuminaMath-TIR-schema rows to questions (rows without a boxed answer are skipped).

    Raises:
        SourceError: rows lack the NuminaMath-TIR fields.
    """
    out: list[Question] = []
    for i, row in enumerate(rows):
        require_fields(source, row, FIELDS, origin)
        gold = gold_from_boxed(str(row["solution"]))
        if gold is None:
            continue
        text = str(row["problem"])
        qid = row.get("id") or f"numina_tir/{i}-{hashlib.sha1(text.encode('utf-8')).hexdigest()[:10]}"
        out.append(
            Question(
                id=str(qid),
                text=text,
                gold_answer=gold,
                problem_type=PROBLEM_TYPE,
                source=source,
                difficulty=row.get("difficulty"),
                metadata={"origin": origin},
            )
        )
    return out


@register_source
class NuminaTIRSource(QuestionSource):
    name = "numina_tir"
    description = "NuminaMath-TIR (AI-MO/NuminaMath-TIR): competition problems; gold = last \\boxed{}"
    options = dict(HF_OPTIONS)
    standin = "numina_tir"

    def load(self, options: dict[str, Any], ctx: LoadContext) -> list[Question]:
        rows, origin = load_hf_rows(
            source=self.name,
            options=options,
            ctx=ctx,
            hf_id="AI-MO/NuminaMath-TIR",
            split="train",
            local_patterns=("NuminaMath-TIR*.parquet", "numina_tir*.jsonl", "numina*.parquet", "numina*.jsonl"),
        )
        return questions_from_rows(rows, source=self.name, origin=origin)

"""GSM8K (``openai/gsm8k``, config ``main``, MIT): rows ``question``, ``answer``.

Gold answer: the text after ``#### `` with thousands separators removed (dataset card).
Problem type: ``"GSM8K"``. Difficulty: not in the data (``None``). Default split: ``test``.
"""

from __future__ import annotations

from typing import Any

from reasoning_env.grading.extract import gold_from_gsm8k
from reasoning_env.questions import Question
from reasoning_env.sources.base import (
    HF_OPTIONS,
    LoadContext,
    QuestionSource,
    load_hf_rows,
    register_source,
    require_fields,
)

PROBLEM_TYPE = "GSM8K"


@register_source
class GSM8KSource(QuestionSource):
    name = "gsm8k"
    description = "GSM8K (openai/gsm8k, main): grade-school word problems; gold after '####'"
    options = dict(HF_OPTIONS)

    def load(self, options: dict[str, Any], ctx: LoadContext) -> list[Question]:
        split = options.get("split", "test")
        rows, origin = load_hf_rows(
            source=self.name,
            options=options,
            ctx=ctx,
            hf_id="openai/gsm8k",
            hf_config="main",
            split=split,
            local_patterns=(f"gsm8k_{split}.jsonl", f"gsm8k*{split}*.jsonl", f"{split}.jsonl"),
        )
        out = []
        for i, row in enumerate(rows):
            require_fields(self.name, row, ("question", "answer"), origin)
            gold = gold_from_gsm8k(str(row["answer"]))
            if gold is None:
                continue
            out.append(
                Question(
                    id=f"gsm8k/{split}/{i}",
                    text=str(row["question"]),
                    gold_answer=gold,
                    problem_type=PROBLEM_TYPE,
                    source=self.name,
                    metadata={"solution": str(row["answer"]), "origin": origin},
                )
            )
        return out

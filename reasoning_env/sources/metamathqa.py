"""MetaMathQA (``meta-math/MetaMathQA``, MIT): rows ``query``, ``response``, ``type``, ``original_question``.

Gold answer: the text after the response's last ``The answer is:`` (dataset card convention).
Problem type: the row's ``type`` (8 values, see :data:`METAMATHQA_TYPES`).
Difficulty: not in the data (``None``).
"""

from __future__ import annotations

import hashlib
from typing import Any

from reasoning_env.grading.extract import gold_from_metamathqa
from reasoning_env.questions import Question
from reasoning_env.sources.base import (
    HF_OPTIONS,
    LoadContext,
    QuestionSource,
    SourceError,
    load_hf_rows,
    register_source,
    require_fields,
)

METAMATHQA_TYPES = (
    "GSM_AnsAug",
    "GSM_Rephrased",
    "GSM_SV",
    "GSM_FOBAR",
    "MATH_AnsAug",
    "MATH_Rephrased",
    "MATH_SV",
    "MATH_FOBAR",
)
FIELDS = ("query", "response", "type")


def _row_id(prefix: str, index: int, text: str) -> str:
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:10]
    return f"{prefix}/{index}-{digest}"


def questions_from_rows(rows: list[dict], *, source: str, origin: str, types=None) -> list[Question]:
    """Convert MetaMathQA-schema rows to questions (rows without a final answer are skipped).

    Raises:
        SourceError: rows lack the MetaMathQA fields.
    """
    wanted = set(types) if types else None
    out: list[Question] = []
    for i, row in enumerate(rows):
        require_fields(source, row, FIELDS, origin)
        qtype = str(row["type"])
        if wanted is not None and qtype not in wanted:
            continue
        gold = gold_from_metamathqa(str(row["response"]))
        if gold is None:
            continue
        out.append(
            Question(
                id=str(row.get("id") or _row_id(f"metamathqa/{qtype}", i, str(row["query"]))),
                text=str(row["query"]),
                gold_answer=gold,
                problem_type=qtype,
                source=source,
                difficulty=row.get("difficulty"),
                metadata={"original_question": row.get("original_question"), "origin": origin},
            )
        )
    return out


@register_source
class MetaMathQASource(QuestionSource):
    name = "metamathqa"
    description = "MetaMathQA (meta-math/MetaMathQA): 8 augmented GSM8K/MATH types; gold after 'The answer is:'"
    options = {**HF_OPTIONS, "types": f"Keep only these `type` values (default all 8: {', '.join(METAMATHQA_TYPES)})."}
    standin = "metamathqa"

    def validate(self, options: dict[str, Any]) -> None:
        super().validate(options)
        types = options.get("types")
        if types is not None:
            bad = [t for t in ([types] if isinstance(types, str) else types) if t not in METAMATHQA_TYPES]
            if bad:
                raise SourceError(f"metamathqa: unknown type(s) {bad}; valid types: {list(METAMATHQA_TYPES)}")

    def load(self, options: dict[str, Any], ctx: LoadContext) -> list[Question]:
        rows, origin = load_hf_rows(
            source=self.name,
            options=options,
            ctx=ctx,
            hf_id="meta-math/MetaMathQA",
            split="train",
            local_patterns=("MetaMathQA*.json", "MetaMathQA*.jsonl", "metamathqa*.jsonl", "metamathqa*.json"),
        )
        types = options.get("types")
        types = [types] if isinstance(types, str) else types
        return questions_from_rows(rows, source=self.name, origin=origin, types=types)

"""Any dataset with a field mapping: ``hf`` (a Hub id, a local folder or files) and ``jsonl``.

Options (besides the usual HF ones): ``prompt_field`` (default ``question``), ``answer_field``
(default ``answer``), ``answer_extraction`` (how to get the gold from the answer field:
``none`` = the field as is, ``boxed`` = last ``\\boxed{}``, ``gsm8k`` = after ``####`` with commas
removed, ``metamathqa`` = after ``The answer is:``, ``final`` = the model-output rules), and
``problem_type`` (a fixed label) or ``type_field``; ``difficulty_field``, ``id_field``.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from reasoning_env.grading import extract
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

EXTRACTORS: dict[str, Callable[[str], Optional[str]]] = {
    "none": lambda s: s.strip() or None,
    "boxed": extract.gold_from_boxed,
    "gsm8k": extract.gold_from_gsm8k,
    "metamathqa": extract.gold_from_metamathqa,
    "final": lambda s: extract.extract_final_answer(s).answer,
}

MAPPING_OPTIONS = {
    "prompt_field": "Row field holding the question text (default 'question').",
    "answer_field": "Row field holding the answer or solution (default 'answer').",
    "answer_extraction": f"How to get the gold from the answer field: one of {sorted(EXTRACTORS)} (default 'none').",
    "problem_type": "Problem-type label for every row (default: the source name).",
    "type_field": "Row field holding the problem type (overrides problem_type).",
    "difficulty_field": "Row field holding an integer difficulty 1-5 (MATH 'Level 3' strings accepted).",
    "id_field": "Row field holding a stable id (default: the row index).",
}


def _difficulty(value: Any) -> Optional[int]:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        digits = "".join(ch for ch in value if ch.isdigit())
        return int(digits) if digits else None
    return None


class _MappedSource(QuestionSource):
    options = {**HF_OPTIONS, **MAPPING_OPTIONS}
    required: tuple[str, ...] = ()

    def validate(self, options: dict[str, Any]) -> None:
        super().validate(options)
        missing = [o for o in self.required if not options.get(o)]
        if missing:
            raise SourceError(f"source {self.name!r} needs option(s) {missing} (e.g. data_files: path/to/rows.jsonl)")
        how = options.get("answer_extraction", "none")
        if how not in EXTRACTORS:
            raise SourceError(f"answer_extraction must be one of {sorted(EXTRACTORS)}, got {how!r}")

    def load(self, options: dict[str, Any], ctx: LoadContext) -> list[Question]:
        self.validate(options)
        rows, origin = load_hf_rows(
            source=self.name,
            options=options,
            ctx=ctx,
            hf_id=options.get("hf_id", ""),
            split=options.get("split", "train"),
        )
        pf = options.get("prompt_field", "question")
        af = options.get("answer_field", "answer")
        extractor = EXTRACTORS[options.get("answer_extraction", "none")]
        label = options.get("problem_type", self.name)
        tf, df, idf = options.get("type_field"), options.get("difficulty_field"), options.get("id_field")
        prefix = options.get("hf_id") or self.name
        out = []
        for i, row in enumerate(rows):
            require_fields(self.name, row, [f for f in (pf, af, tf, df, idf) if f], origin)
            gold = extractor(str(row[af]))
            if not gold:
                continue
            out.append(
                Question(
                    id=str(row[idf]) if idf else f"{prefix}/{i}",
                    text=str(row[pf]),
                    gold_answer=gold,
                    problem_type=str(row[tf]) if tf else str(label),
                    source=self.name,
                    difficulty=_difficulty(row[df]) if df else None,
                    metadata={"origin": origin},
                )
            )
        return out


@register_source
class HFDatasetSource(_MappedSource):
    name = "hf"
    description = "Any Hugging Face dataset (hf_id, or local data_files/data_dir) with a field mapping"

    def validate(self, options: dict[str, Any]) -> None:
        super().validate(options)
        if not (options.get("hf_id") or options.get("data_files") or options.get("data_dir")):
            raise SourceError("source 'hf' needs hf_id (a Hub dataset id) or data_files / data_dir (local copies)")


@register_source
class JsonlSource(_MappedSource):
    name = "jsonl"
    description = "Local JSONL/JSON/parquet/CSV files (data_files) with a field mapping"
    required = ("data_files",)

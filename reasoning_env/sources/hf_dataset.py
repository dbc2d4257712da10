"""Any dataset with a field mapping: ``hf`` (a Hub id, a local folder or files) and ``jsonl``.

Options (besides the usual HF ones): ``prompt_field`` (default ``question``), ``answer_field``
(default ``answer``), ``answer_extraction`` (how to get the gold from the answer field:
``none`` = the field as is, ``boxed`` = last ``\\boxed{}``, ``gsm8k`` = after ``####`` with commas
removed, ``metamathqa`` = after ``The answer is:``, ``final`` = the model-output rules), and
``problem_type`` (a fixed label) or ``type_field``; ``difficulty_field``, ``id_field``.

With ``answer_extraction`` unset, the answer field is used as is only when it holds no worked
solution: if any value carries a known gold marker (a ``#### N`` line, a final ``\\boxed{}``, or
``The answer is:``), loading stops with a :class:`SourceError` naming the ``answer_extraction``
value to set (:func:`detect_gold_format`). Guessing instead would make the gold rule depend on a
heuristic the config does not record; refusing costs one line of YAML and never a wrong gold.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

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

logger = logging.getLogger(__name__)

EXTRACTORS: dict[str, Callable[[str], str | None]] = {
    "none": lambda s: s.strip() or None,
    "boxed": extract.gold_from_boxed,
    "gsm8k": extract.gold_from_gsm8k,
    "metamathqa": extract.gold_from_metamathqa,
    "final": lambda s: extract.extract_final_answer(s).answer,
}

MAPPING_OPTIONS = {
    "prompt_field": "Row field holding the question text (default 'question').",
    "answer_field": "Row field holding the answer or solution (default 'answer').",
    "answer_extraction": (
        f"How to get the gold from the answer field: one of {sorted(EXTRACTORS)}. Unset: the field as is, "
        "but loading stops (naming the value to set) when the field holds worked solutions."
    ),
    "problem_type": "Problem-type label for every row (default: the source name).",
    "type_field": "Row field holding the problem type (overrides problem_type).",
    "difficulty_field": "Row field holding an integer difficulty 1-5 (MATH 'Level 3' strings accepted).",
    "id_field": "Row field holding a stable id (default: the row index).",
}


#: The gold formats :func:`detect_gold_format` recognises: extraction name -> how the docs describe it.
GOLD_FORMATS: dict[str, str] = {
    "gsm8k": "worked solutions ending in a '#### N' line (GSM8K style)",
    "metamathqa": "worked solutions ending in 'The answer is: X' (MetaMathQA style)",
    "boxed": "worked solutions with the answer in a final \\boxed{} (MATH / NuminaMath style)",
}


def _format_of(text: str) -> str | None:
    """The gold format of one answer-field value, or ``None`` for a plain answer.

    When several markers occur (a MetaMathQA solution boxes a value, then states ``The answer
    is:``), the one that comes last in the text is the gold's format.
    """
    positions = {
        "gsm8k": text.rfind("####") if extract.gold_from_gsm8k(text) else -1,
        "metamathqa": text.lower().rfind("the answer is") if extract.gold_from_metamathqa(text) else -1,
        "boxed": max(text.rfind("\\boxed"), text.rfind("\\fbox")) if extract.gold_from_boxed(text) else -1,
    }
    best = max(positions, key=positions.__getitem__)
    return best if positions[best] >= 0 else None


def _excerpt(text: str, width: int = 90) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else f"{flat[: width - 30]} ... {flat[-25:]}"


def detect_gold_format(values: Iterable[str]) -> tuple[str, int, int, str] | None:
    """Which known gold format the values of an answer field hold, if any.

    Args:
        values: The answer field of every row (strings).

    Returns:
        ``None`` when no value carries a gold marker (plain answers such as ``"18"`` or
        ``"\\frac{1}{2}"``); else ``(extraction, matched, total, example)``: the
        ``answer_extraction`` value that reads the most common format (a key of
        :data:`GOLD_FORMATS`), the number of values in that format, the number of values, and a
        shortened example of it.
    """
    counts: Counter[str] = Counter()
    examples: dict[str, str] = {}
    total = 0
    for value in values:
        total += 1
        fmt = _format_of(value)
        if fmt is not None:
            counts[fmt] += 1
            examples.setdefault(fmt, value)
    if not counts:
        return None
    best = max(GOLD_FORMATS, key=lambda f: counts[f])  # ties: the order of GOLD_FORMATS
    return best, counts[best], total, _excerpt(examples[best])


def _difficulty(value: Any) -> int | None:
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
        label = options.get("problem_type", self.name)
        tf, df, idf = options.get("type_field"), options.get("difficulty_field"), options.get("id_field")
        prefix = options.get("hf_id") or self.name
        for row in rows:
            require_fields(self.name, row, [f for f in (pf, af, tf, df, idf) if f], origin)
        golds = self._golds([str(row[af]) for row in rows], options.get("answer_extraction"), af, origin)
        out = []
        for i, (row, gold) in enumerate(zip(rows, golds)):
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

    def _golds(self, values: list[str], how: str | None, field: str, origin: str) -> list[str | None]:
        """The gold of each value under ``answer_extraction`` ``how`` (``None``: unset).

        Raises:
            SourceError: ``how`` is unset and the values are worked solutions (the message names
                the ``answer_extraction`` to set), or ``how`` finds no gold in any value.
        """
        if how is None:
            found = detect_gold_format(values)
            if found is not None:
                fmt, matched, total, example = found
                raise SourceError(
                    f"source {self.name!r}: {matched} of {total} values of field {field!r} are {GOLD_FORMATS[fmt]}, "
                    f"e.g. {example!r}; used as is, the whole text would be the gold and right answers would grade "
                    f"wrong. Set answer_extraction: {fmt} in the source's options (or answer_extraction: none "
                    "to keep the field as is)"
                )
            how = "none"
        golds = [EXTRACTORS[how](v) for v in values]
        missing = sum(1 for g in golds if not g)
        if values and missing == len(values):
            found = detect_gold_format(values) if how != "none" else None
            hint = f"; they look like {GOLD_FORMATS[found[0]]}: set answer_extraction: {found[0]}" if found else ""
            raise SourceError(
                f"source {self.name!r}: answer_extraction {how!r} found no gold answer in any of the {len(values)} "
                f"values of field {field!r} (e.g. {_excerpt(values[0])!r}){hint}"
            )
        if missing:
            logger.warning(
                "source %r: answer_extraction %r found no gold answer in %d of %d rows of %s "
                "(field %r); they are skipped",
                self.name,
                how,
                missing,
                len(values),
                origin,
                field,
            )
        return golds


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

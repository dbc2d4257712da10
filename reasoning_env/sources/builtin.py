"""Questions written for this project, shipped in the package (offline stand-ins).

``builtin_data/metamathqa_style.jsonl`` holds questions in the style of each of the 8 MetaMathQA
types, in MetaMathQA's own schema; ``builtin_data/numina_tir_style.jsonl`` holds competition-style
questions in NuminaMath-TIR's schema. Both carry a ``difficulty`` (1-5) and, where the answer is a
number, a ``check`` expression that the test suite recomputes. They are parsed by the same code
as the real datasets, so their gold answers follow the dataset cards.

Options: ``subset`` (``metamathqa``, ``numina_tir`` or ``all``; default ``all``), ``types``
(keep only these problem types).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from reasoning_env.questions import Question
from reasoning_env.sources import metamathqa, numina_tir
from reasoning_env.sources.base import LoadContext, QuestionSource, SourceError, register_source

FILES = {"metamathqa": "metamathqa_style.jsonl", "numina_tir": "numina_tir_style.jsonl"}


@cache
def _rows(filename: str) -> tuple[dict, ...]:
    text = resources.files("reasoning_env.sources").joinpath("builtin_data", filename).read_text(encoding="utf-8")
    return tuple(json.loads(line) for line in text.splitlines() if line.strip())


def builtin_questions(subset: str) -> list[Question]:
    """All builtin questions of ``subset`` (``metamathqa`` or ``numina_tir``), in file order."""
    rows = [dict(r) for r in _rows(FILES[subset])]
    origin = f"builtin:{FILES[subset]}"
    if subset == "metamathqa":
        return metamathqa.questions_from_rows(rows, source="builtin", origin=origin)
    return numina_tir.questions_from_rows(rows, source="builtin", origin=origin)


@register_source
class BuiltinSource(QuestionSource):
    name = "builtin"
    description = "Project-written offline questions: 8 MetaMathQA-style types + NuminaMath-TIR-style"
    options = {
        "subset": "metamathqa, numina_tir or all (default all).",
        "types": "Keep only these problem types.",
    }

    def validate(self, options: dict[str, Any]) -> None:
        super().validate(options)
        subset = options.get("subset", "all")
        if subset not in ("all", *FILES):
            raise SourceError(f"builtin: subset must be one of ['all', {', '.join(map(repr, FILES))}], got {subset!r}")

    def load(self, options: dict[str, Any], ctx: LoadContext) -> list[Question]:
        self.validate(options)
        subset = options.get("subset", "all")
        subsets = list(FILES) if subset == "all" else [subset]
        out = [q for s in subsets for q in builtin_questions(s)]
        types = options.get("types")
        if types:
            types = {types} if isinstance(types, str) else set(types)
            out = [q for q in out if q.problem_type in types]
        return out

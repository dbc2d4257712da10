"""The `Question` record every source yields."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Question:
    """One math question with its gold answer.

    Attributes:
        id: Stable identifier, unique within its source (e.g. ``"gsm8k/test/17"``).
        text: The question as shown to the policy.
        gold_answer: The reference answer as a string (LaTeX allowed, no ``\\boxed{}``),
            extracted per the dataset card (see :mod:`reasoning_env.sources`).
        problem_type: The mix category, e.g. a MetaMathQA ``type`` (``"GSM_SV"``),
            ``"NuminaMath-TIR"``, ``"GSM8K"``, ``"MATH-500"`` or ``"reasoning_gym/<name>"``.
        source: Registry name of the source that produced it (``"metamathqa"``, ``"builtin"``...).
        difficulty: Difficulty on the MATH "level" scale 1 (easiest) .. 5, where the data has it
            (MATH-500 ``level``, builtin questions, reasoning-gym configs); ``None`` otherwise.
        subject: Subject area where the data has it (MATH-500 ``subject``).
        metadata: Anything else the source keeps (original fields, generator config).
    """

    id: str
    text: str
    gold_answer: str
    problem_type: str
    source: str
    difficulty: int | None = None
    subject: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def to_dict(self) -> dict:
        """Plain-dict form (JSON-serialisable when ``metadata`` is)."""
        d = asdict(self)
        d["metadata"] = dict(self.metadata)
        return d

    def public_view(self) -> dict:
        """What a policy may see before answering: everything except the gold answer."""
        return {
            "id": self.id,
            "text": self.text,
            "problem_type": self.problem_type,
            "source": self.source,
            "difficulty": self.difficulty,
            "subject": self.subject,
        }

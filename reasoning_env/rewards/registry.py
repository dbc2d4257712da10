"""The reward registry: names -> reward classes, with machine-readable parameter metadata.

Every registered reward is a frozen dataclass whose fields are its parameters. The
:func:`register` decorator attaches a :class:`RewardInfo` (what it pays, formula, paper source,
scope, component names) and one :class:`Param` per field (default, slider range and step, unit,
description), and checks that the two agree, so the Gradio UI can render sliders from
:func:`describe` without importing any reward class.

The registry is filled once, at import of :mod:`reasoning_env.rewards`; nothing else in the
package holds mutable global state.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reasoning_env.errors import RewardSpecError, UnknownRewardError
from reasoning_env.registry import Registry

#: Scopes a reward may have. ``group`` rewards need every rollout of a GRPO group at once.
SCOPES = ("step", "episode", "step+episode", "group")


@dataclass(frozen=True)
class Param:
    """Metadata of one reward parameter (for validation, docs and UI sliders).

    Attributes:
        name: Keyword of the reward class.
        default: Default value.
        description: One line: what it does.
        kind: ``"float"``, ``"int"`` or ``"choice"``.
        min, max, step: Slider range and step (``None`` for choices). Values outside
            ``[min, max]`` are accepted unless ``hard_min``/``hard_max`` forbid them: the slider
            range is a sensible region, not a law.
        unit: ``"tokens"``, ``"reward"``, ``"fraction"``, ``"fair shares"``... or ``""``.
        choices: Allowed values of a ``choice`` parameter.
        hard_min, hard_max: Inclusive limits enforced on build (``None`` = unbounded).
    """

    name: str
    default: float | int | str
    description: str
    kind: str = "float"
    min: float | None = None
    max: float | None = None
    step: float | None = None
    unit: str = ""
    choices: tuple[str, ...] | None = None
    hard_min: float | None = None
    hard_max: float | None = None

    def check(self, value: Any, reward: str) -> float | int | str:
        """Validate ``value`` for this parameter and return it normalised (int/float/str).

        Raises:
            RewardSpecError: wrong type, not finite, outside the hard limits, or not a listed choice.
        """
        where = f"reward {reward!r} parameter {self.name!r}"
        if self.kind == "choice":
            if not isinstance(value, str) or value not in (self.choices or ()):
                raise RewardSpecError(f"{where} must be one of {list(self.choices or ())}, got {value!r}")
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RewardSpecError(f"{where} must be a number, got {value!r}")
        if not math.isfinite(float(value)):
            raise RewardSpecError(f"{where} must be finite, got {value!r}")
        if self.kind == "int":
            if float(value) != int(value):
                raise RewardSpecError(f"{where} must be an integer, got {value!r}")
            value = int(value)
        else:
            value = float(value)
        if self.hard_min is not None and value < self.hard_min:
            raise RewardSpecError(f"{where} must be >= {self.hard_min}, got {value!r}")
        if self.hard_max is not None and value > self.hard_max:
            raise RewardSpecError(f"{where} must be <= {self.hard_max}, got {value!r}")
        return value

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready metadata (what a UI needs to draw a slider or a dropdown)."""
        d = dataclasses.asdict(self)
        if d["choices"] is not None:
            d["choices"] = list(d["choices"])
        return d


@dataclass(frozen=True)
class RewardInfo:
    """What a registered reward is.

    Attributes:
        name: Registry name (the ``type`` of a spec).
        summary: One line.
        formula: The formula in plain text, tokens in policy-tokenizer tokens.
        source: Paper or contract it comes from.
        scope: ``"step"``, ``"episode"``, ``"step+episode"`` or ``"group"``.
        components: Names of the signed components it returns (their sum is the reward).
        params: Its parameters.
        needs_text: Whether it reads the response text (slower to re-score; truncated stored
            responses change its value).
        length: Which token count it reads: ``"raw_tokens"`` (generated length),
            ``"tokens"`` (charged to the budget) or ``""``.
    """

    name: str
    summary: str
    formula: str
    source: str
    scope: str
    components: tuple[str, ...]
    params: tuple[Param, ...] = ()
    needs_text: bool = False
    length: str = ""

    @property
    def is_group(self) -> bool:
        """True for rewards that need the whole GRPO group (not computable inside one env step)."""
        return self.scope == "group"

    def param(self, name: str) -> Param:
        """The :class:`Param` called ``name``. Raises ``KeyError``."""
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def defaults(self) -> dict[str, Any]:
        """``{param: default}``."""
        return {p.name: p.default for p in self.params}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready metadata of the reward and its parameters."""
        return {
            "name": self.name,
            "summary": self.summary,
            "formula": self.formula,
            "source": self.source,
            "scope": self.scope,
            "components": list(self.components),
            "needs_text": self.needs_text,
            "length": self.length,
            "params": [p.to_dict() for p in self.params],
        }


#: The registered rewards (classes), in registration order, plus ``"combined"`` (registered by
#: :mod:`reasoning_env.rewards`): the core's one registry shape (:class:`reasoning_env.registry.Registry`).
REWARDS: Registry[type] = Registry("reward", error=UnknownRewardError)


def register(
    name: str,
    *,
    summary: str,
    formula: str,
    source: str,
    scope: str,
    components: tuple[str, ...],
    params: tuple[Param, ...] = (),
    needs_text: bool = False,
    length: str = "",
) -> Callable[[type], type]:
    """Class decorator: register a frozen-dataclass reward under ``name``.

    Checks at import time that the dataclass fields are exactly the declared params with the same
    defaults, so metadata and behaviour cannot drift apart.

    Raises:
        ValueError: duplicate name, unknown scope, or fields/params mismatch.
    """
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")

    def deco(cls: type) -> type:
        if name in REWARDS:
            raise ValueError(f"reward {name!r} is already registered")
        if not dataclasses.is_dataclass(cls):
            raise ValueError(f"reward {name!r}: {cls.__name__} must be a dataclass")
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
        declared = {p.name: p for p in params}
        if set(fields) != set(declared):
            raise ValueError(f"reward {name!r}: fields {sorted(fields)} != declared params {sorted(declared)}")
        for pname, f in fields.items():
            if f.default is dataclasses.MISSING or f.default != declared[pname].default:
                raise ValueError(
                    f"reward {name!r}: default of {pname!r} is {f.default!r}, metadata says "
                    f"{declared[pname].default!r}"
                )
        cls.info = RewardInfo(
            name=name,
            summary=summary,
            formula=formula,
            source=source,
            scope=scope,
            components=tuple(components),
            params=tuple(params),
            needs_text=needs_text,
            length=length,
        )
        return REWARDS.add(name, cls, summary=summary, meta=cls.info.to_dict)

    return deco


def registered() -> dict[str, type]:
    """A copy of ``{name: class}`` in registration order (``"combined"``: :class:`~.compose.CombinedReward`)."""
    return {name: REWARDS.get(name) for name in REWARDS.names()}


def reward_class(name: str) -> type:
    """The class registered as ``name``.

    Raises:
        UnknownRewardError: unknown name (a ``RewardSpecError``, so a ``ValueError``; the message
            lists the available ones).
    """
    return REWARDS.get(name)

"""`EnvConfig`: every knob of the environment, validated, with YAML load/save.

Defaults follow the ReasoningEconomicsEnv v2 contract (see README "Environment contract"):
10 questions, ``budget_ratio`` 4.0, ``min_tokens`` 10, ``max_tokens`` 800, ``max_tokens_per_step``
2048, hard-cap mode, gamma 0.1, ``lambda_ep`` 0.5, target utilisation 0.9, soft overspend penalty
0.25, tokenizer ``Qwen/Qwen2.5-0.5B-Instruct``. The reward's cost weight ``beta`` is 0 (the seed's 0.05
belongs to ``reward: {type: reference}``, the seed's exact reward): see :mod:`reasoning_env.rewards.economics`.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from reasoning_env.errors import ConfigError
from reasoning_env.renamed import rename_keys, rename_spec_keys

DEFAULT_TOKENIZER_NAME = "Qwen/Qwen2.5-0.5B-Instruct"


#: Largest episode budget (tokens) any path accepts: a reset's ``total_budget``, the config's,
#: the config formula, and a tokenizer-native budget.
MAX_TOTAL_BUDGET = 100_000_000


class SourceSpec(BaseModel):
    """One question source of the mix: a registry name plus its options.

    In YAML a bare string (``- gsm8k``) is shorthand for ``{name: gsm8k}``.
    ``options`` are checked by the source itself (see ``reasoning_env.sources.available()``).
    """

    # allow_inf_nan=False: `.inf` / `.nan` in YAML are refused by name at load, not at reset.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"name": value}
        return value


#: The numeric settings of :class:`EnvConfig` (a boolean for any of them is refused by name).
_NUMBER_FIELDS = (
    "num_questions",
    "budget_ratio",
    "total_budget",
    "min_tokens",
    "max_tokens",
    "max_tokens_per_step",
    "soft_overspend_penalty",
    "correct_reward",
    "wrong_reward",
    "beta",
    "gamma",
    "lambda_ep",
    "target_utilisation",
    "grading_timeout_s",
    "seed",
)


#: The boolean settings of :class:`EnvConfig` (a string or number for any of them is refused by name).
_BOOLEAN_FIELDS = (
    "hard_cap_mode",
    "grade_beyond_budget",
    "soft_allow_negative_budget",
    "offline_fallback",
    "allow_config_budget_fallback",
)


def _default_sources() -> list[SourceSpec]:
    return [SourceSpec(name="metamathqa"), SourceSpec(name="numina_tir")]


class EnvConfig(BaseModel):
    """All environment settings. Immutable once built; vary one with :meth:`replace`
    (``config.replace(num_questions=5)``), which validates the copy as the constructor does
    (pydantic's ``model_copy(update=...)`` skips validation: do not use it).

    Token quantities are in tokens of the policy tokenizer (``tokenizer_name``), except the
    "config" budget formula, which uses ``min_tokens``/``max_tokens`` as abstract units (as the
    v2 contract does).

    Raises:
        ConfigError: on any invalid value (negative budgets, unknown sources or options, ...).
    """

    # allow_inf_nan=False: `.inf` / `.nan` in YAML are refused by name at load, not at reset.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    # Episode shape and budget
    num_questions: int = Field(10, ge=1, le=10_000, description="Questions per episode.")
    budget_ratio: float = Field(
        4.0, gt=0, le=1000, description="Budget = ratio x question tokens (tokenizer_native) or x config formula."
    )
    total_budget: int | None = Field(
        None,
        gt=0,
        le=MAX_TOTAL_BUDGET,
        description="Fixed 'config' budget in tokens, used when a reset passes neither "
        "total_budget nor tokenizer_name (the contract's priority: client > "
        "tokenizer_native > config); None = the formula.",
    )
    min_tokens: int = Field(
        10, ge=0, description="Hard-cap mode ends the episode when the remaining budget drops below this."
    )
    max_tokens: int = Field(800, ge=1, description="Upper end of the config budget formula (abstract units).")
    max_tokens_per_step: int = Field(
        2048,
        ge=1,
        le=MAX_TOTAL_BUDGET,
        description="Generation cap per step that policies and trainers should apply (tokens; at most "
        "MAX_TOTAL_BUDGET, the largest episode budget).",
    )

    # Budget modes
    hard_cap_mode: bool = Field(
        True,
        description="True: clip each step's spend to the remaining budget and stop when it runs "
        "dry. False: soft budget, overspend penalised.",
    )
    grade_beyond_budget: bool = Field(
        False,
        description="Hard-cap mode: also grade the tokens that did not fit in the remaining budget "
        "(the seed's behaviour). False: only the paid prefix is graded.",
    )
    soft_allow_negative_budget: bool = Field(
        True, description="Soft mode: let the remaining budget go negative (else floor at 0)."
    )
    soft_overspend_penalty: float = Field(
        0.25, ge=0, description="Soft mode: penalty per fair share of cumulative overspend."
    )

    # Default reward (economics) weights; the seed's exact reward is reward: {type: reference}
    correct_reward: float = Field(1.0, description="Correctness term for a correct answer.")
    wrong_reward: float = Field(-0.1, description="Correctness term for a wrong or missing answer.")
    beta: float = Field(
        0.0,
        ge=0,
        description="Cost penalty weight: beta * max(0, tokens/fair_share - 1) (0 by default; the seed's 0.05 "
        "is the 'reference' reward's).",
    )
    gamma: float = Field(
        0.1, ge=0, description="Efficiency bonus weight (correct answers): gamma * (1 - tokens/fair_share)."
    )
    lambda_ep: float = Field(0.5, ge=0, description="Episode bonus weight on the final step.")
    target_utilisation: float = Field(
        0.9,
        gt=0,
        le=2.0,
        description="Budget utilisation (spent/budget) the episode bonus peaks at (old spelling "
        "target_utilization still read, with a warning).",
    )
    reward: dict[str, Any] | None = Field(
        None,
        description="Reward spec for reasoning_env.rewards.build(): {type, weight, params} or "
        "{type: combined, rewards: [...]}, types from "
        "reasoning_env.rewards.available(); the weights above fill unset "
        "economics/budget_aware params. None = the default economics reward with the "
        "weights above (a question never asked costs what a wrong answer costs); "
        "{type: reference} = the seed's exact reward. Group rewards (kimi_length, shorter_better, arora_zanette) are "
        "rejected: they need a GRPO group.",
    )

    # Data
    sources: list[SourceSpec] = Field(default_factory=_default_sources, min_length=1)
    mix: dict[str, float] = Field(
        default_factory=dict, description="problem_type -> sampling weight; unlisted types weigh 1.0 (an even mix)."
    )
    data_dir: str | None = Field(
        None,
        description="Folder searched for local data files of every source (e.g. a folder holding "
        "gsm8k_test.jsonl and math500_test.jsonl).",
    )
    offline_fallback: bool = Field(
        True, description="When the Hub is unreachable, serve the builtin stand-ins for metamathqa / numina_tir."
    )

    # Tokenizer and grading
    tokenizer_name: str = Field(
        DEFAULT_TOKENIZER_NAME,
        min_length=1,
        description="Policy tokenizer (Hub id or local folder) used to count tokens.",
    )
    allow_config_budget_fallback: bool = Field(
        False,
        description="If a reset's tokenizer fails to load, fall back to the config budget (with a "
        "warning) instead of raising.",
    )
    grading_timeout_s: float = Field(2.0, gt=0, le=600, description="Wall-clock limit of one grade (seconds).")

    seed: int | None = Field(
        None, ge=0, description="Default episode seed when reset() gets none; None = a fresh seed per reset."
    )

    def __init__(self, **values: Any) -> None:
        # Every construction path (EnvConfig(...), build, from_dict, from_yaml, replace) raises
        # ConfigError with all problems listed, never a bare pydantic ValidationError.
        # Renamed settings (reasoning_env.renamed) are read under their old key too, with a warning.
        values = rename_keys(values, where="EnvConfig", error=ConfigError)
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConfigError(_format_validation_error(exc)) from None

    @field_validator(*_NUMBER_FIELDS, mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any) -> Any:
        # pydantic's lax mode reads True as 1: `num_questions: yes` would be a one-question episode
        if isinstance(value, bool):
            raise ValueError("must be a number, not a boolean (YAML reads yes/no/on/off/true/false as booleans)")
        return value

    @field_validator("max_tokens_per_step", mode="before")
    @classmethod
    def _step_cap_bound(cls, value: Any) -> Any:
        # checked before parsing, so that 1e22 is told the bound, not "exceeded maximum size"
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > MAX_TOTAL_BUDGET:
            raise ValueError(
                f"must be at most {MAX_TOTAL_BUDGET:,} tokens (MAX_TOTAL_BUDGET, the largest episode budget)"
            )
        return value

    @field_validator(*_BOOLEAN_FIELDS, mode="before")
    @classmethod
    def _no_lax_booleans(cls, value: Any) -> Any:
        # pydantic's lax mode reads 'yes', 'off', '0' and 1 as booleans: `hard_cap_mode: 'no'` (quoted)
        # would silently be read, and a typo such as 'flase' would only fail by luck
        if not isinstance(value, bool):
            raise ValueError(f"must be true or false (a YAML/JSON boolean, unquoted), not a {type(value).__name__}")
        return value

    @field_validator("reward", mode="before")
    @classmethod
    def _reward_name(cls, value: Any) -> Any:
        # `reward: l1_max` in YAML is shorthand for `reward: {type: l1_max}`; parameters under an old
        # name (reasoning_env.renamed) are stored under the new one, so the config saves the new key.
        return {"type": value} if isinstance(value, str) else rename_spec_keys(value)

    @field_validator("mix")
    @classmethod
    def _check_mix(cls, value: dict[str, float]) -> dict[str, float]:
        for key, weight in value.items():
            if not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
                raise ValueError(f"mix weight for {key!r} must be a finite number >= 0, got {weight!r}")
        return value

    @model_validator(mode="after")
    def _check_consistency(self) -> EnvConfig:
        if self.min_tokens > self.max_tokens:
            raise ValueError(f"min_tokens ({self.min_tokens}) must not exceed max_tokens ({self.max_tokens})")
        if self.config_budget() > MAX_TOTAL_BUDGET:
            raise ValueError(
                f"the config budget formula gives {self.config_budget():,} tokens, above the "
                f"maximum of {MAX_TOTAL_BUDGET:,}; "
                "lower budget_ratio, num_questions or max_tokens, or set total_budget"
            )
        from reasoning_env.sources import validate_spec  # local import: sources never import config

        for spec in self.sources:
            validate_spec(spec.name, spec.options)
        if self.reward is not None:
            from reasoning_env.rewards import validate_reward_spec

            validate_reward_spec(self.reward)
        return self

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(cls, **values: Any) -> EnvConfig:
        """Build and validate; raise :class:`ConfigError` with every problem listed (the same as
        ``EnvConfig(**values)``; kept as the explicit spelling)."""
        return cls(**values)

    @classmethod
    def coerce(cls, value: EnvConfig | dict | None) -> EnvConfig:
        """``value`` as an EnvConfig: itself, built from a dict, or the defaults for ``None``.

        Raises:
            ConfigError: the dict holds invalid settings.
            TypeError: ``value`` is none of these.
        """
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            return cls.from_dict(value)
        raise TypeError(f"config must be an EnvConfig, a dict or None, got {type(value).__name__}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EnvConfig:
        """Build from a plain dict (e.g. parsed YAML). Raises :class:`ConfigError`."""
        if not isinstance(data, dict):
            raise ConfigError(f"an EnvConfig must be a mapping of settings, got {type(data).__name__}")
        return cls.build(**data)

    @classmethod
    def from_yaml(cls, path: str | Path) -> EnvConfig:
        """Load a YAML file. An ``env:`` top-level key is accepted (files shared with training).

        Raises:
            ConfigError: file missing, not YAML, or invalid settings.
        """
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {str(p)!r} does not exist")
        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {str(p)!r} is not valid YAML: {exc}") from None
        if isinstance(data, dict) and "env" in data and isinstance(data["env"], dict):
            data = data["env"]
        try:
            return cls.from_dict(data)
        except ConfigError as exc:
            raise ConfigError(f"config file {str(p)!r}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form that :meth:`from_dict` reads back unchanged."""
        return self.model_dump(mode="json")

    def to_yaml(self, path: str | Path | None = None) -> str:
        """Serialise to YAML; also write it to ``path`` when given. Returns the YAML text."""
        text = yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def replace(self, **changes: Any) -> EnvConfig:
        """A validated copy with ``changes`` applied. Raises :class:`ConfigError`."""
        data = self.to_dict()
        data.update(changes)
        return EnvConfig.from_dict(data)

    @property
    def target_utilization(self) -> float:
        """The old spelling of :attr:`target_utilisation` (reads it, with a ``FutureWarning``)."""
        warnings.warn(
            "EnvConfig.target_utilization is the old spelling of target_utilisation; read that instead",
            FutureWarning,
            stacklevel=2,
        )
        return self.target_utilisation

    # ------------------------------------------------------------------ derived values
    def config_budget(self) -> int:
        """The "config" budget: ``total_budget`` if set, else
        ``int(budget_ratio * num_questions * (min_tokens + max_tokens) / 2)`` (v2 contract)."""
        if self.total_budget is not None:
            return int(self.total_budget)
        return max(1, int(self.budget_ratio * self.num_questions * (self.min_tokens + self.max_tokens) / 2))


def _format_validation_error(exc: ValidationError) -> str:
    lines = ["invalid environment config:"]
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(config)"
        msg = err.get("msg", "invalid value")
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        if err.get("type") == "extra_forbidden":
            msg = f"unknown setting {loc!r}; see EnvConfig's fields (README: Configuration)"
        lines.append(
            f"  - {loc}: {msg} (got {err.get('input')!r})"
            if "input" in err and err.get("type") != "extra_forbidden"
            else f"  - {loc}: {msg}"
        )
    return "\n".join(lines)

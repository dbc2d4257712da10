"""Rewards: the default ``economics`` reward, the seed's exact ``reference``, a registry of literature shapes,
composition.

- :func:`available` lists the registered reward names; :func:`describe` gives their
  machine-readable metadata (formula, source, scope, components, and per parameter: default,
  slider range/step, unit, description) for docs and UI sliders.
- :func:`build` returns the reward an :class:`~reasoning_env.config.EnvConfig` asks for (its
  ``reward`` spec, else the default ``economics`` reward with its flat weights), or the reward of a spec
  (dict, YAML text or file, registry name). See :mod:`reasoning_env.rewards.compose` for the spec
  language.
- Every reward pays *named, signed components* that sum to the reward, per step
  (``step_components``) and on the final step (``episode_components``); the same formulas run
  vectorised over arrays (``step_batch`` / ``episode_batch``) for re-scoring and training.
- Group rewards (``kimi_length``, ``shorter_better``, ``arora_zanette``) compare the rollouts of
  a GRPO group: use them through :func:`trl_reward_function` or re-scoring; an environment config
  naming one is rejected with an explanation.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reasoning_env.errors import RewardSpecError
from reasoning_env.rewards.base import EnvReward, EpisodeContext, StepContext
from reasoning_env.rewards.batch import (
    EpisodeBatch,
    GroupRewardError,
    RewardShape,
    StepBatch,
    components_total,
    group_error_message,
)

# The reward modules register themselves when imported, and this order is the registry's order
# (what available() lists and the reward lab shows), so the import sorter leaves it as written.
# isort: off
from reasoning_env.rewards.economics import COMPONENTS, BudgetAwareReward, EconomicsReward, ReferenceReward
from reasoning_env.rewards import shapes as _shapes  # noqa: F401  (registers the literature shapes)
from reasoning_env.rewards import group as _group  # noqa: F401  (registers the group shapes)
# isort: on

from reasoning_env.rewards.compose import (
    COMBINED_INFO,
    CONTEXTS,
    CombinedReward,
    Entry,
    from_spec,
    load_spec,
    normalise_spec,
    normalize_spec,
    spec_to_yaml,
)
from reasoning_env.rewards.registry import REWARDS, Param, RewardInfo, register, reward_class
from reasoning_env.rewards.trl import trl_reward_function, trl_reward_functions

__all__ = [
    "COMPONENTS",
    "DEFAULT_REWARD",
    "REFERENCE_REWARD",
    "BudgetAwareReward",
    "CombinedReward",
    "EconomicsReward",
    "Entry",
    "EnvReward",
    "EpisodeBatch",
    "components_total",
    "EpisodeContext",
    "GroupRewardError",
    "Param",
    "REWARDS",
    "RewardInfo",
    "ReferenceReward",
    "RewardShape",
    "RewardSpecError",
    "StepBatch",
    "StepContext",
    "available",
    "build",
    "build_reward",
    "describe",
    "info",
    "load_spec",
    "normalise_spec",
    "normalize_spec",
    "register",
    "spec_to_yaml",
    "trl_reward_function",
    "trl_reward_functions",
    "validate_reward_spec",
]

#: The registry name of the default reward: what an ``EnvConfig`` without a ``reward`` spec pays (with its
#: flat weights), and what the server, the trainer, the reward lab and the app start from.
DEFAULT_REWARD = "economics"

#: The registry name of the reference environment's (ReasoningEconomicsEnv v2) seed reward, exactly.
REFERENCE_REWARD = "reference"

#: EnvConfig fields that are the default reward's parameters (flat weights). They fill the unset
#: parameters of ``economics`` and ``budget_aware`` entries; ``reference`` (the seed, exactly) keeps
#: its own defaults.
FLAT_WEIGHTS = (
    "correct_reward",
    "wrong_reward",
    "beta",
    "gamma",
    "soft_overspend_penalty",
    "lambda_ep",
    "target_utilisation",
)

#: The composition is a registered type too, after every shape (the last name of :func:`available`).
REWARDS.add("combined", CombinedReward, summary=COMBINED_INFO.summary, meta=COMBINED_INFO.to_dict)


def available() -> list[str]:
    """Registered reward names (the ``type`` of a spec), registration order, then ``"combined"``."""
    return REWARDS.names()


def info(name: str) -> RewardInfo:
    """The :class:`RewardInfo` of a registered reward (``"combined"`` included).

    Raises:
        UnknownRewardError: unknown name (a ``ValueError``).
    """
    if name == "combined":
        return COMBINED_INFO
    return reward_class(name).info


def describe(name: str | None = None) -> dict[str, Any]:
    """JSON-ready metadata: of one reward (``name``, ``summary``, ``formula``, ``source``, ``scope``,
    ``components``, ``needs_text``, ``length``, ``params``), or ``{name: metadata}`` of all (for
    UIs and docs).

    Raises:
        UnknownRewardError: ``name`` is not registered.
    """
    return REWARDS.describe(name)


def _is_config(obj: Any) -> bool:
    from reasoning_env.config import EnvConfig

    return isinstance(obj, EnvConfig)


def _flat_defaults(config: Any) -> dict[str, dict[str, Any]]:
    flat = {k: getattr(config, k) for k in FLAT_WEIGHTS}
    return {"economics": flat, "budget_aware": dict(flat)}


def build_reward(source: Any = None, *, context: str = "env") -> Any:
    """The reward a config, spec or reward object describes.

    Args:
        source: ``None`` (the default reward, ``economics``), an EnvConfig, a spec (dict,
            registry name, YAML text or a ``.yaml`` path), or an already built reward (returned).
        context: ``"env"`` (group rewards are rejected), ``"training"`` or ``"rescore"``.

    Raises:
        RewardSpecError: invalid spec (a ``ValueError``); :class:`GroupRewardError` (a subclass) for a
            group reward in the ``"env"`` context (the message says where to use it instead).
        ValueError: unknown ``context``.
    """
    if context not in CONTEXTS:
        raise ValueError(f"context must be one of {CONTEXTS}, got {context!r}")
    if source is None:
        reward: Any = EconomicsReward()
    elif _is_config(source):
        flat = _flat_defaults(source)
        if not source.reward:
            return EconomicsReward(**flat["economics"])
        reward = from_spec(source.reward, defaults=flat)
    elif isinstance(source, (RewardShape, CombinedReward)):
        reward = source
    elif isinstance(source, (Mapping, str, Path)):
        reward = from_spec(source)
    elif hasattr(source, "step_components") and hasattr(source, "episode_components"):
        return source  # a custom EnvReward: trusted as is
    else:
        raise RewardSpecError(
            f"cannot build a reward from {type(source).__name__}; pass an EnvConfig, a spec or a reward"
        )
    if context == "env" and getattr(reward, "is_group", False):
        names = (
            [e.reward.info.name for e in reward.entries if e.reward.is_group]
            if isinstance(reward, CombinedReward)
            else [reward.info.name]
        )
        raise GroupRewardError(group_error_message(names[0]))
    return reward


def build(config: Any = None) -> Any:
    """The environment's reward for an ``EnvConfig`` (its ``reward`` spec, else the default ``economics``
    reward with its flat weights), or for a spec / registry name / YAML. Flat weights also fill the
    unspecified parameters of ``economics`` and ``budget_aware`` entries of the spec.

    Raises:
        RewardSpecError: invalid spec or a group reward (see :func:`build_reward`).
    """
    return build_reward(config, context="env")


def validate_reward_spec(spec: Any, *, context: str = "env") -> None:
    """Check a reward spec (``None`` is fine). Raises :class:`RewardSpecError` (a ``ValueError``)
    saying what is wrong; in the ``"env"`` context group rewards are errors that say to use them in
    training or re-scoring."""
    if spec is None:
        return
    if not isinstance(spec, (Mapping, str)):
        raise RewardSpecError(f"reward must be a mapping (a reward spec), got {type(spec).__name__}")
    build_reward(load_spec(spec), context=context)

"""Building the reward a config or spec asks for (:func:`build_reward`, :func:`build`) and checking a spec.

Apart from the package's ``__init__`` so that its submodules (:mod:`.trl`) can build rewards without
importing the package that imports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reasoning_env.errors import RewardSpecError
from reasoning_env.rewards.batch import GroupRewardError, RewardShape, group_error_message
from reasoning_env.rewards.compose import CONTEXTS, CombinedReward, from_spec, load_spec
from reasoning_env.rewards.economics import EconomicsReward

__all__ = ["FLAT_WEIGHTS", "build", "build_reward", "validate_reward_spec"]

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


def _is_config(obj: Any) -> bool:
    """An EnvConfig, known by its reward spec and flat weights (this package never imports the config,
    which imports it to check its reward spec)."""
    return hasattr(obj, "reward") and all(hasattr(obj, k) for k in FLAT_WEIGHTS) and hasattr(obj, "config_budget")


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

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

from typing import Any

from reasoning_env.errors import RewardSpecError
from reasoning_env.rewards.base import EnvReward, EpisodeContext, StepContext
from reasoning_env.rewards.batch import (
    EpisodeBatch,
    GroupRewardError,
    RewardShape,
    StepBatch,
    components_total,
    group_error_message,  # noqa: F401  (re-exported)
)

# The reward modules register themselves when imported, and this order is the registry's order
# (what available() lists and the reward lab shows), so the import sorter leaves it as written.
# isort: off
from reasoning_env.rewards.economics import COMPONENTS, BudgetAwareReward, EconomicsReward, ReferenceReward
from reasoning_env.rewards import shapes as _shapes  # noqa: F401  (registers the literature shapes)
from reasoning_env.rewards import group as _group  # noqa: F401  (registers the group shapes)
# isort: on

from reasoning_env.rewards.build import FLAT_WEIGHTS, build, build_reward, validate_reward_spec  # noqa: F401
from reasoning_env.rewards.compose import (
    COMBINED_INFO,
    CONTEXTS,  # noqa: F401  (re-exported)
    CombinedReward,
    Entry,
    from_spec,  # noqa: F401  (re-exported)
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

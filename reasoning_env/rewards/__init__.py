"""Rewards: the seed economics reward (default) and the reward protocol.

``build(config)`` returns the reward an :class:`~reasoning_env.config.EnvConfig` asks for.
"""

from __future__ import annotations

from typing import Any

from reasoning_env.rewards.base import EnvReward, EpisodeContext, StepContext
from reasoning_env.rewards.economics import COMPONENTS, EconomicsReward

__all__ = ["COMPONENTS", "EconomicsReward", "EnvReward", "EpisodeContext", "StepContext", "build", "validate_reward_spec"]


def validate_reward_spec(spec: Any) -> None:
    """Check a reward spec from a config. Raises ``ValueError`` saying what is wrong."""
    if spec is None:
        return
    if not isinstance(spec, dict):
        raise ValueError(f"reward must be a mapping, got {type(spec).__name__}")
    name = spec.get("name", "economics")
    if name != "economics":
        raise ValueError(f"unknown reward {name!r}; available: ['economics']")
    params = spec.get("params", {}) or {}
    EconomicsReward(**params)


def build(config: Any) -> EnvReward:
    """The reward for an ``EnvConfig`` (its ``reward`` spec, else economics with its flat weights)."""
    base = dict(
        correct_reward=config.correct_reward,
        wrong_reward=config.wrong_reward,
        beta=config.beta,
        gamma=config.gamma,
        soft_overspend_penalty=config.soft_overspend_penalty,
        lambda_ep=config.lambda_ep,
        target_utilization=config.target_utilization,
    )
    spec = config.reward
    if spec:
        base.update(spec.get("params", {}) or {})
    return EconomicsReward(**base)

"""The seed reward of ReasoningEconomicsEnv v2 (the default).

Per step (``fair_share = total_budget / num_questions``, ``r = tokens / fair_share``):

- ``correctness``: ``correct_reward`` (+1) if correct else ``wrong_reward`` (-0.1);
- ``efficiency_bonus``: ``gamma * (1 - r)`` if correct else 0 (negative when ``r > 1``, as in the seed);
- ``cost_penalty``: ``-beta * max(0, r - 1)``;
- ``overspend_penalty`` (soft mode only): ``-soft_overspend_penalty * overspend / fair_share`` where
  ``overspend = max(0, spent_after_step - total_budget)`` is the *cumulative* overspend (seed semantics:
  once over budget, every further step pays for the whole overspend so far).

On the final step, ``episode_bonus``: ``lambda_ep * accuracy * max(0, 1 - |spent/budget - target_utilization|)``
with ``accuracy = num_correct / num_questions``.

Source: the ReasoningEconomicsEnv v2 contract (README "Environment contract").
"""

from __future__ import annotations

from dataclasses import dataclass

from reasoning_env.rewards.base import EpisodeContext, StepContext

STEP_COMPONENTS = ("correctness", "efficiency_bonus", "cost_penalty", "overspend_penalty")
EPISODE_COMPONENTS = ("episode_bonus",)
COMPONENTS = STEP_COMPONENTS + EPISODE_COMPONENTS


@dataclass(frozen=True)
class EconomicsReward:
    """The seed economics reward; parameters default to the v2 contract."""

    correct_reward: float = 1.0
    wrong_reward: float = -0.1
    beta: float = 0.05
    gamma: float = 0.1
    soft_overspend_penalty: float = 0.25
    lambda_ep: float = 0.5
    target_utilization: float = 0.9

    def step_components(self, ctx: StepContext) -> dict[str, float]:
        """Signed per-step components (sum = step reward before any episode bonus)."""
        fair = ctx.fair_share
        ratio = ctx.tokens / fair if fair > 0 else 0.0
        overspend = 0.0
        if not ctx.hard_cap_mode and fair > 0 and ctx.overspend_tokens > 0:
            overspend = -self.soft_overspend_penalty * ctx.overspend_tokens / fair
        return {
            "correctness": self.correct_reward if ctx.correct else self.wrong_reward,
            "efficiency_bonus": self.gamma * (1.0 - ratio) if (ctx.correct and fair > 0) else 0.0,
            "cost_penalty": -self.beta * max(0.0, ratio - 1.0),
            "overspend_penalty": overspend,
        }

    def episode_components(self, ctx: EpisodeContext) -> dict[str, float]:
        """``{"episode_bonus": ...}`` paid on the final step."""
        if ctx.num_questions <= 0 or ctx.total_budget <= 0:
            return {"episode_bonus": 0.0}
        accuracy = ctx.num_correct / ctx.num_questions
        utilisation_score = max(0.0, 1.0 - abs(ctx.total_spent / ctx.total_budget - self.target_utilization))
        return {"episode_bonus": self.lambda_ep * accuracy * utilisation_score}

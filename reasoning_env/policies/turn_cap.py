"""The per-answer generation cap a language-model policy applies (the environment's rules unchanged).

The environment offers ``step_token_cap`` = min(``max_tokens_per_step``, remaining budget) in hard-cap
mode: one answer may spend everything that is left. A pretrained model that falls into a repetition
loop on question 1 then spends the whole episode there (measured with Qwen2.5-Coder-0.5B on the
default config: a 1,724-token loop, the nine other questions never asked), and the episode says
nothing about how it allocates. So LLM policies cap each answer by default at a multiple of the
fair share of what is left, keeping a floor for every later question::

    share:  cap = min(step_token_cap, max(floor, min(ceil(factor x R / L), R - (L - 1) x floor)))
    env:    cap = step_token_cap                      (the environment's cap alone)

with ``R`` the remaining budget and ``L`` the questions remaining (this one included). ``factor`` 2 lets
a hard question take twice the average of what is left; the second term reserves ``floor`` tokens for
each later question, so no question takes the whole remaining budget while others wait (without it,
``ceil(2 R / 2) = R`` gave the second-to-last question everything that was left: with 2 questions,
question 1 took the whole budget in 25 of 30 groups of the first CPU training run). After long answers
the cap shrinks with the budget, after short ones it grows. ``floor`` (default 64 tokens) keeps the cap
from falling below what any answer needs while the budget lasts: when ``R`` cannot keep a floor for
every question (``R < L x floor``) the cap is the floor, and the later questions share what remains.
An optional fixed ``max_tokens`` lowers it further. The rule
is the policy's, not the environment's: rewards, budgets and the environment's own cap are
unchanged, and the cap the policy applied is shown to the model in its prompt ("This answer may use
at most N tokens") and recorded per step (``policy_max_tokens``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from reasoning_env.policies.base import obs_get

__all__ = ["TURN_CAP_RULES", "TurnCap", "capped_observation"]

TURN_CAP_RULES = ("share", "env")


@dataclass(frozen=True)
class TurnCap:
    """A per-answer cap rule (see the module docstring).

    Args:
        rule: ``"share"`` (default) or ``"env"``.
        factor: Multiple of the remaining fair share (``share`` only; > 0).
        floor: Smallest cap while the budget allows it (``share`` only; tokens, >= 1).
        max_tokens: A fixed extra cap (tokens), or ``None``.

    Raises:
        ValueError: an unknown rule or a value out of range, naming it.
    """

    rule: str = "share"
    factor: float = 2.0
    floor: int = 64
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.rule not in TURN_CAP_RULES:
            raise ValueError(f"turn cap rule must be one of {TURN_CAP_RULES}, got {self.rule!r}")
        if not (isinstance(self.factor, (int, float)) and math.isfinite(self.factor) and self.factor > 0):
            raise ValueError(f"turn cap factor must be a positive number, got {self.factor!r}")
        if int(self.floor) < 1:
            raise ValueError(f"turn cap floor must be at least 1 token, got {self.floor!r}")
        if self.max_tokens is not None and int(self.max_tokens) < 1:
            raise ValueError(f"max_tokens must be at least 1 token, got {self.max_tokens!r}")

    def __call__(self, obs: Any) -> int:
        """The cap for ``obs``'s question (at least 1)."""
        cap = int(obs_get(obs, "step_token_cap", 0) or 0)
        if self.rule == "share":
            remaining = int(obs_get(obs, "remaining_budget", 0) or 0)
            left = int(obs_get(obs, "questions_remaining", 0) or 0)
            if left > 0 and remaining > 0:
                reserve = (left - 1) * int(self.floor)  # a floor for every later question
                share = max(int(self.floor), min(math.ceil(self.factor * remaining / left), remaining - reserve))
                cap = min(cap, share) if cap > 0 else share
        if self.max_tokens is not None:
            cap = min(cap, int(self.max_tokens)) if cap > 0 else int(self.max_tokens)
        return max(1, cap)

    def describe(self) -> dict[str, Any]:
        """For ``run.json``."""
        if self.rule == "env":
            return {"rule": "env", "max_tokens": self.max_tokens}
        return {"rule": "share", "factor": self.factor, "floor": self.floor, "max_tokens": self.max_tokens}

    def label(self) -> str:
        """One line for the UI: how the cap is chosen."""
        extra = f", at most {self.max_tokens}" if self.max_tokens is not None else ""
        if self.rule == "env":
            return f"the environment's step_token_cap{extra}"
        return (
            f"{self.factor:g} x the remaining budget per remaining question, keeping {self.floor} for each later one "
            f"(at least {self.floor}){extra}"
        )


def capped_observation(obs: Any, cap: int) -> Any:
    """``obs`` (an observation, or its dict) with ``step_token_cap`` set to ``cap`` tokens, the cap the policy
    applies, so the prompt built from it states that cap; a copy (the original is unchanged), or ``obs`` itself
    when it is neither a dict nor a pydantic model."""
    if isinstance(obs, dict):
        return {**obs, "step_token_cap": int(cap)}
    copy = getattr(obs, "model_copy", None)
    if callable(copy):
        return copy(update={"step_token_cap": int(cap)})
    return obs

"""What a reward sees: the per-step and per-episode contexts, and the reward protocol.

A reward is an object with two pure methods returning *named, signed components* whose sum is
the reward (penalties are negative numbers), so that a UI can stack them:

- ``step_components(StepContext) -> dict[str, float]``, paid on every step;
- ``episode_components(EpisodeContext) -> dict[str, float]``, added on the final step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class StepContext:
    """Everything a step reward may use. Token counts are in policy-tokenizer tokens.

    Attributes:
        correct: The graded verdict.
        has_answer: Whether a final answer was found in the response.
        tokens: Tokens charged to the budget this step (after hard-cap clipping).
        raw_tokens: Tokens of the response as counted, before clipping.
        total_budget: Episode budget.
        num_questions: Questions in the episode.
        spent_before: Tokens charged before this step.
        question_index: 0-based index of the question answered.
        hard_cap_mode: Budget mode of the episode.
        problem_type: Problem type of the question.
        difficulty: Difficulty 1-5 where known, else ``None``.
        response: The response text (for format/repetition rewards).
    """

    correct: bool
    has_answer: bool
    tokens: int
    raw_tokens: int
    total_budget: int
    num_questions: int
    spent_before: int
    question_index: int
    hard_cap_mode: bool = True
    problem_type: str = ""
    difficulty: int | None = None
    response: str = ""

    @property
    def spent_after(self) -> int:
        """Tokens charged after this step."""
        return self.spent_before + self.tokens

    @property
    def fair_share(self) -> float:
        """``total_budget / num_questions`` (tokens)."""
        return self.total_budget / self.num_questions if self.num_questions > 0 else 1.0

    @property
    def overspend_tokens(self) -> int:
        """Cumulative tokens charged beyond the budget after this step: ``max(0, spent_after - total_budget)``."""
        return max(0, self.spent_after - self.total_budget)


@dataclass(frozen=True)
class EpisodeContext:
    """Everything an episode-level reward may use.

    Attributes:
        num_correct: Correct answers in the episode.
        num_answered: Questions answered (fewer than ``num_questions`` if the budget ran dry).
        num_questions: Questions in the episode.
        total_spent: Tokens charged over the episode.
        total_budget: Episode budget (tokens).
        ran_dry: Whether a hard-cap episode ended with questions left.
    """

    num_correct: int
    num_answered: int
    num_questions: int
    total_spent: int
    total_budget: int
    ran_dry: bool = False


@runtime_checkable
class EnvReward(Protocol):
    """The reward interface the environment calls (see module docstring)."""

    def step_components(self, ctx: StepContext) -> dict[str, float]: ...

    def episode_components(self, ctx: EpisodeContext) -> dict[str, float]: ...

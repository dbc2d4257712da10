"""OpenEnv models of the environment: action, observation, state, and the per-step records.

Built on OpenEnv's pydantic ``Action`` / ``Observation`` / ``State`` so that the same classes
serve in-process use, the HTTP/WebSocket server and the typed client.

The classes carry the environment family's one prefix (``ReasoningEconomics*``, as
``ReasoningEconomicsEnv`` and ``ReasoningEconomicsClient``; README "Names"). The reference
environment's names ``ReasonBudgetAction``, ``ReasonBudgetObservation`` and ``ReasonBudgetState``
(ReasonBudgetEnv v2, whose clients import them) are the same classes under their old names.
"""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, ConfigDict, Field


class ReasoningEconomicsAction(Action):
    """The policy's answer to the current question.

    Attributes:
        response: The full model output (reasoning trace + final answer). Its tokens are counted
            in full with the session tokenizer and charged to the budget.
        metadata: Optional keys: ``tokenizer_name`` (count this step's tokens with that tokenizer
            and keep it for the session), ``grading_response`` (if non-empty, grade this text
            instead of ``response``; tokens are still counted on ``response``) and
            ``num_generated_tokens`` (the number of token ids the policy generated for
            ``response``, in the session tokenizer's units: the step is charged
            ``max(tokens of response, num_generated_tokens)``, so decoding and re-encoding cannot
            make a response cheaper than it was to generate).
    """

    response: str = Field(..., description="Full model output: reasoning trace ending in a final answer (\\boxed{}).")


class HistoryEntry(BaseModel):
    """What one answered question did (no gold answer: see :class:`StepRecord`).

    Token counts are in tokens of the session tokenizer. ``reward_components`` are signed and
    sum to ``reward``.
    """

    model_config = ConfigDict(extra="forbid")

    index: int = Field(..., description="0-based position of the question in the episode.")
    question_id: str
    problem_type: str
    difficulty: int | None = None
    raw_tokens: int = Field(..., description="Tokens of the response as counted, before clipping.")
    tokens: int = Field(
        ..., description="Tokens charged to the budget (clipped to the remaining budget in hard-cap mode)."
    )
    extracted_answer: str | None = Field(None, description="Final answer found in the graded text, or null.")
    correct: bool
    grade_reason: str = Field(
        ..., description="Why the grader decided (e.g. 'exact', 'equivalent', 'mismatch', 'no_answer', 'timeout')."
    )
    reward: float
    reward_components: dict[str, float] = Field(default_factory=dict)
    # The reference environment's (ReasonBudgetEnv v2) names, served beside ours so that its
    # clients read real values (README "Departures from the v2 contract").
    tokens_used: int = Field(0, description="= tokens (the reference environment's name).")
    was_correct: bool = Field(False, description="= correct (the reference environment's name).")
    question_summary: str = Field(
        "", description="The question's first 60 characters (the reference environment's field)."
    )


class StepRecord(HistoryEntry):
    """The result of the step that answered a question: the history entry plus what only this
    step reveals (the gold answer) and diagnostics."""

    gold_answer: str = Field(..., description="The question's gold answer (revealed only after it was answered).")
    question: str = Field("", description="The question text that was answered.")
    graded_text: str = Field(
        "response",
        description="Which text was graded: 'response', 'grading_response', or 'paid_prefix' (hard "
        "cap: only the tokens that fit in the remaining budget).",
    )
    grade_time_s: float = Field(0.0, description="Wall-clock seconds spent grading.")
    paid_chars: int | None = Field(
        None,
        description="Hard cap: characters of the response that fit in the remaining budget and "
        "were graded ('paid_prefix'); null when the whole text was graded.",
    )
    spent_before: int = Field(0, description="Tokens charged before this step (tokens).")
    remaining_budget_after: int = Field(
        0, description="Remaining budget after this step (tokens; may be negative in soft mode)."
    )


class ReasoningEconomicsObservation(Observation):
    """What the policy sees before answering (and what the last step did).

    The gold answer of a question never appears before that question is answered; the answered
    question's gold is in ``last_step`` only.
    """

    question: str = Field("", description="Current question text ('' when done).")
    question_id: str | None = None
    problem_type: str | None = None
    difficulty: int | None = None
    question_index: int = Field(0, description="0-based index of the current question (= questions answered).")
    num_questions: int = 0
    total_budget: int = Field(0, description="Episode budget (tokens).")
    remaining_budget: int = Field(0, description="Tokens left (negative possible in soft mode).")
    questions_remaining: int = 0
    budget_per_remaining_question: float = Field(0.0, description="remaining_budget / questions_remaining.")
    accuracy_so_far: float = Field(0.0, description="Correct / answered so far (0 before the first answer).")
    step_token_cap: int = Field(
        0,
        description="Generation cap for the next response (tokens): min(max_tokens_per_step, "
        "remaining) in hard-cap mode, else max_tokens_per_step. Policies and trainers "
        "apply it; the environment itself clips only at the remaining budget (hard-cap "
        "mode).",
    )
    history: list[HistoryEntry] = Field(default_factory=list)
    last_step: StepRecord | None = Field(
        None, description="What the step that produced this observation did (null after reset)."
    )
    done_reason: str | None = Field(
        None, description="'all_answered', 'budget_exhausted', 'episode_already_done' or 'no_episode' when done."
    )
    # The reference environment's (ReasonBudgetEnv v2) names, served beside ours (same values).
    step_idx: int = Field(0, description="= question_index (the reference environment's name).")
    budget_per_remaining: float = Field(
        0.0, description="= budget_per_remaining_question (the reference environment's name)."
    )


class ReasoningEconomicsState(State):
    """Internal episode state (``/state``). Holds no gold answers."""

    total_budget: int = 0
    spent_budget: int = 0
    remaining_budget: int = 0
    questions_answered: int = 0
    num_questions: int = 0
    total_correct: int = 0
    current_accuracy: float = 0.0
    budget_remaining_ratio: float = 0.0
    budget_source: str | None = None
    tokenizer_name: str | None = None
    seed: int | None = None
    done: bool = False
    done_reason: str | None = None
    question_ids: list[str] = Field(default_factory=list)
    problem_types: list[str] = Field(default_factory=list)
    episode_reward: float = 0.0


def observation_to_dict(obs: ReasoningEconomicsObservation) -> dict[str, Any]:
    """JSON-ready dict of an observation (for logs and the UI)."""
    return obs.model_dump(mode="json")


# The reference environment's (ReasonBudgetEnv v2) names of the same classes: its OpenEnv clients
# and users' code import them, so they stay importable (from here and from ``reasoning_env``).
ReasonBudgetAction = ReasoningEconomicsAction
ReasonBudgetObservation = ReasoningEconomicsObservation
ReasonBudgetState = ReasoningEconomicsState

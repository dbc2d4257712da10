"""The one prompt template every policy and the trainer use.

A turn's user message states the budget situation and the question; the system message states
the rules. Keeping both here means an evaluated policy and a trained one see the same text.

Template (``{...}`` filled from the observation)::

    Question {index}/{num_questions} [{problem_type}]
    Budget: {remaining_budget} of {total_budget} tokens left, {questions_remaining} questions left
    ({budget_per_remaining_question:.0f} tokens per remaining question). This answer may use at most
    {step_token_cap} tokens. Accuracy so far: {accuracy}.
    Recent: #{i} {problem_type}: {tokens} tokens, correct|wrong; ... (last ``history_len``)

    {question}

    Think as long as the question needs, then end with the final answer in \\boxed{}.
"""

from __future__ import annotations

from typing import Any

SYSTEM_PROMPT = (
    "You answer a sequence of math questions that share one token budget. Every token you write is "
    "charged to the budget. Spend more reasoning on hard questions and less on easy ones, and do not "
    "run out before the last question. End every answer with the final result in \\boxed{}."
)

INSTRUCTION = "Think as long as the question needs, then end with the final answer in \\boxed{}."


def _get(obs: Any, key: str, default: Any = None) -> Any:
    if isinstance(obs, dict):
        return obs.get(key, default)
    return getattr(obs, key, default)


def format_history(history: list, limit: int = 3) -> str:
    """The last ``limit`` history entries as one line (``""`` when empty)."""
    if not history or limit <= 0:
        return ""
    parts = []
    for h in history[-limit:]:
        idx = _get(h, "index", 0) + 1
        ptype = _get(h, "problem_type", "?")
        tokens = _get(h, "tokens", 0)
        verdict = "correct" if _get(h, "correct", False) else "wrong"
        parts.append(f"#{idx} {ptype}: {tokens} tokens, {verdict}")
    return "Recent: " + "; ".join(parts) + "."


def build_user_prompt(obs: Any, *, history_len: int = 3, show_problem_type: bool = True) -> str:
    """The user message for the current question of ``obs`` (an observation or its dict).

    Args:
        obs: A :class:`~reasoning_env.models.ReasoningEconomicsObservation` (or ``model_dump()`` of one).
        history_len: How many past answers to summarise (0 = none).
        show_problem_type: Include the problem type label in the header.
    Returns:
        The prompt text (no chat markup).
    """
    index = _get(obs, "question_index", 0) + 1
    n = _get(obs, "num_questions", 0)
    ptype = _get(obs, "problem_type")
    header = f"Question {index}/{n}" + (f" [{ptype}]" if (show_problem_type and ptype) else "")
    answered = index - 1
    acc = f"{_get(obs, 'accuracy_so_far', 0.0):.0%} of {answered}" if answered else "n/a"
    lines = [
        header,
        (
            f"Budget: {_get(obs, 'remaining_budget', 0)} of {_get(obs, 'total_budget', 0)} tokens left, "
            f"{_get(obs, 'questions_remaining', 0)} questions left "
            f"({_get(obs, 'budget_per_remaining_question', 0.0):.0f} tokens per remaining question). "
            f"This answer may use at most {_get(obs, 'step_token_cap', 0)} tokens. Accuracy so far: {acc}."
        ),
    ]
    hist = format_history(list(_get(obs, "history", []) or []), history_len)
    if hist:
        lines.append(hist)
    lines += ["", str(_get(obs, "question", "")), "", INSTRUCTION]
    return "\n".join(lines)


def build_messages(obs: Any, *, system_prompt: str | None = SYSTEM_PROMPT, history_len: int = 3) -> list[dict]:
    """Chat messages ``[{"role": "system", ...}, {"role": "user", ...}]`` for the current question."""
    messages = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": build_user_prompt(obs, history_len=history_len)})
    return messages

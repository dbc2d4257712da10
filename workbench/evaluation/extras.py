"""The evaluation extras shared by evaluation and Play: how a budget mode maps to reset
arguments, and the expected-correctness / oracle / regret columns of a run folder.

Both :mod:`workbench.evaluation.runner` and :mod:`workbench.play` write run folders through these
functions, so an evaluation run and a saved Play episode have the same columns with the same
meaning (:data:`workbench.runs.EVAL_STEP_EXTRAS`, :data:`workbench.runs.EVAL_EPISODE_EXTRAS`).
The regret itself is :func:`reasoning_env.policies.episode_regret`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from reasoning_env.policies import OracleCache, SolverCurves, episode_regret

__all__ = ["BUDGET_MODES", "budget_reset_kwargs", "episode_extras", "scalar", "step_expected_correct"]

#: How an episode's budget is set: the tokenizer-native formula (``int(budget_ratio x tokens of
#: the question texts)`` in the policy tokenizer's units), the config formula, or an explicit number.
BUDGET_MODES = ("tokenizer_native", "config", "explicit")


def budget_reset_kwargs(
    mode: str, *, tokenizer_name: str, config_tokenizer: str, total_budget: int | None = None
) -> tuple[dict[str, Any], str | None]:
    """``(reset keyword arguments, step tokenizer)`` of a budget mode.

    Args:
        mode: One of :data:`BUDGET_MODES`.
        tokenizer_name: The tokenizer that counts this episode's tokens (the policy's).
        config_tokenizer: The config's ``tokenizer_name``.
        total_budget: The budget of ``"explicit"`` (tokens).

    Returns:
        The reset arguments, and the tokenizer to send with every step (``metadata.tokenizer_name``)
        when the reset does not set it (``"config"`` mode with a policy tokenizer that differs from
        the config's), else ``None``.

    Raises:
        ValueError: unknown mode, or ``"explicit"`` without a positive ``total_budget``.
    """
    if mode == "explicit":
        if total_budget is None or int(total_budget) < 1:
            raise ValueError(f"budget mode 'explicit' needs a total budget of at least 1 token, got {total_budget!r}")
        return {"total_budget": int(total_budget), "tokenizer_name": tokenizer_name}, None
    if mode == "tokenizer_native":
        return {"tokenizer_name": tokenizer_name}, None
    if mode == "config":
        return {}, (tokenizer_name if tokenizer_name != config_tokenizer else None)
    raise ValueError(f"budget_mode must be one of {list(BUDGET_MODES)}, got {mode!r}")


def scalar(v: Any) -> bool:
    """Whether ``v`` can be stored as is in a run-folder column (JSON scalar)."""
    return v is None or isinstance(v, (str, int, float, bool))


def step_expected_correct(curves: SolverCurves, last_step: Any) -> float:
    """The ``expected_correct`` column of a step: the solver curve's probability of a correct
    answer at the charged tokens (0 for no tokens)."""
    if last_step.tokens <= 0:
        return 0.0
    return float(curves.p(last_step.tokens, last_step.problem_type, last_step.difficulty))


def episode_extras(
    *,
    kind: str,
    curves: SolverCurves,
    num_questions: int,
    total_budget: int,
    steps: Sequence[tuple[str | None, float | None, int]],
    questions: Sequence[tuple[str | None, float | None]] | None,
    lows: Sequence[int] | None = None,
    oracle: OracleCache | None = None,
) -> dict[str, Any]:
    """The episode columns ``kind``, ``unanswered``, ``expected_correct``,
    ``oracle_expected_correct`` and ``regret`` (expected correct answers per episode).

    Args:
        steps: ``(problem_type, difficulty, charged tokens)`` of the answered steps, in order.
        questions: Every question's ``(problem_type, difficulty)``, or ``None`` when unknown
            (a remote run that did not answer them all): the oracle and regret are then NaN.
        lows: Shortest possible response per question (tokens), for the oracle's plan.
        oracle: The shared oracle cache (``None``: no oracle, NaN).
    """
    out: dict[str, Any] = {"kind": kind, "unanswered": int(num_questions - len(steps))}
    if questions is not None and oracle is not None:
        r = episode_regret(curves, questions, int(total_budget), [t for _p, _d, t in steps], lows=lows, cache=oracle)
        out.update(
            expected_correct=r.expected_correct, oracle_expected_correct=r.oracle_expected_correct, regret=r.regret
        )
        return out
    exp = sum(float(curves.p(float(t), p, d)) for p, d, t in steps if float(t) > 0)
    out.update(expected_correct=exp, oracle_expected_correct=math.nan, regret=math.nan)
    return out

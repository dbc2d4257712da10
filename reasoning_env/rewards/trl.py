"""Rewards as TRL-style reward callables: ``f(completions, **kwargs) -> list[float]``.

TRL's ``GRPOTrainer`` calls each reward function with ``prompts``, ``completions``,
``completion_ids`` and every dataset column as keyword lists (one entry per completion). The
callables built here read, per completion:

- length (tokens): ``tokens`` column if present, else ``len(completion_ids[i])``, else the
  ``tokenizer`` argument's count of the completion text;
- verdict: ``correct`` (and optionally ``has_answer``) columns if present, else the completion is
  graded against the ``gold_answer`` / ``answer`` / ``solution`` column with
  :class:`reasoning_env.grading.Grader`;
- budget context: ``total_budget``, ``num_questions``, ``spent_before``, ``question_index``,
  ``difficulty``, ``problem_type`` columns if present, else the ``config``'s values (by default
  the default EnvConfig's config budget: 16,200 tokens for 10 questions, first question);
- groups (for group rewards): a ``group`` column if present, else completions of the same prompt.

Only step and group components are paid (an episode bonus needs a finished episode: use the
environment, or re-score the run). Caveat: TRL computes rewards per process, so a group reward
sees the members of a group that this process generated.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from reasoning_env.rewards.batch import StepBatch, components_total


def completion_text(c: Any) -> str:
    """Text of a TRL completion: a string, or (conversational) the last message's content."""
    if isinstance(c, str):
        return c
    if isinstance(c, dict):
        return str(c.get("content", ""))
    if isinstance(c, (list, tuple)) and c:
        last = c[-1]
        return str(last.get("content", "")) if isinstance(last, dict) else str(last)
    return "" if c is None else str(c)


def prompt_text(p: Any) -> str:
    """Text of a TRL prompt: a string, or (conversational) every message's content joined."""
    if isinstance(p, str):
        return p
    if isinstance(p, dict):
        return str(p.get("content", ""))
    if isinstance(p, (list, tuple)):
        return "\n".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in p)
    return "" if p is None else str(p)


def _column(kwargs: dict, name: str, n: int) -> list | None:
    v = kwargs.get(name)
    if v is None:
        return None
    if isinstance(v, (list, tuple, np.ndarray)):
        if len(v) != n:
            raise ValueError(f"column {name!r} has {len(v)} values for {n} completions")
        return list(v)
    return [v] * n


def _is_number(v: Any) -> bool:
    return not isinstance(v, (bool, np.bool_)) and isinstance(v, (int, float, np.integer, np.floating))


def _checked_numbers(values: list | None, name: str, *, positive: bool = False) -> list | None:
    """``values`` unchanged when every one is a finite number (> 0 with ``positive``, else >= 0).

    Raises:
        ValueError: naming the column, the completion and the value.
    """
    if values is None:
        return None
    for i, v in enumerate(values):
        if not _is_number(v) or not math.isfinite(v) or (v <= 0 if positive else v < 0):
            bound = "> 0" if positive else ">= 0"
            raise ValueError(
                f"column {name!r} must hold finite numbers {bound} (tokens or counts), got {v!r} for completion {i}"
            )
    return values


def _checked_flags(values: list | None, name: str) -> list | None:
    """``values`` as bools when each is a bool (numpy's too) or the integer 0 / 1.

    Raises:
        ValueError: a value is anything else (``bool("False")`` is True: a string verdict would be paid).
    """
    if values is None:
        return None
    out = []
    for i, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)) or (_is_number(v) and v in (0, 1)):
            out.append(bool(v))
        else:
            raise ValueError(f"column {name!r} must hold booleans (True/False or 1/0), got {v!r} for completion {i}")
    return out


def _checked_golds(values: list) -> list[str]:
    """The gold answers as text.

    Raises:
        ValueError: one is missing (None, NaN or blank): ``str(None)`` would grade ``\\boxed{None}`` correct.
    """
    out = []
    for i, g in enumerate(values):
        if g is None or (isinstance(g, float) and math.isnan(g)) or not str(g).strip():
            raise ValueError(
                f"the gold answer of completion {i} is missing ({g!r}); fill the dataset's gold column "
                "or drop the row before training"
            )
        out.append(str(g))
    return out


def _checked_difficulties(values: list | None) -> list:
    if values is None:
        return []
    for i, d in enumerate(values):
        if d is not None and not _is_number(d):
            raise ValueError(f"column 'difficulty' must hold numbers or None (unknown), got {d!r} for completion {i}")
    return values


def _group_ids(prompts: Sequence[Any] | None, kwargs: dict, n: int) -> np.ndarray:
    g = _column(kwargs, "group", n)
    keys = (
        g
        if g is not None
        else (
            [json.dumps(p, sort_keys=True, default=str) if not isinstance(p, str) else p for p in prompts]
            if prompts is not None
            else list(range(n))
        )
    )
    index: dict[Any, int] = {}
    return np.array([index.setdefault(k if g is None else str(k), len(index)) for k in keys], dtype=np.int64)


def steps_from_completions(
    completions: Sequence[Any],
    *,
    prompts: Sequence[Any] | None = None,
    completion_ids: Sequence[Sequence[int]] | None = None,
    tokenizer: Any = None,
    grader: Any = None,
    config: Any = None,
    **kwargs: Any,
) -> StepBatch:
    """The :class:`StepBatch` a TRL reward call describes (see the module docstring).

    Raises:
        TypeError: ``completions`` is not a list (a bare string would be one completion per
            character), or a ``completion_ids`` entry is not a sequence of ids.
        ValueError: a column's length differs from the completions', a gold answer is missing, a
            verdict column holds non-booleans, or a token / budget column holds a negative,
            non-finite or (``total_budget``, ``num_questions``) zero value.
    """
    if isinstance(completions, (str, bytes)) or not isinstance(completions, (Sequence, np.ndarray)):
        raise TypeError(
            "completions must be a list of completions (strings or chat message lists), "
            f"got {type(completions).__name__}"
        )
    texts = [completion_text(c) for c in completions]
    n = len(texts)
    tok = _checked_numbers(_column(kwargs, "tokens", n), "tokens")
    if tok is None and completion_ids is not None:
        if len(completion_ids) != n:
            raise ValueError(f"{len(completion_ids)} completion_ids for {n} completions")
        for i, ids in enumerate(completion_ids):
            if isinstance(ids, (str, bytes)) or not hasattr(ids, "__len__"):
                raise TypeError(f"completion_ids[{i}] must be a sequence of token ids, got {type(ids).__name__}")
        tok = [len(ids) for ids in completion_ids]
    if tok is None and tokenizer is not None:
        count = getattr(tokenizer, "count", None)
        tok = [count(t) if count else len(tokenizer.encode(t, add_special_tokens=False)) for t in texts]
    if tok is None:
        raise ValueError("token counts unknown: pass completion_ids (TRL does), a 'tokens' column, or tokenizer=")

    correct = _checked_flags(_column(kwargs, "correct", n), "correct")
    has_answer = _checked_flags(_column(kwargs, "has_answer", n), "has_answer")
    if correct is None:
        gold = next(
            (_column(kwargs, k, n) for k in ("gold_answer", "answer", "solution") if kwargs.get(k) is not None), None
        )
        if gold is None:
            raise ValueError(
                "verdicts unknown: pass a 'correct' column or a gold column ('gold_answer', 'answer' or 'solution')"
            )
        gold = _checked_golds(gold)
        from reasoning_env.grading import Grader

        if grader is None:
            grader = Grader()
        if isinstance(grader, Grader) and prompts is not None and len(prompts) == n:
            # the prompt holds the question: a copy of one of its expressions is not an answer
            results = [grader.grade(t, str(g), question=prompt_text(p)) for t, g, p in zip(texts, gold, prompts)]
        else:
            results = [grader.grade(t, str(g)) for t, g in zip(texts, gold)]
        correct = [r.correct for r in results]
        if has_answer is None:
            has_answer = [r.extracted is not None for r in results]
    if has_answer is None:
        from reasoning_env.grading.extract import extract_final_answer

        has_answer = [extract_final_answer(t).answer is not None for t in texts]

    if config is None:
        from reasoning_env.config import EnvConfig

        config = EnvConfig()
    budget = _checked_numbers(_column(kwargs, "total_budget", n), "total_budget", positive=True)
    nq = _checked_numbers(_column(kwargs, "num_questions", n), "num_questions", positive=True)
    budget = budget or config.config_budget()
    nq = nq or config.num_questions
    return StepBatch.build(
        n,
        correct=correct,
        has_answer=has_answer,
        tokens=tok,
        raw_tokens=tok,
        total_budget=budget,
        num_questions=nq,
        spent_before=_checked_numbers(_column(kwargs, "spent_before", n), "spent_before") or 0,
        question_index=_checked_numbers(_column(kwargs, "question_index", n), "question_index") or 0,
        hard_cap_mode=_checked_flags(_column(kwargs, "hard_cap_mode", n), "hard_cap_mode") or config.hard_cap_mode,
        difficulty=_checked_difficulties(_column(kwargs, "difficulty", n)) or [None] * n,
        problem_type=_column(kwargs, "problem_type", n) or "",
        response=texts,
        group=_group_ids(prompts, kwargs, n),
    )


def trl_reward_function(
    spec: Any = None,
    *,
    tokenizer: Any = None,
    grader: Any = None,
    config: Any = None,
    name: str | None = None,
) -> Callable[..., list[float]]:
    """A TRL reward callable paying the step (and group) components of ``spec``.

    Args:
        spec: Reward spec (dict, YAML, registry name) or a built reward; default: the default reward (``economics``).
        tokenizer: Counts tokens when TRL gives no ``completion_ids`` and there is no ``tokens`` column.
        grader: A :class:`~reasoning_env.grading.Grader` (default: a new one).
        config: EnvConfig supplying budget defaults (see module docstring).
        name: ``__name__`` of the callable (TRL logs rewards under it); default ``reward_<type>``.

    Returns:
        ``f(completions, prompts=None, completion_ids=None, **kwargs) -> list[float]``.
    """
    from reasoning_env.rewards.build import build_reward

    reward = build_reward(spec, context="training")

    def reward_fn(
        completions: Sequence[Any],
        prompts: Sequence[Any] | None = None,
        completion_ids: Sequence[Sequence[int]] | None = None,
        **kwargs: Any,
    ) -> list[float]:
        batch = steps_from_completions(
            completions,
            prompts=prompts,
            completion_ids=completion_ids,
            tokenizer=tokenizer,
            grader=grader,
            config=config,
            **kwargs,
        )
        return [float(x) for x in components_total(reward.step_batch(batch), len(batch))]

    reward_fn.__name__ = name or f"reward_{reward.info.name}"
    reward_fn.reward = reward  # type: ignore[attr-defined]
    return reward_fn


def trl_reward_functions(spec: Any, **kwargs: Any) -> list[Callable[..., list[float]]]:
    """One TRL callable per member of a combined spec (weights applied inside), so TRL logs each
    under its label; a single spec gives a one-element list. ``kwargs`` as :func:`trl_reward_function`."""
    from reasoning_env.rewards.build import build_reward
    from reasoning_env.rewards.compose import CombinedReward

    reward = build_reward(spec, context="training")
    if isinstance(reward, CombinedReward) and len(reward.entries) > 1:
        kwargs.pop("name", None)
        return [trl_reward_function(CombinedReward((e,)), name=f"reward_{e.label}", **kwargs) for e in reward.entries]
    return [trl_reward_function(reward, **kwargs)]

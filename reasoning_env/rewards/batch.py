"""Vectorised contexts (:class:`StepBatch`, :class:`EpisodeBatch`) and the base class of shapes.

Every registered reward computes its components over *arrays* of steps (and episodes): the
environment calls it on a batch of one (:meth:`RewardShape.step_components`), while the reward
lab's counterfactual re-scoring calls it once on every step of a run (10,000 steps in a few
milliseconds) and training calls it on a batch of completions. One formula, three users.

Token counts are in policy-tokenizer tokens, stored as float64 arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import numpy as np

from reasoning_env.errors import GroupRewardError
from reasoning_env.rewards.base import EpisodeContext, StepContext


def group_error_message(name: str) -> str:
    """The message explaining why a group reward cannot run inside the environment."""
    return (
        f"reward {name!r} is a group reward: it compares the rollouts of one GRPO group (e.g. the "
        "shortest correct length among them), so it cannot be computed inside one environment step. "
        "Use it in training as a TRL reward function (reasoning_env.rewards.trl_reward_function) or in "
        "counterfactual re-scoring of a run with group/member columns (workbench.reward_lab.rescore)."
    )


def _arr(values: Any, n: int, dtype: Any) -> np.ndarray:
    a = np.asarray(values, dtype=dtype)
    if a.ndim == 0:
        return np.full(n, a, dtype=dtype)
    if a.shape != (n,):
        raise ValueError(f"expected {n} values, got shape {a.shape}")
    return a


@dataclass
class StepBatch:
    """Arrays of step contexts (see :class:`~reasoning_env.rewards.base.StepContext`), length n.

    Attributes:
        correct, has_answer, hard_cap_mode: bool arrays.
        tokens: tokens charged to the budget this step; raw_tokens: tokens of the response as
            counted (generated length). total_budget, num_questions, spent_before,
            question_index: float64 arrays (tokens / counts).
        difficulty: float64, ``NaN`` where unknown. problem_type: object array of str.
        response: object array of response texts, or ``None`` when the texts are unavailable
            (text rewards then assume a clean, boxed response).
        group: int64 group codes (rows with the same code are rollouts of the same question in one
            GRPO group; ``-1`` = no group), or ``None``.
        cache: per-batch memo for derived per-row features (e.g. n-gram repetition of a text);
            lives and dies with the batch.
    """

    correct: np.ndarray
    has_answer: np.ndarray
    tokens: np.ndarray
    raw_tokens: np.ndarray
    total_budget: np.ndarray
    num_questions: np.ndarray
    spent_before: np.ndarray
    question_index: np.ndarray
    hard_cap_mode: np.ndarray
    difficulty: np.ndarray
    problem_type: np.ndarray
    response: np.ndarray | None = None
    group: np.ndarray | None = None
    cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return int(self.correct.shape[0])

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(
        cls,
        n: int,
        *,
        correct: Any,
        tokens: Any,
        total_budget: Any,
        num_questions: Any,
        raw_tokens: Any = None,
        has_answer: Any = True,
        spent_before: Any = 0,
        question_index: Any = 0,
        hard_cap_mode: Any = True,
        difficulty: Any = np.nan,
        problem_type: Any = "",
        response: Sequence[str] | None = None,
        group: Any = None,
    ) -> StepBatch:
        """A batch of ``n`` steps; scalars broadcast. ``raw_tokens`` defaults to ``tokens``;
        ``difficulty`` may hold ``None`` for unknown."""
        tok = _arr(tokens, n, np.float64)
        if difficulty is None or np.ndim(difficulty) == 0:
            diff = np.full(n, np.nan if difficulty is None else float(difficulty), dtype=np.float64)
        else:
            diff = np.array([np.nan if d is None else float(d) for d in difficulty], dtype=np.float64)
            if diff.shape != (n,):
                raise ValueError(f"expected {n} difficulties, got shape {diff.shape}")
        pt = np.asarray(problem_type, dtype=object)
        if pt.ndim == 0:
            pt = np.full(n, pt, dtype=object)
        return cls(
            correct=_arr(correct, n, bool),
            has_answer=_arr(has_answer, n, bool),
            tokens=tok,
            raw_tokens=tok.copy() if raw_tokens is None else _arr(raw_tokens, n, np.float64),
            total_budget=_arr(total_budget, n, np.float64),
            num_questions=_arr(num_questions, n, np.float64),
            spent_before=_arr(spent_before, n, np.float64),
            question_index=_arr(question_index, n, np.float64),
            hard_cap_mode=_arr(hard_cap_mode, n, bool),
            difficulty=diff,
            problem_type=pt,
            response=None if response is None else np.asarray(list(response), dtype=object),
            group=None if group is None else _arr(group, n, np.int64),
        )

    @classmethod
    def from_contexts(cls, ctxs: Iterable[StepContext]) -> StepBatch:
        """A batch from :class:`StepContext` objects (the environment's path; no group)."""
        ctxs = list(ctxs)
        n = len(ctxs)
        return cls.build(
            n,
            correct=[c.correct for c in ctxs],
            has_answer=[c.has_answer for c in ctxs],
            tokens=[c.tokens for c in ctxs],
            raw_tokens=[c.raw_tokens for c in ctxs],
            total_budget=[c.total_budget for c in ctxs],
            num_questions=[c.num_questions for c in ctxs],
            spent_before=[c.spent_before for c in ctxs],
            question_index=[c.question_index for c in ctxs],
            hard_cap_mode=[c.hard_cap_mode for c in ctxs],
            difficulty=[c.difficulty for c in ctxs],
            problem_type=[c.problem_type for c in ctxs],
            response=[c.response for c in ctxs],
        )

    def take(self, idx: np.ndarray) -> StepBatch:
        """The rows ``idx`` (a fresh cache)."""
        kw = {}
        for f in fields(self):
            if f.name == "cache":
                continue
            v = getattr(self, f.name)
            kw[f.name] = None if v is None else v[idx]
        return StepBatch(**kw)

    # ------------------------------------------------------------------ derived quantities
    @property
    def fair_share(self) -> np.ndarray:
        """``total_budget / num_questions`` (tokens); 1.0 where ``num_questions`` is 0."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.num_questions > 0, self.total_budget / self.num_questions, 1.0)

    @property
    def spent_after(self) -> np.ndarray:
        """Tokens charged after this step."""
        return self.spent_before + self.tokens

    @property
    def overspend_tokens(self) -> np.ndarray:
        """Cumulative overspend after this step: ``max(0, spent_after - total_budget)`` (tokens)."""
        return np.maximum(0.0, self.spent_after - self.total_budget)

    @property
    def remaining_before(self) -> np.ndarray:
        """Budget left before this step: ``total_budget - spent_before`` (tokens; < 0 possible in soft mode)."""
        return self.total_budget - self.spent_before

    @property
    def questions_left(self) -> np.ndarray:
        """Questions left including this one: ``num_questions - question_index`` (at least 1)."""
        return np.maximum(1.0, self.num_questions - self.question_index)

    def text_feature(self, key: str, fn: Callable[[str], float]) -> np.ndarray:
        """``fn(response)`` for every row as float64, memoised on this batch under ``key``.

        Raises:
            ValueError: the batch has no response texts.
        """
        if self.response is None:
            raise ValueError("this batch has no response texts")
        if key not in self.cache:
            self.cache[key] = np.fromiter(
                (fn(t if isinstance(t, str) else "") for t in self.response), dtype=np.float64, count=len(self)
            )
        return self.cache[key]


@dataclass
class EpisodeBatch:
    """Arrays of episode contexts (see :class:`~reasoning_env.rewards.base.EpisodeContext`).

    Attributes:
        num_correct, num_answered, num_questions, total_spent, total_budget: float64 arrays
            (counts and tokens). ran_dry: bool array.
    """

    num_correct: np.ndarray
    num_answered: np.ndarray
    num_questions: np.ndarray
    total_spent: np.ndarray
    total_budget: np.ndarray
    ran_dry: np.ndarray

    def __len__(self) -> int:
        return int(self.num_correct.shape[0])

    @classmethod
    def build(
        cls,
        n: int,
        *,
        num_correct: Any,
        num_questions: Any,
        total_spent: Any,
        total_budget: Any,
        num_answered: Any = None,
        ran_dry: Any = False,
    ) -> EpisodeBatch:
        """A batch of ``n`` episodes; scalars broadcast. ``num_answered`` defaults to ``num_questions``."""
        nq = _arr(num_questions, n, np.float64)
        return cls(
            num_correct=_arr(num_correct, n, np.float64),
            num_answered=nq.copy() if num_answered is None else _arr(num_answered, n, np.float64),
            num_questions=nq,
            total_spent=_arr(total_spent, n, np.float64),
            total_budget=_arr(total_budget, n, np.float64),
            ran_dry=_arr(ran_dry, n, bool),
        )

    @classmethod
    def from_contexts(cls, ctxs: Iterable[EpisodeContext]) -> EpisodeBatch:
        """A batch from :class:`EpisodeContext` objects."""
        ctxs = list(ctxs)
        return cls.build(
            len(ctxs),
            num_correct=[c.num_correct for c in ctxs],
            num_answered=[c.num_answered for c in ctxs],
            num_questions=[c.num_questions for c in ctxs],
            total_spent=[c.total_spent for c in ctxs],
            total_budget=[c.total_budget for c in ctxs],
            ran_dry=[c.ran_dry for c in ctxs],
        )


def components_total(components: dict[str, np.ndarray], n: int) -> np.ndarray:
    """The total reward of ``n`` rows: the sum of a batch's signed components (``step_batch`` or
    ``episode_batch`` output, ``{name: float64 array of n}``); zeros when there are none.

    Returns:
        ``float64`` array of shape ``(n,)``.
    """
    total = np.zeros(n)
    for v in components.values():
        total = total + v
    return total


class RewardShape:
    """Base class of registered rewards (subclasses are frozen dataclasses of their parameters).

    Subclasses override :meth:`step_batch` and/or :meth:`episode_batch`; the environment's
    scalar methods :meth:`step_components` / :meth:`episode_components` evaluate them on a batch
    of one, so the live reward and the re-scored reward come from the same formula.
    """

    info: ClassVar[Any]  # RewardInfo, set by registry.register

    # ------------------------------------------------------------------ vectorised API
    def step_batch(self, batch: StepBatch) -> dict[str, np.ndarray]:
        """Signed per-step components over a batch, ``{name: float64 array}`` (default: none)."""
        return {}

    def episode_batch(self, batch: EpisodeBatch) -> dict[str, np.ndarray]:
        """Signed episode components (paid on the final step), ``{name: float64 array}`` (default: none)."""
        return {}

    # ------------------------------------------------------------------ environment API (EnvReward)
    def step_components(self, ctx: StepContext) -> dict[str, float]:
        """Components of one step (the environment's call).

        Raises:
            GroupRewardError: this is a group reward.
        """
        if self.info.is_group:
            raise GroupRewardError(group_error_message(self.info.name))
        out = self.step_batch(StepBatch.from_contexts([ctx]))
        return {k: float(v[0]) for k, v in out.items()}

    def episode_components(self, ctx: EpisodeContext) -> dict[str, float]:
        """Episode components of one finished episode (the environment's call on the final step)."""
        out = self.episode_batch(EpisodeBatch.from_contexts([ctx]))
        return {k: float(v[0]) for k, v in out.items()}

    # ------------------------------------------------------------------ description
    @property
    def component_names(self) -> tuple[str, ...]:
        """Names of the components this reward returns (step ones, then episode ones)."""
        return tuple(self.info.components)

    @property
    def is_group(self) -> bool:
        """True if it needs whole GRPO groups."""
        return bool(self.info.is_group)

    @property
    def needs_text(self) -> bool:
        """True if it reads response texts."""
        return bool(self.info.needs_text)

    def params(self) -> dict[str, Any]:
        """``{param: value}`` of this instance."""
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    def to_spec(self) -> dict[str, Any]:
        """The spec dict that :func:`reasoning_env.rewards.build` turns back into an equal reward."""
        return {"type": self.info.name, "weight": 1.0, "params": self.params()}

    def __post_init__(self) -> None:
        # Dataclass subclasses run this after __init__: every shape validates its parameters.
        self._check_params()

    def _check_params(self) -> None:
        """Validate every parameter against its :class:`Param` (run by ``__post_init__``)."""
        for p in self.info.params:
            object.__setattr__(self, p.name, p.check(getattr(self, p.name), self.info.name))


def as_float(a: Any) -> np.ndarray:
    """``np.asarray(a, float64)``."""
    return np.asarray(a, dtype=np.float64)

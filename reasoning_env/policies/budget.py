"""Budget baselines (the seed's dummy baselines, for budget and reward smoke tests).

Each writes real text of a chosen token length (exact in the environment's tokenizer, see
:mod:`.text`) ending in ``\\boxed{<answer>}``. They do not solve anything: by default the answer
is a placeholder (``0``), so their accuracy is near zero and their rows show spending patterns
and the reward's budget terms. With ``answer="solver"`` they answer like the simulated solver
at the length they spend (same curves, same seeded draws), which isolates their allocation
rule. Lengths are clipped to the observation's ``step_token_cap``.

- ``uniform``: the fair share ``total_budget // num_questions`` on every question.
- ``greedy_max``: the config's ``max_tokens`` (800 by default) on every question: runs dry.
- ``difficulty_oracle``: a fixed length by difficulty level, ``base_tokens * 2 ** (d - 1)``
  (64, 128, 256, 512, 1024 tokens for levels 1..5) capped at ``max_tokens``; ``d`` is the
  question's level or its problem type's default (:data:`~.curves.DEFAULT_DIFFICULTY`).
  It knows the difficulty but ignores the budget.
"""

from __future__ import annotations

import random
from typing import Any

from reasoning_env.policies.base import BasePolicy, EpisodeInfo, PolicyError, PolicyOutput, obs_get
from reasoning_env.policies.curves import SolverCurves
from reasoning_env.policies.simulated import question_uniform, wrong_answer
from reasoning_env.policies.text import write_response

__all__ = ["BudgetBaseline", "DifficultyOraclePolicy", "GreedyMaxPolicy", "PLACEHOLDER_ANSWER", "UniformPolicy"]

PLACEHOLDER_ANSWER = "0"
ANSWER_MODES = ("placeholder", "solver")


class BudgetBaseline(BasePolicy):
    """Base of the budget baselines: subclasses implement :meth:`length`.

    Args:
        answer: ``"placeholder"`` (``\\boxed{0}``) or ``"solver"`` (simulated solver's answer at
            the spent length; needs trusted context).
        curves: Curves for ``answer="solver"`` and for difficulty defaults.
        name: Row label (default: the class's).

    Raises:
        ValueError: unknown ``answer`` mode.
    """

    kind = "budget_baseline"
    default_name = "budget"

    def __init__(
        self, *, answer: str = "placeholder", curves: SolverCurves | None = None, name: str | None = None
    ) -> None:
        super().__init__()
        if answer not in ANSWER_MODES:
            raise ValueError(f"answer must be one of {list(ANSWER_MODES)}, got {answer!r}")
        self.answer = answer
        self.needs_trusted_context = answer == "solver"
        self.curves = curves or SolverCurves()
        self.name = name or self.default_name

    def describe(self) -> dict[str, Any]:
        """Name, kind, class and answer mode."""
        return {**super().describe(), "answer": self.answer}

    def reset(self, info: EpisodeInfo) -> None:
        """Start an episode. Raises :class:`PolicyError` when the tokenizer is missing."""
        super().reset(info)
        if info.tokenizer is None:
            raise PolicyError(
                f"policy {self.name!r} needs the environment's tokenizer "
                f"{info.tokenizer_name!r} to write exact-length text"
            )

    def length(self, obs: Any) -> int:  # pragma: no cover - abstract
        """Tokens to spend on the current question (before clipping to ``step_token_cap``)."""
        raise NotImplementedError

    def act(self, obs: Any) -> PolicyOutput:
        """Write text of :meth:`length` tokens ending in the answer."""
        if self.info is None:
            raise PolicyError(f"policy {self.name!r}: call reset() before act()")
        cap = int(obs_get(obs, "step_token_cap", 0))
        target = max(1, min(int(self.length(obs)), cap if cap > 0 else 1))
        qid = str(obs_get(obs, "question_id") or obs_get(obs, "question_index", 0))
        rng_state = f"{self.info.seed}|{qid}|text"
        meta: dict[str, Any] = {"target_tokens": target}
        answer = PLACEHOLDER_ANSWER
        if self.answer == "solver":
            q = self.info.questions[int(obs_get(obs, "question_index", 0))]
            text = write_response(self.info.tokenizer, target, q.gold_answer, random.Random(rng_state))
            length = int(self.info.tokenizer.count(text)) if text.startswith("\\boxed") else target
            p = float(self.curves.p(length, q.problem_type, q.difficulty))
            u = question_uniform(self.info.seed, q.id)
            meta.update(p_correct=p, u=u, intended_correct=bool(u < p))
            if u < p:
                return PolicyOutput(response=text, meta=meta)
            answer = wrong_answer(q.gold_answer, random.Random(f"{self.info.seed}|{q.id}|wrong"))
        text = write_response(self.info.tokenizer, target, answer, random.Random(rng_state))
        return PolicyOutput(response=text, meta=meta)


class UniformPolicy(BudgetBaseline):
    """Spends the fair share ``total_budget // num_questions`` on every question."""

    default_name = "uniform"

    def length(self, obs: Any) -> int:
        """``total_budget // num_questions`` (tokens)."""
        return int(self.info.total_budget) // max(1, int(self.info.num_questions))


class GreedyMaxPolicy(BudgetBaseline):
    """Spends ``max_tokens`` (the config's) on every question, until the budget runs dry."""

    default_name = "greedy_max"

    def length(self, obs: Any) -> int:
        """The config's ``max_tokens`` (tokens)."""
        return int(self.info.max_tokens)


class DifficultyOraclePolicy(BudgetBaseline):
    """A fixed length per difficulty level: ``base_tokens * 2 ** (d - 1)``, at most ``max_tokens``.

    Args:
        base_tokens: Length at level 1 (tokens, default 64).
        **kwargs: See :class:`BudgetBaseline`.
    """

    default_name = "difficulty_oracle"
    reads_difficulty = True  # oracle-informed: the label it reads sets the solver's success probability

    def __init__(self, *, base_tokens: int = 64, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if base_tokens < 1:
            raise ValueError(f"base_tokens must be >= 1, got {base_tokens}")
        self.base_tokens = int(base_tokens)

    def describe(self) -> dict[str, Any]:
        """Adds ``base_tokens``."""
        return {**super().describe(), "base_tokens": self.base_tokens}

    def length(self, obs: Any) -> int:
        """``base_tokens * 2 ** (d - 1)`` capped at ``max_tokens`` (tokens)."""
        d = self.curves.difficulty_for(obs_get(obs, "problem_type"), obs_get(obs, "difficulty"))
        return int(min(self.info.max_tokens, round(self.base_tokens * 2 ** (d - 1))))

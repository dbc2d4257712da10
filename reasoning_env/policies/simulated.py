"""The simulated solver: a calibrated stand-in for an LLM, and the oracle allocation on top of it.

:class:`SimulatedSolverPolicy` answers a question by

1. choosing a length ``t`` (tokens) with its allocation ``strategy``;
2. computing ``p = curves.p(t, problem_type, difficulty)`` (:mod:`.curves`);
3. drawing ``u`` uniform in [0, 1) from a hash of ``(episode seed, question id)`` and answering
   correctly iff ``u < p``. Every policy sees the same ``u`` for the same question (common random
   numbers), so a question solved with ``t`` tokens is also solved with more;
4. writing real text of exactly ``t`` tokens of the episode's tokenizer (:mod:`.text`) ending
   in ``\\boxed{gold}`` or a plausible wrong answer (the gold with a digit or letter changed),
   so the environment counts and grades it for real.

It needs the gold answers (trusted context from the evaluator) but uses only what the
observation shows to allocate, except the oracle, which also knows the future questions.

**Oracle-informed or blind.** The observation carries each question's difficulty label, and the
same label sets the solver's own success probability, so an allocator that reads it
(``proportional``, ``greedy``, and the oracle) knows its true curve: its closeness to the oracle holds
by construction (:attr:`SimulatedSolverPolicy.reads_difficulty`, shown as *oracle-informed* in every
table). An LLM's prompt has no difficulty. With ``blind=True`` (``sim_proportional_blind``,
``sim_greedy_blind``) the allocator sees only what an LLM sees: the problem type and the text of the
questions asked so far. It replaces each label by a guess from text length: the family's default
level (:data:`~.curves.DEFAULT_DIFFICULTY`) times the question's length over the mean length of the
questions seen so far in the episode (current included), clipped to 1..5
(:meth:`SimulatedSolverPolicy.blind_difficulty`). The answer is still drawn from the true curve.
``uniform`` reads no label, so ``sim_uniform`` is blind already.

Strategies (``t`` is then clipped to ``[1, step_token_cap]``):

- ``uniform``: ``remaining_budget / questions_remaining``.
- ``proportional``: ``remaining * d / (d + (left - 1) * d_mean)`` where ``d`` is the current
  question's difficulty and ``d_mean`` the mean difficulty of the questions seen so far in the
  episode (current included): longer on harder questions.
- ``greedy``: :func:`~.allocation.greedy_allocation` of the remaining budget over the current
  question's curve plus ``left - 1`` copies of the mean curve of the questions seen so far
  (marginal gains on concave envelopes), replanned every step; spends the current share.
- ``oracle`` (:class:`OracleAllocationPolicy`): the exact plan of :func:`~.oracle.oracle_plan`
  over the true curves of *all* the episode's questions with the whole budget, under the
  hard-cap rules (an upper bound on expected correct answers of any policy that answers every
  question it spends on with at least its shortest response, ``\\boxed{gold}``); replanned if the
  spend deviates from the plan. Its plans come from the evaluation's shared
  :class:`~.oracle.OracleCache` when one is set (:attr:`OracleAllocationPolicy.oracle_cache`).
"""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any

import numpy as np

from reasoning_env.policies.allocation import greedy_allocation
from reasoning_env.policies.base import BasePolicy, EpisodeInfo, PolicyError, PolicyOutput, obs_get
from reasoning_env.policies.curves import SolverCurves
from reasoning_env.policies.oracle import OracleCache, oracle_plan
from reasoning_env.policies.text import minimal_tokens, write_response

__all__ = ["OracleAllocationPolicy", "SimulatedSolverPolicy", "STRATEGIES", "question_uniform", "wrong_answer"]

STRATEGIES = ("uniform", "proportional", "greedy", "oracle")
#: Smallest length (tokens) a planned allocation gives a question (besides the env's min_tokens).
MIN_RESPONSE_TOKENS = 1


def question_uniform(seed: int, question_id: str) -> float:
    """The seeded uniform draw of a question in an episode: ``sha256("seed|id")`` -> [0, 1)."""
    h = hashlib.sha256(f"{int(seed)}|{question_id}".encode()).hexdigest()
    return int(h[:15], 16) / float(16**15)


_INT_RE = re.compile(r"^-?\d+$")
_DEC_RE = re.compile(r"^-?\d+\.\d+$")
_CHOICE_RE = re.compile(r"^((?:\\text\{)?\(?)([A-Ea-e])(\)?\}?)$")
_FIRST_NUM_RE = re.compile(r"\d+")


def wrong_answer(gold: str, rng: random.Random) -> str:
    """A plausible wrong answer: the gold with a number shifted, a digit changed, or a choice
    letter changed; otherwise ``gold + 1``. Never equal to ``gold`` as a string.

    Examples: ``"18" -> "21"``, ``"\\frac{16}{5}" -> "\\frac{13}{5}"``, ``"4343_6" -> "4345_6"``,
    ``"(C)" -> "(A)"``. (The first number is changed, not a unit's exponent or a base subscript,
    which lenient graders may ignore.)
    """
    g = gold.strip()
    if _INT_RE.match(g):
        delta = rng.choice([-3, -2, -1, 1, 2, 3, 10])
        return str(int(g) + delta)
    if _DEC_RE.match(g):
        whole, frac = g.split(".")
        delta = rng.choice([-2, -1, 1, 2])
        return f"{int(whole) + delta}.{frac}" if whole not in ("-0",) else f"{delta}.{frac}"
    m = _CHOICE_RE.match(g)
    if m:
        letters = [c for c in "ABCDE" if c != m.group(2).upper()]
        letter = rng.choice(letters)
        return f"{m.group(1)}{letter if m.group(2).isupper() else letter.lower()}{m.group(3)}"
    m = _FIRST_NUM_RE.search(g)
    if m:  # change the last digit of the first number (units, bases, exponents stay)
        i = m.end() - 1
        new = str((int(g[i]) + rng.randint(1, 8)) % 10)
        return g[:i] + new + g[i + 1 :]
    return f"{g}+1"


class SimulatedSolverPolicy(BasePolicy):
    """A simulated LLM whose accuracy follows :class:`~.curves.SolverCurves` (see the module docstring).

    Args:
        strategy: ``"uniform"``, ``"proportional"`` or ``"greedy"`` (``"oracle"``: use
            :class:`OracleAllocationPolicy`).
        curves: The accuracy curves (default: :class:`~.curves.SolverCurves` defaults).
        name: Row label (default ``sim_<strategy>``, ``sim_<strategy>_blind`` when blind).
        max_units: Grid resolution of the greedy strategy's heuristic (budget units).
        blind: Allocate without the difficulty label (see the module docstring); not for the oracle.

    Raises:
        ValueError: unknown strategy, or a blind oracle.
    """

    kind = "simulated"
    needs_trusted_context = True

    def __init__(
        self,
        strategy: str = "greedy",
        curves: SolverCurves | None = None,
        *,
        name: str | None = None,
        max_units: int = 1000,
        blind: bool = False,
    ) -> None:
        super().__init__()
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}; choose one of {list(STRATEGIES)}")
        if blind and strategy == "oracle":
            raise ValueError("the oracle allocation knows every question's curve; it has no blind variant")
        self.strategy = strategy
        self.blind = bool(blind)
        self.curves = curves or SolverCurves()
        default = "oracle_allocation" if strategy == "oracle" else f"sim_{strategy}" + ("_blind" if blind else "")
        self.name = name or default
        self.max_units = int(max_units)
        self._plan: tuple[int, int, list[int]] | None = None  # (start index, remaining then, tokens)

    @property
    def reads_difficulty(self) -> bool:  # type: ignore[override]
        """Whether the allocation reads the difficulty label (oracle-informed): every strategy but
        ``uniform``, unless blind."""
        return self.strategy != "uniform" and not self.blind

    def describe(self) -> dict[str, Any]:
        """Name, kind, strategy, blind or not, and the curves' source."""
        return {**super().describe(), "strategy": self.strategy, "blind": self.blind, "curves": self.curves.source}

    def blind_difficulty(self, problem_type: str | None, length: int, lengths: list[int]) -> float:
        """The blind guess of a question's level from what an LLM sees: the family's default level
        times ``length / mean(lengths)`` (the text lengths, in characters, of the questions seen
        so far, current included), clipped to 1..5."""
        base = self.curves.difficulty_for(problem_type, None)
        mean = float(np.mean(lengths)) if lengths else 0.0
        return float(np.clip(base * (length / mean if mean > 0 else 1.0), 1.0, 5.0))

    # ------------------------------------------------------------------ episode
    def reset(self, info: EpisodeInfo) -> None:
        """Start an episode. Raises :class:`PolicyError` without trusted context or tokenizer."""
        super().reset(info)
        if info.tokenizer is None:
            raise PolicyError(
                f"policy {self.name!r} needs the environment's tokenizer "
                f"{info.tokenizer_name!r} to write exact-length text"
            )
        self._plan = None

    def _floor_tokens(self) -> int:
        return max(int(self.info.min_tokens if self.info else 10), MIN_RESPONSE_TOKENS)

    def _question(self, obs: Any):
        idx = int(obs_get(obs, "question_index", 0))
        qs = self.info.questions or []
        if idx >= len(qs):
            raise PolicyError(f"observation asks question {idx} but the episode has {len(qs)}")
        q = qs[idx]
        qid = obs_get(obs, "question_id")
        if qid is not None and qid != q.id:
            raise PolicyError(f"trusted context out of sync: observation question {qid!r}, expected {q.id!r}")
        return q

    def _seen_curves(self, obs: Any):
        if self.blind:  # problem type and text of the questions asked so far; never a label
            idx = int(obs_get(obs, "question_index", 0))
            asked = (self.info.questions or [])[: idx + 1]
            lengths = [len(q.text) for q in asked]
            return [
                (q.problem_type, self.blind_difficulty(q.problem_type, n, lengths)) for q, n in zip(asked, lengths)
            ]
        seen = [
            (
                h["problem_type"] if isinstance(h, dict) else h.problem_type,
                h["difficulty"] if isinstance(h, dict) else h.difficulty,
            )
            for h in (obs_get(obs, "history", []) or [])
        ]
        seen.append((obs_get(obs, "problem_type"), obs_get(obs, "difficulty")))
        return seen

    # ------------------------------------------------------------------ allocation
    def target_tokens(self, obs: Any) -> int:
        """Tokens this strategy spends on the current question of ``obs`` (before clipping)."""
        remaining = int(obs_get(obs, "remaining_budget", 0))
        left = max(1, int(obs_get(obs, "questions_remaining", 1)))
        cap = int(self.info.max_tokens_per_step)
        floor = self._floor_tokens()
        if self.strategy == "uniform":
            return remaining // left
        seen = self._seen_curves(obs)
        if self.strategy == "proportional":
            ds = [self.curves.difficulty_for(pt, d) for pt, d in seen]
            d_cur, d_mean = ds[-1], float(np.mean(ds))
            return int(remaining * d_cur / (d_cur + (left - 1) * d_mean))
        if self.strategy == "greedy":
            cur = self.curves.question_fn(*seen[-1])
            fns = [self.curves.question_fn(pt, d) for pt, d in seen]

            def mean_curve(t: np.ndarray) -> np.ndarray:
                return np.mean([f(t) for f in fns], axis=0)

            alloc = greedy_allocation(
                [cur] + [mean_curve] * (left - 1),
                remaining,
                lo=min(floor, max(1, remaining // left)),
                cap=max(1, min(cap, remaining)),
                max_units=self.max_units,
            )
            return alloc.tokens[0]
        return self._oracle_target(obs)

    def _oracle_target(self, obs: Any) -> int:
        idx = int(obs_get(obs, "question_index", 0))
        remaining = int(obs_get(obs, "remaining_budget", 0))
        if self._plan is not None:
            start, rem0, toks = self._plan
            k = idx - start
            if 0 <= k < len(toks) and rem0 - sum(toks[:k]) == remaining:
                return int(toks[k])
        rest = (self.info.questions or [])[idx:]
        qs = [(q.problem_type, q.difficulty) for q in rest]
        lows = [minimal_tokens(self.info.tokenizer, q.gold_answer) for q in rest]
        cache = getattr(self, "oracle_cache", None)
        if (
            cache is not None
            and cache.curves is self.curves
            and cache.cap == int(self.info.max_tokens_per_step)
            and cache.min_tokens == int(self.info.min_tokens)
        ):
            alloc = cache.plan(qs, remaining, lows)
        else:
            alloc = oracle_plan(
                self.curves,
                qs,
                remaining,
                lows,
                cap=int(self.info.max_tokens_per_step),
                min_tokens=int(self.info.min_tokens),
            )
        self._plan = (idx, remaining, list(alloc.tokens))
        return int(alloc.tokens[0]) if alloc.tokens else 0

    # ------------------------------------------------------------------ act
    def act(self, obs: Any) -> PolicyOutput:
        """Write the response for the current question (see the module docstring)."""
        if self.info is None:
            raise PolicyError(f"policy {self.name!r}: call reset() before act()")
        q = self._question(obs)
        cap = int(obs_get(obs, "step_token_cap", 0))
        target = max(1, min(int(self.target_tokens(obs)), cap if cap > 0 else 1))
        seed = int(self.info.seed)
        tok = self.info.tokenizer
        rng_state = f"{seed}|{q.id}|text"
        text = write_response(tok, target, q.gold_answer, random.Random(rng_state))
        # write_response is exact unless the target is below a tail-only response (then minimal)
        length = int(tok.count(text)) if text.startswith("\\boxed") else target
        p = float(self.curves.p(length, q.problem_type, q.difficulty))
        u = question_uniform(seed, q.id)
        correct = u < p
        if not correct:
            wrong = wrong_answer(q.gold_answer, random.Random(f"{seed}|{q.id}|wrong"))
            text = write_response(tok, target, wrong, random.Random(rng_state))
        return PolicyOutput(
            response=text,
            meta={"target_tokens": target, "p_correct": p, "u": u, "intended_correct": bool(correct)},
        )


class OracleAllocationPolicy(SimulatedSolverPolicy):
    """The oracle allocation: the simulated solver spending the budget split that maximises
    expected correct answers given every question's true curve (see the module docstring).

    Args:
        curves: The accuracy curves (default: defaults).
        name: Row label (default ``oracle_allocation``).
        oracle_cache: A shared :class:`~.oracle.OracleCache` of the same curves (the evaluation
            sets one, so each episode's plan is solved once for the policy and the regret).

    Attributes:
        oracle_cache: The shared cache, or ``None`` (plans are then solved here). Used only when
            its curves, cap and ``min_tokens`` are the episode's.
    """

    kind = "oracle"

    def __init__(
        self, curves: SolverCurves | None = None, *, name: str | None = None, oracle_cache: OracleCache | None = None
    ) -> None:
        super().__init__("oracle", curves, name=name or "oracle_allocation")
        self.oracle_cache = oracle_cache

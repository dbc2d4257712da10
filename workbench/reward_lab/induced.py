"""Induced behaviour: the token allocation a reward-maximising policy would choose, and its cost.

Model. An episode is a fixed sequence of questions (difficulty, problem type) under a budget of
``B`` tokens. A policy chooses how many tokens ``t_i`` to spend on each; it answers correctly
with probability ``p_i(t_i)`` from the solver curves (:class:`reasoning_env.policies.SolverCurves`,
the same model as the evaluation's simulated policies and regret; ``--curves FILE`` plugs a
calibrated one in). Spending 0 tokens is a *skip* (no answer, wrong). The environment's budget
rules apply: in hard-cap mode the spend never exceeds what is left and the episode ends early
(later questions are never asked and pay nothing) once fewer than ``min_tokens`` remain; in soft
mode spending may exceed ``B`` (up to ``soft_headroom * B`` here) and the reward's overspend
terms apply.

The reward-maximising allocation maximises the reward's *expected* episode reward (its own
vectorised formula, step and episode terms) and the accuracy-maximising *oracle* the expected
correct answers, both with the project's one optimiser,
:func:`reasoning_env.policies.optimal_allocation`: exact in tokens at every budget, with a
certified ``bound`` on the gap where a reward reads the spent budget. Because no term depends on
past verdicts, an open-loop plan is optimal among adaptive policies too.

The *regret* of a reward is the oracle's expected correct answers minus those of the reward's
optimum (per episode). A reward that pays a right and a wrong answer alike (``format``,
``repetition``, ``dapo_overlong`` alone) has no correctness signal: any allocation inside a wide
set is optimal for it, so the accuracy it "induces" is undefined; such rows say so
(``signal = "none"``) and leave accuracy and regret empty instead of reporting a tie-break.
Whether a reward pays more tokens to harder questions is the Spearman rank correlation of tokens
with difficulty.

Group rewards (they compare rollouts) have no single-policy optimum in this model.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from reasoning_env.policies import Allocation, SolverCurves, optimal_allocation
from reasoning_env.policies.objective import correctness_signal
from reasoning_env.rewards import build_reward, normalise_spec

__all__ = [
    "AllocationCache",
    "InducedResult",
    "QuestionSpec",
    "default_questions",
    "induced_allocation",
    "induced_behaviour",
    "oracle_allocation",
    "oracle_frontier",
    "spearman",
]


@dataclass(frozen=True)
class QuestionSpec:
    """One question of the modelled episode: MATH difficulty level (``None``: the problem type's
    default level) and problem type (its family picks the curve)."""

    difficulty: int | None
    problem_type: str = "MATH"


def default_questions(num_questions: int = 10) -> list[QuestionSpec]:
    """An even mix of MATH difficulty levels 1..5 (cycled), e.g. 1,2,3,4,5,1,2,3,4,5 for ten."""
    return [QuestionSpec(difficulty=1 + (i % 5)) for i in range(num_questions)]


class AllocationCache:
    """A bounded, thread-safe memo of optimal allocations (least recently used dropped first).

    An allocation depends only on the reward, the questions, the budget, the environment's rules
    and the curves, and each takes the exact optimiser 0.1-1 s: the reward lab's sliders change the
    tuned reward, while the oracle, the recorded reward and the frontier stay what they were. Hold
    one per app (the Reward lab tab does) and pass it to :func:`induced_behaviour` and
    :func:`oracle_frontier`; :func:`key` is ``None`` (no caching) for curves that are not a
    :class:`~reasoning_env.policies.SolverCurves` or a reward that is not a spec.

    Args:
        maxsize: Allocations kept (each is a few hundred bytes).
    """

    def __init__(self, maxsize: int = 512) -> None:
        self.maxsize = int(maxsize)
        self._items: OrderedDict[Hashable, Allocation] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(kind: str, reward: Any, questions: Sequence[QuestionSpec], budget: int, curves: Any, **rules: Any):
        """A hashable key of one allocation, or ``None`` when it cannot be keyed safely."""
        if not isinstance(curves, SolverCurves):
            return None
        if reward is None:
            spec = None
        else:
            try:
                spec = json.dumps(normalise_spec(reward), sort_keys=True, default=str)
            except (TypeError, ValueError):
                return None  # a reward object, not a spec
        return (kind, spec, tuple(questions), int(budget), repr(curves), tuple(sorted(rules.items())))

    def get(self, key: Hashable | None, compute: Callable[[], Allocation]) -> Allocation:
        """The cached allocation of ``key``, or ``compute()`` stored under it (``None``: always computed)."""
        if key is None:
            return compute()
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self.hits += 1
                return self._items[key]
        value = compute()  # outside the lock: two sessions may compute the same plan once each, never wait
        with self._lock:
            self.misses += 1
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._items)


def _cached(cache: AllocationCache | None, key_args: tuple, rules: dict, compute: Callable[[], Allocation]):
    if cache is None:
        return compute()
    return cache.get(AllocationCache.key(*key_args, **rules), compute)


def _curve_fns(curves: Any, questions: Sequence[QuestionSpec]) -> list:
    return [
        lambda t, q=q: np.clip(
            np.asarray(curves(np.asarray(t, dtype=float), q.difficulty, q.problem_type), dtype=float), 0.0, 1.0
        )
        for q in questions
    ]


def induced_allocation(
    reward: Any,
    questions: Sequence[QuestionSpec],
    budget: int,
    *,
    curves: Any = None,
    hard_cap_mode: bool = True,
    min_tokens: int = 10,
    max_tokens_per_step: int = 2048,
    soft_headroom: float = 2.0,
    resolution: int = 64,
) -> Allocation:
    """The allocation maximising a reward's expected episode reward (see the module docstring).

    Args:
        reward: Reward spec / name / object (not a group reward).
        questions: The episode, in order.
        budget: Episode budget (tokens).
        curves: Accuracy model: a :class:`~reasoning_env.policies.SolverCurves` (default: its
            defaults) or any callable ``curves(tokens, difficulty, problem_type) -> p``.
        hard_cap_mode, min_tokens, max_tokens_per_step: Environment rules (tokens).
        soft_headroom: Soft mode: largest total spend modelled, in budgets.
        resolution: Cells of the spent budget used by rewards that read it (see
            :func:`reasoning_env.policies.optimal_allocation`'s ``spent_cells``).

    Returns:
        The core :class:`~reasoning_env.policies.Allocation` (``objective`` = expected reward,
        ``bound`` = certified gap).

    Raises:
        ValueError: a group reward, or a budget below ``min_tokens``.
    """
    if budget < max(1, min_tokens):
        raise ValueError(f"budget ({budget}) must be at least min_tokens ({min_tokens})")
    curves = curves if curves is not None else SolverCurves()
    return optimal_allocation(
        _curve_fns(curves, questions),
        int(budget),
        lo=0,
        cap=int(max_tokens_per_step),
        min_tokens=int(min_tokens) if hard_cap_mode else 0,
        reward=build_reward(reward, context="rescore"),
        questions=[(q.difficulty, q.problem_type) for q in questions],
        hard_cap_mode=hard_cap_mode,
        soft_headroom=soft_headroom,
        spent_cells=resolution,
    )


def oracle_allocation(
    questions: Sequence[QuestionSpec],
    budget: int,
    *,
    curves: Any = None,
    min_tokens: int = 10,
    max_tokens_per_step: int = 2048,
) -> Allocation:
    """The accuracy-maximising allocation under the hard cap: max ``sum_i p_i(t_i)`` over every
    plan the environment allows (``sum_i t_i <= budget``; an early end below ``min_tokens``)."""
    curves = curves if curves is not None else SolverCurves()
    return optimal_allocation(
        _curve_fns(curves, questions), int(budget), lo=0, cap=int(max_tokens_per_step), min_tokens=int(min_tokens)
    )


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rank correlation (average ranks for ties); NaN if either side is constant."""
    x = pd.Series(np.asarray(x, dtype=np.float64)).rank().to_numpy()
    y = pd.Series(np.asarray(y, dtype=np.float64)).rank().to_numpy()
    if len(x) < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


@dataclass
class InducedResult:
    """What each reward induces, next to the accuracy oracle.

    Attributes:
        questions: One row per (reward, budget, order, position): difficulty, problem_type, tokens,
            p, answered (False: never asked, the hard-cap budget ran dry first), skipped (asked,
            answered with 0 tokens). The oracle appears as reward ``"oracle"``.
        summary: One row per (reward, budget): expected_accuracy, oracle_accuracy, regret
            (oracle expected correct minus the reward's, per episode), regret_pct (of the oracle's
            expected correct), tokens (mean spend per episode), utilisation (tokens / budget),
            spearman (tokens vs difficulty), skipped and unasked (questions per episode),
            expected_reward, bound (largest certified gap of the optimum over the orders; 0 =
            exact), signal (``"correctness"``, or ``"none"``: the reward pays right and wrong
            answers alike, so accuracy and regret are left empty).
        by_difficulty: One row per (reward, budget, difficulty): mean tokens, accuracy, and
            give-up rate (skipped or never asked).
        notes: ``{reward: [caveats]}``.
    """

    questions: pd.DataFrame
    summary: pd.DataFrame
    by_difficulty: pd.DataFrame
    notes: dict[str, list[str]] = field(default_factory=dict)


def induced_behaviour(
    rewards: Mapping[str, Any] | Any,
    budgets: Sequence[int],
    *,
    questions: Sequence[QuestionSpec] | None = None,
    curves: Any = None,
    orders: int = 1,
    seed: int = 0,
    hard_cap_mode: bool = True,
    min_tokens: int = 10,
    max_tokens_per_step: int = 2048,
    resolution: int = 64,
    cache: AllocationCache | None = None,
) -> InducedResult:
    """Optimal allocations of each reward at each budget, against the accuracy oracle.

    Args:
        rewards: ``{label: spec}`` or a single spec (labelled by its type).
        budgets: Episode budgets (tokens).
        questions: The episode (default :func:`default_questions`).
        curves: Accuracy model (default: :class:`~reasoning_env.policies.SolverCurves` defaults).
        orders: Number of question orders averaged over: the given order, then random
            permutations (order matters for hard-cap running dry and remaining-budget shares).
        cache: An :class:`AllocationCache` to reuse allocations computed before (the same
            result, without solving again).
        Other arguments as :func:`induced_allocation`.
    """
    if not isinstance(rewards, Mapping) or "type" in rewards or "name" in rewards:
        rw = build_reward(rewards, context="rescore")
        rewards = {rw.info.name: rw}
    curves = curves if curves is not None else SolverCurves()
    qs = list(questions) if questions is not None else default_questions()
    rng = np.random.default_rng(seed)
    perms = [np.arange(len(qs))] + [rng.permutation(len(qs)) for _ in range(max(0, orders - 1))]
    rows, summ, notes = [], [], {}
    for budget in budgets:
        oracle_min = min_tokens if hard_cap_mode else 0
        oracle = [
            _cached(
                cache,
                ("oracle", None, [qs[j] for j in perm], budget, curves),
                dict(min_tokens=oracle_min, max_tokens_per_step=max_tokens_per_step),
                partial(
                    oracle_allocation,
                    [qs[j] for j in perm],
                    int(budget),
                    curves=curves,
                    min_tokens=oracle_min,
                    max_tokens_per_step=max_tokens_per_step,
                ),
            )
            for perm in perms
        ]
        results: dict[str, list[Allocation]] = {"oracle": oracle}
        signal: dict[str, bool] = {"oracle": True}
        for label, spec in rewards.items():
            signal[label] = correctness_signal(
                spec, budget=int(budget), num_questions=len(qs), cap=max_tokens_per_step, hard_cap_mode=hard_cap_mode
            )
            rules = dict(
                hard_cap_mode=hard_cap_mode,
                min_tokens=min_tokens,
                max_tokens_per_step=max_tokens_per_step,
                resolution=resolution,
            )
            allocs = [
                _cached(
                    cache,
                    ("reward", spec, [qs[j] for j in perm], budget, curves),
                    rules,
                    partial(induced_allocation, spec, [qs[j] for j in perm], int(budget), curves=curves, **rules),
                )
                for perm in perms
            ]
            results[label] = allocs
            caveats = [n for al in allocs for n in al.notes]
            if not signal[label]:
                caveats.insert(
                    0,
                    "no correctness signal: the reward pays right and wrong answers alike, so any "
                    "allocation in a wide set "
                    "is optimal and the accuracy it induces is undefined (not 0)",
                )
            for note in caveats:
                notes.setdefault(label, [])
                if note not in notes[label]:
                    notes[label].append(note)
        oracle_correct = float(np.mean([al.expected_correct for al in oracle]))
        for label, allocs in results.items():
            diffs, toks = [], []
            for o, (al, perm) in enumerate(zip(allocs, perms)):
                tokens, answered = np.asarray(al.tokens, dtype=float), np.asarray(al.answered, dtype=bool)
                for pos, j in enumerate(perm):
                    q = qs[j]
                    rows.append(
                        dict(
                            reward=label,
                            budget=int(budget),
                            order=o,
                            position=pos,
                            difficulty=q.difficulty,
                            problem_type=q.problem_type,
                            tokens=float(tokens[pos]),
                            p=float(al.p[pos]),
                            answered=bool(answered[pos]),
                            skipped=bool(tokens[pos] == 0 and answered[pos]),
                        )
                    )
                    diffs.append(np.nan if q.difficulty is None else q.difficulty)
                    toks.append(tokens[pos])
            correct = float(np.mean([al.expected_correct for al in allocs]))
            d, t = np.asarray(diffs, dtype=float), np.asarray(toks, dtype=float)
            known = ~np.isnan(d)
            has_signal = signal[label]
            spend = float(np.mean([al.total_tokens for al in allocs]))
            summ.append(
                dict(
                    reward=label,
                    budget=int(budget),
                    fair_share=budget / len(qs),
                    expected_accuracy=correct / len(qs) if has_signal else np.nan,
                    oracle_accuracy=oracle_correct / len(qs),
                    regret=oracle_correct - correct if has_signal else np.nan,
                    regret_pct=(100.0 * (oracle_correct - correct) / oracle_correct if oracle_correct else 0.0)
                    if has_signal
                    else np.nan,
                    tokens=spend,
                    utilisation=spend / budget,
                    spearman=spearman(d[known], t[known]) if known.sum() > 1 and has_signal else float("nan"),
                    skipped=float(
                        np.mean([np.sum((np.asarray(al.tokens) == 0) & np.asarray(al.answered)) for al in allocs])
                    ),
                    unasked=float(np.mean([np.sum(~np.asarray(al.answered)) for al in allocs])),
                    expected_reward=float(np.mean([al.objective for al in allocs]))
                    if label != "oracle"
                    else float("nan"),
                    bound=float(np.max([al.bound for al in allocs])),
                    signal="correctness" if has_signal else "none",
                )
            )
    qdf = pd.DataFrame(rows)
    qdf["give_up"] = qdf["skipped"] | ~qdf["answered"]
    by = (
        qdf.groupby(["reward", "budget", "difficulty"], sort=False, dropna=False)
        .agg(tokens=("tokens", "mean"), accuracy=("p", "mean"), give_up_rate=("give_up", "mean"), n=("tokens", "size"))
        .reset_index()
    )
    return InducedResult(questions=qdf, summary=pd.DataFrame(summ), by_difficulty=by, notes=notes)


def oracle_frontier(
    budgets: Sequence[int],
    *,
    questions: Sequence[QuestionSpec] | None = None,
    curves: Any = None,
    min_tokens: int = 10,
    max_tokens_per_step: int = 2048,
    cache: AllocationCache | None = None,
) -> pd.DataFrame:
    """The accuracy-vs-tokens Pareto frontier: the oracle's expected accuracy and spend per budget
    (``cache``: an :class:`AllocationCache`, shared with :func:`induced_behaviour`'s oracle)."""
    qs = list(questions) if questions is not None else default_questions()
    curves = curves if curves is not None else SolverCurves()
    out = []
    for b in budgets:
        al = _cached(
            cache,
            ("oracle", None, qs, b, curves),
            dict(min_tokens=min_tokens, max_tokens_per_step=max_tokens_per_step),
            partial(
                oracle_allocation,
                qs,
                int(b),
                curves=curves,
                min_tokens=min_tokens,
                max_tokens_per_step=max_tokens_per_step,
            ),
        )
        out.append(
            dict(
                budget=int(b),
                tokens=al.total_tokens,
                tokens_per_question=al.total_tokens / len(qs),
                accuracy=al.expected_accuracy,
            )
        )
    return pd.DataFrame(out)

"""Induced behaviour: the token allocation a reward-maximising policy would choose, and its cost.

Model. An episode is a fixed sequence of questions (difficulty, problem type) under a budget of
``B`` tokens. A policy chooses how many tokens ``t_i`` to spend on each question; it answers
correctly with probability ``p_i(t_i)`` from an accuracy curve (:mod:`workbench.reward_lab.curves`).
Spending 0 tokens is a *skip* (answered, wrong). The environment's budget rules apply: in hard-cap
mode the spend cannot exceed the remaining budget and the episode ends early (later questions are
never asked and pay nothing) once fewer than ``min_tokens`` remain; in soft mode spending may
exceed ``B`` (up to ``soft_headroom * B`` in this model) and the reward's overspend terms apply.

The reward-maximising allocation maximises the *expected* episode reward

    sum_i [ p_i(t_i) R_i(correct, t_i, s_i) + (1 - p_i(t_i)) R_i(wrong, t_i, s_i) ] + E[episode terms]

(``s_i`` = tokens spent before question i), computed with the reward's own vectorised formula.
It is solved exactly on a token grid of ``unit = max(1, round(B / resolution))`` tokens by dynamic
programming over (question, tokens spent). Episode terms that are affine in the number of correct
answers ``K`` (the seed's bonus ``lambda_ep * K/N * u(S)`` is) are handled exactly by running the
DP once per distinct coefficient ``a(S) = d bonus / dK`` of the final spend ``S``; the result says
so in ``notes`` when an episode term is not affine. Because no term depends on past verdicts, an
open-loop allocation is optimal among adaptive policies too.

The accuracy-maximising *oracle* maximises ``sum_i p_i(t_i)`` with ``sum_i t_i <= B`` on the same
grid. The *regret* of a reward is the oracle's expected correct answers minus those of the
reward's optimum (per episode). Whether a reward pays more tokens to harder questions is the
Spearman rank correlation of tokens with difficulty over the questions.

Group rewards (they compare rollouts) have no single-policy optimum in this model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
import pandas as pd

from reasoning_env.rewards import EpisodeBatch, StepBatch, build_reward
from workbench.reward_lab.curves import DEFAULT_CURVE, AccuracyCurve


@dataclass(frozen=True)
class QuestionSpec:
    """One question of the modelled episode."""

    difficulty: Optional[int]
    problem_type: str = "math"


def default_questions(num_questions: int = 10) -> list[QuestionSpec]:
    """An even mix of difficulty levels 1..5 (cycled), e.g. 1,2,3,4,5,1,2,3,4,5 for ten."""
    return [QuestionSpec(difficulty=1 + (i % 5)) for i in range(num_questions)]


@dataclass
class Allocation:
    """An optimal allocation over one ordered episode.

    Attributes:
        questions: The questions, in episode order.
        budget: Episode budget (tokens). unit: token grid step.
        tokens: Tokens per question (0 = skipped or never asked).
        answered: False for questions never asked because the hard-cap budget ran dry.
        p: Probability of a correct answer at the chosen tokens (0 when not answered).
        objective: The maximised value (expected reward; expected correct for the oracle).
        notes: Modelling caveats.
    """

    questions: list[QuestionSpec]
    budget: int
    unit: int
    tokens: np.ndarray
    answered: np.ndarray
    p: np.ndarray
    objective: float
    notes: list[str] = field(default_factory=list)

    @property
    def expected_correct(self) -> float:
        """Expected number of correct answers."""
        return float(self.p.sum())

    @property
    def expected_accuracy(self) -> float:
        """Expected correct / number of questions."""
        return self.expected_correct / len(self.questions)

    @property
    def total_tokens(self) -> float:
        """Tokens spent over the episode."""
        return float(self.tokens.sum())


def _grid(budget: int, resolution: int, max_tokens_per_step: int, hard_cap_mode: bool, soft_headroom: float) -> tuple[int, int, int]:
    unit = max(1, int(round(budget / resolution)))
    k_budget = budget // unit
    n_states = k_budget if hard_cap_mode else int(np.floor(soft_headroom * budget / unit))
    levels = min(max_tokens_per_step // unit, n_states)
    return unit, n_states, levels


def _dp(E: list[np.ndarray], P: list[np.ndarray], a: np.ndarray, b: np.ndarray, terminal: np.ndarray) -> tuple[np.ndarray, int, float]:
    """Maximise sum_i E_i[g_i, k_i] + a(k_N) * sum_i P_i[g_i] + b(k_N) over level paths.

    Returns (levels per question, index of the last answered question, value).
    """
    n = len(E)
    n_levels, n_states = E[0].shape
    K = n_states - 1
    c_vals, row_of_k = np.unique(a, return_inverse=True)
    C = len(c_vals)
    V = np.full((C, n_states), -np.inf)
    V[:, 0] = 0.0
    T = np.full((C, n_states), -np.inf)
    T_step = np.full((C, n_states), -1, dtype=np.int64)
    bps = []
    for i in range(n):
        newV = np.full((C, n_states), -np.inf)
        choice = np.zeros((C, n_states), dtype=np.int32)
        for g in range(min(n_levels, n_states)):
            cand = V[:, : K + 1 - g] + (E[i][g, : K + 1 - g][None, :] + c_vals[:, None] * P[i][g])
            dst = newV[:, g:]
            better = cand > dst
            newV[:, g:] = np.where(better, cand, dst)
            choice[:, g:] = np.where(better, g, choice[:, g:])
        bps.append(choice)
        if i < n - 1 and terminal.any():
            tv = newV[:, terminal]
            upd = tv > T[:, terminal]
            T[:, terminal] = np.where(upd, tv, T[:, terminal])
            T_step[:, terminal] = np.where(upd, i, T_step[:, terminal])
            newV[:, terminal] = -np.inf
        V = newV
    rows = row_of_k.reshape(-1)
    ks = np.arange(n_states)
    v_end = V[rows, ks]
    t_end = T[rows, ks]
    total = np.maximum(v_end, t_end) + b
    k = int(np.argmax(total))
    value = float(total[k])
    r = int(rows[k])
    last = n - 1 if v_end[k] >= t_end[k] else int(T_step[r, k])
    levels = np.zeros(n, dtype=np.int64)
    for i in range(last, -1, -1):
        g = int(bps[i][r, k])
        levels[i] = g
        k -= g
    return levels, last, value


def optimal_allocation(
    reward: Any,
    questions: Sequence[QuestionSpec],
    budget: int,
    *,
    curve: AccuracyCurve = DEFAULT_CURVE,
    hard_cap_mode: bool = True,
    min_tokens: int = 10,
    max_tokens_per_step: int = 2048,
    resolution: int = 100,
    soft_headroom: float = 2.0,
) -> Allocation:
    """The allocation maximising a reward's expected episode reward (see module docstring).

    Args:
        reward: Reward spec / name / object (not a group reward).
        questions: The episode, in order.
        budget: Episode budget (tokens).
        curve: Accuracy curve ``p(tokens, difficulty, problem_type)``.
        hard_cap_mode, min_tokens, max_tokens_per_step: Environment rules (tokens).
        resolution: Grid cells per budget (the token grid step is ``budget / resolution``).
        soft_headroom: Soft mode: largest total spend modelled, in budgets.

    Raises:
        ValueError: a group reward, or a budget below ``min_tokens``.
    """
    rw = build_reward(reward, context="rescore")
    if getattr(rw, "is_group", False):
        raise ValueError("group rewards compare rollouts of a group; a single policy's optimal allocation is not defined for them (use re-scoring)")
    if budget < max(1, min_tokens):
        raise ValueError(f"budget ({budget}) must be at least min_tokens ({min_tokens})")
    n = len(questions)
    unit, K, G = _grid(budget, resolution, max_tokens_per_step, hard_cap_mode, soft_headroom)
    t_levels = np.arange(G + 1) * float(unit)
    states = np.arange(K + 1) * float(unit)
    notes: list[str] = []

    E, P = [], []
    gg, kk = np.meshgrid(np.arange(G + 1), np.arange(K + 1), indexing="ij")
    m = gg.size
    for i, q in enumerate(questions):
        p = np.clip(np.asarray(curve(t_levels, q.difficulty, q.problem_type), dtype=np.float64), 0.0, 1.0)
        rows = {}
        for verdict in (True, False):
            batch = StepBatch.build(
                m, correct=verdict, tokens=t_levels[gg.ravel()], total_budget=budget, num_questions=n,
                spent_before=states[kk.ravel()], question_index=i, hard_cap_mode=hard_cap_mode,
                difficulty=q.difficulty, problem_type=q.problem_type,
            )
            total = np.zeros(m)
            for v in rw.step_batch(batch).values():
                total = total + v
            rows[verdict] = total.reshape(gg.shape)
        e = p[:, None] * rows[True] + (1.0 - p[:, None]) * rows[False]
        E.append(e)
        P.append(p)

    # Episode terms g(K, S) at K = 0, N/2, N correct, per final spend S.
    def ep_value(k_correct: float) -> np.ndarray:
        eb = EpisodeBatch.build(K + 1, num_correct=k_correct, num_questions=n, total_spent=states, total_budget=budget)
        total = np.zeros(K + 1)
        for v in rw.episode_batch(eb).values():
            total = total + v
        return total

    g0, gN = ep_value(0.0), ep_value(float(n))
    a = (gN - g0) / n if n else np.zeros(K + 1)
    if n >= 2:
        mid = n // 2
        err = np.max(np.abs(ep_value(float(mid)) - (g0 + a * mid)))
        if err > 1e-9:
            notes.append(f"episode terms are not affine in the number correct (max error {err:.3g}); the optimum treats them as linear")
    if np.any(a != 0) or np.any(g0 != 0):
        notes.append("episode terms evaluated with every question answered (num_answered = N, ran_dry = False)")
    terminal = np.zeros(K + 1, dtype=bool)
    if hard_cap_mode:
        terminal = (budget - states) < min_tokens
    levels, last, value = _dp(E, P, a, g0, terminal)
    tokens = levels * float(unit)
    answered = np.arange(n) <= last
    p = np.array([P[i][levels[i]] if answered[i] else 0.0 for i in range(n)])
    return Allocation(list(questions), int(budget), unit, tokens, answered, p, value, notes)


def oracle_allocation(
    questions: Sequence[QuestionSpec],
    budget: int,
    *,
    curve: AccuracyCurve = DEFAULT_CURVE,
    max_tokens_per_step: int = 2048,
    resolution: int = 100,
) -> Allocation:
    """The accuracy-maximising allocation: max ``sum_i p_i(t_i)`` subject to ``sum_i t_i <= budget``
    (tokens), on the same token grid as :func:`optimal_allocation`."""
    n = len(questions)
    unit, K, G = _grid(budget, resolution, max_tokens_per_step, True, 1.0)
    t_levels = np.arange(G + 1) * float(unit)
    P = [np.clip(np.asarray(curve(t_levels, q.difficulty, q.problem_type), dtype=np.float64), 0.0, 1.0) for q in questions]
    E = [np.repeat(p[:, None], K + 1, axis=1) for p in P]
    zeros = np.zeros(K + 1)
    levels, last, value = _dp(E, [np.zeros_like(p) for p in P], zeros, zeros, np.zeros(K + 1, dtype=bool))
    tokens = levels * float(unit)
    p = np.array([P[i][levels[i]] for i in range(n)])
    return Allocation(list(questions), int(budget), unit, tokens, np.ones(n, dtype=bool), p, value, [])


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
            expected_reward.
        by_difficulty: One row per (reward, budget, difficulty): mean tokens, accuracy, and
            give-up rate (skipped or never asked).
        notes: ``{reward: [caveats]}``.
    """

    questions: pd.DataFrame
    summary: pd.DataFrame
    by_difficulty: pd.DataFrame
    notes: dict[str, list[str]] = field(default_factory=dict)


def induced_behaviour(
    rewards: Union[Mapping[str, Any], Any],
    budgets: Sequence[int],
    *,
    questions: Optional[Sequence[QuestionSpec]] = None,
    curve: AccuracyCurve = DEFAULT_CURVE,
    orders: int = 1,
    seed: int = 0,
    hard_cap_mode: bool = True,
    min_tokens: int = 10,
    max_tokens_per_step: int = 2048,
    resolution: int = 100,
) -> InducedResult:
    """Optimal allocations of each reward at each budget, against the accuracy oracle.

    Args:
        rewards: ``{label: spec}`` or a single spec (labelled by its type).
        budgets: Episode budgets (tokens).
        questions: The episode (default :func:`default_questions`).
        orders: Number of question orders averaged over: the given order, then random
            permutations (order matters for hard-cap running dry and remaining-budget shares).
        Other arguments as :func:`optimal_allocation`.
    """
    if not isinstance(rewards, Mapping) or "type" in rewards or "name" in rewards:
        rw = build_reward(rewards, context="rescore")
        rewards = {rw.info.name: rw}
    qs = list(questions) if questions is not None else default_questions()
    rng = np.random.default_rng(seed)
    perms = [np.arange(len(qs))] + [rng.permutation(len(qs)) for _ in range(max(0, orders - 1))]
    rows, summ, notes = [], [], {}
    for budget in budgets:
        oracle = [oracle_allocation([qs[j] for j in perm], int(budget), curve=curve, max_tokens_per_step=max_tokens_per_step, resolution=resolution) for perm in perms]
        results: dict[str, list[Allocation]] = {"oracle": oracle}
        for label, spec in rewards.items():
            allocs = [
                optimal_allocation(spec, [qs[j] for j in perm], int(budget), curve=curve, hard_cap_mode=hard_cap_mode,
                                   min_tokens=min_tokens, max_tokens_per_step=max_tokens_per_step, resolution=resolution)
                for perm in perms
            ]
            results[label] = allocs
            for al in allocs:
                for note in al.notes:
                    notes.setdefault(label, [])
                    if note not in notes[label]:
                        notes[label].append(note)
        oracle_correct = float(np.mean([al.expected_correct for al in oracle]))
        for label, allocs in results.items():
            diffs, toks = [], []
            for o, al in enumerate(allocs):
                for pos, q in enumerate(al.questions):
                    skipped = bool(al.tokens[pos] == 0 and al.answered[pos])
                    rows.append(dict(reward=label, budget=int(budget), order=o, position=pos, difficulty=q.difficulty,
                                     problem_type=q.problem_type, tokens=float(al.tokens[pos]), p=float(al.p[pos]),
                                     answered=bool(al.answered[pos]), skipped=skipped))
                    diffs.append(np.nan if q.difficulty is None else q.difficulty)
                    toks.append(al.tokens[pos])
            correct = float(np.mean([al.expected_correct for al in allocs]))
            d, t = np.asarray(diffs, dtype=float), np.asarray(toks, dtype=float)
            known = ~np.isnan(d)
            summ.append(dict(
                reward=label, budget=int(budget), fair_share=budget / len(qs),
                expected_accuracy=correct / len(qs), oracle_accuracy=oracle_correct / len(qs),
                regret=oracle_correct - correct, regret_pct=100.0 * (oracle_correct - correct) / oracle_correct if oracle_correct else 0.0,
                tokens=float(np.mean([al.total_tokens for al in allocs])),
                utilisation=float(np.mean([al.total_tokens for al in allocs])) / budget,
                spearman=spearman(d[known], t[known]) if known.sum() > 1 else float("nan"),
                skipped=float(np.mean([np.sum((al.tokens == 0) & al.answered) for al in allocs])),
                unasked=float(np.mean([np.sum(~al.answered) for al in allocs])),
                expected_reward=float(np.mean([al.objective for al in allocs])) if label != "oracle" else float("nan"),
            ))
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
    questions: Optional[Sequence[QuestionSpec]] = None,
    curve: AccuracyCurve = DEFAULT_CURVE,
    max_tokens_per_step: int = 2048,
    resolution: int = 100,
) -> pd.DataFrame:
    """The accuracy-vs-tokens Pareto frontier: the oracle's expected accuracy and spend per budget."""
    qs = list(questions) if questions is not None else default_questions()
    out = []
    for b in budgets:
        al = oracle_allocation(qs, int(b), curve=curve, max_tokens_per_step=max_tokens_per_step, resolution=resolution)
        out.append(dict(budget=int(b), tokens=al.total_tokens, tokens_per_question=al.total_tokens / len(qs), accuracy=al.expected_accuracy))
    return pd.DataFrame(out)

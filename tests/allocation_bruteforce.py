"""An independent brute force for the optimiser's tests: every integer plan of a small episode,
played under the environment's budget rules, its expected value computed from scratch.

Nothing here calls the optimiser. The expected episode reward of a plan is the sum over asked
questions of ``p R(correct) + (1 - p) R(wrong)`` (the reward's own ``step_batch``), plus the
episode terms averaged over the exact distribution of the number of correct answers (every
verdict outcome enumerated), so it does not rely on the optimiser's affine treatment of them.
"""

from __future__ import annotations

import itertools

import numpy as np

from reasoning_env.rewards import EpisodeBatch, StepBatch, build_reward


def plans(n, budget, lows, cap, *, hard=True, min_tokens=0, headroom=2.0):
    """Every plan the rules allow: ``(tokens (P, n), asked (P, n))``.

    Hard cap: each question gets ``lo_i..min(cap, remaining)``; after a question that is not the
    last, fewer than ``min_tokens`` remaining ends the episode (later questions get 0, unasked).
    Soft: any ``lo_i..cap`` with a total of at most ``headroom * budget``.
    """
    out_t, out_a = [], []
    for combo in itertools.product(range(0, cap + 1), repeat=n):
        spent, asked, ok = 0, [], True
        for i, t in enumerate(combo):
            if len(asked) > i:  # unasked: the episode ended before this question
                ok = t == 0
                if not ok:
                    break
                continue
            if t < lows[i] or (hard and t > budget - spent):
                ok = False
                break
            spent += t
            asked.append(True)
            if hard and min_tokens > 0 and i < n - 1 and budget - spent < min_tokens:
                asked.extend([False] * (n - i - 1))
        if not ok or (not hard and sum(combo) > headroom * budget):
            continue
        out_t.append(combo)
        out_a.append(asked)
    return np.array(out_t, dtype=float), np.array(out_a, dtype=bool)


def best_value(curve_fns, contexts, budget, lows, cap, *, reward=None, hard=True, min_tokens=0, headroom=2.0):
    """``(best expected value, a best plan)`` over :func:`plans` (accuracy when ``reward`` is None)."""
    n = len(curve_fns)
    T, A = plans(n, budget, lows, cap, hard=hard, min_tokens=min_tokens, headroom=headroom)
    P = np.stack([np.where(T[:, i] > 0, np.clip(curve_fns[i](T[:, i]), 0, 1), 0.0) for i in range(n)], axis=1) * A
    if reward is None:
        values = P.sum(axis=1)
    else:
        rw = build_reward(reward, context="rescore")
        spent_before = np.concatenate([np.zeros((len(T), 1)), np.cumsum(T, axis=1)[:, :-1]], axis=1)
        values = np.zeros(len(T))
        for i in range(n):
            d, pt = contexts[i]
            terms = {}
            for verdict in (True, False):
                b = StepBatch.build(
                    len(T),
                    correct=verdict,
                    tokens=T[:, i],
                    has_answer=T[:, i] > 0,
                    total_budget=budget,
                    num_questions=n,
                    spent_before=spent_before[:, i],
                    question_index=i,
                    hard_cap_mode=hard,
                    difficulty=d,
                    problem_type=pt,
                )
                terms[verdict] = sum(rw.step_batch(b).values())
            values += np.where(A[:, i], P[:, i] * terms[True] + (1 - P[:, i]) * terms[False], 0.0)
        answered = A.sum(axis=1)
        total = T.sum(axis=1)
        ran_dry = answered < n
        for outcome in itertools.product([0, 1], repeat=n):
            o = np.array(outcome, dtype=float)
            prob = np.prod(np.where(o == 1, P, 1 - P), axis=1) * np.all(A | (o == 0), axis=1)
            if not prob.any():
                continue
            eb = EpisodeBatch.build(
                len(T),
                num_correct=float(o.sum()),
                num_answered=answered,
                num_questions=n,
                total_spent=total,
                total_budget=budget,
                ran_dry=ran_dry,
            )
            values += prob * sum(rw.episode_batch(eb).values())
    k = int(np.argmax(values))
    return float(values[k]), T[k].astype(int).tolist()

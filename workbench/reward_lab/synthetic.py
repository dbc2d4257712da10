"""Synthetic run frames for benchmarks, examples and property tests (no model, no grader).

:func:`synthetic_steps` plays episodes with the environment's budget rules (hard-cap clipping and
running dry, or soft overspend) where each step's length is drawn around the question's t50 and
its verdict from an accuracy curve, and pays the rewards with the *scalar* path the environment
uses (``step_components`` / ``episode_components``). The result has the columns of a run folder's
``trajectories.parquet`` (:data:`reasoning_env.records.STEP_COLUMNS`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from reasoning_env.policies import SolverCurves
from reasoning_env.records import StepRow, episode_row_from_steps
from reasoning_env.rewards import EpisodeContext, StepContext, build_reward

_WORDS = ("so", "we", "get", "the", "sum", "of", "both", "terms", "then", "check", "it", "again")


def _response(rng: np.random.Generator, n_tokens: int, answer: str, boxed: bool, repeat: bool) -> str:
    n_words = max(1, int(n_tokens * 0.75))
    if repeat:
        body = " ".join(["so we get the sum"] * max(1, n_words // 5))
    else:
        body = " ".join(rng.choice(_WORDS, size=n_words))
    return f"{body} \\boxed{{{answer}}}" if boxed else f"{body} the answer is unclear"


def synthetic_steps(
    n_steps: int = 10_000,
    *,
    num_questions: int = 10,
    total_budget: int = 4000,
    hard_cap_mode: bool = True,
    group_size: int | None = None,
    reward: Any = None,
    curve: Any = None,
    with_text: bool = False,
    min_tokens: int = 10,
    seed: int = 0,
    policy: str = "synthetic",
) -> pd.DataFrame:
    """A trajectories frame of about ``n_steps`` steps (whole episodes).

    Args:
        total_budget: Episode budget (tokens).
        group_size: If set, episodes come in GRPO groups of this many members that share the
            episode's questions (``group``/``member`` columns filled).
        reward: Reward (spec or object) paid and stored in ``reward``/``reward_<component>``;
            default the default reward (``economics``).
        curve: Accuracy model ``curve(tokens, difficulty, problem_type) -> p`` of the verdicts
            (default: :class:`~reasoning_env.policies.SolverCurves` defaults); lengths are drawn
            log-normally around the default curve's mid-point length of each difficulty.
        with_text: Store synthetic responses (boxed answers, some unboxed or repetitive).
        min_tokens: Hard-cap mode ends the episode when fewer tokens remain.

    Returns:
        One row per step, columns as :class:`reasoning_env.records.StepRow` flattened.
    """
    rw = build_reward(reward, context="rescore")
    curves = SolverCurves()
    curve = curve if curve is not None else curves
    rng = np.random.default_rng(seed)
    rows: list[StepRow] = []
    episode = 0
    gsize = group_size or 1
    group = 0
    while len(rows) < n_steps:
        diffs = rng.integers(1, 6, size=num_questions)
        for member in range(gsize):
            ep_rows: list[StepRow] = []
            spent = 0
            correct_n = 0
            done_reason = None
            for i in range(num_questions):
                d = int(diffs[i])
                t50 = curves.curve_for("synthetic").t50_at(d)
                raw = int(max(1, rng.lognormal(np.log(t50), 0.6)))
                remaining = total_budget - spent
                tokens = min(raw, max(0, remaining)) if hard_cap_mode else raw
                p = float(curve(np.array([tokens]), d, "synthetic")[0])
                correct = bool(rng.random() < p)
                boxed = bool(rng.random() < 0.95)
                has_answer = boxed or bool(rng.random() < 0.5)
                correct = correct and has_answer
                text = (
                    _response(rng, raw, "7" if correct else "8", boxed, bool(rng.random() < 0.05)) if with_text else ""
                )
                ctx = StepContext(
                    correct=correct,
                    has_answer=has_answer,
                    tokens=tokens,
                    raw_tokens=raw,
                    total_budget=total_budget,
                    num_questions=num_questions,
                    spent_before=spent,
                    question_index=i,
                    hard_cap_mode=hard_cap_mode,
                    problem_type="synthetic",
                    difficulty=d,
                    response=text,
                )
                comps = {k: float(v) for k, v in rw.step_components(ctx).items()}
                spent += tokens
                correct_n += int(correct)
                done = i == num_questions - 1
                if done:
                    done_reason = "all_answered"
                elif hard_cap_mode and total_budget - spent < min_tokens:
                    done, done_reason = True, "budget_exhausted"
                if done:
                    ep = EpisodeContext(
                        num_correct=correct_n,
                        num_answered=i + 1,
                        num_questions=num_questions,
                        total_spent=spent,
                        total_budget=total_budget,
                        ran_dry=done_reason == "budget_exhausted",
                    )
                    comps.update({k: float(v) for k, v in rw.episode_components(ep).items()})
                ep_rows.append(
                    StepRow(
                        run_id="synthetic",
                        policy=policy,
                        episode=episode,
                        episode_id=f"ep{episode}",
                        seed=episode,
                        step=i,
                        question_id=f"q{episode}-{i}",
                        problem_type="synthetic",
                        difficulty=d,
                        raw_tokens=raw,
                        tokens=tokens,
                        spent_before=spent - tokens,
                        remaining_budget_after=total_budget - spent,
                        total_budget=total_budget,
                        num_questions=num_questions,
                        budget_source="client",
                        hard_cap_mode=hard_cap_mode,
                        tokenizer_name="synthetic",
                        correct=correct,
                        has_answer=has_answer,
                        extracted_answer=("7" if correct else "8") if has_answer else None,
                        gold_answer="7",
                        grade_reason="exact" if correct else "mismatch",
                        reward=float(sum(comps.values())),
                        done=done,
                        done_reason=done_reason if done else None,
                        components=comps,
                        group=group if group_size else None,
                        member=member if group_size else None,
                        response=text,
                        response_chars=len(text),
                    )
                )
                if done:
                    break
            rows.extend(ep_rows)
            episode += 1
        group += 1
    frame = pd.DataFrame.from_records([r.to_flat() for r in rows])
    return frame


def synthetic_episodes(steps: pd.DataFrame) -> pd.DataFrame:
    """The ``episodes.parquet`` rows of a synthetic steps frame (via ``episode_row_from_steps``)."""
    out = []
    for _, g in steps.groupby("episode", sort=True):
        recs = []
        for r in g.to_dict("records"):
            comps = {c[len("reward_") :]: r.pop(c) for c in list(r) if c.startswith("reward_")}
            fields = set(StepRow.__dataclass_fields__)
            recs.append(StepRow(**{k: v for k, v in r.items() if k in fields}, components=comps))
        out.append(episode_row_from_steps(recs).to_flat())
    return pd.DataFrame.from_records(out)

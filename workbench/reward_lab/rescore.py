"""Counterfactual re-scoring: what a run's episodes would have earned under another reward.

A run folder's ``trajectories.parquet`` stores, per step, the charged and raw token counts, the
verdict, the budget context and the response. Re-scoring recomputes every step's and episode's
reward under any reward spec from those stored values, vectorised with numpy (no re-grading, no
re-tokenising): :class:`Rescorer` prepares the arrays once (about 10-30 ms for 10,000 steps) and
:meth:`Rescorer.rescore` then costs a few milliseconds per reward, fast enough for a slider.

Semantics match the environment: step components on every row; episode components (e.g. the
seed's ``episode_bonus``) on the row that ended the episode (``done``), computed from the
episode's answered steps (``num_correct``, ``num_answered``), ``total_spent = spent_before +
tokens`` of the final row and ``ran_dry = done_reason == "budget_exhausted"``; the step reward is
the sum of its components in the order the environment adds them. Re-scoring a run with the
reward it was recorded with therefore reproduces the stored rewards (to float rounding).

Group rewards see the rows with the same ``(run_id, policy, group, step)`` as one group (the
members of a GRPO group replay the same seeded episode); ``group_by=`` overrides that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reasoning_env.errors import ReasoningEconomicsError
from reasoning_env.rewards import EpisodeBatch, StepBatch, build_reward

#: Columns that identify an episode (those present are used).
EPISODE_KEYS = ("run_id", "policy", "episode", "episode_id", "group", "member")
#: Columns a trajectories frame must have.
REQUIRED = ("correct", "tokens", "total_budget", "num_questions", "spent_before", "step")
#: Identity/context columns copied into the re-scored step frame (those present).
STEP_ID_COLUMNS = (
    "run_id",
    "policy",
    "episode",
    "episode_id",
    "seed",
    "group",
    "member",
    "step",
    "question_id",
    "problem_type",
    "difficulty",
    "raw_tokens",
    "tokens",
    "total_budget",
    "correct",
    "has_answer",
    "done",
    "done_reason",
)


class RescoreError(ReasoningEconomicsError, ValueError):
    """The frame cannot be re-scored (missing columns, no groups for a group reward...)."""


@dataclass
class Rescored:
    """Result of a re-scoring.

    Attributes:
        steps: One row per step: identity columns, ``reward`` and ``reward_<component>``.
        episodes: One row per episode: its keys, ``num_correct``, ``num_answered``, ``accuracy``
            (correct / num_questions), ``total_spent``, ``total_budget``, ``utilisation``,
            ``reward`` (sum over steps) and ``reward_<component>`` sums.
        components: Component names, in the order they are summed.
        spec: The reward's spec (``to_spec()``), or ``None`` for a custom reward.
        notes: Caveats (e.g. text rewards on truncated responses).
    """

    steps: pd.DataFrame
    episodes: pd.DataFrame
    components: tuple[str, ...]
    spec: dict | None = None
    notes: list[str] = field(default_factory=list)

    def summary(self, by: str | None = "policy") -> pd.DataFrame:
        """Mean episode reward, accuracy, tokens per answered question and components per ``by``
        (an episode column; ``None`` for one row over all episodes).

        Raises:
            RescoreError: ``by`` is not a column of the episodes frame.
        """
        ep = self.episodes
        if by is not None and by not in ep.columns:
            raise RescoreError(
                f"cannot group the summary by {by!r}: not an episode column; choose one of "
                f"{sorted(map(str, ep.columns))}"
            )
        key = by
        cols = ["reward", "accuracy"] + [f"reward_{c}" for c in self.components]
        g = ep.groupby(key, dropna=False) if key else ep.assign(_all="all").groupby("_all")
        out = g[cols].mean()
        out["tokens_per_question"] = g["total_spent"].sum() / g["num_answered"].sum()
        out["episodes"] = g.size()
        return out.reset_index()


class Rescorer:
    """Prepared arrays of one trajectories frame, re-scorable under any reward.

    Args:
        steps: A trajectories frame (``load_run(path).steps``).
        group_by: Columns whose equal values form a group for group rewards (default
            ``run_id, policy, group, step`` over rows with a ``group``).

    Raises:
        RescoreError: a required column is missing.
    """

    def __init__(self, steps: pd.DataFrame, *, group_by: Sequence[str] | None = None) -> None:
        missing = [c for c in REQUIRED if c not in steps.columns]
        if missing:
            raise RescoreError(
                f"trajectories frame lacks column(s) {missing}; expected a run folder's trajectories.parquet"
            )
        df = steps.reset_index(drop=True)
        self.frame = df
        n = len(df)
        self.n = n

        def col(name: str, default: Any, dtype: Any) -> np.ndarray:
            if name in df.columns:
                return (
                    df[name].to_numpy(dtype=dtype, na_value=default)
                    if dtype is not object
                    else df[name].to_numpy(dtype=object)
                )
            return np.full(n, default, dtype=dtype)

        tokens = col("tokens", 0.0, np.float64)
        difficulty = (
            pd.to_numeric(df["difficulty"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
            if "difficulty" in df.columns
            else np.full(n, np.nan)
        )
        response = None
        self.notes: list[str] = []
        if "response" in df.columns:
            resp = df["response"].to_numpy(dtype=object)
            if "graded_response" in df.columns:
                # Text rewards saw the graded text (grading_response, or a hard cap's paid prefix).
                graded = df["graded_response"].to_numpy(dtype=object)
                has = pd.notna(graded)
                resp = np.where(has, graded, resp)
            lengths = df["response"].fillna("").str.len().to_numpy()
            if n and lengths.max() > 0:
                response = resp
                if "response_chars" in df.columns:
                    cut = int((df["response_chars"].fillna(0).to_numpy() > lengths).sum())
                    if cut:
                        self.notes.append(
                            f"{cut} stored responses are truncated: text rewards (format, repetition) read "
                            "the stored prefix only"
                        )
        self._text_note = (
            None
            if response is not None
            else "no stored response texts: 'format' falls back to the has_answer verdict and 'repetition' is 0"
        )
        self.batch = StepBatch(
            correct=col("correct", False, bool),
            has_answer=col("has_answer", True, bool),
            tokens=tokens,
            raw_tokens=col("raw_tokens", np.nan, np.float64) if "raw_tokens" in df.columns else tokens.copy(),
            total_budget=col("total_budget", 0.0, np.float64),
            num_questions=col("num_questions", 0.0, np.float64),
            spent_before=col("spent_before", 0.0, np.float64),
            question_index=col("step", 0.0, np.float64),
            hard_cap_mode=col("hard_cap_mode", True, bool),
            difficulty=difficulty,
            problem_type=col("problem_type", "", object),
            response=response,
            group=self._group_codes(df, group_by),
        )

        # Episodes: codes, final rows, aggregates.
        keys = [k for k in EPISODE_KEYS if k in df.columns]
        if keys:
            codes = df.groupby(keys, dropna=False, sort=False).ngroup().to_numpy()
        else:
            codes = np.zeros(n, dtype=np.int64)
        self.episode_codes = codes
        n_ep = int(codes.max()) + 1 if n else 0
        self.n_episodes = n_ep
        first = np.full(n_ep, n, dtype=np.int64)
        np.minimum.at(first, codes, np.arange(n))
        self.first_rows = first
        if "done" in df.columns:
            done = df["done"].fillna(False).to_numpy(dtype=bool)
        else:  # last row of each episode
            last = np.full(n_ep, -1, dtype=np.int64)
            np.maximum.at(last, codes, np.arange(n))
            done = np.zeros(n, dtype=bool)
            done[last] = True
        self.final_rows = np.flatnonzero(done)
        fcodes = codes[self.final_rows]
        num_correct = np.bincount(codes, weights=self.batch.correct.astype(np.float64), minlength=n_ep)
        num_answered = np.bincount(codes, minlength=n_ep).astype(np.float64)
        fr = self.final_rows
        # Tokens charged over the episode (the budget may have been floored at 0 in soft mode,
        # so total_budget - remaining_budget_after can understate it).
        spent = self.batch.spent_before[fr] + self.batch.tokens[fr]
        ran_dry = (
            (col("done_reason", "", object)[fr] == "budget_exhausted")
            if "done_reason" in df.columns
            else np.zeros(len(fr), bool)
        )
        self.episode_batch = EpisodeBatch(
            num_correct=num_correct[fcodes],
            num_answered=num_answered[fcodes],
            num_questions=self.batch.num_questions[fr],
            total_spent=spent,
            total_budget=self.batch.total_budget[fr],
            ran_dry=np.asarray(ran_dry, dtype=bool),
        )
        self._num_correct = num_correct
        self._num_answered = num_answered
        self._spent = np.bincount(codes, weights=tokens, minlength=n_ep)
        self._spent[fcodes] = spent
        # Identity columns kept as frames (their own dtypes, no per-call conversion).
        self._id_frame = df[[c for c in STEP_ID_COLUMNS if c in df.columns]]
        ep_cols = [c for c in EPISODE_KEYS + ("seed", "total_budget", "num_questions") if c in df.columns]
        self._ep_frame = df[ep_cols].iloc[first].reset_index(drop=True)
        self._ep_nq = self.batch.num_questions[first]
        self._ep_tb = self.batch.total_budget[first]

    @staticmethod
    def _group_codes(df: pd.DataFrame, group_by: Sequence[str] | None) -> np.ndarray | None:
        if group_by is not None:
            missing = [c for c in group_by if c not in df.columns]
            if missing:
                raise RescoreError(f"group_by column(s) {missing} not in the frame")
            return df.groupby(list(group_by), dropna=False, sort=False).ngroup().to_numpy(dtype=np.int64)
        if "group" not in df.columns or df["group"].isna().all():
            return None
        keys = [c for c in ("run_id", "policy", "group", "step") if c in df.columns]
        codes = df.groupby(keys, dropna=True, sort=False).ngroup().to_numpy(dtype=np.int64)
        return np.where(df["group"].isna().to_numpy(), -1, codes)

    def rescore(self, reward: Any = None) -> Rescored:
        """Every step's and episode's reward under ``reward`` (spec, registry name, YAML, or a
        reward object; ``None`` = the default reward, ``economics``).

        Raises:
            RescoreError: a group reward on a frame without groups.
        """
        rw = build_reward(reward, context="rescore")
        notes = list(self.notes)
        if getattr(rw, "needs_text", False) and self._text_note:
            notes.append(self._text_note)
        if getattr(rw, "is_group", False) and self.batch.group is None:
            raise RescoreError(
                "this reward has group members but the run has no GRPO groups (the 'group' column is empty); "
                "pass group_by=[...] to say which rows form a group (e.g. ['episode', 'step'] to compare policies)"
            )
        n = self.n
        step = rw.step_batch(self.batch)
        ep = rw.episode_batch(self.episode_batch) if len(self.final_rows) else {}
        # As the environment: components = step components, then .update(episode components) on
        # the final row (a same-named episode component replaces the step one there); the reward
        # is the sum of the values in that order (adding 0.0 elsewhere is exact).
        components: dict[str, np.ndarray] = {k: np.array(v, dtype=np.float64) for k, v in step.items()}
        for k, v in ep.items():
            if k not in components:
                components[k] = np.zeros(n)
            components[k][self.final_rows] = v
        total = np.zeros(n)
        for v in components.values():
            total = total + v

        data = {"reward": total}
        for k, v in components.items():
            data[f"reward_{k}"] = v
        steps = pd.concat([self._id_frame, pd.DataFrame(data, index=self._id_frame.index)], axis=1)

        codes, n_ep = self.episode_codes, self.n_episodes
        nq, tb = self._ep_nq, self._ep_tb
        ed: dict[str, np.ndarray] = {
            "num_correct": self._num_correct.astype(np.int64),
            "num_answered": self._num_answered.astype(np.int64),
        }
        with np.errstate(divide="ignore", invalid="ignore"):
            ed["accuracy"] = np.where(nq > 0, self._num_correct / nq, np.nan)
            ed["total_spent"] = self._spent
            ed["utilisation"] = np.where(tb > 0, self._spent / tb, np.nan)
        ed["reward"] = np.bincount(codes, weights=total, minlength=n_ep)
        for k, v in components.items():
            ed[f"reward_{k}"] = np.bincount(codes, weights=v, minlength=n_ep)
        episodes = pd.concat([self._ep_frame, pd.DataFrame(ed)], axis=1)
        spec = rw.to_spec() if hasattr(rw, "to_spec") else None
        return Rescored(steps=steps, episodes=episodes, components=tuple(components), spec=spec, notes=notes)


def _frame_and_config(source: Any) -> tuple[pd.DataFrame, Any]:
    from workbench.runs import Run, load_run

    if isinstance(source, pd.DataFrame):
        return source, None
    if isinstance(source, (str, Path)):
        source = load_run(source)
    if isinstance(source, Run):
        return source.steps, source.config
    raise RescoreError(
        f"re-score a run folder path, a loaded Run or a trajectories DataFrame, not {type(source).__name__}"
    )


def rescore(
    source: str | Path | Any | pd.DataFrame, reward: Any = None, *, group_by: Sequence[str] | None = None
) -> Rescored:
    """Re-score a run under ``reward``.

    Args:
        source: A run folder path, a :class:`workbench.runs.Run`, or a trajectories frame.
        reward: Spec / registry name / YAML / reward object. ``None``: the reward the run was
            recorded with (its ``config.yaml``), or the default reward for a bare frame.
        group_by: See :class:`Rescorer`.

    Returns:
        A :class:`Rescored` with per-step and per-episode frames.
    """
    frame, config = _frame_and_config(source)
    if reward is None and config is not None:
        reward = build_reward(config, context="rescore")
    return Rescorer(frame, group_by=group_by).rescore(reward)


def compare_to_stored(frame: pd.DataFrame, rescored: Rescored) -> pd.Series:
    """Largest absolute difference between the stored and the re-scored ``reward`` and each
    re-scored ``reward_<component>`` column (components absent from the frame count as 0)."""
    out = {}
    for c in ["reward"] + [f"reward_{k}" for k in rescored.components]:
        # A component a row did not pay is stored as NaN (a column another row created) or absent.
        stored = (
            np.nan_to_num(frame[c].to_numpy(dtype=np.float64, na_value=np.nan))
            if c in frame.columns
            else np.zeros(len(frame))
        )
        out[c] = float(np.max(np.abs(stored - rescored.steps[c].to_numpy()))) if len(frame) else 0.0
    return pd.Series(out)

"""Metrics over run frames: pure functions, DataFrames in, DataFrames (or text) out.

``steps`` is a run folder's ``trajectories.parquet`` and ``episodes`` its ``episodes.parquet``
(schema: :mod:`workbench.runs`). Token counts are in tokens of the episode's tokenizer.
Definitions (per policy):

- ``accuracy``: correct answers / questions served (``sum num_questions``): questions left
  unanswered when a hard-cap episode runs dry count as wrong.
- ``tokens_per_question``: tokens charged / questions answered.
- ``utilisation``: mean over episodes of ``total_spent / total_budget``.
- ``run_dry_rate``: share of episodes that ended with the budget exhausted (``ran_dry``).
- ``reward`` and ``reward_<component>``: mean per episode (components sum to the reward).
- ``acc_per_1k_tokens``: correct answers per 1,000 charged tokens.
- ``expected_accuracy``: expected correct answers under the solver curves at the charged
  tokens (``expected_correct``) / questions served; ``regret``: mean over episodes of
  ``oracle_expected_correct - expected_correct`` (expected correct answers lost to allocation).
"""

from __future__ import annotations

import math
from typing import Iterable, Optional, Sequence

import numpy as np
import pandas as pd

from reasoning_env.records import REWARD_COMPONENT_COLUMNS

__all__ = [
    "SUMMARY_COLUMNS",
    "TIMING_COLUMNS",
    "accuracy_vs_tokens",
    "by_group",
    "format_table",
    "policy_order",
    "reward_components",
    "spend_curve",
    "summary_table",
]

#: Columns of ``summary.csv`` in order (then any extra reward components, then timing columns).
SUMMARY_COLUMNS = (
    "policy",
    "kind",
    "episodes",
    "questions",
    "answered",
    "correct",
    "accuracy",
    "expected_accuracy",
    "tokens_per_question",
    "utilisation",
    "run_dry_rate",
    "reward",
) + REWARD_COMPONENT_COLUMNS + (
    "acc_per_1k_tokens",
    "regret",
    "regret_std",
    "mean_total_budget",
    "budget_source",
    "tokenizer_name",
)
#: Columns that measure time and so differ between reruns.
TIMING_COLUMNS = ("wall_s", "latency_s_mean")


def policy_order(frame: pd.DataFrame, preferred: Optional[Sequence[str]] = None) -> list[str]:
    """Policies of ``frame`` in ``preferred`` order, then in order of first appearance."""
    if frame is None or frame.empty or "policy" not in frame:
        return []
    seen = list(dict.fromkeys(frame["policy"].tolist()))
    if not preferred:
        return seen
    return [p for p in preferred if p in seen] + [p for p in seen if p not in preferred]


def _col(df: pd.DataFrame, name: str, default: float = np.nan) -> pd.Series:
    return df[name] if name in df.columns else pd.Series(default, index=df.index, dtype=float)


def summary_table(episodes: pd.DataFrame, steps: Optional[pd.DataFrame] = None, *, order: Optional[Sequence[str]] = None, decimals: int = 6) -> pd.DataFrame:
    """One row per policy with the metrics of the module docstring (:data:`SUMMARY_COLUMNS`).

    Args:
        episodes: Episode rows (``episodes.parquet``).
        steps: Step rows (``trajectories.parquet``); used for ``kind`` when episodes lack it.
        order: Preferred policy order.
        decimals: Floats are rounded to this many decimals (stable CSVs).

    Returns:
        The table (empty with the right columns when there are no episodes).
    """
    if episodes is None or episodes.empty:
        return pd.DataFrame(columns=list(SUMMARY_COLUMNS))
    rows = []
    comp_cols = [c for c in episodes.columns if c.startswith("reward_")]
    for pol in policy_order(episodes, order):
        ep = episodes[episodes["policy"] == pol]
        questions = int(ep["num_questions"].sum())
        answered = int(ep["num_answered"].sum())
        correct = int(ep["num_correct"].sum())
        spent = float(ep["total_spent"].sum())
        kind = ep["kind"].iloc[0] if "kind" in ep.columns else (
            steps.loc[steps["policy"] == pol, "kind"].iloc[0] if steps is not None and "kind" in steps.columns and (steps["policy"] == pol).any() else ""
        )
        exp = _col(ep, "expected_correct")
        regret = _col(ep, "regret")
        row = {
            "policy": pol,
            "kind": kind,
            "episodes": int(len(ep)),
            "questions": questions,
            "answered": answered,
            "correct": correct,
            "accuracy": correct / questions if questions else np.nan,
            "expected_accuracy": float(exp.sum()) / questions if questions and exp.notna().all() else np.nan,
            "tokens_per_question": spent / answered if answered else np.nan,
            "utilisation": float(ep["utilisation"].mean()),
            "run_dry_rate": float(ep["ran_dry"].astype(float).mean()),
            "reward": float(ep["episode_reward"].mean()),
        }
        for c in comp_cols:
            row[c] = float(ep[c].mean())
        row.update(
            {
                "acc_per_1k_tokens": 1000.0 * correct / spent if spent else np.nan,
                "regret": float(regret.mean()) if regret.notna().all() else np.nan,
                "regret_std": float(regret.std(ddof=0)) if regret.notna().all() else np.nan,
                "mean_total_budget": float(ep["total_budget"].mean()),
                "budget_source": ",".join(sorted(set(ep["budget_source"].astype(str)))),
                "tokenizer_name": ",".join(sorted(set(ep["tokenizer_name"].astype(str)))),
            }
        )
        rows.append(row)
    df = pd.DataFrame(rows)
    cols = [c for c in SUMMARY_COLUMNS if c in df.columns] + [c for c in df.columns if c not in SUMMARY_COLUMNS]
    df = df[cols]
    floats = df.select_dtypes(include="float").columns
    df[floats] = df[floats].round(decimals)
    return df


def spend_curve(steps: pd.DataFrame) -> pd.DataFrame:
    """Mean share of the budget spent after each question, per policy.

    Returns:
        Columns ``policy``, ``question`` (1-based), ``spent_fraction`` (mean over episodes of
        cumulative charged tokens / budget; episodes that ended earlier keep their final value),
        ``episodes``.
    """
    if steps is None or steps.empty:
        return pd.DataFrame(columns=["policy", "question", "spent_fraction", "episodes"])
    s = steps.copy()
    s["spent_after"] = (s["spent_before"] + s["tokens"]) / s["total_budget"].where(s["total_budget"] > 0, np.nan)
    out = []
    for pol in policy_order(s):
        ps = s[s["policy"] == pol]
        n_q = int(ps["num_questions"].max())
        wide = ps.pivot_table(index="episode", columns="step", values="spent_after", aggfunc="last")
        wide = wide.reindex(columns=range(n_q)).ffill(axis=1)
        for q in range(n_q):
            out.append({"policy": pol, "question": q + 1, "spent_fraction": float(wide[q].mean()), "episodes": int(wide[q].notna().sum())})
    return pd.DataFrame(out)


def by_group(steps: pd.DataFrame, by: str) -> pd.DataFrame:
    """Mean charged tokens and accuracy per policy and ``by`` (e.g. ``problem_type``, ``difficulty``).

    Missing ``by`` values are labelled ``"n/a"``.

    Returns:
        Columns ``policy``, ``by`` value (as a string), ``tokens`` (mean), ``accuracy`` (of
        answered questions), ``n`` (steps).
    """
    if steps is None or steps.empty:
        return pd.DataFrame(columns=["policy", by, "tokens", "accuracy", "n"])
    s = steps.copy()
    if by == "difficulty":
        s[by] = s[by].map(lambda v: "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else str(int(v)))
    else:
        s[by] = s[by].fillna("n/a").astype(str)
    g = s.groupby(["policy", by], sort=True).agg(tokens=("tokens", "mean"), accuracy=("correct", "mean"), n=("tokens", "size")).reset_index()
    order = {p: i for i, p in enumerate(policy_order(steps))}
    g["_o"] = g["policy"].map(order)
    return g.sort_values(["_o", by]).drop(columns="_o").reset_index(drop=True)


def accuracy_vs_tokens(steps: pd.DataFrame, bins: Optional[Iterable[float]] = None) -> pd.DataFrame:
    """Accuracy of answered questions by charged-token bin, per policy.

    Args:
        bins: Bin edges in tokens (default: powers of two from 8 to 8192).

    Returns:
        Columns ``policy``, ``tokens_mid`` (geometric bin centre), ``accuracy``,
        ``expected`` (mean ``expected_correct`` if present), ``n``.
    """
    edges = np.array(list(bins) if bins is not None else [0] + [2.0**k for k in range(3, 14)] + [np.inf], dtype=float)
    if steps is None or steps.empty:
        return pd.DataFrame(columns=["policy", "tokens_mid", "accuracy", "expected", "n"])
    s = steps.copy()
    s["bin"] = pd.cut(s["tokens"], edges, right=False, labels=False)
    agg = {"accuracy": ("correct", "mean"), "n": ("correct", "size")}
    if "expected_correct" in s.columns:
        agg["expected"] = ("expected_correct", "mean")
    g = s.groupby(["policy", "bin"]).agg(**agg).reset_index()
    lo = edges[g["bin"].astype(int)]
    hi = edges[g["bin"].astype(int) + 1]
    hi = np.where(np.isinf(hi), lo * 2, hi)
    g["tokens_mid"] = np.sqrt(np.maximum(lo, 1) * hi)
    if "expected" not in g.columns:
        g["expected"] = np.nan
    order = {p: i for i, p in enumerate(policy_order(steps))}
    g["_o"] = g["policy"].map(order)
    return g.sort_values(["_o", "tokens_mid"])[["policy", "tokens_mid", "accuracy", "expected", "n"]].reset_index(drop=True)


def reward_components(episodes: pd.DataFrame) -> pd.DataFrame:
    """Mean per-episode reward components per policy, long form.

    Returns:
        Columns ``policy``, ``component`` (without the ``reward_`` prefix), ``value``.
    """
    if episodes is None or episodes.empty:
        return pd.DataFrame(columns=["policy", "component", "value"])
    comps = [c for c in episodes.columns if c.startswith("reward_")]
    out = []
    for pol in policy_order(episodes):
        ep = episodes[episodes["policy"] == pol]
        for c in comps:
            out.append({"policy": pol, "component": c[len("reward_"):], "value": float(ep[c].mean())})
    return pd.DataFrame(out)


_TABLE_COLS = (
    ("policy", "policy", "{}"),
    ("accuracy", "acc", "{:.3f}"),
    ("expected_accuracy", "exp_acc", "{:.3f}"),
    ("tokens_per_question", "tok/q", "{:.0f}"),
    ("utilisation", "util", "{:.2f}"),
    ("run_dry_rate", "dry", "{:.2f}"),
    ("reward", "reward", "{:+.3f}"),
    ("reward_correctness", "correct", "{:+.3f}"),
    ("reward_efficiency_bonus", "effic", "{:+.3f}"),
    ("reward_cost_penalty", "cost", "{:+.3f}"),
    ("reward_overspend_penalty", "oversp", "{:+.3f}"),
    ("reward_episode_bonus", "ep_bonus", "{:+.3f}"),
    ("acc_per_1k_tokens", "acc/1k", "{:.2f}"),
    ("regret", "regret", "{:.3f}"),
)


def format_table(summary: pd.DataFrame) -> str:
    """The summary as a fixed-width text table for the terminal (one line per policy).

    Columns: accuracy, expected accuracy under the solver curves, tokens per answered question,
    budget utilisation, run-dry rate, mean episode reward and its components (``oversp`` only
    when non-zero), accuracy per 1k tokens, regret vs the oracle (expected correct per episode).
    """
    if summary is None or summary.empty:
        return "(no episodes)"
    cols = [c for c in _TABLE_COLS if c[0] in summary.columns]
    if "reward_overspend_penalty" in summary.columns and not summary["reward_overspend_penalty"].fillna(0).abs().gt(0).any():
        cols = [c for c in cols if c[0] != "reward_overspend_penalty"]
    cells = []
    for _, r in summary.iterrows():
        line = []
        for key, _h, fmt in cols:
            v = r[key]
            if v is None or (isinstance(v, float) and math.isnan(v)):
                line.append("-")
            else:
                line.append(fmt.format(v))
        cells.append(line)
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, (_k, h, _f) in enumerate(cols)]
    head = "  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, ((_k, h, _f), w) in enumerate(zip(cols, widths)))
    lines = [head, "  ".join("-" * w for w in widths)]
    for c in cells:
        lines.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(c, widths))))
    return "\n".join(lines)

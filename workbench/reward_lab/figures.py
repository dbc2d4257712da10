"""Plotly figures of the reward lab (pure functions returning ``plotly.graph_objects.Figure``).

- :func:`reward_curves_figure`: step reward vs tokens for each reward, correct vs wrong.
- :func:`induced_tokens_figure`: tokens a reward-maximising policy spends per difficulty level.
- :func:`pareto_figure`: expected accuracy vs tokens of each reward's optimum, with the oracle frontier.
- :func:`rescore_comparison_figure`: per-episode reward under two rewards (counterfactual vs recorded).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from reasoning_env.rewards import StepBatch, build_reward, components_total
from workbench.figure_template import LIGHT
from workbench.reward_lab.induced import InducedResult
from workbench.reward_lab.rescore import Rescored

PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#7f7f7f",
    "#bcbd22",
)
ORACLE_COLOR = "#111111"
#: The other rollouts of the group a group reward's curve is drawn against: (tokens, correct).
DEFAULT_GROUP_OTHERS: tuple[tuple[float, bool], ...] = ((200.0, True), (400.0, True), (800.0, False))


def _as_mapping(rewards: Any) -> dict[str, Any]:
    if isinstance(rewards, Mapping) and "type" not in rewards and "name" not in rewards:
        return dict(rewards)
    if isinstance(rewards, (list, tuple)):
        out = {}
        for r in rewards:
            rw = build_reward(r, context="rescore")
            out[rw.info.name if rw.info.name not in out else f"{rw.info.name}_{len(out)}"] = rw
        return out
    rw = build_reward(rewards, context="rescore")
    return {rw.info.name: rw}


def step_reward_curve(
    reward: Any,
    tokens: np.ndarray,
    *,
    correct: bool,
    total_budget: int = 4000,
    num_questions: int = 10,
    spent_before: int = 0,
    question_index: int = 0,
    difficulty: int | None = 3,
    hard_cap_mode: bool = True,
    group_others: Sequence[tuple[float, bool]] = DEFAULT_GROUP_OTHERS,
) -> np.ndarray:
    """Step reward (sum of step components) of one response of ``tokens`` tokens (array).

    Group rewards score it inside a group made of it plus ``group_others`` (``(tokens, correct)``
    of the other rollouts). Episode components are not included.
    """
    rw = build_reward(reward, context="rescore")
    t = np.asarray(tokens, dtype=np.float64)
    n = len(t)
    if getattr(rw, "is_group", False):
        m = 1 + len(group_others)
        toks = np.concatenate([t[:, None], np.tile([o[0] for o in group_others], (n, 1))], axis=1).ravel()
        corr = np.concatenate(
            [np.full((n, 1), correct), np.tile([o[1] for o in group_others], (n, 1))], axis=1
        ).ravel()
        groups = np.repeat(np.arange(n), m)
        batch = StepBatch.build(
            n * m,
            correct=corr,
            tokens=toks,
            total_budget=total_budget,
            num_questions=num_questions,
            spent_before=spent_before,
            question_index=question_index,
            hard_cap_mode=hard_cap_mode,
            difficulty=difficulty,
            group=groups,
        )
        take = np.arange(n) * m
    else:
        batch = StepBatch.build(
            n,
            correct=correct,
            tokens=t,
            total_budget=total_budget,
            num_questions=num_questions,
            spent_before=spent_before,
            question_index=question_index,
            hard_cap_mode=hard_cap_mode,
            difficulty=difficulty,
        )
        take = np.arange(n)
    return components_total(rw.step_batch(batch), len(batch))[take]


def reward_curves_figure(
    rewards: Any,
    *,
    total_budget: int = 4000,
    num_questions: int = 10,
    max_tokens: int | None = None,
    difficulty: int | None = 3,
    spent_before: int = 0,
    question_index: int = 0,
    hard_cap_mode: bool = True,
    points: int = 201,
    cols: int = 3,
) -> go.Figure:
    """Step reward vs tokens, one panel per reward: correct (solid) and wrong (dashed).

    Args:
        rewards: ``{label: spec}``, a list of specs, or one spec.
        total_budget, num_questions: Episode budget (tokens) and size; the fair share is marked.
        max_tokens: Right end of the token axis (default ``max(2048, 2.5 x fair share)``).
        difficulty, spent_before, question_index, hard_cap_mode: The step's context.

    Text rewards are drawn without a text (a clean, answered response: ``format`` pays its
    present value, ``repetition`` 0); group rewards against :data:`DEFAULT_GROUP_OTHERS`.
    """
    specs = _as_mapping(rewards)
    fair = total_budget / num_questions
    hi = max_tokens or int(max(2048, 2.5 * fair))
    t = np.linspace(0, hi, points)
    rows = math.ceil(len(specs) / cols)
    group_note = ", ".join(f"{o[0]:.0f}{'✓' if o[1] else '✗'}" for o in DEFAULT_GROUP_OTHERS)
    titles = [
        f"{k} (group: {group_note})" if getattr(build_reward(v, context="rescore"), "is_group", False) else k
        for k, v in specs.items()
    ]
    fig = make_subplots(rows=rows, cols=min(cols, len(specs)), subplot_titles=titles, shared_xaxes=False)
    for k, (label, spec) in enumerate(specs.items()):
        r, c = k // cols + 1, k % cols + 1
        for correct, dash, color in ((True, "solid", PALETTE[0]), (False, "dash", PALETTE[1])):
            y = step_reward_curve(
                spec,
                t,
                correct=correct,
                total_budget=total_budget,
                num_questions=num_questions,
                spent_before=spent_before,
                question_index=question_index,
                difficulty=difficulty,
                hard_cap_mode=hard_cap_mode,
            )
            fig.add_trace(
                go.Scatter(
                    x=t,
                    y=y,
                    mode="lines",
                    line=dict(dash=dash, color=color),
                    name="correct" if correct else "wrong",
                    legendgroup="correct" if correct else "wrong",
                    showlegend=k == 0,
                    hovertemplate=f"{label}<br>%{{x:.0f}} tokens<br>reward %{{y:.3f}}<extra></extra>",
                ),
                row=r,
                col=c,
            )
        fig.add_vline(x=fair, line=dict(color="#999", dash="dot", width=1), row=r, col=c)
    fig.update_xaxes(title_text="tokens")
    fig.update_yaxes(title_text="step reward", col=1)
    fig.update_layout(
        title=f"Step reward vs tokens (budget {total_budget:,} for {num_questions} questions; "
        f"dotted: fair share {fair:.0f})",
        height=max(320, 280 * rows),
        template=LIGHT,
    )
    return fig


def induced_tokens_figure(result: InducedResult, *, budgets: Sequence[int] | None = None) -> go.Figure:
    """Mean tokens a reward-maximising policy spends per difficulty level (bars per reward, the
    accuracy oracle in black), one panel per budget. Hover shows accuracy and give-up rate."""
    by = result.by_difficulty
    bs = list(budgets) if budgets is not None else sorted(by["budget"].unique())
    labels = list(dict.fromkeys(by["reward"]))
    labels = ["oracle"] + [x for x in labels if x != "oracle"]
    fig = make_subplots(rows=1, cols=len(bs), subplot_titles=[f"budget {b:,} tokens" for b in bs], shared_yaxes=True)
    for j, b in enumerate(bs):
        sub = by[by["budget"] == b]
        for k, label in enumerate(labels):
            d = sub[sub["reward"] == label].sort_values("difficulty")
            color = ORACLE_COLOR if label == "oracle" else PALETTE[(k - 1) % len(PALETTE)]
            fig.add_trace(
                go.Bar(
                    x=d["difficulty"].astype(str),
                    y=d["tokens"],
                    name=label,
                    legendgroup=label,
                    showlegend=j == 0,
                    marker_color=color,
                    customdata=np.stack([d["accuracy"], d["give_up_rate"]], axis=1),
                    hovertemplate=f"{label}<br>difficulty %{{x}}<br>%{{y:.0f}} tokens<br>accuracy "
                    f"%{{customdata[0]:.2f}}<br>gives up %{{customdata[1]:.0%}}<extra></extra>",
                ),
                row=1,
                col=j + 1,
            )
    fig.update_xaxes(title_text="difficulty level")
    fig.update_yaxes(title_text="tokens per question", col=1)
    fig.update_layout(
        barmode="group",
        template=LIGHT,
        height=420,
        title="Tokens a reward-maximising policy spends by difficulty (oracle = accuracy-maximising)",
    )
    return fig


def pareto_figure(result: InducedResult, frontier: pd.DataFrame | None = None) -> go.Figure:
    """Expected accuracy vs tokens per question of each reward's optimum (one marker per budget),
    with the accuracy oracle's frontier (:func:`~workbench.reward_lab.induced.oracle_frontier`)."""
    s = result.summary
    n_q = result.questions.groupby(["reward", "budget", "order"]).size().max() if len(result.questions) else 1
    fig = go.Figure()
    if frontier is not None and len(frontier):
        f = frontier.sort_values("tokens_per_question")
        fig.add_trace(
            go.Scatter(
                x=f["tokens_per_question"],
                y=f["accuracy"],
                mode="lines",
                name="oracle frontier",
                line=dict(color=ORACLE_COLOR, width=2),
                hovertemplate="oracle<br>%{x:.0f} tokens/question<br>accuracy %{y:.3f}<extra></extra>",
            )
        )
    labels = [x for x in dict.fromkeys(s["reward"]) if x != "oracle"]
    for k, label in enumerate(labels):
        d = s[s["reward"] == label].sort_values("budget")
        fig.add_trace(
            go.Scatter(
                x=d["tokens"] / n_q,
                y=d["expected_accuracy"],
                mode="markers+lines",
                name=label,
                marker=dict(size=10, color=PALETTE[k % len(PALETTE)]),
                line=dict(width=1, dash="dot"),
                customdata=np.stack([d["budget"], d["regret"], d["spearman"]], axis=1),
                hovertemplate=f"{label}<br>budget %{{customdata[0]:,}}<br>%{{x:.0f}} "
                f"tokens/question<br>accuracy %{{y:.3f}}<br>regret %{{customdata[1]:.3f}} "
                f"correct/episode<br>Spearman %{{customdata[2]:.2f}}<extra></extra>",
            )
        )
    fig.update_layout(
        template=LIGHT,
        height=450,
        title="Accuracy vs tokens of each reward's optimum",
        xaxis_title="tokens per question",
        yaxis_title="expected accuracy",
    )
    return fig


def rescore_comparison_figure(
    base: Rescored, other: Rescored, *, labels: tuple[str, str] = ("recorded", "counterfactual")
) -> go.Figure:
    """Per-episode reward under two rewards (e.g. the recorded one and a counterfactual), one
    marker per episode coloured by accuracy; points off the diagonal changed rank."""
    a, b = base.episodes, other.episodes
    acc = a["accuracy"].to_numpy()
    fig = go.Figure(
        go.Scatter(
            x=a["reward"],
            y=b["reward"],
            mode="markers",
            marker=dict(color=acc, colorscale="Viridis", colorbar=dict(title="accuracy"), size=7, opacity=0.8),
            customdata=np.stack([acc, a["total_spent"]], axis=1),
            hovertemplate=f"{labels[0]} %{{x:.3f}}<br>{labels[1]} %{{y:.3f}}<br>accuracy "
            f"%{{customdata[0]:.2f}}<br>%{{customdata[1]:,}} tokens<extra></extra>",
        )
    )
    lo = float(min(a["reward"].min(), b["reward"].min())) if len(a) else 0.0
    hi = float(max(a["reward"].max(), b["reward"].max())) if len(a) else 1.0
    fig.add_trace(
        go.Scatter(
            x=[lo, hi],
            y=[lo, hi],
            mode="lines",
            line=dict(color="#999", dash="dot"),
            showlegend=False,
            hoverinfo="skip",
        )
    )
    fig.update_layout(
        template=LIGHT,
        height=450,
        title="Episode reward: counterfactual vs recorded",
        xaxis_title=f"{labels[0]} episode reward",
        yaxis_title=f"{labels[1]} episode reward",
    )
    return fig

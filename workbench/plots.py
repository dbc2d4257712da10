"""Figure builders: pure functions, run frames in, ``plotly.graph_objects.Figure`` out.

Used by the evaluation report (``report.html``) and meant for the Gradio UI. ``steps`` and
``episodes`` are a run folder's ``trajectories.parquet`` / ``episodes.parquet`` frames (several
runs can be compared by concatenating frames and renaming ``policy`` values, e.g.
``"<run>:<policy>"``). Every builder returns a figure with a title even for empty input.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from workbench import analysis

__all__ = [
    "accuracy_vs_tokens_figure",
    "policy_colors",
    "budget_spend_figure",
    "length_histogram_figure",
    "regret_figure",
    "reward_components_figure",
    "tokens_by_difficulty_figure",
    "tokens_by_type_figure",
]

_TEMPLATE = "plotly_white"
_PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#17becf",
    "#e377c2",
    "#8c564b",
    "#bcbd22",
    "#7f7f7f",
    "#393b79",
    "#ad494a",
    "#637939",
    "#7b4173",
    "#e6550d",
    "#3182bd",
)


def policy_colors(policies: list[str]) -> dict[str, str]:
    """A stable colour per policy (by position in ``policies``), shared by all figures of a run."""
    return {p: _PALETTE[i % len(_PALETTE)] for i, p in enumerate(policies)}


def _colors(frame: pd.DataFrame) -> dict[str, str]:
    return policy_colors(analysis.policy_order(frame))


def _empty(title: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(
        title=title,
        template=_TEMPLATE,
        annotations=[dict(text="no data", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)],
    )
    return fig


def budget_spend_figure(steps: pd.DataFrame) -> go.Figure:
    """Budget spend across the episode: mean cumulative share of the budget spent after each
    question, one line per policy, with the even-spend diagonal for reference."""
    title = "Budget spend across the episode"
    curve = analysis.spend_curve(steps)
    if curve.empty:
        return _empty(title)
    fig = go.Figure()
    n = int(curve["question"].max())
    fig.add_trace(
        go.Scatter(
            x=list(range(0, n + 1)),
            y=[i / n for i in range(0, n + 1)],
            mode="lines",
            name="even spend",
            line=dict(dash="dot", color="grey"),
        )
    )
    colors = _colors(curve)
    for pol in analysis.policy_order(curve):
        c = curve[curve["policy"] == pol]
        fig.add_trace(
            go.Scatter(
                x=[0] + c["question"].tolist(),
                y=[0.0] + c["spent_fraction"].tolist(),
                mode="lines+markers",
                name=pol,
                line=dict(color=colors[pol]),
            )
        )
    fig.update_layout(
        title=title,
        template=_TEMPLATE,
        xaxis_title="questions answered",
        yaxis_title="share of budget spent (mean over episodes)",
        yaxis=dict(rangemode="tozero"),
    )
    return fig


def _grouped_bars(steps: pd.DataFrame, by: str, title: str, xlabel: str) -> go.Figure:
    g = analysis.by_group(steps, by)
    if g.empty:
        return _empty(title)
    fig = go.Figure()
    colors = _colors(g)
    for pol in analysis.policy_order(g):
        c = g[g["policy"] == pol]
        fig.add_trace(
            go.Bar(
                x=c[by],
                y=c["tokens"],
                name=pol,
                marker_color=colors[pol],
                customdata=np.stack([c["accuracy"], c["n"]], axis=1),
                hovertemplate="%{x}<br>%{y:.0f} tokens<br>accuracy %{customdata[0]:.2f} (n=%{customdata[1]})<extra>"
                + pol
                + "</extra>",
            )
        )
    fig.update_layout(
        title=title,
        template=_TEMPLATE,
        barmode="group",
        xaxis_title=xlabel,
        yaxis_title="mean tokens per answered question",
    )
    return fig


def tokens_by_type_figure(steps: pd.DataFrame) -> go.Figure:
    """Mean charged tokens per answered question, by problem type and policy (hover: accuracy)."""
    return _grouped_bars(steps, "problem_type", "Tokens by problem type", "problem type")


def tokens_by_difficulty_figure(steps: pd.DataFrame) -> go.Figure:
    """Mean charged tokens per answered question, by difficulty level (``n/a`` = unlabelled)."""
    return _grouped_bars(steps, "difficulty", "Tokens by difficulty level", "difficulty level")


def accuracy_vs_tokens_figure(steps: pd.DataFrame, summary: pd.DataFrame | None = None) -> go.Figure:
    """Accuracy vs tokens: per policy, accuracy of answered questions by token bin (powers of
    two, log-scale x; hover shows the count), and a large marker at the policy's mean tokens per
    question and accuracy (from ``summary`` when given)."""
    title = "Accuracy vs tokens"
    if steps is None or steps.empty:
        return _empty(title)
    fig = go.Figure()
    colors = _colors(steps)
    binned = analysis.accuracy_vs_tokens(steps)
    for pol in analysis.policy_order(steps):
        c = binned[binned["policy"] == pol]
        fig.add_trace(
            go.Scatter(
                x=c["tokens_mid"],
                y=c["accuracy"],
                mode="lines+markers",
                name=pol,
                legendgroup=pol,
                line=dict(width=1, color=colors[pol]),
                marker=dict(size=5),
                opacity=0.7,
                customdata=c["n"],
                hovertemplate="~%{x:.0f} tokens: accuracy %{y:.2f} (n=%{customdata})<extra>" + pol + "</extra>",
            )
        )
        if summary is not None and not summary.empty and pol in set(summary["policy"]):
            r = summary[summary["policy"] == pol].iloc[0]
            if pd.notna(r.get("tokens_per_question")) and pd.notna(r.get("accuracy")):
                fig.add_trace(
                    go.Scatter(
                        x=[r["tokens_per_question"]],
                        y=[r["accuracy"]],
                        mode="markers",
                        name=f"{pol} (mean)",
                        legendgroup=pol,
                        showlegend=False,
                        marker=dict(size=14, symbol="diamond", color=colors[pol], line=dict(width=1, color="black")),
                        hovertemplate=f"{pol}: %{{x:.0f}} tokens/question, accuracy %{{y:.3f}}<extra></extra>",
                    )
                )
    fig.update_layout(
        title=title + " (lines: by response length; diamonds: policy means)",
        template=_TEMPLATE,
        xaxis_title="tokens (log scale)",
        yaxis_title="accuracy",
        xaxis_type="log",
        yaxis=dict(range=[-0.02, 1.05]),
    )
    return fig


def reward_components_figure(episodes: pd.DataFrame) -> go.Figure:
    """Mean per-episode reward components per policy, stacked (penalties below zero), with the
    total reward as a marker."""
    title = "Reward components (mean per episode)"
    comps = analysis.reward_components(episodes)
    if comps.empty:
        return _empty(title)
    order = analysis.policy_order(comps)
    fig = go.Figure()
    for comp in list(dict.fromkeys(comps["component"])):
        c = comps[comps["component"] == comp].set_index("policy").reindex(order)
        if c["value"].abs().sum() == 0:
            continue
        fig.add_trace(go.Bar(x=order, y=c["value"], name=comp))
    totals = episodes.groupby("policy")["episode_reward"].mean().reindex(order)
    fig.add_trace(
        go.Scatter(
            x=order,
            y=totals.values,
            mode="markers",
            marker=dict(color="black", size=10, symbol="line-ew-open", line=dict(width=3)),
            name="total",
        )
    )
    fig.update_layout(title=title, template=_TEMPLATE, barmode="relative", yaxis_title="reward per episode")
    return fig


def regret_figure(episodes: pd.DataFrame) -> go.Figure:
    """Per-episode regret against the oracle allocation (expected correct answers lost), one box
    per policy."""
    title = "Regret vs the oracle allocation (expected correct answers per episode)"
    if episodes is None or episodes.empty or "regret" not in episodes.columns or episodes["regret"].isna().all():
        return _empty(title)
    fig = go.Figure()
    colors = _colors(episodes)
    for pol in analysis.policy_order(episodes):
        r = episodes.loc[episodes["policy"] == pol, "regret"].dropna()
        fig.add_trace(go.Box(y=r, name=pol, boxmean=True, marker_color=colors[pol]))
    fig.update_layout(
        title=title,
        template=_TEMPLATE,
        yaxis_title="oracle expected correct - policy expected correct",
        showlegend=False,
    )
    return fig


def length_histogram_figure(steps: pd.DataFrame, policy: str | None = None) -> go.Figure:
    """Histogram of charged tokens for correct vs wrong answers (all policies, or one)."""
    title = "Response length: correct vs wrong" + (f" ({policy})" if policy else "")
    if steps is None or steps.empty:
        return _empty(title)
    s = steps if policy is None else steps[steps["policy"] == policy]
    if s.empty:
        return _empty(title)
    fig = go.Figure()
    for verdict, label in ((True, "correct"), (False, "wrong")):
        fig.add_trace(go.Histogram(x=s.loc[s["correct"] == verdict, "tokens"], name=label, opacity=0.6, nbinsx=40))
    fig.update_layout(
        title=title, template=_TEMPLATE, barmode="overlay", xaxis_title="tokens charged", yaxis_title="answers"
    )
    return fig

"""Figures of a run's summary with its uncertainty: intervals per policy, accuracy against the
budget of a sweep, and the Pareto frontier of accuracy against tokens per question.

Pure functions: a ``summary.csv`` frame (:func:`workbench.analysis.summary_table`, with its
``<metric>_ci_low`` / ``_ci_high`` columns) in, a ``plotly.graph_objects.Figure`` out. Several runs
can be drawn together by concatenating their summaries with ``policy = "<run>:<policy>"``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from workbench import analysis, stats
from workbench.plots import policy_colors

__all__ = ["accuracy_vs_budget_figure", "frontier_figure", "interval_figure"]

_TEMPLATE = "plotly_white"


def _empty(title: str, text: str = "no data") -> go.Figure:
    fig = go.Figure()
    fig.update_layout(
        title=title,
        template=_TEMPLATE,
        annotations=[dict(text=text, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)],
    )
    return fig


def _errors(d: pd.DataFrame, metric: str) -> dict:
    lo, hi = stats.ci_columns(metric)
    if lo not in d or d[lo].isna().all():
        return {}
    return dict(
        type="data",
        symmetric=False,
        array=(d[hi] - d[metric]).clip(lower=0).fillna(0).to_numpy(),
        arrayminus=(d[metric] - d[lo]).clip(lower=0).fillna(0).to_numpy(),
        thickness=1.2,
        width=4,
    )


def interval_figure(summary: pd.DataFrame, metric: str = "accuracy", *, title: str = "") -> go.Figure:
    """Each policy's ``metric`` with its 95% bootstrap interval over episodes (one marker and
    error bar per policy, and per budget ratio of a sweep)."""
    title = title or f"{metric.replace('_', ' ')} with 95% intervals over episodes"
    if summary is None or summary.empty or metric not in summary:
        return _empty(title)
    order = analysis.policy_order(summary)
    colors = policy_colors(order)
    fig = go.Figure()
    sweep = "budget_ratio" in summary and summary["budget_ratio"].nunique(dropna=True) > 1
    for pol in order:
        d = summary[summary["policy"] == pol]
        x = [f"{pol} ×{r:g}" for r in d["budget_ratio"]] if sweep else [pol] * len(d)
        fig.add_trace(
            go.Scatter(
                x=x,
                y=d[metric],
                mode="markers",
                name=pol,
                marker=dict(size=10, color=colors[pol]),
                error_y=_errors(d, metric),
                showlegend=False,
                hovertemplate="%{x}<br>" + metric + " %{y:.3f}<extra></extra>",
            )
        )
    fig.update_layout(
        title=title,
        template=_TEMPLATE,
        yaxis_title=metric.replace("_", " "),
        xaxis=dict(tickangle=-30, automargin=True),
        margin=dict(l=55, r=15, t=55, b=40),
    )
    return fig


def accuracy_vs_budget_figure(summary: pd.DataFrame, metric: str = "accuracy") -> go.Figure:
    """``metric`` against the budget ratio of a sweep, one line per policy, with 95% intervals
    (x: the budget ratio; hover: the mean budget in tokens). Needs several ``budget_ratio`` values."""
    title = f"{metric.replace('_', ' ').capitalize()} against budget (budget sweep, 95% intervals)"
    if (
        summary is None
        or summary.empty
        or "budget_ratio" not in summary
        or summary["budget_ratio"].nunique(dropna=True) < 2
    ):
        return _empty(title, "one budget only: run with --budget-ratios 1,2,4,8 for a sweep")
    order = analysis.policy_order(summary)
    colors = policy_colors(order)
    fig = go.Figure()
    for pol in order:
        d = summary[summary["policy"] == pol].sort_values("budget_ratio")
        fig.add_trace(
            go.Scatter(
                x=d["budget_ratio"],
                y=d[metric],
                mode="lines+markers",
                name=pol,
                line=dict(color=colors[pol]),
                error_y=_errors(d, metric),
                customdata=np.stack([d["mean_total_budget"], d["tokens_per_question"]], axis=1),
                hovertemplate=pol
                + "<br>ratio %{x:g} (mean budget %{customdata[0]:.0f} tokens)<br>"
                + metric
                + " %{y:.3f}<br>"
                "%{customdata[1]:.0f} tokens/question<extra></extra>",
            )
        )
    fig.update_layout(
        title=title,
        template=_TEMPLATE,
        xaxis=dict(title="budget ratio (log scale)", type="log"),
        yaxis_title=metric.replace("_", " "),
    )
    return fig


def frontier_figure(summary: pd.DataFrame) -> go.Figure:
    """Accuracy against tokens per question of every policy (and budget ratio), with 95%
    intervals on both axes and the Pareto frontier (rows no other row beats on both) as a line."""
    title = "Accuracy vs tokens per question: the Pareto frontier"
    if summary is None or summary.empty or "accuracy" not in summary:
        return _empty(title)
    order = analysis.policy_order(summary)
    colors = policy_colors(order)
    front = summary[analysis.pareto_frontier(summary)].sort_values("tokens_per_question")
    fig = go.Figure()
    if len(front):
        fig.add_trace(
            go.Scatter(
                x=front["tokens_per_question"],
                y=front["accuracy"],
                mode="lines",
                name="frontier",
                line=dict(color="#111", width=1.5, dash="dot"),
                hoverinfo="skip",
            )
        )
    sweep = "budget_ratio" in summary and summary["budget_ratio"].nunique(dropna=True) > 1
    for pol in order:
        d = summary[summary["policy"] == pol]
        label = [f"×{r:g}" for r in d["budget_ratio"]] if sweep else None
        fig.add_trace(
            go.Scatter(
                x=d["tokens_per_question"],
                y=d["accuracy"],
                mode="markers+text" if sweep else "markers",
                name=pol,
                text=label,
                textposition="top center",
                marker=dict(size=10, color=colors[pol], line=dict(width=1, color="#333")),
                error_y=_errors(d, "accuracy"),
                error_x=_errors(d, "tokens_per_question"),
                hovertemplate=pol + "<br>%{x:.0f} tokens/question<br>accuracy %{y:.3f}<extra></extra>",
            )
        )
    fig.update_layout(
        title=title, template=_TEMPLATE, xaxis_title="tokens per answered question", yaxis_title="accuracy"
    )
    return fig

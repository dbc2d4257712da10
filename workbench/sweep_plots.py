"""Figures of a run's summary with its uncertainty: intervals per policy, accuracy against the
budget of a sweep, and the Pareto frontier of accuracy against tokens per question.

Pure functions: a ``summary.csv`` frame (:func:`workbench.analysis.summary_table`, with its
``<metric>_ci_low`` / ``_ci_high`` columns) in, a ``plotly.graph_objects.Figure`` out. Several runs
are drawn together from :func:`workbench.compare.labelled_summary` (``run``, ``run_kind`` and
``policy_name`` beside ``policy = "<run>:<policy>"``), grouped as in :mod:`workbench.plots`: one
colour per policy, one line style and marker per run with a run key, one panel per run for the
intervals.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from workbench import analysis, stats
from workbench.figure_template import LIGHT
from workbench.plots import add_run_key, empty_figure, is_grouped, run_panels, series_styles

__all__ = ["accuracy_vs_budget_figure", "frontier_figure", "interval_figure"]

_TEMPLATE = LIGHT  # plotly_white's 2-D look, small (workbench.figure_template)


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


def _swept(summary: pd.DataFrame) -> pd.Index:
    """The rows of ``summary`` that belong to a budget sweep (several ``budget_ratio`` values in
    their run; the whole frame when it holds one run)."""
    if "budget_ratio" not in summary:
        return summary.index[:0]
    if not is_grouped(summary):
        return summary.index if summary["budget_ratio"].nunique(dropna=True) > 1 else summary.index[:0]
    counts = summary.groupby("run")["budget_ratio"].transform(lambda r: r.nunique(dropna=True))
    return summary.index[counts > 1]


def interval_figure(summary: pd.DataFrame, metric: str = "accuracy", *, title: str = "") -> go.Figure:
    """Each policy's ``metric`` with its 95% bootstrap interval over episodes (one marker and
    error bar per policy, and per budget ratio of a sweep). Several runs: a forest plot, one
    horizontal row per policy (and ratio), one panel per run."""
    title = title or f"{metric.replace('_', ' ')} with 95% intervals over episodes"
    if summary is None or summary.empty or metric not in summary:
        return empty_figure(title)
    order = analysis.policy_order(summary)
    styles = series_styles(summary)
    swept = _swept(summary)

    def names(d: pd.DataFrame, pol: str) -> list[str]:
        return (
            [f"{pol} ×{r:g}" if pd.notna(r) else pol for r in d["budget_ratio"]]
            if d.index[0] in swept
            else [pol] * len(d)
        )

    if not is_grouped(summary):
        fig = go.Figure()
        for pol in order:
            d = summary[summary["policy"] == pol]
            st = styles[pol]
            fig.add_trace(
                go.Scatter(
                    x=names(d, st.policy),
                    y=d[metric],
                    mode="markers",
                    name=st.policy,
                    marker=dict(size=10, color=st.color),
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
    sizes = summary.assign(_run=summary["run"].astype(str))["_run"].value_counts().to_dict()
    fig, rows, height = run_panels(styles, sizes, horizontal_bars=True, unit_px=20)
    for pol in order:
        st, d = styles[pol], summary[summary["policy"] == pol]
        err = _errors(d, metric)
        fig.add_trace(
            go.Scatter(
                y=names(d, st.policy),
                x=d[metric],
                mode="markers",
                name=st.hover,
                marker=dict(size=9, color=st.color),
                error_x=err,
                showlegend=False,
                hovertemplate=st.hover + "<br>%{y}<br>" + metric + " %{x:.3f}<extra></extra>",
            ),
            row=rows[st.run],
            col=1,
        )
    fig.update_yaxes(automargin=True, autorange="reversed", type="category")
    fig.update_xaxes(title_text=metric.replace("_", " ") + " (95% interval)", row=len(rows), col=1)
    fig.update_layout(title=title, template=_TEMPLATE, height=height)
    return fig


def accuracy_vs_budget_figure(summary: pd.DataFrame, metric: str = "accuracy") -> go.Figure:
    """``metric`` against the budget ratio of a sweep, one line per policy, with 95% intervals
    (x: the budget ratio; hover: the mean budget in tokens). Needs several ``budget_ratio`` values.
    Several runs: one colour per policy, one line style per run."""
    title = f"{metric.replace('_', ' ').capitalize()} against budget (budget sweep, 95% intervals)"
    if summary is not None and not summary.empty and "budget_ratio" in summary:
        summary = summary.loc[_swept(summary)]  # several runs: the sweeps among them
    if summary is None or summary.empty or summary["budget_ratio"].nunique(dropna=True) < 2:
        return empty_figure(title, "one budget only: run with --budget-ratios 1,2,4,8 for a sweep")
    styles = series_styles(summary)
    fig = go.Figure()
    for pol in analysis.policy_order(summary):
        st, d = styles[pol], summary[summary["policy"] == pol].sort_values("budget_ratio")
        fig.add_trace(
            go.Scatter(
                x=d["budget_ratio"],
                y=d[metric],
                mode="lines+markers",
                name=st.policy,
                legendgroup=st.policy,
                showlegend=st.legend,
                line=dict(color=st.color, dash=st.dash),
                marker=dict(symbol=st.symbol, size=7),
                error_y=_errors(d, metric),
                customdata=np.stack([d["mean_total_budget"], d["tokens_per_question"]], axis=1),
                hovertemplate=st.hover
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
    return add_run_key(fig, styles)


def frontier_figure(summary: pd.DataFrame) -> go.Figure:
    """Accuracy against tokens per question of every policy (and budget ratio), with 95%
    intervals on both axes and the Pareto frontier (rows no other row beats on both) as a line.
    Several runs: one colour per policy, one marker symbol per run."""
    title = "Accuracy vs tokens per question: the Pareto frontier"
    if summary is None or summary.empty or "accuracy" not in summary:
        return empty_figure(title)
    styles = series_styles(summary)
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
    swept = _swept(summary)
    for pol in analysis.policy_order(summary):
        st, d = styles[pol], summary[summary["policy"] == pol]
        sweep = d.index[0] in swept
        label = [f"×{r:g}" if pd.notna(r) else "" for r in d["budget_ratio"]] if sweep else None
        fig.add_trace(
            go.Scatter(
                x=d["tokens_per_question"],
                y=d["accuracy"],
                mode="markers+text" if sweep else "markers",
                name=st.policy,
                text=label,
                legendgroup=st.policy,
                showlegend=st.legend,
                textposition="top center",
                textfont=dict(size=10),
                marker=dict(size=10, color=st.color, symbol=st.symbol, line=dict(width=1, color="#333")),
                error_y=_errors(d, "accuracy"),
                error_x=_errors(d, "tokens_per_question"),
                hovertemplate=st.hover + "<br>%{x:.0f} tokens/question<br>accuracy %{y:.3f}<extra></extra>",
            )
        )
    fig.update_layout(
        title=title, template=_TEMPLATE, xaxis_title="tokens per answered question", yaxis_title="accuracy"
    )
    return add_run_key(fig, styles, lines=False)

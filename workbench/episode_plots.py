"""Figures of one episode as it is played (the Play tab's live charts): pure functions over the
episode's step frame (:meth:`workbench.play.PlaySession.steps_frame`, or any trajectories frame
restricted to one episode).

- :func:`spend_figure`: cumulative tokens charged after each question, against the budget line
  and the fair-share line (``total_budget / num_questions`` per question).
- :func:`tokens_per_question_figure`: tokens per question, coloured by problem type; tokens the
  hard cap clipped (generated, never charged) stacked in grey; the fair share as a line.
- :func:`step_rewards_figure`: reward per step, stacked by component (penalties below zero),
  with the step total as a marker.

Every builder returns a titled figure, also for an episode with no steps yet.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go

from reasoning_env.sources.gsm8k import PROBLEM_TYPE as GSM8K_TYPE
from reasoning_env.sources.math500 import PROBLEM_TYPE as MATH500_TYPE
from reasoning_env.sources.metamathqa import METAMATHQA_TYPES
from reasoning_env.sources.numina_tir import PROBLEM_TYPE as NUMINA_TYPE
from reasoning_env.sources.reasoning_gym_source import DEFAULT_DATASETS as REASONING_GYM_DATASETS
from workbench.figure_template import LIGHT

__all__ = [
    "KNOWN_TYPES",
    "TYPE_COLORS",
    "spend_figure",
    "step_rewards_figure",
    "tokens_per_question_figure",
    "type_color",
]

#: The workbench's small copy of ``plotly_white`` (:mod:`workbench.figure_template`).
_TEMPLATE = LIGHT
_HEIGHT = 380
_MARGIN = dict(l=55, r=15, t=45, b=40)
#: Colours of problem types: the project's known types (the sources' types and the default
#: reasoning_gym generators) get distinct fixed colours; any other type gets one by a stable hash
#: (the same in every session). Picked by farthest-point selection in CIELAB from Plotly's and
#: ColorBrewer's qualitative sets (mid lightness, for a white background): the first 12 (MetaMathQA's
#: 8 types, NuminaMath-TIR, GSM8K, MATH-500, reasoning_gym) are at least 25 apart (Delta E 1976) and
#: hold one pink. Plotly's Dark24 gave GSM_Rephrased and MATH_AnsAug two near-identical pinks.
TYPE_COLORS = (
    "#4C78A8",
    "#FF7F00",
    "#109618",
    "#E7298A",
    "#52BCA3",
    "#8C564B",
    "#BCBD22",
    "#7F3C8D",
    "#D62728",
    "#A6761D",
    "#BAB0AC",
    "#88CCEE",
    "#3366CC",
    "#FF9DA6",
    "#B279A2",
    "#EDAD08",
    "#882255",
    "#117733",
    "#008695",
    "#80BA5A",
)
KNOWN_TYPES = (
    METAMATHQA_TYPES
    + (NUMINA_TYPE, GSM8K_TYPE, MATH500_TYPE, "reasoning_gym")
    + tuple(f"reasoning_gym/{name}" for name in REASONING_GYM_DATASETS)
)
_COMPONENT_COLORS = {
    "correctness": "#4c78a8",
    "efficiency_bonus": "#54a24b",
    "cost_penalty": "#e45756",
    "overspend_penalty": "#b279a2",
    "episode_bonus": "#f58518",
}
_OTHER_COMPONENT_COLORS = ("#72b7b2", "#eeca3b", "#9d755d", "#ff9da6", "#bab0ac", "#1f77b4", "#8c564b")


def type_color(problem_type: str) -> str:
    """The colour of a problem type (deterministic: the same in every session)."""
    if problem_type in KNOWN_TYPES:
        return TYPE_COLORS[KNOWN_TYPES.index(problem_type) % len(TYPE_COLORS)]
    h = 0
    for ch in str(problem_type):
        h = (h * 31 + ord(ch)) % 1_000_003
    return TYPE_COLORS[h % len(TYPE_COLORS)]


def _hline(
    y: float, color: str, dash: str | None = None, width: float = 1, text: str | None = None
) -> tuple[list, list]:
    """A horizontal line across the plot at ``y`` (a layout shape) and its label: ``(shapes, annotations)``."""
    shape = dict(
        type="line", xref="paper", x0=0, x1=1, yref="y", y0=y, y1=y, line=dict(color=color, width=width, dash=dash)
    )
    notes = (
        [
            dict(
                text=text,
                xref="paper",
                x=0,
                xanchor="left",
                yref="y",
                y=y,
                yanchor="bottom",
                showarrow=False,
                font=dict(size=11),
            )
        ]
        if text
        else []
    )
    return [shape], notes


def _layout(title: str, xaxis: dict, yaxis: dict, **extra: Any) -> dict:
    """The charts' shared layout: title, the small template, height, margins, legend below."""
    return dict(
        title=dict(text=title, x=0.01, font=dict(size=15)),
        template=_TEMPLATE,
        height=_HEIGHT,
        margin=_MARGIN,
        legend=dict(orientation="h", yanchor="top", y=-0.2, xanchor="left", x=0.0, font=dict(size=11)),
        hoverlabel=dict(font_size=12),
        xaxis=xaxis,
        yaxis=yaxis,
        **extra,
    )


def _rows(steps: pd.DataFrame | None, columns: tuple[str, ...]) -> dict[str, list]:
    """The step rows sorted by ``step``, as one plain list per column (``[]`` for no steps).

    The figures read a handful of values per step; plain lists avoid pandas' per-call overhead
    (boolean masks over Arrow-backed strings), which dominated building the live charts.
    """
    if steps is None or steps.empty:
        return {c: [] for c in columns}
    s = steps.sort_values("step")
    return {c: s[c].tolist() for c in columns if c in s.columns}


def _empty_note() -> dict:
    return dict(
        text="no answers yet", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5, font=dict(color="#999")
    )


def spend_figure(steps: pd.DataFrame, total_budget: int, num_questions: int) -> go.Figure:
    """Cumulative tokens charged after each answered question (markers: green correct, red
    wrong), with the budget (horizontal) and the fair-share line (``total_budget x q /
    num_questions``: spending exactly the fair share on every question).

    Args:
        steps: The episode's step rows (``step``, ``tokens``, ``spent_before``, ``correct``...).
        total_budget: The episode budget (tokens). num_questions: Questions in the episode.
    """
    n = max(1, int(num_questions))
    budget = max(0, int(total_budget))
    r = _rows(steps, ("step", "tokens", "spent_before", "correct", "problem_type"))
    traces = [
        go.Scatter(
            x=[0, n],
            y=[0, budget],
            mode="lines",
            name="fair share",
            line=dict(color="#999", dash="dot"),
            hovertemplate="fair share after %{x} questions: %{y:,.0f} tokens<extra></extra>",
        ),
        go.Scatter(
            x=[0, n],
            y=[budget, budget],
            mode="lines",
            name="budget",
            line=dict(color="#333", width=1.5),
            hovertemplate=f"budget {budget:,} tokens<extra></extra>",
        ),
    ]
    ymax = budget
    if r["step"]:
        x = [0] + [int(i) + 1 for i in r["step"]]
        y = [0] + [int(b + t) for b, t in zip(r["spent_before"], r["tokens"])]
        ok = [bool(c) for c in r["correct"]]
        custom = [[str(p), int(t), "correct" if c else "wrong"] for p, t, c in zip(r["problem_type"], r["tokens"], ok)]
        traces.append(
            go.Scatter(x=x, y=y, mode="lines", name="spent", line=dict(color="#4c78a8", width=3), hoverinfo="skip")
        )
        traces.append(
            go.Scatter(
                x=x[1:],
                y=y[1:],
                mode="markers",
                name="answer",
                showlegend=False,
                marker=dict(
                    size=10, color=["#54a24b" if c else "#e45756" for c in ok], line=dict(width=1, color="white")
                ),
                customdata=custom,
                hovertemplate="Q%{x} %{customdata[0]}: %{customdata[1]:,} tokens, %{customdata[2]}<br>spent "
                "%{y:,} tokens<extra></extra>",
            )
        )
        ymax = max([budget] + y)
    layout = _layout(
        "Cumulative spend vs budget",
        xaxis=dict(title=dict(text="questions answered"), range=[-0.2, n + 0.2], dtick=1 if n <= 20 else None),
        yaxis=dict(title=dict(text="tokens charged"), range=[0, ymax * 1.08 + 1], tickformat=","),
    )
    return go.Figure(data=traces, layout=layout)


def _slots(steps: pd.DataFrame | None, num_questions: int | None) -> list[str]:
    n = int(num_questions or 0)
    if steps is not None and not steps.empty:
        n = max(n, int(steps["step"].max()) + 1)
    return [f"Q{i + 1}" for i in range(n)]


def _category_axis(title: str, slots: list[str]) -> dict:
    axis: dict = dict(title=dict(text=title))
    if slots:
        axis.update(categoryorder="array", categoryarray=slots, range=[-0.5, len(slots) - 0.5])
    return axis


def tokens_per_question_figure(
    steps: pd.DataFrame, fair_share: float | None = None, num_questions: int | None = None
) -> go.Figure:
    """Tokens charged per question (bars coloured by problem type; grey on top: tokens the hard
    cap clipped), with the fair share as a dotted line.

    Args:
        steps: The episode's step rows (``step``, ``problem_type``, ``tokens``, ``raw_tokens``...).
        fair_share: ``total_budget / num_questions`` (tokens), or ``None`` for no line.
        num_questions: Questions in the episode: the x axis shows a slot for each (Q1..QN).
    """
    slots = _slots(steps, num_questions)
    r = _rows(steps, ("step", "problem_type", "tokens", "raw_tokens", "correct", "difficulty"))
    traces: list = []
    shapes: list = []
    notes: list = []
    if r["step"]:
        labels = [f"Q{int(i) + 1}" for i in r["step"]]
        types = [str(p) for p in r["problem_type"]]
        for ptype in dict.fromkeys(types):
            idx = [i for i, p in enumerate(types) if p == ptype]
            custom = [
                [
                    "correct" if r["correct"][i] else "wrong",
                    "n/a" if pd.isna(r["difficulty"][i]) else str(int(r["difficulty"][i])),
                ]
                for i in idx
            ]
            traces.append(
                go.Bar(
                    x=[labels[i] for i in idx],
                    y=[int(r["tokens"][i]) for i in idx],
                    name=ptype,
                    marker_color=type_color(ptype),
                    customdata=custom,
                    hovertemplate=f"%{{x}} {ptype} (difficulty %{{customdata[1]}})<br>%{{y:,}} tokens charged, "
                    f"%{{customdata[0]}}<extra></extra>",
                )
            )
        clipped = [max(0, int(raw) - int(t)) for raw, t in zip(r["raw_tokens"], r["tokens"])]
        if any(clipped):
            traces.append(
                go.Bar(
                    x=labels,
                    y=clipped,
                    name="clipped (not charged)",
                    marker_color="#cccccc",
                    marker_pattern_shape="/",
                    hovertemplate="%{x}: %{y:,} tokens past the budget, not charged<extra></extra>",
                )
            )
    else:
        notes.append(_empty_note())
    if fair_share:
        line, label = _hline(float(fair_share), "#999", dash="dot", text=f"fair share {fair_share:,.0f}")
        shapes += line
        notes += label
    layout = _layout(
        "Tokens per question, by type",
        xaxis=_category_axis("question", slots),
        yaxis=dict(title=dict(text="tokens"), tickformat=",", rangemode="tozero"),
        barmode="stack",
        shapes=shapes,
        annotations=notes,
    )
    return go.Figure(data=traces, layout=layout)


def step_rewards_figure(steps: pd.DataFrame, num_questions: int | None = None) -> go.Figure:
    """Reward per step stacked by component (``reward_<component>`` columns; components that are
    zero on every step are left out), with each step's total as a black marker.

    Args:
        steps: The episode's step rows.
        num_questions: Questions in the episode: the x axis shows a slot for each (Q1..QN).
    """
    slots = _slots(steps, num_questions)
    traces: list = []
    notes: list = []
    if steps is not None and not steps.empty:
        comps = [c for c in steps.columns if c.startswith("reward_") and pd.api.types.is_numeric_dtype(steps[c])]
        r = _rows(steps, ("step", "reward", *comps))
        labels = [f"Q{int(i) + 1}" for i in r["step"]]
        k = 0
        for c in comps:
            vals = [0.0 if pd.isna(v) else float(v) for v in r[c]]
            if not any(vals):
                continue
            name = c[len("reward_") :]
            color = _COMPONENT_COLORS.get(name)
            if color is None:
                color = _OTHER_COMPONENT_COLORS[k % len(_OTHER_COMPONENT_COLORS)]
                k += 1
            traces.append(
                go.Bar(
                    x=labels,
                    y=vals,
                    name=name,
                    marker_color=color,
                    hovertemplate=f"%{{x}} {name}: %{{y:+.3f}}<extra></extra>",
                )
            )
        traces.append(
            go.Scatter(
                x=labels,
                y=[float(v) for v in r["reward"]],
                mode="markers",
                name="total",
                marker=dict(color="black", size=11, symbol="line-ew-open", line=dict(width=3)),
                hovertemplate="%{x} reward %{y:+.3f}<extra></extra>",
            )
        )
    else:
        notes.append(_empty_note())
    shapes, _ = _hline(0.0, "#666", width=1)
    layout = _layout(
        "Reward per step, by component",
        xaxis=_category_axis("question", slots),
        yaxis=dict(title=dict(text="reward")),
        barmode="relative",
        shapes=shapes,
        annotations=notes,
    )
    return go.Figure(data=traces, layout=layout)

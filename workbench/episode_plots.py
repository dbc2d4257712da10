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

from typing import Optional

import pandas as pd
import plotly.colors
import plotly.graph_objects as go

from reasoning_env.sources.gsm8k import PROBLEM_TYPE as GSM8K_TYPE
from reasoning_env.sources.math500 import PROBLEM_TYPE as MATH500_TYPE
from reasoning_env.sources.metamathqa import METAMATHQA_TYPES
from reasoning_env.sources.numina_tir import PROBLEM_TYPE as NUMINA_TYPE
from reasoning_env.sources.reasoning_gym_source import DEFAULT_DATASETS as REASONING_GYM_DATASETS

__all__ = ["KNOWN_TYPES", "TYPE_COLORS", "spend_figure", "step_rewards_figure", "tokens_per_question_figure", "type_color"]

_TEMPLATE = "plotly_white"
_HEIGHT = 380
_MARGIN = dict(l=55, r=15, t=45, b=40)
#: Colours of problem types: the project's known types (the sources' types and the default
#: reasoning_gym generators) get distinct fixed colours (Plotly's Dark24); any other type gets one by
#: a stable hash (the same in every session).
TYPE_COLORS = tuple(plotly.colors.qualitative.Dark24)
KNOWN_TYPES = (
    METAMATHQA_TYPES + (NUMINA_TYPE, GSM8K_TYPE, MATH500_TYPE, "reasoning_gym")
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


def _layout(fig: go.Figure, title: str, xtitle: str, ytitle: str, height: Optional[int] = None) -> go.Figure:
    fig.update_layout(
        title=dict(text=title, x=0.01, font=dict(size=15)), template=_TEMPLATE, height=height or _HEIGHT, margin=_MARGIN,
        xaxis_title=xtitle, yaxis_title=ytitle, legend=dict(orientation="h", yanchor="top", y=-0.2, xanchor="left", x=0.0, font=dict(size=11)),
        hoverlabel=dict(font_size=12),
    )
    return fig


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
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, n], y=[0, budget], mode="lines", name="fair share", line=dict(color="#999", dash="dot"),
                             hovertemplate="fair share after %{x} questions: %{y:,.0f} tokens<extra></extra>"))
    fig.add_trace(go.Scatter(x=[0, n], y=[budget, budget], mode="lines", name="budget", line=dict(color="#333", width=1.5),
                             hovertemplate=f"budget {budget:,} tokens<extra></extra>"))
    if steps is not None and not steps.empty:
        s = steps.sort_values("step")
        x = [0] + (s["step"].astype(int) + 1).tolist()
        y = [0] + (s["spent_before"] + s["tokens"]).astype(int).tolist()
        colors = ["#54a24b" if c else "#e45756" for c in s["correct"].astype(bool)]
        custom = list(zip(s["problem_type"].astype(str), s["tokens"].astype(int), ["correct" if c else "wrong" for c in s["correct"].astype(bool)]))
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name="spent", line=dict(color="#4c78a8", width=3), hoverinfo="skip"))
        fig.add_trace(go.Scatter(
            x=x[1:], y=y[1:], mode="markers", name="answer", showlegend=False,
            marker=dict(size=10, color=colors, line=dict(width=1, color="white")), customdata=custom,
            hovertemplate="Q%{x} %{customdata[0]}: %{customdata[1]:,} tokens, %{customdata[2]}<br>spent %{y:,} tokens<extra></extra>",
        ))
    ymax = max([budget] + ([int((steps["spent_before"] + steps["tokens"]).max())] if steps is not None and not steps.empty else []))
    fig.update_xaxes(range=[-0.2, n + 0.2], dtick=1 if n <= 20 else None)
    fig.update_yaxes(range=[0, ymax * 1.08 + 1], tickformat=",")
    return _layout(fig, "Cumulative spend vs budget", "questions answered", "tokens charged")


def _slots(steps: Optional[pd.DataFrame], num_questions: Optional[int]) -> list[str]:
    n = int(num_questions or 0)
    if steps is not None and not steps.empty:
        n = max(n, int(steps["step"].max()) + 1)
    return [f"Q{i + 1}" for i in range(n)]


def tokens_per_question_figure(steps: pd.DataFrame, fair_share: Optional[float] = None, num_questions: Optional[int] = None) -> go.Figure:
    """Tokens charged per question (bars coloured by problem type; grey on top: tokens the hard
    cap clipped), with the fair share as a dotted line.

    Args:
        steps: The episode's step rows (``step``, ``problem_type``, ``tokens``, ``raw_tokens``...).
        fair_share: ``total_budget / num_questions`` (tokens), or ``None`` for no line.
        num_questions: Questions in the episode: the x axis shows a slot for each (Q1..QN).
    """
    fig = go.Figure()
    slots = _slots(steps, num_questions)
    if steps is not None and not steps.empty:
        s = steps.sort_values("step")
        labels = [f"Q{int(i) + 1}" for i in s["step"]]
        for ptype in dict.fromkeys(s["problem_type"].astype(str)):
            m = (s["problem_type"].astype(str) == ptype).to_numpy()
            sub = s[m]
            verdicts = ["correct" if c else "wrong" for c in sub["correct"].astype(bool)]
            diffs = ["n/a" if pd.isna(d) else str(int(d)) for d in sub["difficulty"]]
            fig.add_trace(go.Bar(
                x=[lab for lab, keep in zip(labels, m) if keep], y=sub["tokens"], name=ptype, marker_color=type_color(ptype),
                customdata=list(zip(verdicts, diffs)),
                hovertemplate=f"%{{x}} {ptype} (difficulty %{{customdata[1]}})<br>%{{y:,}} tokens charged, %{{customdata[0]}}<extra></extra>",
            ))
        clipped = (s["raw_tokens"] - s["tokens"]).clip(lower=0)
        if (clipped > 0).any():
            fig.add_trace(go.Bar(x=labels, y=clipped, name="clipped (not charged)", marker_color="#cccccc", marker_pattern_shape="/",
                                 hovertemplate="%{x}: %{y:,} tokens past the budget, not charged<extra></extra>"))
    if slots:
        fig.update_xaxes(categoryorder="array", categoryarray=slots, range=[-0.5, len(slots) - 0.5])
    if fair_share:
        fig.add_hline(y=float(fair_share), line=dict(color="#999", dash="dot"), annotation_text=f"fair share {fair_share:,.0f}",
                      annotation_position="top left", annotation_font_size=11)
    fig.update_layout(barmode="stack")
    fig.update_yaxes(tickformat=",", rangemode="tozero")
    if steps is None or steps.empty:
        fig.add_annotation(text="no answers yet", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5, font=dict(color="#999"))
    return _layout(fig, "Tokens per question, by type", "question", "tokens")


def step_rewards_figure(steps: pd.DataFrame, num_questions: Optional[int] = None) -> go.Figure:
    """Reward per step stacked by component (``reward_<component>`` columns; components that are
    zero on every step are left out), with each step's total as a black marker.

    Args:
        steps: The episode's step rows.
        num_questions: Questions in the episode: the x axis shows a slot for each (Q1..QN).
    """
    fig = go.Figure()
    slots = _slots(steps, num_questions)
    if steps is not None and not steps.empty:
        s = steps.sort_values("step")
        labels = [f"Q{int(i) + 1}" for i in s["step"]]
        comps = [c for c in s.columns if c.startswith("reward_") and pd.api.types.is_numeric_dtype(s[c])]
        k = 0
        for c in comps:
            vals = s[c].fillna(0.0).astype(float)
            if vals.abs().sum() == 0:
                continue
            name = c[len("reward_"):]
            color = _COMPONENT_COLORS.get(name)
            if color is None:
                color = _OTHER_COMPONENT_COLORS[k % len(_OTHER_COMPONENT_COLORS)]
                k += 1
            fig.add_trace(go.Bar(x=labels, y=vals, name=name, marker_color=color,
                                 hovertemplate=f"%{{x}} {name}: %{{y:+.3f}}<extra></extra>"))
        fig.add_trace(go.Scatter(x=labels, y=s["reward"].astype(float), mode="markers", name="total",
                                 marker=dict(color="black", size=11, symbol="line-ew-open", line=dict(width=3)),
                                 hovertemplate="%{x} reward %{y:+.3f}<extra></extra>"))
    else:
        fig.add_annotation(text="no answers yet", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5, font=dict(color="#999"))
    if slots:
        fig.update_xaxes(categoryorder="array", categoryarray=slots, range=[-0.5, len(slots) - 0.5])
    fig.add_hline(y=0, line=dict(color="#666", width=1))
    fig.update_layout(barmode="relative")
    return _layout(fig, "Reward per step, by component", "question", "reward")

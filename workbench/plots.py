"""Figure builders: pure functions, run frames in, ``plotly.graph_objects.Figure`` out.

Used by the evaluation report (``report.html``) and the workbench's Runs tab. ``steps`` and
``episodes`` are a run folder's ``trajectories.parquet`` / ``episodes.parquet`` frames. Every
builder returns a figure with a title even for empty input.

Several runs are drawn together from their concatenated frames (:class:`workbench.compare.RunSet`
builds them) holding ``run``, ``run_kind`` and ``policy_name`` (the policy's own name) beside
``policy`` (the series label, ``"<run>:<policy>"``). Such frames are drawn grouped
(:func:`series_styles`): one colour per policy, the same in every run, and one line style and
marker per run; the legend lists each policy once, and a second legend (the run key, below the
plot) each run once with its kind, so a chart of 4 runs of 6 policies has 6 + 4 entries, not 24.
Bar charts of several runs get one panel per run instead (:func:`run_panels`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench import analysis
from workbench.figure_template import LIGHT

__all__ = [
    "SeriesStyle",
    "accuracy_vs_tokens_figure",
    "add_run_key",
    "allocation_figure",
    "is_grouped",
    "policy_colors",
    "run_panels",
    "series_styles",
    "budget_spend_figure",
    "length_histogram_figure",
    "regret_figure",
    "reward_components_figure",
    "tokens_by_difficulty_figure",
    "tokens_by_type_figure",
]

_TEMPLATE = LIGHT  # plotly_white's 2-D look, small (workbench.figure_template)
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


#: What tells runs apart when several are drawn together: line dash, marker symbol.
_RUN_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
_RUN_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star", "cross", "triangle-down")
#: The run key's look (grey: it names a run, not a policy).
_KEY_COLOR = "#555"
#: Height of a line chart (pixels) before :func:`add_run_key` adds ``KEY_ROW_PX`` per row of its key.
LINE_CHART_HEIGHT = 400
KEY_ROW_PX = 22


def policy_colors(policies: list[str]) -> dict[str, str]:
    """A stable colour per policy (by position in ``policies``), shared by all figures of a run."""
    return {p: _PALETTE[i % len(_PALETTE)] for i, p in enumerate(policies)}


@dataclass(frozen=True)
class SeriesStyle:
    """How one series (one policy of one run) is drawn.

    Attributes:
        label: The frame's ``policy`` value (``"<run>:<policy>"`` when several runs are drawn).
        policy: The policy's own name: the legend entry.
        run: The run's label (``""`` for a single run). run_kind: ``"evaluation"``, ``"training"``,
            ``"play"`` or ``""``.
        color: One per policy. dash, symbol: One per run (``"solid"``, ``"circle"`` for a single run).
        legend: Whether this series carries its policy's legend entry (the first of that policy).
    """

    label: str
    policy: str
    run: str
    run_kind: str
    color: str
    dash: str
    symbol: str
    legend: bool

    @property
    def hover(self) -> str:
        """The series' full name for hover labels: ``"<run> · <policy>"`` or the policy."""
        return f"{self.run} · {self.policy}" if self.run else self.policy


def is_grouped(frame: pd.DataFrame | None) -> bool:
    """Whether ``frame`` holds several runs to draw grouped (``run`` and ``policy_name`` columns,
    more than one run)."""
    return (
        frame is not None
        and not frame.empty
        and {"run", "policy_name", "policy"} <= set(frame.columns)
        and frame["run"].nunique() > 1
    )


def series_styles(frame: pd.DataFrame) -> dict[str, SeriesStyle]:
    """The style of every series (``policy`` value) of ``frame``, in order of first appearance.

    One colour per policy: per ``policy_name`` when the frame has it (the same policy has the same
    colour in every run), else per ``policy``. Several runs (:func:`is_grouped`): one dash and
    marker symbol per ``run``; one run: solid lines and circles.
    """
    order = analysis.policy_order(frame)
    if not order:
        return {}
    first = frame.drop_duplicates("policy").set_index("policy")
    named = "policy_name" in first.columns
    name = {p: str(first.at[p, "policy_name"]) if named else p for p in order}
    run = {p: str(first.at[p, "run"]) if named and "run" in first.columns else "" for p in order}
    kind = {p: str(first.at[p, "run_kind"]) if named and "run_kind" in first.columns else "" for p in order}
    grouped = is_grouped(frame)
    colors = policy_colors(list(dict.fromkeys(name.values())))
    runs = list(dict.fromkeys(run.values()))
    out, seen = {}, set()
    for p in order:
        i = runs.index(run[p]) if grouped else 0
        out[p] = SeriesStyle(
            p,
            name[p],
            run[p],
            kind[p],
            colors[name[p]],
            _RUN_DASHES[i % len(_RUN_DASHES)],
            _RUN_SYMBOLS[i % len(_RUN_SYMBOLS)],
            name[p] not in seen,
        )
        seen.add(name[p])
    return out


def _run_names(styles: dict[str, SeriesStyle]) -> dict[str, str]:
    """``{run: "<run> (<kind>)"}`` in order (the run key's and the panels' titles)."""
    from workbench.runs import RUN_KINDS

    out: dict[str, str] = {}
    for st in styles.values():
        if st.run and st.run not in out:
            out[st.run] = f"{st.run} ({RUN_KINDS.get(st.run_kind, st.run_kind)})" if st.run_kind else st.run
    return out


def add_run_key(
    fig: go.Figure,
    styles: dict[str, SeriesStyle],
    *,
    lines: bool = True,
    markers: bool = True,
    legend_title: str = "policy",
) -> go.Figure:
    """Add the run key of a grouped figure: a second legend below the plot with one grey entry per
    run in that run's line dash and marker (``lines`` / ``markers``), named ``"<run> (<kind>)"``.
    Clicking an entry does nothing (it is a key); the first legend (``legend_title``) toggles
    policies. No-op for a single run. The figure's height grows by the key's rows."""
    runs = _run_names(styles)
    if len(runs) < 2:
        return fig
    first = {}
    for st in styles.values():
        first.setdefault(st.run, st)
    mode = "+".join(m for m, on in (("lines", lines), ("markers", markers)) if on) or "markers"
    for run, name in runs.items():
        st = first[run]
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode=mode,
                name=name,
                legend="legend2",
                hoverinfo="skip",
                line=dict(color=_KEY_COLOR, dash=st.dash, width=2),
                marker=dict(color=_KEY_COLOR, symbol=st.symbol, size=8),
            )
        )
    # below the plot, as many a row as fit (run names are long: often one); the figure grows by a row per run
    fig.update_layout(
        legend=dict(title=dict(text=legend_title), tracegroupgap=2),
        legend2=dict(
            title=dict(text="run"),
            orientation="h",
            x=0,
            xanchor="left",
            y=-0.16,
            yanchor="top",
            itemclick=False,
            itemdoubleclick=False,
            font=dict(size=11),
        ),
        height=(fig.layout.height or LINE_CHART_HEIGHT) + KEY_ROW_PX * len(runs),
    )
    return fig


def run_panels(
    styles: dict[str, SeriesStyle],
    sizes: dict[str, int] | None = None,
    *,
    horizontal_bars: bool = False,
    unit_px: int = 22,
    panel_px: int = 120,
    **kwargs,
) -> tuple[go.Figure, dict[str, int], int]:
    """An empty figure with one panel (subplot row, shared x axis) per run of a grouped figure,
    titled ``"<run> (<kind>)"``.

    Args:
        sizes: Rows per run (bars of a horizontal bar chart); panel heights follow them.
        horizontal_bars: Size each panel by ``sizes`` (``unit_px`` per bar) rather than
            ``panel_px`` per run.
        kwargs: Passed to ``make_subplots``.

    Returns:
        ``(figure, {run: row}, height in pixels)``: set the height with ``fig.update_layout(height=...)``.
    """
    runs = _run_names(styles)
    weights = [max(1, (sizes or {}).get(r, 1)) if horizontal_bars else 1 for r in runs]
    body = sum(w * unit_px + 12 for w in weights) if horizontal_bars else panel_px * len(runs)
    height = int(body + 40 * len(runs) + 110)
    gap = min(0.3 / max(1, len(runs) - 1), 42 / height) if len(runs) > 1 else 0
    fig = make_subplots(
        rows=len(runs),
        cols=1,
        shared_xaxes=True,
        row_heights=weights,
        vertical_spacing=gap,
        subplot_titles=list(runs.values()),
        **kwargs,
    )
    for ann in fig.layout.annotations:  # panel titles: left-aligned, small
        ann.update(x=0, xanchor="left", font=dict(size=12))
    return fig, {r: i + 1 for i, r in enumerate(runs)}, height


def _colors(frame: pd.DataFrame) -> dict[str, str]:
    return {label: st.color for label, st in series_styles(frame).items()}


def empty_figure(
    title: str, text: str = "no data", *, fig: go.Figure | None = None, height: int | None = None
) -> go.Figure:
    """A figure that says why it has nothing to draw: ``text`` in the middle under ``title``, and
    no axes (a new figure; ``fig``'s panels keep theirs).

    Args:
        title: The figure's title, as the drawn figure would have had it.
        text: What is missing and, where it helps, how to get it (e.g. which flag writes it).
        fig: A figure to annotate instead of a new one (a subplot grid keeps its panel titles).
        height: Figure height in pixels (Plotly's default when ``None``).
    """
    new = fig is None
    fig = go.Figure() if new else fig
    note = dict(text=text, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5, font=dict(size=14, color="#888"))
    fig.update_layout(title=title, template=_TEMPLATE, annotations=[*fig.layout.annotations, note])
    if new:  # no axes around nothing (Plotly's empty axes run -1..6 and read as data)
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
    if height is not None:
        fig.update_layout(height=height)
    return fig


def budget_spend_figure(steps: pd.DataFrame) -> go.Figure:
    """Budget spend across the episode: mean cumulative share of the budget spent after each
    question, one line per policy (grouped by run and policy for several runs), with the
    even-spend diagonal for reference."""
    title = "Budget spend across the episode"
    curve = analysis.spend_curve(steps)
    if curve.empty:
        return empty_figure(title)
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
    styles = series_styles(steps)
    for pol in analysis.policy_order(curve):
        st, c = styles[pol], curve[curve["policy"] == pol]
        fig.add_trace(
            go.Scatter(
                x=[0] + c["question"].tolist(),
                y=[0.0] + c["spent_fraction"].tolist(),
                mode="lines+markers",
                name=st.policy,
                legendgroup=st.policy,
                showlegend=st.legend,
                line=dict(color=st.color, dash=st.dash),
                marker=dict(symbol=st.symbol, size=6),
                hovertemplate=f"{st.hover}<br>after %{{x}} questions: %{{y:.0%}} of the budget<extra></extra>",
            )
        )
    fig.update_layout(
        title=title,
        template=_TEMPLATE,
        xaxis_title="questions answered",
        yaxis_title="share of budget spent (mean over episodes)",
        yaxis=dict(rangemode="tozero"),
    )
    return add_run_key(fig, styles)


def _bar_trace(c: pd.DataFrame, by: str, st: SeriesStyle) -> go.Bar:
    return go.Bar(
        x=c[by],
        y=c["tokens"],
        name=st.policy,
        legendgroup=st.policy,
        marker_color=st.color,
        customdata=np.stack([c["accuracy"], c["n"]], axis=1),
        hovertemplate="%{x}<br>%{y:.0f} tokens<br>accuracy %{customdata[0]:.2f} (n=%{customdata[1]})<extra>"
        + st.hover
        + "</extra>",
    )


def _grouped_bars(steps: pd.DataFrame, by: str, title: str, xlabel: str) -> go.Figure:
    g = analysis.by_group(steps, by)
    if g.empty:
        return empty_figure(title)
    styles = series_styles(steps)
    yaxis_title = "mean tokens per answered question"
    if not is_grouped(steps):
        fig = go.Figure()
        for pol in analysis.policy_order(g):
            fig.add_trace(_bar_trace(g[g["policy"] == pol], by, styles[pol]))
        fig.update_layout(
            title=title, template=_TEMPLATE, barmode="group", xaxis_title=xlabel, yaxis_title=yaxis_title
        )
        return fig
    # several runs: one panel per run, the same categories in every panel, one colour per policy
    categories = sorted(g[by].unique(), key=lambda v: (v == "n/a", len(v) if by == "difficulty" else 0, v))
    fig, rows, height = run_panels(styles)
    for pol in analysis.policy_order(g):
        st = styles[pol]
        tr = _bar_trace(g[g["policy"] == pol], by, st)
        tr.showlegend = st.legend
        fig.add_trace(tr, row=rows[st.run], col=1)
    fig.update_xaxes(categoryorder="array", categoryarray=categories, automargin=True)
    fig.update_xaxes(title_text=xlabel, row=len(rows), col=1)
    fig.update_yaxes(rangemode="tozero", nticks=4, title_text="tokens", title_font=dict(size=11))
    fig.update_layout(
        title=dict(text=title + " (one panel per run)", subtitle=dict(text=yaxis_title)),
        template=_TEMPLATE,
        barmode="group",
        height=height,
        legend=dict(title=dict(text="policy")),
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
    question and accuracy (from ``summary`` when given). Several runs: grouped (:func:`series_styles`),
    the bins as markers without lines (lines of every run and policy crossing each other were
    unreadable from 4 runs on)."""
    title = "Accuracy vs tokens"
    if steps is None or steps.empty:
        return empty_figure(title)
    fig = go.Figure()
    styles = series_styles(steps)
    grouped = is_grouped(steps)
    binned = analysis.accuracy_vs_tokens(steps)
    for pol in analysis.policy_order(steps):
        st, c = styles[pol], binned[binned["policy"] == pol]
        fig.add_trace(
            go.Scatter(
                x=c["tokens_mid"],
                y=c["accuracy"],
                mode="markers" if grouped else "lines+markers",
                name=st.policy,
                legendgroup=st.policy,
                showlegend=st.legend,
                line=dict(width=1, color=st.color, dash=st.dash),
                marker=dict(size=7 if grouped else 5, symbol=st.symbol, color=st.color),
                opacity=0.6 if grouped else 0.7,
                customdata=c["n"],
                hovertemplate="~%{x:.0f} tokens: accuracy %{y:.2f} (n=%{customdata})<extra>" + st.hover + "</extra>",
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
                        name=f"{st.policy} (mean)",
                        legendgroup=st.policy,
                        showlegend=False,
                        marker=dict(
                            size=14,
                            symbol=st.symbol if grouped else "diamond",
                            color=st.color,
                            line=dict(width=1, color="black"),
                        ),
                        hovertemplate=f"{st.hover}: %{{x:.0f}} tokens/question, accuracy %{{y:.3f}}<extra></extra>",
                    )
                )
    means = "large markers: policy means" if grouped else "diamonds: policy means"
    bins = "small markers: accuracy by response length" if grouped else "lines: by response length"
    fig.update_layout(
        title=dict(text=title, subtitle=dict(text=f"{bins}; {means}")),
        template=_TEMPLATE,
        xaxis_title="tokens (log scale)",
        yaxis_title="accuracy",
        xaxis_type="log",
        yaxis=dict(range=[-0.02, 1.05]),
    )
    return add_run_key(fig, styles)


def reward_components_figure(episodes: pd.DataFrame) -> go.Figure:
    """Mean per-episode reward components per policy, stacked (penalties below zero), with the
    total reward as a marker."""
    title = "Reward components (mean per episode)"
    comps = analysis.reward_components(episodes)
    if comps.empty:
        return empty_figure(title)
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
    per policy (several runs: horizontal boxes, one panel per run)."""
    title = "Regret vs the oracle allocation (expected correct answers per episode)"
    if episodes is None or episodes.empty or "regret" not in episodes.columns or episodes["regret"].isna().all():
        return empty_figure(title)
    styles = series_styles(episodes)
    axis_title = "oracle expected correct - policy expected correct"
    if not is_grouped(episodes):
        fig = go.Figure()
        for pol in analysis.policy_order(episodes):
            r = episodes.loc[episodes["policy"] == pol, "regret"].dropna()
            fig.add_trace(go.Box(y=r, name=styles[pol].policy, boxmean=True, marker_color=styles[pol].color))
        fig.update_layout(title=title, template=_TEMPLATE, yaxis_title=axis_title, showlegend=False)
        return fig
    sizes = episodes.drop_duplicates("policy")["run"].astype(str).value_counts().to_dict()
    fig, rows, height = run_panels(styles, sizes, horizontal_bars=True, unit_px=30)
    for pol in analysis.policy_order(episodes):
        st = styles[pol]
        r = episodes.loc[episodes["policy"] == pol, "regret"].dropna()
        fig.add_trace(
            go.Box(x=r, y=[st.policy] * len(r), name=st.hover, orientation="h", boxmean=True, marker_color=st.color),
            row=rows[st.run],
            col=1,
        )
    fig.update_yaxes(automargin=True, autorange="reversed")
    fig.update_xaxes(title_text=axis_title, row=len(rows), col=1)
    fig.update_layout(title=title, template=_TEMPLATE, showlegend=False, height=height)
    return fig


#: Answers of at most this many tokens are drawn apart in the length histogram: a bare
#: ``\boxed{guess}``, what an allocating policy (``sim_greedy``, ``oracle_allocation``) spends on a
#: question it writes off to save budget for others (nearly always wrong: the spike at 0 tokens).
BARE_ANSWER_TOKENS = 16


def length_histogram_figure(steps: pd.DataFrame, policy: str | None = None) -> go.Figure:
    """Histogram of charged tokens for correct vs wrong answers (all policies, or one); bare answers
    (at most :data:`BARE_ANSWER_TOKENS` tokens: questions a policy wrote off) are their own grey
    trace, counted in the legend, instead of an unexplained spike at 0 in the wrong answers."""
    title = "Response length: correct vs wrong" + (f" ({policy})" if policy else "")
    if steps is None or steps.empty:
        return empty_figure(title)
    s = steps if policy is None else steps[steps["policy"] == policy]
    if s.empty:
        return empty_figure(title)
    bare = s["tokens"] <= BARE_ANSWER_TOKENS
    fig = go.Figure()
    for verdict, label in ((True, "correct"), (False, "wrong")):
        fig.add_trace(
            go.Histogram(x=s.loc[(s["correct"] == verdict) & ~bare, "tokens"], name=label, opacity=0.6, nbinsx=40)
        )
    if bare.any():
        wrong = int((~s.loc[bare, "correct"].astype(bool)).sum())
        fig.add_trace(
            go.Histogram(
                x=s.loc[bare, "tokens"],
                name=f"bare answers, <= {BARE_ANSWER_TOKENS} tokens ({int(bare.sum())}, {wrong} wrong)",
                marker_color="#9e9e9e",
                opacity=0.8,
                xbins=dict(start=0, end=BARE_ANSWER_TOKENS + 1, size=BARE_ANSWER_TOKENS + 1),
            )
        )
    fig.update_layout(
        title=dict(
            text=title,
            subtitle=dict(
                text=f"grey: answers of at most {BARE_ANSWER_TOKENS} tokens, questions a policy wrote off "
                "(an allocator's minimum-length guess)"
            ),
        ),
        template=_TEMPLATE,
        barmode="overlay",
        xaxis_title="tokens charged",
        yaxis_title="answers",
    )
    return fig


#: Colours of the before/after bars of :func:`allocation_figure` (untrained grey, trained blue).
BEFORE_AFTER_COLORS = {"before": "#9e9e9e", "after": "#1f77b4"}
ALLOCATION_TITLE = "Before vs after training: tokens and accuracy by difficulty (held-out, 95% intervals)"


def _tier_label(tier: str, types: str) -> str:
    """A tier's axis label: ``"difficulty 3"`` with its problem type below when it holds one type only."""
    if types and "," not in types and types != tier:
        return f"{tier}<br>{types.rsplit('/', 1)[-1] if types.startswith('reasoning_gym/') else types}"
    return tier


def allocation_figure(frame: pd.DataFrame | None) -> go.Figure:
    """A training run's held-out allocation before vs after training: per difficulty tier, tokens per answered
    question (left) and accuracy of the answered questions (right), the first held-out evaluation (grey) beside
    the last (blue), with bootstrap 95% intervals over the held-out episodes as error bars; one row of panels per
    run. A bar without an interval (its tier answered in one episode only) is labelled with its count (``n=1``).
    Hover: the value, its interval, questions answered and (tokens) the paired change after - before.

    Args:
        frame: :func:`workbench.held_out.run_allocation` frames (concatenated for several runs).
    """
    if frame is None or frame.empty:
        return empty_figure(
            ALLOCATION_TITLE,
            "no training run with held-out evaluations at two steps: train with --eval_every N",
            height=LINE_CHART_HEIGHT,
        )
    runs = list(dict.fromkeys(frame["run"]))
    titles = []
    for run in runs:
        r = frame[frame["run"] == run].iloc[0]
        head = f"{run}: step {r['before_step']} vs step {r['after_step']}, {int(r['episodes'])} paired episodes"
        titles += [f"{head}<br>tokens per answered question", "accuracy of the answered questions"]
    fig = make_subplots(
        rows=len(runs), cols=2, horizontal_spacing=0.1, vertical_spacing=0.3 / len(runs), subplot_titles=titles
    )
    for ann in fig.layout.annotations:
        ann.update(font=dict(size=12))
    for row, run in enumerate(runs, start=1):
        f = frame[frame["run"] == run]
        order = list(dict.fromkeys(_tier_label(t, p) for t, p in zip(f["tier"], f["problem_types"])))
        for side in ("before", "after"):
            d = f[f["side"] == side]
            if d.empty:
                continue
            step = int(d["before_step" if side == "before" else "after_step"].iloc[0])
            x = [_tier_label(t, p) for t, p in zip(d["tier"], d["problem_types"])]
            for col, metric, fmt in ((1, "tokens", ".0f"), (2, "accuracy", ".2f")):
                # no interval (one episode answered in the tier): no whisker, rather than a zero-width one
                hi = [None if pd.isna(v) else max(0.0, v) for v in d[f"{metric}_ci_high"] - d[metric]]
                lo = [None if pd.isna(v) else max(0.0, v) for v in d[metric] - d[f"{metric}_ci_low"]]
                change = d["tokens_change"] if metric == "tokens" else pd.Series(np.nan, index=d.index)
                note = [
                    ""
                    if pd.isna(c)
                    else f"<br>change {c:+.0f}" + ("" if pd.isna(cl) else f" [{cl:+.0f}, {ch:+.0f}], paired")
                    for c, cl, ch in zip(change, d["tokens_change_ci_low"], d["tokens_change_ci_high"])
                ]
                interval = [
                    "no interval" if pd.isna(a) else f"[{a:{fmt}}, {b:{fmt}}]"
                    for a, b in zip(d[f"{metric}_ci_low"], d[f"{metric}_ci_high"])
                ]
                fig.add_trace(
                    go.Bar(
                        x=x,
                        y=d[metric],
                        name=f"{side} (step {step})" if len(runs) == 1 else side,
                        legendgroup=side,
                        showlegend=row == 1 and col == 1,
                        marker_color=BEFORE_AFTER_COLORS[side],
                        error_y=dict(type="data", array=hi, arrayminus=lo, thickness=1.2, width=4),
                        # a bar without an interval (answers from one episode only) says how few it rests on
                        text=[f"n={n}" if pd.isna(a) else "" for n, a in zip(d["answered"], d[f"{metric}_ci_low"])],
                        textposition="outside",
                        textfont=dict(size=10, color="#555"),
                        cliponaxis=False,
                        customdata=np.stack([interval, d["answered"].astype(str), note], axis=1),
                        hovertemplate=f"%{{x}}<br>{side} (step {step}): %{{y:{fmt}}} %{{customdata[0]}}"
                        "<br>%{customdata[1]} questions answered%{customdata[2]}<extra></extra>",
                    ),
                    row=row,
                    col=col,
                )
            fig.update_xaxes(categoryorder="array", categoryarray=order, row=row)
        fig.update_yaxes(title_text="tokens", rangemode="tozero", row=row, col=1)
        fig.update_yaxes(title_text="correct / answered", range=[0, 1.05], row=row, col=2)
    fig.update_xaxes(automargin=True)
    fig.update_layout(
        title=dict(text=ALLOCATION_TITLE, font=dict(size=14)),
        template=_TEMPLATE,
        barmode="group",
        height=120 + 330 * len(runs),
        legend=dict(orientation="h", yanchor="bottom", y=1.0 + 0.12 / len(runs), xanchor="right", x=1),
        margin=dict(t=110),
    )
    return fig

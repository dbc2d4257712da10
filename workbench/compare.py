"""Comparing run folders side by side: the library behind the workbench's Runs tab and the
``03_compare_runs`` notebook.

    from workbench import compare
    found = compare.discover_runs("runs")                 # run folders under a root, newest first
    runs = compare.load_runs([f.path for f in found[:3]]) # RunSet: runs + load errors
    runs.summary()                                        # one row per (run, policy), 95% intervals
    runs.comparisons()                                    # paired comparisons on common episode seeds
    compare.accuracy_vs_tokens(runs); compare.utilisation_figure(runs); compare.training_curves_figure(runs)
    compare.frontier(runs); compare.intervals(runs); compare.accuracy_vs_budget(runs)

Command line: ``python -m workbench.compare RUN [RUN ...] [--out DIR]`` prints the comparison
table with its intervals and the paired comparison, and writes ``summary.csv``,
``comparisons.csv`` and ``figures.html`` into ``DIR`` (default ``runs/compare-<time>``, beside the
runs and ignored by git, not the current folder).

Runs are labelled by their folder name (made unique) and their kind (evaluation, training, or an
episode saved from the Play tab: :func:`workbench.runs.run_kind`). In the combined frames of
several runs, ``policy`` is the series label ``<run>:<policy>`` and ``run``, ``run_kind`` and
``policy_name`` say whose it is, so the figure builders of :mod:`workbench.plots` and
:mod:`workbench.sweep_plots` draw them grouped: one colour per policy across runs, one line style
per run (with a run key), one panel per run for bar charts. :meth:`RunSet.only` keeps the
policies to draw (the Runs tab's policy picker).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from reasoning_env.errors import ReasoningEconomicsError
from workbench import analysis, plots
from workbench.figure_template import LIGHT
from workbench.runs import RUN_KINDS, Run, RunFolderError, fresh_run_dir, load_run, output_folder

__all__ = [
    "RunEntry",
    "RunSet",
    "SUMMARY_DISPLAY_COLUMNS",
    "TRAINING_METRICS",
    "TRAINING_ROW",
    "accuracy_vs_budget",
    "accuracy_vs_tokens",
    "budget_spend",
    "discover_runs",
    "frontier",
    "held_out_evaluations",
    "held_out_figure",
    "intervals",
    "labelled_summary",
    "load_runs",
    "main",
    "tokens_by_type",
    "training_curves_figure",
    "utilisation_figure",
]

#: Summary columns shown in the comparison table, in order (those present).
SUMMARY_DISPLAY_COLUMNS = (
    "run",
    "policy",
    "kind",
    "oracle_informed",
    "budget_ratio",
    "episodes",
    # every number with its interval; the forfeits beside tokens per question and accuracy per 1k
    *(
        c
        for m in (
            "accuracy",
            "expected_accuracy",
            "unasked_per_episode",
            "tokens_per_question",
            "acc_per_1k_tokens",
            "utilisation",
            "run_dry_rate",
            "reward",
            "regret",
        )
        for c in (m, f"{m}_ci_low", f"{m}_ci_high")
    ),
    "on_frontier",
    "mean_total_budget",
)
#: The summary row of a training run that logged metrics but no episodes.
TRAINING_ROW = "(training, last logged step)"
#: ``metrics.jsonl`` keys drawn as training curves, with their axis titles.
TRAINING_METRICS = (
    ("reward", "reward (mean per episode)"),
    ("accuracy", "accuracy"),
    ("tokens_per_question", "tokens per question"),
    ("episode_length", "episode length (questions answered)"),
)


@dataclass(frozen=True)
class RunEntry:
    """A run folder found under a root.

    Attributes:
        path: The folder. label: Its path relative to the root (display name).
        kind: :func:`workbench.runs.run_kind`: ``"evaluation"``, ``"training"``, ``"play"`` (an
            episode saved from the Play tab) or ``"?"``.
        modified: Last modification time of ``run.json`` (seconds since the epoch).
    """

    path: Path
    label: str
    kind: str
    modified: float

    @property
    def choice(self) -> str:
        """``"<label>  (<kind>, <date>)"``: the label a picker shows (``Play episode`` for Play saves)."""
        when = datetime.fromtimestamp(self.modified).strftime("%Y-%m-%d %H:%M")
        return f"{self.label}  ({RUN_KINDS.get(self.kind, self.kind)}, {when})"


def discover_runs(root: str | Path, *, max_depth: int = 3) -> list[RunEntry]:
    """Run folders (holding a ``run.json``) under ``root``, newest first.

    Args:
        root: Folder to search (a run folder itself counts too).
        max_depth: How many folder levels below ``root`` to search.

    Returns:
        The entries (empty when ``root`` does not exist).
    """
    import json

    from workbench.runs import run_kind

    base = Path(root).expanduser()
    if not base.is_dir():
        return []
    found: list[RunEntry] = []
    frontier = [(base, 0)]
    while frontier:
        folder, depth = frontier.pop()
        meta = folder / "run.json"
        if meta.is_file():
            try:
                kind = run_kind(json.loads(meta.read_text(encoding="utf-8")))
            except (OSError, ValueError, AttributeError):
                kind = "?"
            label = folder.name if folder == base else str(folder.relative_to(base))
            found.append(RunEntry(folder, label, kind, meta.stat().st_mtime))
            continue
        if depth < max_depth:
            try:
                children = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")]
            except OSError:
                continue
            frontier.extend((c, depth + 1) for c in children)
    found.sort(key=lambda e: (-e.modified, e.label))
    return found


@dataclass
class RunSet:
    """Loaded runs with unique labels, and the folders that failed to load.

    Attributes:
        runs: ``{label: Run}`` in the order given.
        errors: ``{path: message}`` of folders that could not be read.
        shown: The policies kept by :meth:`only` (``None``: all).
    """

    runs: dict[str, Run] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    shown: frozenset | None = None

    def __len__(self) -> int:
        return len(self.runs)

    def _label(self, table: pd.DataFrame, label: str, run: Run) -> pd.DataFrame:
        """``table`` of one run with ``run``, ``run_kind`` and ``policy_name`` columns, and
        ``policy`` the series label (``<run>:<policy>`` when several runs are loaded)."""
        df = table.copy()
        df.insert(0, "run", label)
        df.insert(1, "run_kind", run.kind)
        df["policy_name"] = df["policy"].astype(str)
        df["policy"] = label + ":" + df["policy_name"] if len(self.runs) > 1 else df["policy_name"]
        return df

    def _frames(self, attr: str) -> pd.DataFrame:
        parts = [
            self._label(getattr(run, attr), label, run)
            for label, run in self.runs.items()
            if getattr(run, attr) is not None and not getattr(run, attr).empty
        ]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

    def kinds(self) -> dict[str, str]:
        """``{run label: kind}`` (:func:`workbench.runs.run_kind`)."""
        return {label: run.kind for label, run in self.runs.items()}

    def policies(self) -> list[str]:
        """The policies' own names over every run, in order of first appearance (each once; a
        training run with logged metrics only counts as :data:`TRAINING_ROW`)."""
        names: list[str] = []
        for run in self.runs.values():
            tables = [
                t
                for t in (run.episodes, run.steps, run.summary)
                if t is not None and not t.empty and "policy" in t.columns
            ]
            for table in tables:
                names.extend(table["policy"].astype(str))
            if not tables and run.metrics is not None and not run.metrics.empty:
                names.append(TRAINING_ROW)
        return list(dict.fromkeys(names))

    def only(self, policies: Iterable[str] | None = None) -> RunSet:
        """The same runs holding only the rows of ``policies`` (their own names, as
        :meth:`policies` lists them; ``None``: all). Training metrics are kept; runs are kept even
        when none of their policies is left (their training curves still draw)."""
        if policies is None:
            return self
        keep = frozenset(map(str, policies))
        out = RunSet(errors=dict(self.errors), shown=keep)
        for label, run in self.runs.items():

            def sel(table: pd.DataFrame | None) -> pd.DataFrame | None:
                if table is None or table.empty or "policy" not in table.columns:
                    return table
                return table[table["policy"].astype(str).isin(keep)].reset_index(drop=True)

            out.runs[label] = replace(run, steps=sel(run.steps), episodes=sel(run.episodes), summary=sel(run.summary))
        return out

    def steps(self) -> pd.DataFrame:
        """Every run's trajectories with ``run``, ``run_kind`` and ``policy_name`` columns;
        ``policy`` = ``<run>:<policy>`` when several runs are loaded."""
        return self._frames("steps")

    def episodes(self) -> pd.DataFrame:
        """Every run's episode rows (labelled as :meth:`steps`)."""
        return self._frames("episodes")

    def summary(self, columns: Sequence[str] | None = SUMMARY_DISPLAY_COLUMNS) -> pd.DataFrame:
        """One row per (run, policy): the run's ``summary.csv`` when present, else computed from
        its episodes (:func:`workbench.analysis.summary_table`); training runs without episodes
        get one row from their last logged metrics.

        Args:
            columns: Columns to keep, in order (those present); ``None`` keeps all.
        """
        parts = []
        for label, run in self.runs.items():
            table = run.summary
            stale = table is not None and not table.empty and "accuracy_ci_low" not in table.columns
            if (table is None or table.empty or stale) and not run.episodes.empty:
                table = analysis.summary_table(run.episodes, run.steps)  # older runs: recompute with the intervals
            if (table is None or table.empty) and run.metrics is not None and not run.metrics.empty:
                last = run.metrics.iloc[-1]
                table = pd.DataFrame(
                    [
                        {
                            "policy": TRAINING_ROW,
                            "kind": "training",
                            "accuracy": last.get("accuracy"),
                            "tokens_per_question": last.get("tokens_per_question"),
                            "reward": last.get("reward"),
                        }
                    ]
                )
            if table is not None and self.shown is not None:
                table = table[table["policy"].astype(str).isin(self.shown)]
            if table is None or table.empty:
                continue
            table = table.copy()
            table.insert(0, "run", label)
            table.insert(1, "run_kind", run.kind)
            parts.append(table)
        if not parts:
            return pd.DataFrame(columns=list(columns or ()))
        out = pd.concat(parts, ignore_index=True)
        if columns is not None:
            out = out[[c for c in columns if c in out.columns]]
        return out

    def comparisons(self, **kwargs) -> pd.DataFrame:
        """Paired comparisons of every two (run, policy) on the episodes they share: within one run
        by episode index, across runs by episode seed (the same seed is the same questions); see
        :func:`workbench.analysis.paired_comparisons`."""
        eps = self.episodes()
        if eps.empty:
            return analysis.paired_comparisons(eps)
        return analysis.paired_comparisons(eps, on="seed" if len(self.runs) > 1 else "episode", **kwargs)

    def metrics(self) -> pd.DataFrame:
        """Every training run's ``metrics.jsonl`` rows with a ``run`` column (empty if none)."""
        parts = []
        for label, run in self.runs.items():
            if run.metrics is not None and not run.metrics.empty:
                m = run.metrics.copy()
                m.insert(0, "run", label)
                parts.append(m)
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

    def describe(self) -> str:
        """One line per run (kind, policies, episodes, steps, notes) and per load error, as
        Markdown bullets."""
        lines = []
        for label, run in self.runs.items():
            pols = analysis.policy_order(run.episodes) if not run.episodes.empty else []
            extra = f", {len(run.metrics)} logged training steps" if run.metrics is not None else ""
            lines.append(
                f"- **{label}** ({RUN_KINDS.get(run.kind, run.kind)}): {len(pols)} policies, "
                f"{len(run.episodes)} episodes, "
                f"{len(run.steps)} steps{extra}"
            )
            for note in list(run.notes) + list(run.meta.get("notes") or []):
                lines.append(f"  - note: {note}")
        for path, err in self.errors.items():
            lines.append(f"- could not load `{path}`: {err}")
        return "\n".join(lines)


def load_runs(paths: Iterable[str | Path]) -> RunSet:
    """Load run folders; those that fail are reported in :attr:`RunSet.errors` (never raised).

    Labels are the folder names, with ``#2``, ``#3``... appended to repeats.
    """
    out = RunSet()
    for p in paths:
        if p is None or not str(p).strip():
            continue
        path = Path(str(p).strip()).expanduser()
        try:
            run = load_run(path)
        except (ReasoningEconomicsError, ValueError, OSError) as exc:
            out.errors[str(path)] = str(exc)
            continue
        label = run.name
        k = 2
        while label in out.runs:
            label = f"{run.name}#{k}"
            k += 1
        out.runs[label] = run
    return out


# ------------------------------------------------------------------------------- figures
def accuracy_vs_tokens(runs: RunSet) -> go.Figure:
    """Accuracy vs tokens of every (run, policy): :func:`workbench.plots.accuracy_vs_tokens_figure`
    over the combined frames, diamonds at each policy's mean (from the runs' summaries,
    :func:`labelled_summary`: recomputing them with their bootstrap intervals took 1.3 s for 6 runs)."""
    steps = runs.steps()
    summary = labelled_summary(runs) if not steps.empty else None
    return plots.accuracy_vs_tokens_figure(steps, summary)


def budget_spend(runs: RunSet) -> go.Figure:
    """Mean share of the budget spent after each question, per (run, policy)."""
    return plots.budget_spend_figure(runs.steps())


def tokens_by_type(runs: RunSet) -> go.Figure:
    """Mean tokens per answered question by problem type, per (run, policy): the allocation."""
    return plots.tokens_by_type_figure(runs.steps())


def utilisation_figure(runs: RunSet) -> go.Figure:
    """Budget utilisation per (run, policy): mean spent / budget over episodes (bars, with the
    spread of episodes as error bars) and the share of episodes that ran dry (hover and labels).
    Several runs: horizontal bars, one panel per run, one colour per policy across runs."""
    title = "Budget utilisation (spent / budget, mean over episodes)"
    eps = runs.episodes()
    if eps.empty:
        return plots.empty_figure(title, "no episodes")
    order = analysis.policy_order(eps)
    g = (
        eps.groupby("policy")
        .agg(
            util=("utilisation", "mean"), sd=("utilisation", "std"), dry=("ran_dry", "mean"), n=("utilisation", "size")
        )
        .reindex(order)
    )
    styles = plots.series_styles(eps)
    text = [f"{u:.2f} · ran dry {d:.0%}" for u, d in zip(g["util"].astype(float), g["dry"].astype(float))]
    custom = [[float(d), int(n), styles[p].hover] for p, d, n in zip(order, g["dry"], g["n"])]
    hover = (
        "%{customdata[2]}<br>utilisation %{x:.2f}<br>ran dry in %{customdata[0]:.0%} of %{customdata[1]} episodes"
        "<extra></extra>"
    )
    if not plots.is_grouped(eps):
        fig = go.Figure(
            go.Bar(
                x=order,
                y=g["util"],
                marker_color=[styles[p].color for p in order],
                error_y=dict(type="data", array=g["sd"].fillna(0.0), visible=True, color="#888"),
                text=text,
                textposition="inside",
                insidetextanchor="start",
                textfont=dict(color="white"),
                customdata=custom,
                hovertemplate=hover.replace("%{x:.2f}", "%{y:.2f}"),
            )
        )
        fig.add_hline(
            y=1.0, line=dict(color="#333", width=1), annotation_text="budget", annotation_position="top left"
        )
        fig.update_layout(
            title=title,
            template=LIGHT,
            yaxis_title="spent / budget",
            yaxis=dict(rangemode="tozero"),
            showlegend=False,
        )
        return fig
    # several runs: one horizontal bar per (run, policy), the runs' panels stacked, labels readable at any count
    sizes = pd.Series([styles[p].run for p in order]).value_counts().to_dict()
    fig, rows, height = plots.run_panels(styles, sizes, horizontal_bars=True)
    for i, p in enumerate(order):
        st = styles[p]
        fig.add_trace(
            go.Bar(
                y=[st.policy],
                x=[g["util"].iloc[i]],
                orientation="h",
                marker_color=st.color,
                name=st.hover,
                showlegend=False,
                error_x=dict(
                    type="data",
                    array=[0.0 if pd.isna(g["sd"].iloc[i]) else g["sd"].iloc[i]],
                    visible=True,
                    color="#888",
                ),
                text=[text[i]],
                textposition="inside",
                insidetextanchor="start",
                textfont=dict(color="white"),
                cliponaxis=False,
                customdata=[custom[i]],
                hovertemplate=hover,
            ),
            row=rows[st.run],
            col=1,
        )
    for r in rows.values():
        fig.add_vline(x=1.0, line=dict(color="#333", width=1), row=r, col=1)
    fig.update_yaxes(automargin=True, autorange="reversed")
    fig.update_xaxes(rangemode="tozero")
    fig.update_xaxes(title_text="spent / budget (line: the whole budget)", row=len(rows), col=1)
    fig.update_layout(title=title, template=LIGHT, showlegend=False, height=height, bargap=0.25)
    return fig


def _smooth(y: pd.Series, window: int) -> pd.Series:
    return y.rolling(window, min_periods=1).mean() if window > 1 else y


def training_curves_figure(runs: RunSet, *, smooth: int = 1) -> go.Figure:
    """Training curves of every training run (``metrics.jsonl``): reward, accuracy, tokens per
    question and episode length against the trainer step, one colour per run.

    Args:
        smooth: Rolling-mean window (logged steps; 1 = raw).
    """
    metrics = runs.metrics()
    fig = make_subplots(
        rows=2, cols=2, subplot_titles=[t for _k, t in TRAINING_METRICS], horizontal_spacing=0.1, vertical_spacing=0.16
    )
    if metrics.empty:
        return plots.empty_figure("Training curves", "no training runs (metrics.jsonl) selected", fig=fig, height=520)
    labels = list(dict.fromkeys(metrics["run"]))
    colors = plots.policy_colors(labels)
    for k, (key, _title) in enumerate(TRAINING_METRICS):
        r, c = k // 2 + 1, k % 2 + 1
        for label in labels:
            m = metrics[metrics["run"] == label]
            if key not in m.columns or m[key].isna().all() or "step" not in m.columns:
                continue
            y = _smooth(pd.to_numeric(m[key], errors="coerce"), smooth)
            fig.add_trace(
                go.Scatter(
                    x=m["step"],
                    y=y,
                    mode="lines+markers" if len(m) < 30 else "lines",
                    name=label,
                    legendgroup=label,
                    showlegend=k == 0,
                    line=dict(color=colors[label]),
                    marker=dict(size=5),
                    hovertemplate=f"{label}<br>step %{{x}}<br>{key} %{{y:.3f}}<extra></extra>",
                ),
                row=r,
                col=c,
            )
        if key == "reward" and "reward_std" in metrics.columns:
            for label in labels:
                m = metrics[metrics["run"] == label]
                if m["reward_std"].notna().any() and m["reward"].notna().any():
                    lo = _smooth(m["reward"] - m["reward_std"], smooth)
                    hi = _smooth(m["reward"] + m["reward_std"], smooth)
                    fig.add_trace(
                        go.Scatter(
                            x=pd.concat([m["step"], m["step"][::-1]]),
                            y=pd.concat([hi, lo[::-1]]),
                            fill="toself",
                            line=dict(width=0),
                            fillcolor=colors[label],
                            opacity=0.15,
                            showlegend=False,
                            hoverinfo="skip",
                            legendgroup=label,
                        ),
                        row=1,
                        col=1,
                    )
    fig.update_xaxes(title_text="trainer step", row=2)
    fig.update_layout(
        title="Training curves" + (f" (rolling mean over {smooth} steps)" if smooth > 1 else ""),
        template=LIGHT,
        height=560,
    )
    return fig


def held_out_evaluations(runs: RunSet) -> pd.DataFrame:
    """Every training run's held-out evaluations (``evaluations.jsonl``, written by
    ``training.grpo_train --eval_every``): one row per ``(run, step, metric, key)`` with ``estimate``,
    ``ci_low``, ``ci_high`` (bootstrap 95% over the held-out episodes) and ``n`` (empty if none)."""
    parts = []
    for label, run in runs.runs.items():
        path = Path(run.path) / "evaluations.jsonl"
        if path.is_file() and path.stat().st_size:
            df = pd.read_json(path, lines=True, dtype={"key": str})
            df.insert(0, "run", label)
            parts.append(df)
    return (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame(columns=["run", "step", "metric", "key", "estimate", "ci_low", "ci_high", "n"])
    )


def held_out_figure(runs: RunSet) -> go.Figure:
    """Did training teach the policy to triage? For every training run with held-out evaluations:
    tokens per answered question by difficulty (left) and regret against the oracle allocation
    (right, expected correct answers per episode under the run's accuracy curves) against the
    training step, with bootstrap 95% intervals over the held-out episodes as error bars."""
    ev = held_out_evaluations(runs)
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.1,
        subplot_titles=[
            "held-out tokens per answered question, by difficulty",
            "held-out regret vs the oracle (expected correct / episode)",
        ],
    )
    title = "Held-out evaluation during training (95% intervals over episodes)"
    if ev.empty:
        return plots.empty_figure(
            title, "no held-out evaluations: train with --eval_every N (evaluations.jsonl)", fig=fig, height=420
        )
    labels = list(dict.fromkeys(ev["run"]))
    kinds = runs.kinds()
    # several training runs: one colour per difficulty, one dash per run (the run key names them)
    keyed = pd.DataFrame(
        {
            "run": labels,
            "run_kind": [kinds.get(r, "training") for r in labels],
            "policy_name": labels,
            "policy": labels,
        }
    )
    styles = plots.series_styles(keyed)

    def err(d: pd.DataFrame) -> dict:
        hi = (d["ci_high"] - d["estimate"]).fillna(0).clip(lower=0)
        lo = (d["estimate"] - d["ci_low"]).fillna(0).clip(lower=0)
        return dict(type="data", array=hi.tolist(), arrayminus=lo.tolist(), thickness=1, width=3)

    diffs = sorted(
        ev.loc[ev["metric"] == "tokens_by_difficulty", "key"].dropna().unique(), key=lambda k: (len(str(k)), str(k))
    )
    dcolors = plots.policy_colors([f"difficulty {d}" for d in diffs])
    shown: set = set()
    for label in labels:
        e, st = ev[ev["run"] == label], styles[label]
        for d in diffs:
            dd = e[(e["metric"] == "tokens_by_difficulty") & (e["key"] == d)].sort_values("step")
            if dd.empty:
                continue
            name = f"difficulty {d}"
            fig.add_trace(
                go.Scatter(
                    x=dd["step"],
                    y=dd["estimate"],
                    error_y=err(dd),
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=name not in shown,
                    line=dict(color=dcolors[name], dash=st.dash),
                    marker=dict(symbol=st.symbol),
                    hovertemplate=f"{label} · {name}<br>step %{{x}}<br>%{{y:.1f}} tokens<extra></extra>",
                ),
                row=1,
                col=1,
            )
            shown.add(name)
        rg = e[e["metric"] == "regret"].sort_values("step")
        if not rg.empty:
            fig.add_trace(
                go.Scatter(
                    x=rg["step"],
                    y=rg["estimate"],
                    error_y=err(rg),
                    mode="lines+markers",
                    name="regret",
                    legendgroup="regret",
                    showlegend="regret" not in shown,
                    line=dict(color="#444", dash=st.dash),
                    marker=dict(symbol=st.symbol),
                    hovertemplate=f"{label}<br>step %{{x}}<br>regret %{{y:.3f}}<extra></extra>",
                ),
                row=1,
                col=2,
            )
            shown.add("regret")
    plots.add_run_key(fig, styles, legend_title="")
    fig.update_xaxes(title_text="training step")
    fig.update_yaxes(title_text="tokens", row=1, col=1)
    fig.update_yaxes(title_text="expected correct lost", row=1, col=2)
    fig.update_layout(title=title, template=LIGHT, height=440)
    return fig


def labelled_summary(runs: RunSet) -> pd.DataFrame:
    """Every column of every run's summary (one row per run, policy and sweep condition), with
    ``run``, ``run_kind``, ``policy_name`` (the policy's own name) and ``policy = "<run>:<policy>"``
    when several runs are loaded (the figures' series labels)."""
    table = runs.summary(columns=None)
    if table.empty:
        return table
    table = table.copy()
    table["policy_name"] = table["policy"].astype(str)
    if len(runs) > 1:
        table["policy"] = table["run"].astype(str) + ":" + table["policy_name"]
    return table


def frontier(runs: RunSet) -> go.Figure:
    """Accuracy vs tokens per question of every (run, policy) and budget ratio, with 95%
    intervals and the Pareto frontier (:func:`workbench.sweep_plots.frontier_figure`)."""
    from workbench import sweep_plots

    return sweep_plots.frontier_figure(labelled_summary(runs))


def intervals(runs: RunSet, metric: str = "accuracy") -> go.Figure:
    """``metric`` of every (run, policy) with its 95% interval over episodes."""
    from workbench import sweep_plots

    return sweep_plots.interval_figure(labelled_summary(runs), metric)


def accuracy_vs_budget(runs: RunSet) -> go.Figure:
    """Accuracy against the budget ratio of the budget sweeps among the runs."""
    from workbench import sweep_plots

    return sweep_plots.accuracy_vs_budget_figure(labelled_summary(runs))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m workbench.compare RUN [RUN ...] [--out DIR]``: print the comparison (one row per
    run and policy with 95% intervals, then the paired comparison on common episode seeds) and
    write ``summary.csv``, ``comparisons.csv`` and ``figures.html`` into ``DIR``.

    Returns:
        0, or 2 when no run could be loaded (the reasons are printed).
    """
    import argparse
    import sys

    p = argparse.ArgumentParser(
        prog="python -m workbench.compare",
        description="Compare run folders: summary with intervals, paired comparison, figures.",
    )
    p.add_argument("runs", nargs="+", help="run folders (evaluation, training or saved Play runs)")
    p.add_argument(
        "--out", help="folder for summary.csv, comparisons.csv and figures.html (default runs/compare-<time>)"
    )
    args = p.parse_args(list(argv) if argv is not None else None)
    try:  # before any work: a comparison written over a run folder would replace its summary.csv
        out = output_folder(args.out, "the comparison", "summary.csv and comparisons.csv") if args.out else None
    except RunFolderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    runs = load_runs(args.runs)
    for path, err in runs.errors.items():
        print(f"error: {path}: {err}", file=sys.stderr)
    if not len(runs):
        print("error: no run could be loaded", file=sys.stderr)
        return 2
    summary = labelled_summary(runs)
    cmp = runs.comparisons()
    print(runs.describe())
    print()
    for label, run in runs.runs.items():
        for w in (run.meta.get("provenance") or {}).get("warnings") or []:
            print(f"PROVENANCE ({label}): {w}")
    print()
    print(analysis.format_table(summary))
    print()
    print(analysis.format_comparisons(cmp, summary))
    out = out or fresh_run_dir("runs", "compare")  # beside the runs (./runs, ignored by git), as evaluate does
    summary.to_csv(out / "summary.csv", index=False)
    cmp.to_csv(out / "comparisons.csv", index=False)
    figs = [
        intervals(runs),
        frontier(runs),
        accuracy_vs_budget(runs),
        accuracy_vs_tokens(runs),
        utilisation_figure(runs),
        budget_spend(runs),
        tokens_by_type(runs),
        training_curves_figure(runs),
        held_out_figure(runs),
    ]
    with open(out / "figures.html", "w", encoding="utf-8") as f:
        f.write(
            "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Run "
            "comparison</title></head><body style='max-width:1240px;margin:auto'>"
        )
        for i, fig in enumerate(figs):
            f.write(fig.to_html(full_html=False, include_plotlyjs=i == 0, default_width="100%"))
        f.write("</body></html>")
    print(f"\nwritten: {out / 'summary.csv'}, {out / 'comparisons.csv'}, {out / 'figures.html'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The Runs tab: pick run folders (evaluation runs, training logs, saved Play episodes) and
compare them side by side.

Thin layer over :mod:`workbench.compare` (discovery, loading, combined frames, figures) and
:mod:`workbench.plots`. Every per-policy number carries its 95% interval over episodes, the
paired comparison says which policies are not told apart (Holm-adjusted p >= 0.05), each run's
provenance (simulated solver and its curves, or a model; the data) sits beside the table, and
budget sweeps get accuracy against budget and the Pareto frontier (:meth:`RunsTab.uncertainty`).
A training run with held-out evaluations opens with its before/after allocation, above everything else:
tokens per answered question and accuracy by difficulty at the first and the last held-out evaluation, with
95% intervals (:func:`workbench.held_out.run_allocation`, drawn by :func:`workbench.plots.allocation_figure`).

Several runs are drawn grouped: one colour per policy (the same in every run), one line style per
run with a run key naming each run and its kind (evaluation, training, Play episode), one panel
per run for the bar charts and intervals; the policy picker narrows every figure, the table and
the comparison to the chosen policies. Actions show they are busy or were refused on the tab's
status line only (:func:`workbench.app.common.marks_on`). API names: ``/runs_refresh``,
``/runs_compare``, ``/runs_uncertainty``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from workbench import compare, plots
from workbench.analysis import MODEL_BASED, model_free, not_modelled
from workbench.app.common import AppContext, marks_on, status_line, user_errors
from workbench.held_out import runs_allocation

__all__ = ["RunsTab"]

#: How many of the newest runs are selected when nothing is.
DEFAULT_SELECTION = 3
HEADERS = {
    "run": "run",
    "policy": "policy",
    "kind": "kind",
    "budget_ratio": "budget ratio",
    "episodes": "episodes",
    "accuracy": "accuracy [95% CI]",
    "oracle_informed": "oracle-informed",
    "unasked": "unasked (forfeits)",
    "expected_accuracy": "exp. accuracy (solver curves, not the answers) [95% CI]",
    "unasked_per_episode": "unasked/episode [95% CI]",
    "tokens_per_question": "tokens/answered question [95% CI]",
    "utilisation": "utilisation [95% CI]",
    "run_dry_rate": "ran dry [95% CI]",
    "reward": "reward [95% CI]",
    "acc_per_1k_tokens": "acc/1k tokens [95% CI]",
    "regret": "regret [95% CI]",
    "on_frontier": "frontier",
    "mean_total_budget": "mean budget",
}
#: Metrics shown with their interval in one cell.
_WITH_CI = {
    "accuracy": "{:.3f}",
    "expected_accuracy": "{:.3f}",
    "unasked_per_episode": "{:.2f}",
    "tokens_per_question": "{:.0f}",
    "acc_per_1k_tokens": "{:.2f}",
    "utilisation": "{:.2f}",
    "run_dry_rate": "{:.2f}",
    "reward": "{:+.2f}",
    "regret": "{:.3f}",
}
#: Height of the tab's line charts (pixels); bar charts and intervals of several runs grow with their rows.
FIGURE_HEIGHT = 400
_MARGIN = dict(l=55, r=15, t=60, b=50)


def _fit(fig: Any) -> Any:
    """The tab's look for ``fig``: its own height if it set one (panels per run), else
    :data:`FIGURE_HEIGHT`; tick labels that make room for themselves."""
    fig.update_layout(height=fig.layout.height or FIGURE_HEIGHT, margin=_MARGIN, legend=dict(font=dict(size=11)))
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    return fig


def _paths(selected: Sequence[str] | None, extra_path: str) -> list[str]:
    return list(selected or []) + [p.strip() for p in (extra_path or "").replace(";", ",").split(",") if p.strip()]


def _load(paths: Sequence[str]) -> compare.RunSet:
    runs = compare.load_runs(dict.fromkeys(paths))
    if not len(runs):
        raise ValueError("no run could be loaded: " + "; ".join(f"{k}: {v}" for k, v in runs.errors.items()))
    return runs


def _signature(paths: Sequence[str]) -> tuple:
    """What a loaded selection depends on: each folder's files with their sizes and modification
    times (a training run that logs another step, or a run written again, loads afresh)."""
    out = []
    for p in dict.fromkeys(paths):
        try:
            with os.scandir(Path(p).expanduser()) as it:
                files = tuple(sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in it if e.is_file()))
        except OSError:
            files = None  # loading says what is wrong with it
        out.append((p, files))
    return tuple(out)


class _LoadedRuns:
    """The last few loaded selections of run folders, reused while their files are unchanged:
    each Compare loads its runs twice (the table and figures, then the paired comparison), and
    opening the tab or narrowing the policies loads the same selection again."""

    def __init__(self, maxsize: int = 4) -> None:
        self.maxsize = maxsize
        self._items: OrderedDict[tuple, compare.RunSet] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, paths: Sequence[str]) -> compare.RunSet:
        key = _signature(paths)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        runs = _load(paths)
        with self._lock:
            self._items[key] = runs
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)
        return runs


def _shown(runs: compare.RunSet, policies: Sequence[str] | None) -> list[str]:
    """The chosen policies that the runs hold (all of them when none is chosen, or none is there)."""
    available = runs.policies()
    chosen = [p for p in (policies or []) if p in available]
    return chosen or available


#: The note beside a table where such rows leave the curve-based figures blank.
NOT_MODELLED_NOTE = (
    "*exp. accuracy* and *regret* are blank for a person's (Play) or a real model's answers: they are the "
    "simulated solver's expectation at the tokens spent, which describes neither; read their accuracy column."
)


#: What each column of the summary table means, shown with the table.
COLUMN_NOTES = (
    "**Columns** (one row per run and policy; [95% CI]: bootstrap interval over episodes): *accuracy*: right "
    "answers over all the episode's questions (never-asked ones count as wrong); *exp. accuracy*: the solver "
    "curves' expected accuracy at the tokens spent; *unasked/episode*: questions never asked because the budget ran "
    "dry; *tokens/answered question*: tokens charged per answer; *utilisation*: tokens spent / budget; *ran dry*: "
    "share of episodes that ended with questions unasked; *reward*: episode reward; *acc/1k tokens*: accuracy per "
    "1,000 tokens spent; *regret*: the accuracy-maximising oracle's expected right answers minus this policy's, "
    "on the same curves; *frontier*: on the accuracy-vs-tokens Pareto frontier; *mean budget*: tokens per episode."
)


def _display_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary for the Dataframe component: each metric of :data:`_WITH_CI` as
    ``"value [low, high]"``, other floats rounded, interval columns folded in; the curve-based
    figures (expected accuracy, regret) blank for a person's or a real model's rows (:func:`not_modelled`)."""
    table, _ = model_free(summary)
    blank = not_modelled(table)
    for metric, fmt in _WITH_CI.items():
        lo, hi = f"{metric}_ci_low", f"{metric}_ci_high"
        if metric not in table:
            continue
        if lo in table:
            table[metric] = [
                ("" if metric in MODEL_BASED and off else "-" if pd.isna(v) else fmt.format(v))
                + ("" if pd.isna(a) else f" [{fmt.format(a)}, {fmt.format(b)}]")
                for v, a, b, off in zip(table[metric], table[lo], table[hi], blank)
            ]
            table = table.drop(columns=[lo, hi])
    if "budget_ratio" in table and table["budget_ratio"].nunique(dropna=True) < 2:
        table = table.drop(columns=["budget_ratio"])
    for col in table.columns:
        if pd.api.types.is_float_dtype(table[col]):
            table[col] = table[col].round(3)
    return table.rename(columns=HEADERS)


class RunsTab:
    """Handlers and layout of the Runs tab.

    Args:
        ctx: The app context (default runs folder).
    """

    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx
        self.loaded = _LoadedRuns()

    @user_errors
    def refresh(self, root: str, current: Sequence[str] | None = None) -> tuple:
        """List the run folders under ``root`` (newest first), keeping the current selection
        (the newest :data:`DEFAULT_SELECTION` when none of it is there).

        Returns:
            ``(run picker update, status markdown)``.
        """
        return self._listing(root, current)[:2]

    @user_errors
    def on_load(self, root: str) -> tuple:
        """A page was opened (each browser session): the runs folder as it is now, its newest
        :data:`DEFAULT_SELECTION` runs selected (not the selection of an earlier page).

        Returns:
            ``(run picker update, status markdown, listed)``; ``listed`` (``{"root": ..., "paths":
            [...]}``) is what this page has seen, for :meth:`relist`.
        """
        return self._listing(root, None)

    @user_errors
    def relist(self, root: str, current: Sequence[str] | None, listed: dict | None) -> tuple:
        """List the runs folder again (the Refresh button, Enter in the folder box, opening the tab):
        keep the current selection and add to it every run that appeared since this page last
        listed the same folder (``listed``, from :meth:`on_load` or an earlier call), such as an
        evaluation run from another shell or an episode saved in another browser.

        Returns:
            ``(run picker update, status markdown, listed)``.
        """
        return self._listing(root, current, listed)

    def _examples(self, root: str) -> list[compare.RunEntry]:
        """The shipped example runs (:attr:`AppContext.example_runs_root`), unless ``root`` is that folder."""
        folder = self.ctx.example_runs_root
        if not folder or Path(root).expanduser().resolve() == Path(folder).resolve():
            return []
        return [dataclasses.replace(e, label=f"example: {e.label}") for e in compare.discover_runs(folder)]

    def _listing(self, root: str, current: Sequence[str] | None, listed: dict | None = None) -> tuple:
        root = (root or "").strip() or self.ctx.runs_root
        found = compare.discover_runs(root)
        examples = self._examples(root)
        paths = [str(e.path) for e in found]
        listed = listed or {}
        seen = set(listed["paths"]) if listed.get("root") == root and listed.get("paths") is not None else None
        appeared = [] if seen is None else [p for p in paths if p not in seen]
        present = set(paths) | {str(e.path) for e in examples}
        # the runs folder's newest runs; the shipped examples when it has none (a fresh clone, the Space)
        default = paths[:DEFAULT_SELECTION] or [str(e.path) for e in examples][:DEFAULT_SELECTION]
        keep = [v for v in (current or []) if v in present] or default
        chosen = list(dict.fromkeys(keep + appeared))
        shipped = (
            f" {len(examples)} example run(s) shipped with the repository are listed after them"
            + (" and shown." if not found else ".")
            if examples
            else ""
        )
        if not found:
            status = (
                f"No run folders under `{root}` yet: run `python -m workbench.evaluate "
                "--n_episodes 5`, or save an episode from the Play tab." + shipped
            )
        else:
            status = (
                f"{len(found)} run folder(s) under `{root}`"
                + (f"; {len(appeared)} new since the last listing, selected." if appeared else ".")
                + shipped
            )
        picker = gr.Dropdown(
            choices=[(e.choice, str(e.path)) for e in [*found, *examples]], value=chosen, multiselect=True
        )
        return picker, status, {"root": root, "paths": paths}

    @user_errors
    def compare(
        self,
        selected: Sequence[str] | None,
        extra_path: str,
        smooth: float = 1,
        policies: Sequence[str] | None = None,
    ) -> tuple:
        """Load the chosen folders (plus ``extra_path``) and draw the comparison of ``policies``
        (their own names; ``None`` or none of them there: every policy of the runs).

        Returns:
            ``(description markdown, summary table, accuracy-vs-tokens, budget spend, utilisation,
            tokens-by-type figures, training-curves, held-out evaluation and before/after allocation
            updates (``{"value": figure, "visible": ...}``: hidden when no run has what they draw), what was
            drawn (``{"paths": [...], "policies": [...]}``, for :meth:`uncertainty_of`), policy picker update)``.

        Raises ``gr.Error`` when nothing is chosen or nothing could be loaded.
        """
        paths = _paths(selected, extra_path)
        if not paths:
            raise ValueError("choose at least one run folder (or type a path)")
        window = _smooth_window(smooth)
        loaded = self.loaded.get(paths)
        shown = _shown(loaded, policies)
        runs = loaded.only(shown)
        summary = runs.summary()
        table = _display_table(summary)
        figs = [
            _fit(f)
            for f in (
                compare.accuracy_vs_tokens(runs),
                compare.budget_spend(runs),
                compare.utilisation_figure(runs),
                compare.tokens_by_type(runs),
            )
        ]
        training = any(r.metrics is not None and not r.metrics.empty for r in runs.runs.values())
        held_out = not compare.held_out_evaluations(runs).empty
        # training runs with held-out evaluations: before/after allocation (workbench.held_out)
        allocation = runs_allocation({label: run.path for label, run in runs.runs.items()})
        picker = gr.Dropdown(choices=loaded.policies(), value=shown, multiselect=True)
        from workbench import analysis

        provenance = [
            f"- **{label}**: {line}"
            for label, run in runs.runs.items()
            if (line := analysis.provenance_line(run.meta.get("provenance")))
        ]
        if not summary.empty and not_modelled(summary).any():
            provenance.append(f"- {NOT_MODELLED_NOTE}")
        if not summary.empty:
            provenance.append(f"- {COLUMN_NOTES}")
        return (
            "\n".join([runs.describe(), *provenance]),
            table,
            *figs,
            gr.update(value=compare.training_curves_figure(runs, smooth=window), visible=training),
            gr.update(value=compare.held_out_figure(runs), visible=held_out),
            gr.update(value=plots.allocation_figure(allocation), visible=allocation is not None),
            {"paths": paths, "policies": shown},
            picker,
        )

    def redraw(
        self,
        selected: Sequence[str] | None,
        extra_path: str,
        smooth: float = 1,
        policies: Sequence[str] | None = None,
    ) -> tuple:
        """:meth:`compare` without the policy picker's update (for the picker's own edits)."""
        return self.compare(selected, extra_path, smooth, policies)[:-1]

    def uncertainty_of(self, drawn: dict | None) -> tuple:
        """:meth:`uncertainty` of the runs and policies the first pass (:meth:`compare`) drew."""
        drawn = drawn or {}
        return self.uncertainty(drawn.get("paths") or [], "", drawn.get("policies"))

    @user_errors
    def uncertainty(
        self, selected: Sequence[str] | None, extra_path: str, policies: Sequence[str] | None = None
    ) -> tuple:
        """The paired comparison and the frontier of the chosen runs and ``policies`` (as :meth:`compare`).

        Returns:
            ``(comparison markdown, intervals figure, frontier figure, accuracy-vs-budget figure)``.
        """
        from workbench import analysis

        paths = _paths(selected, extra_path)
        if not paths:
            return tuple(gr.skip() for _ in range(4))
        loaded = self.loaded.get(paths)
        runs = loaded.only(_shown(loaded, policies))
        summary = compare.labelled_summary(runs)
        cmp = runs.comparisons()
        lines = [
            f"**Provenance ({label})**: {w}"
            for label, run in runs.runs.items()
            for w in (run.meta.get("provenance") or {}).get("warnings") or []
        ]
        text = analysis.format_comparisons(cmp, summary)
        from workbench.held_out import run_change_markdown

        # training runs: the held-out episodes before vs after, paired (workbench.held_out)
        lines += [md for label, run in runs.runs.items() if (md := run_change_markdown(run.path, label))]
        md = "\n\n".join(
            lines
            + [
                "**Paired comparison** (same episode seeds; 95% paired bootstrap interval, sign-flip p-value, "
                "Holm-adjusted):",
                "```\n" + text + "\n```",
            ]
        )
        figs = [_fit(f) for f in (compare.intervals(runs), compare.frontier(runs), compare.accuracy_vs_budget(runs))]
        return (md, *figs)

    def build(self) -> dict[str, Any]:
        """Create the tab's components inside the current ``gr.Blocks`` and wire the events.

        Returns:
            The components by name.
        """
        c: dict[str, Any] = {}
        # the list and its selection are filled per page, when it loads (:meth:`wire_load`), never at build time
        with gr.Row(equal_height=True):
            c["root"] = gr.Textbox(self.ctx.runs_root, label="Runs folder", scale=2)
            c["refresh"] = gr.Button("Refresh list", scale=1)
        c["status"] = gr.Markdown(f"Listing the run folders under `{self.ctx.runs_root}`…")
        # what this page last listed ({"root", "paths"}): runs that appear after it are selected on the next listing
        c["listed"] = gr.State({})
        with gr.Row(equal_height=True):
            c["runs"] = gr.Dropdown(
                [],
                value=[],
                multiselect=True,
                label="Runs to compare",
                scale=4,
                elem_id="ree-runs-picker",
            )
            c["path"] = gr.Textbox("", label="…or a folder path (commas for several)", scale=2)
        with gr.Row(equal_height=True):
            c["policies"] = gr.Dropdown(
                [],
                value=[],
                multiselect=True,
                label="Policies to draw",
                scale=4,
                elem_id="ree-runs-policies",
                info="every policy of the runs unless you narrow it; "
                "one colour per policy in every run, one line style per run",
            )
            c["smooth"] = gr.Slider(
                1, 50, value=1, step=1, label="Smooth training curves (rolling mean, logged steps)", scale=2
            )
            c["compare_btn"] = gr.Button("Compare", variant="primary", scale=1, elem_id="ree-compare")
        # the one place the tab's actions show they are busy or were refused (the message is a toast)
        c["busy"] = status_line("ree-runs-status")
        # the runs and policies the first pass drew: the second pass completes that comparison (it must not read
        # the pickers, which may have changed, or be changing, in between)
        c["drawn"] = gr.State({})
        # a training run with held-out evaluations: its before/after allocation first, above the table
        c["allocation_plot"] = gr.Plot(show_label=False, elem_id="ree-runs-allocation", visible=False)
        c["describe"] = gr.Markdown("")
        c["table"] = gr.Dataframe(
            pd.DataFrame(columns=list(HEADERS.values())),
            interactive=False,
            label="Summary (one row per run and policy)",
            wrap=False,
            elem_id="ree-runs-table",
        )
        # line charts side by side; the per-run panels (one row per policy) side by side; the densest chart full width
        with gr.Row():
            c["acc_plot"] = gr.Plot(show_label=False, elem_id="ree-runs-acc")
            c["spend_plot"] = gr.Plot(show_label=False, elem_id="ree-runs-spend")
        with gr.Row():
            c["util_plot"] = gr.Plot(show_label=False, elem_id="ree-runs-util")
            c["interval_plot"] = gr.Plot(show_label=False, elem_id="ree-runs-intervals")
        c["type_plot"] = gr.Plot(show_label=False, elem_id="ree-runs-type")
        c["train_plot"] = gr.Plot(show_label=False, elem_id="ree-runs-train", visible=False)
        c["held_out_plot"] = gr.Plot(show_label=False, elem_id="ree-runs-held-out", visible=False)
        with gr.Accordion("Paired comparison and frontier", open=True):
            c["uncertainty"] = gr.Markdown("", elem_id="ree-runs-uncertainty")
            with gr.Row():
                c["frontier_plot"] = gr.Plot(show_label=False, elem_id="ree-runs-frontier")
                c["budget_plot"] = gr.Plot(show_label=False, elem_id="ree-runs-budget")

        outputs = [
            c["describe"],
            c["table"],
            c["acc_plot"],
            c["spend_plot"],
            c["util_plot"],
            c["type_plot"],
            c["train_plot"],
            c["held_out_plot"],
            c["allocation_plot"],
            c["drawn"],
            c["policies"],
        ]
        extra = [c["uncertainty"], c["interval_plot"], c["frontier_plot"], c["budget_plot"]]
        on = marks_on(c["busy"])  # busy and error marks on the status line only
        private = {"api_visibility": "private", **on}
        filtered = [c["runs"], c["path"], c["smooth"], c["policies"]]
        c["_io"] = (outputs, extra, filtered, on)
        listing_in, listing_out = [c["root"], c["runs"], c["listed"]], [c["runs"], c["status"], c["listed"]]
        c["refresh"].click(self.relist, listing_in, listing_out, api_name="runs_refresh", **on)
        c["root"].submit(self.relist, listing_in, listing_out, **private)
        # Compare draws every policy of the chosen runs; narrowing the picker (or smoothing) redraws the chosen ones
        c["compare_btn"].click(
            self.compare, [c["runs"], c["path"], c["smooth"]], outputs, api_name="runs_compare", **on
        ).success(self.uncertainty_of, [c["drawn"]], extra, api_visibility="private", **on)
        gr.on([], self.uncertainty, [c["runs"], c["path"]], extra, api_name="runs_uncertainty")
        # (the picker is not redrawn by its own edits, and after several quick edits the last choice is drawn)
        c["policies"].input(self.redraw, filtered, outputs[:-1], trigger_mode="always_last", **private).success(
            self.uncertainty_of, [c["drawn"]], extra, trigger_mode="always_last", **private
        )
        c["smooth"].release(self.redraw, filtered, outputs[:-1], trigger_mode="always_last", **private)
        c["_refresh_io"] = (listing_in, listing_out)
        return c

    def include_saved(self, session: Any, root: str, current: Sequence[str] | None) -> tuple:
        """After the Play tab saved an episode: re-list the runs folder and add the saved run to
        the selection (also when it was saved outside the runs folder)."""
        saved = getattr(session, "saved_to", None) if session is not None else None
        if saved is None:
            return gr.skip(), gr.skip()
        saved = str(saved)
        base = (root or "").strip() or self.ctx.runs_root
        choices = [(e.choice, str(e.path)) for e in compare.discover_runs(base)]
        if saved not in {v for _l, v in choices}:
            choices.insert(0, (f"{Path(saved).name}  (Play episode)", saved))
        chosen = [v for v in (current or []) if v in {c for _l, c in choices}] + [saved]
        return (
            gr.Dropdown(choices=choices, value=list(dict.fromkeys(chosen)), multiselect=True),
            f"Saved episode `{saved}` added to the comparison; press **Compare**.",
        )

    def compare_if_any(
        self,
        selected: Sequence[str] | None,
        extra_path: str,
        smooth: float = 1,
        policies: Sequence[str] | None = None,
    ) -> tuple:
        """:meth:`compare` when something is chosen; otherwise leave the outputs as they are."""
        if not selected and not (extra_path or "").strip():
            return tuple(gr.skip() for _ in range(11))
        return self.compare(selected, extra_path, smooth, policies)

    def wire_load(self, demo: Any, c: dict[str, Any]) -> None:
        """When a page of ``demo`` loads (each browser session): list the runs folder as it is
        now and select its newest runs (:meth:`on_load`)."""
        _inputs, refreshed = c["_refresh_io"]
        on = c["_io"][-1]
        demo.load(self.on_load, [c["root"]], refreshed, api_visibility="private", **on)

    def wire_tab(self, tab: Any, c: dict[str, Any]) -> None:
        """When ``tab`` is selected: list the runs again (:meth:`relist`: runs made since the
        page loaded are added to the selection), then draw the comparison of the selection
        (keeping the policy picker's choice)."""
        inputs, refreshed = c["_refresh_io"]
        outputs, extra, filtered, on = c["_io"]
        private = {"api_visibility": "private", **on}
        tab.select(self.relist, inputs, refreshed, **private).success(
            self.compare_if_any, filtered, outputs, **private
        ).success(self.uncertainty_of, [c["drawn"]], extra, **private)


def _smooth_window(smooth: Any) -> int:
    """The rolling-mean window (logged steps) from the slider's value.

    Raises:
        ValueError: not a finite number between 1 and 1,000.
    """
    try:
        v = float(smooth if smooth not in (None, "") else 1)
    except (TypeError, ValueError):
        raise ValueError(
            f"smoothing must be a whole number of logged steps (1-50 on the slider), got {smooth!r}"
        ) from None
    if not math.isfinite(v) or not 1 <= v <= 1000:
        raise ValueError(f"smoothing must be between 1 and 1,000 logged steps, got {smooth!r}")
    return int(v)

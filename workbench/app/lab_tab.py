"""The Reward lab tab: tune reward shapes with sliders, re-score a run live, see what they teach.

Thin layer over :mod:`workbench.reward_lab.tuning` (controls from the registry, spec building,
re-scoring tables, the induced allocation, tuned YAML) and :mod:`workbench.reward_lab.figures`.
The loaded run lives in a per-session ``gr.State`` (a :class:`~workbench.reward_lab.tuning.LabRun`).

API names: ``/lab_load``, ``/lab_update``, ``/lab_induced``, ``/lab_save``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from reasoning_env.rewards import DEFAULT_REWARD, describe, normalise_spec, spec_to_yaml
from workbench.app.common import AppContext, esc, marks_on, status_line, user_errors
from workbench.compare import discover_runs
from workbench.reward_lab import AllocationCache
from workbench.reward_lab import tuning as rt
from workbench.reward_lab.figures import (
    induced_tokens_figure,
    pareto_figure,
    rescore_comparison_figure,
    reward_curves_figure,
)

__all__ = ["LabTab", "SYNTHETIC"]

#: Run-picker value of the synthetic demo run.
SYNTHETIC = "synthetic"
RESCORE_COLUMNS = {
    "policy": "policy",
    "episodes": "episodes",
    "accuracy": "accuracy",
    "tokens_per_question": "tokens/question",
    "recorded_reward": "recorded reward",
    "tuned_reward": "tuned reward",
    "change": "change",
    "recorded_rank": "rank (recorded)",
    "tuned_rank": "rank (tuned)",
}


def _round(df: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    out = df.copy()
    for c in out.columns:
        if pd.api.types.is_float_dtype(out[c]):
            out[c] = out[c].round(digits)
    return out


class LabTab:
    """Handlers and layout of the Reward lab tab.

    Args:
        ctx: The app context (runs folder, download folder).
    """

    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx
        self.controls = rt.controls()
        self.names = rt.reward_names()
        self.meta = describe()
        self._synthetic: rt.LabRun | None = None
        self._synthetic_lock = threading.Lock()
        # optimal allocations solved for any session (a slider changes only the tuned reward's)
        self.allocations = AllocationCache()

    def synthetic(self) -> rt.LabRun:
        """The synthetic demo run, built once and shared by every session (re-scoring only reads it)."""
        with self._synthetic_lock:
            if self._synthetic is None:
                self._synthetic = rt.LabRun.synthetic()
            return self._synthetic

    # ------------------------------------------------------------------ helpers
    def run_choices(self, root: str | None = None) -> list[tuple[str, str]]:
        """Picker entries: the synthetic demo run, then the run folders under ``root``."""
        entries = [("synthetic demo run (no run needed)", SYNTHETIC)]
        entries += [(e.choice, str(e.path)) for e in discover_runs(root or self.ctx.runs_root)]
        return entries

    def default_choice(self, root: str | None = None) -> str:
        """What the picker opens on: the newest run folder under ``root`` (a real run), else the synthetic demo."""
        runs = discover_runs(root or self.ctx.runs_root)
        return str(runs[0].path) if runs else SYNTHETIC

    def _spec(self, selected: Sequence[str], values: Sequence[Any]) -> dict:
        return rt.values_to_spec(list(selected or []), list(values))

    # ------------------------------------------------------------------ handlers
    @user_errors
    def load(self, choice: str) -> tuple:
        """Load the chosen run (a folder path, or ``"synthetic"``) for re-scoring.

        Returns:
            ``(LabRun, description markdown)``.
        """
        choice = (choice or "").strip() or SYNTHETIC
        lab = self.synthetic() if choice == SYNTHETIC else rt.LabRun.from_path(choice)
        return lab, lab.describe() + "".join(f"\n- note: {esc(n)}" for n in lab.notes)

    @user_errors
    def recorded_controls(self, lab: rt.LabRun | None) -> tuple:
        """Set the controls to the reward the run was recorded with: ``(selected, *values)``."""
        spec = lab.recorded if lab is not None else rt.recorded_spec(None)
        selected, values, notes = rt.spec_to_values(spec)
        for n in notes:
            gr.Info(n)
        return (selected, *[values.get(c.key, c.default) for c in self.controls])

    def visibility(self, selected: Sequence[str]) -> list:
        """One ``gr.Accordion`` update per reward: visible when selected."""
        chosen = set(selected or [])
        return [gr.Accordion(visible=name in chosen) for name in self.names]

    @user_errors
    def update(self, lab: rt.LabRun | None, selected: Sequence[str], *values: Any) -> tuple:
        """Re-score the run under the tuned spec and redraw the reward curves (the whole view).

        Returns:
            ``(spec YAML, notes markdown, rescore table, comparison figure, reward-curves figure,
            YAML download button)``.
        """
        spec, lab, table, tuned, base, notes = self._rescored(lab, selected, values)
        figures = self._figures(spec, lab, tuned, base, notes)
        return (*self._table_outputs(spec, table, notes), *figures)

    @user_errors
    def update_table(self, lab: rt.LabRun | None, selected: Sequence[str], *values: Any) -> tuple:
        """The page's first pass after a slider moved: ``(spec YAML, notes markdown, rescore
        table)``, the re-scoring alone (the figures, ~5x its time, follow in :meth:`update_figures`)."""
        spec, _lab, table, _tuned, _base, notes = self._rescored(lab, selected, values)
        return self._table_outputs(spec, table, notes)

    @user_errors
    def update_figures(self, lab: rt.LabRun | None, selected: Sequence[str], *values: Any) -> tuple:
        """The page's second pass: ``(comparison figure, reward-curves figure, YAML download button)``."""
        spec, lab, _table, tuned, base, notes = self._rescored(lab, selected, values)
        return self._figures(spec, lab, tuned, base, notes)

    def _rescored(self, lab: rt.LabRun | None, selected: Sequence[str], values: Sequence[Any]) -> tuple:
        spec = self._spec(selected, values)
        lab = lab if lab is not None else self.synthetic()
        table, tuned, base, notes = lab.rescore(spec)
        return spec, lab, table, tuned, base, list(notes)

    def _table_outputs(self, spec: dict, table: pd.DataFrame, notes: list[str]) -> tuple:
        md = "\n".join(f"- {esc(n)}" for n in notes) if notes else ""
        return spec_to_yaml(spec), md, _round(table.rename(columns=RESCORE_COLUMNS))

    def _figures(self, spec: dict, lab: rt.LabRun, tuned: Any, base: Any, notes: list[str]) -> tuple:
        comparison = rescore_comparison_figure(
            base, tuned, labels=(f"recorded ({rt.spec_label(lab.recorded)})", f"tuned ({rt.spec_label(spec)})")
        )
        comparison.update_layout(
            height=400,
            margin=dict(l=60, r=20, t=50, b=50),
            showlegend=False,
            title=dict(text="Episode reward, tuned vs recorded (one dot per episode)", font=dict(size=14)),
        )
        same = normalise_spec(spec) == normalise_spec(lab.recorded)
        panels = (
            {f"tuned = recorded: {rt.spec_label(spec)}": spec}
            if same
            else {f"tuned: {rt.spec_label(spec)}": spec, f"recorded: {rt.spec_label(lab.recorded)}": lab.recorded}
        )
        curves = reward_curves_figure(
            panels,
            total_budget=lab.total_budget,
            num_questions=lab.num_questions,
            hard_cap_mode=lab.hard_cap_mode,
            cols=2,
        )
        curves.update_layout(
            height=340,
            margin=dict(l=60, r=20, t=80, b=45),
            title=dict(
                text=f"Step reward vs tokens: solid correct, dashed wrong (budget {lab.total_budget:,} for "
                f"{lab.num_questions} questions; dotted: fair share "
                f"{lab.total_budget / max(1, lab.num_questions):,.0f})",
                font=dict(size=14),
            ),
        )
        download = self._yaml_file(spec, lab, notes)
        return comparison, curves, download

    @user_errors
    def induced(self, lab: rt.LabRun | None, selected: Sequence[str], budgets: str, *values: Any) -> tuple:
        """The induced allocation of the tuned and the recorded reward by difficulty.

        Returns:
            ``(tokens-by-difficulty figure, accuracy-vs-tokens figure, summary table, notes markdown)``.
        """
        spec = self._spec(selected, values)
        bs = rt.parse_budgets(budgets)
        hard = lab.hard_cap_mode if lab is not None else True
        recorded = lab.recorded if lab is not None else rt.recorded_spec(None)
        same = normalise_spec(spec) == normalise_spec(recorded)
        specs = {"tuned = recorded": spec} if same else {"tuned": spec, "recorded": recorded}
        res, notes = rt.induced(specs, bs, hard_cap_mode=hard, curves=self.ctx.curves, cache=self.allocations)
        if res is None:
            empty = pd.DataFrame(columns=["reward", "budget"])
            return gr.Plot(value=None), gr.Plot(value=None), empty, "\n".join(f"- {esc(n)}" for n in notes)
        tokens_fig = induced_tokens_figure(res)
        tokens_fig.update_layout(
            height=380,
            margin=dict(l=60, r=20, t=80, b=45),
            title=dict(
                text="Induced allocation: tokens per question by difficulty (black: accuracy-maximising oracle)",
                font=dict(size=14),
            ),
        )
        from workbench.reward_lab import oracle_frontier

        front = oracle_frontier(
            [int(b) for b in sorted(set([min(bs) // 2] + list(bs) + [max(bs) * 3 // 2]))],
            curves=self.ctx.curves,
            cache=self.allocations,
        )
        pareto = pareto_figure(res, front)
        pareto.update_layout(
            height=400,
            margin=dict(l=60, r=20, t=50, b=50),
            title=dict(text="Expected accuracy vs tokens of each optimum, per budget", font=dict(size=14)),
        )
        cols = {
            "reward": "reward",
            "budget": "budget",
            "expected_accuracy": "exp. accuracy",
            "oracle_accuracy": "oracle accuracy",
            "regret": "regret",
            "regret_pct": "regret %",
            "tokens": "tokens spent",
            "spearman": "Spearman",
            "skipped": "skipped",
            "unasked": "never asked",
            "signal": "signal",
            "bound": "optimality bound",
        }
        table = _round(res.summary[[c for c in cols if c in res.summary.columns]].rename(columns=cols))
        return tokens_fig, pareto, table, "\n".join(f"- {esc(n)}" for n in dict.fromkeys(notes))

    def _yaml_file(self, spec: dict, lab: rt.LabRun, notes: list[str]) -> Any:
        try:
            text = rt.tuned_yaml(spec, lab.config)
        except ValueError as exc:
            notes.append(f"cannot save as an environment config: {exc}")
            return gr.DownloadButton(value=None, interactive=False)
        name = re.sub(r"[^A-Za-z0-9_.+-]", "_", rt.spec_label(spec))[:60]
        path = self.ctx.download_dir / f"env-{name}.yaml"
        path.write_text(text, encoding="utf-8")
        return gr.DownloadButton(value=str(path), interactive=True)

    @user_errors
    def save(self, lab: rt.LabRun | None, selected: Sequence[str], path: str, *values: Any) -> str:
        """Write the tuned EnvConfig YAML to ``path`` (folders created); returns a status line.

        Raises ``gr.Error`` for a blank path, a group reward (the environment cannot pay it) or an
        unwritable file.
        """
        spec = self._spec(selected, values)
        target = (path or "").strip()
        if not target:
            raise ValueError("enter a file path for the YAML, e.g. configs/tuned_reward.yaml")
        p = Path(target).expanduser()
        if p.suffix.lower() not in (".yaml", ".yml"):
            p = p.with_suffix(".yaml")
        text = rt.tuned_yaml(spec, lab.config if lab is not None else None)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot write {str(p)!r}: {exc}") from None
        return (
            f"Saved `{p}`. Use it with `python -m workbench.evaluate --config {p}` or "
            f"`python -m training.grpo_train --config {p}`."
        )

    @user_errors
    def refresh(self, root: str) -> Any:
        """Re-list the run folders under ``root`` in the run picker."""
        return gr.Dropdown(choices=self.run_choices(root))

    # ------------------------------------------------------------------ layout
    def build(self) -> dict[str, Any]:
        """Create the tab's components inside the current ``gr.Blocks`` and wire the events.

        Returns:
            The components by name.
        """
        c: dict[str, Any] = {}
        c["lab"] = gr.State(None, time_to_live=6 * 3600)
        gr.Markdown(
            "Tune a reward with the sliders: the loaded run is **re-scored** at once "
            "(counterfactual rewards from its stored tokens "
            "and verdicts, no re-grading), the step reward is drawn against tokens, and "
            "the **induced allocation** shows how a policy "
            "maximising the reward would split a budget over difficulty levels 1-5, next "
            "to the accuracy-maximising oracle."
        )
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=330, elem_classes=["ree-sidebar"]):
                with gr.Row(equal_height=True):
                    c["run"] = gr.Dropdown(
                        self.run_choices(),
                        value=self.default_choice(),
                        allow_custom_value=True,
                        label="Run to re-score",
                        info="a run folder, or type its path",
                        scale=4,
                    )
                    c["refresh"] = gr.Button("↻", scale=0, min_width=44)
                c["runs_root"] = gr.Textbox(self.ctx.runs_root, label="Runs folder", visible=True)
                c["run_info"] = gr.Markdown("")
                c["use_recorded"] = gr.Button("Start from the run's recorded reward", size="sm")
                c["selected"] = gr.CheckboxGroup(
                    [(n, n) for n in self.names],
                    value=[DEFAULT_REWARD],
                    label="Reward shapes (several = weighted sum)",
                    elem_id="ree-lab-shapes",
                )
                c["accordions"] = []
                c["controls"] = []
                for name in self.names:
                    info = self.meta[name]
                    formula = str(info["formula"]).replace("`", "'")
                    with gr.Accordion(f"{name} ({info['scope']})", open=True, visible=name == DEFAULT_REWARD) as acc:
                        gr.Markdown(
                            # the formula in a code span, which shows it as typed (escaped, `>=` read `&gt;=`)
                            f"{esc(info['summary'])}  \n<small>`{formula}` · {esc(info['source'])}</small>"
                        )
                        for ctrl in [x for x in self.controls if x.reward == name]:
                            if ctrl.kind == "choice":
                                comp = gr.Dropdown(
                                    list(ctrl.choices or ()), value=ctrl.default, label=ctrl.label, info=ctrl.info
                                )
                            else:
                                comp = gr.Slider(
                                    ctrl.minimum,
                                    ctrl.maximum,
                                    value=ctrl.default,
                                    step=ctrl.step,
                                    label=ctrl.label,
                                    info=ctrl.info,
                                )
                            c["controls"].append(comp)
                    c["accordions"].append(acc)
                c["budgets"] = gr.Textbox(
                    ", ".join(str(b) for b in rt.DEFAULT_BUDGETS),
                    label="Budgets for the induced allocation (tokens, 10 questions)",
                )
            with gr.Column(scale=2, min_width=520):
                # the one place the lab's actions show they are busy or were refused (the message is a toast)
                c["status"] = status_line("ree-lab-status")
                c["notes"] = gr.Markdown("")
                c["table"] = gr.Dataframe(
                    pd.DataFrame(columns=list(RESCORE_COLUMNS.values())),
                    interactive=False,
                    label="Re-scored run: mean episode reward per policy",
                    elem_id="ree-lab-table",
                )
                c["curves"] = gr.Plot(show_label=False, elem_id="ree-lab-curves")
                with gr.Row():
                    c["comparison"] = gr.Plot(show_label=False, elem_id="ree-lab-comparison")
                    c["pareto"] = gr.Plot(show_label=False, elem_id="ree-lab-pareto")
                c["induced_tokens"] = gr.Plot(show_label=False, elem_id="ree-lab-induced")
                c["induced_table"] = gr.Dataframe(
                    interactive=False,
                    label="Induced allocation per budget: expected accuracy, regret vs the oracle "
                    "(expected correct answers lost per episode), Spearman(tokens, difficulty), "
                    "questions skipped / never asked",
                )
                c["induced_notes"] = gr.Markdown("")
                with gr.Accordion("Tuned reward spec (YAML) and saving", open=True):
                    c["spec"] = gr.Code("", language="yaml", label="reward spec", lines=8, interactive=False)
                    with gr.Row(equal_height=True):
                        c["download"] = gr.DownloadButton(
                            "Download env config (YAML)", value=None, interactive=False, scale=1
                        )
                        c["save_path"] = gr.Textbox("configs/tuned_reward.yaml", label="or save to", scale=2)
                        c["save_btn"] = gr.Button("Save YAML", scale=1)
                    c["save_status"] = gr.Markdown("")

        lab, sel, ctrls = c["lab"], c["selected"], c["controls"]
        update_outputs = [c["spec"], c["notes"], c["table"], c["comparison"], c["curves"], c["download"]]
        induced_outputs = [c["induced_tokens"], c["pareto"], c["induced_table"], c["induced_notes"]]
        on = marks_on(c["status"])  # busy and error marks on the status line only
        private = {"api_visibility": "private", **on}
        c["refresh"].click(self.refresh, [c["runs_root"]], [c["run"]], **private)
        load = c["run"].change(
            self.load, [c["run"]], [lab, c["run_info"]], api_name="lab_load", trigger_mode="always_last", **on
        )
        load.success(self.update, [lab, sel, *ctrls], update_outputs, **private).success(
            self.induced, [lab, sel, c["budgets"], *ctrls], induced_outputs, **private
        )
        sel.change(self.visibility, [sel], c["accordions"], api_visibility="private", show_progress="hidden")
        c["use_recorded"].click(self.recorded_controls, [lab], [sel, *ctrls], **private)
        # a slider drawn in three passes: the re-scored table first, then its figures, then the induced
        # allocation (the optimiser: seconds); the API's /lab_update returns the first two at once
        gr.on([], self.update, [lab, sel, *ctrls], update_outputs, api_name="lab_update", **on)
        live = gr.on(
            [sel.change] + [x.change for x in ctrls],
            self.update_table,
            [lab, sel, *ctrls],
            update_outputs[:3],
            trigger_mode="always_last",
            show_progress="minimal",
            **private,
        )
        live = live.success(
            self.update_figures,
            [lab, sel, *ctrls],
            update_outputs[3:],
            trigger_mode="always_last",
            show_progress="hidden",
            api_visibility="private",
        )
        live.success(
            self.induced,
            [lab, sel, c["budgets"], *ctrls],
            induced_outputs,
            trigger_mode="always_last",
            show_progress="minimal",
            **private,
        )
        c["budgets"].submit(
            self.induced, [lab, sel, c["budgets"], *ctrls], induced_outputs, api_name="lab_induced", **on
        )
        c["save_btn"].click(
            self.save, [lab, sel, c["save_path"], *ctrls], [c["save_status"]], api_name="lab_save", **on
        )
        c["_initial"] = (lab, c["run"], c["run_info"], update_outputs, induced_outputs, on)
        return c

    @user_errors
    def ensure_loaded(self, lab: rt.LabRun | None, choice: str, root: str | None = None) -> tuple:
        """Load the picked run the first time the tab is opened (later: nothing changes): the newest real run
        when the picker still shows the synthetic demo (a run made since the page was built counts).
        Outputs: ``(LabRun, description, run picker)``."""
        if lab is not None:
            return gr.skip(), gr.skip(), gr.skip()
        defaulted = (choice or "").strip() in ("", SYNTHETIC)
        if defaulted:
            choice = self.default_choice(root)
        try:
            data, info = self.load(choice)
        except gr.Error:
            if not defaulted or choice == SYNTHETIC:
                raise
            choice = SYNTHETIC  # the newest folder cannot be re-scored: the demo, as before
            data, info = self.load(choice)
        return data, info, gr.Dropdown(choices=self.run_choices(root), value=choice)

    def wire_tab(self, tab: Any, c: dict[str, Any]) -> None:
        """When ``tab`` is selected: load the run on first use, then draw everything."""
        lab, run, info, update_outputs, induced_outputs, on = c["_initial"]
        private = {"api_visibility": "private", **on}
        tab.select(self.ensure_loaded, [lab, run, c["runs_root"]], [lab, info, run], **private).success(
            self.update, [lab, c["selected"], *c["controls"]], update_outputs, **private
        ).success(self.induced, [lab, c["selected"], c["budgets"], *c["controls"]], induced_outputs, **private)

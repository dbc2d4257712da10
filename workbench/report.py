"""``report.html``: a self-contained evaluation report.

In order: where the numbers come from (simulated solver or a model, builtin stand-in questions
or real data), the run's facts, the summary with 95% intervals over episodes, whether the
policies can be told apart (paired comparisons on the same episodes), the budget sweep and the
Pareto frontier, the per-seed table of a multi-seed run, the figures, and the data sources.
Plotly's JavaScript is embedded once, so the file opens offline (about 4.7 MB). The page fits a
1,400-pixel window without horizontal scrolling (intervals sit under their value; long text
wraps).
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from workbench import analysis, plots, stats, sweep_plots

__all__ = ["build_report", "report_figures", "write_report"]


def report_figures(steps: pd.DataFrame, episodes: pd.DataFrame, summary: pd.DataFrame | None = None) -> list:
    """The report's figures, in order: budget spend, tokens by problem type, tokens by
    difficulty, accuracy vs tokens, reward components, regret, length histogram."""
    return [
        plots.budget_spend_figure(steps),
        plots.tokens_by_type_figure(steps),
        plots.tokens_by_difficulty_figure(steps),
        plots.accuracy_vs_tokens_figure(steps, summary),
        plots.reward_components_figure(episodes),
        plots.regret_figure(episodes),
        plots.length_histogram_figure(steps),
    ]


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5rem auto;max-width:1240px;
  padding:0 12px;color:#222}
table{border-collapse:collapse;font-size:12.5px;max-width:100%}
td,th{border:1px solid #ddd;padding:3px 6px;text-align:right;vertical-align:top}
th{background:#f4f4f4;font-weight:600}td:first-child,th:first-child{text-align:left}
.ci{display:block;color:#777;font-size:11px;white-space:nowrap}
.meta{font-size:13px;color:#555;overflow-wrap:anywhere}
.note{background:#fffbe6;border:1px solid #f0e0a0;padding:6px 10px;font-size:13px;overflow-wrap:anywhere}
.prov{background:#fdecea;border:1px solid #e6a4a0;padding:8px 12px;font-size:14px;overflow-wrap:anywhere}
.prov b{color:#8a1f17}.ok{background:#eaf6ec;border:1px solid #9fd3a8;padding:8px 12px;font-size:14px}
pre.json{white-space:pre-wrap;overflow-wrap:anywhere;word-break:break-word;max-width:100%;background:#fafafa;
  border:1px solid #eee;padding:8px}
.plot{max-width:100%;overflow:hidden}
"""

#: Summary columns of the main table (value, with its interval beneath when it has one).
_MAIN = [
    "policy",
    "kind",
    "budget_ratio",
    "token_cap",
    "oracle_informed",
    "episodes",
    "accuracy",
    "expected_accuracy",
    "unasked_per_episode",
    "tokens_per_question",
    "acc_per_1k_tokens",
    "utilisation",
    "run_dry_rate",
    "reward",
    "regret",
    "on_frontier",
    "wall_s",
]
_COMPONENTS = [
    "policy",
    "budget_ratio",
    "reward",
    "reward_correctness",
    "reward_efficiency_bonus",
    "reward_cost_penalty",
    "reward_overspend_penalty",
    "reward_episode_bonus",
]
_SHORT = {
    "budget_ratio": "budget ratio",
    "token_cap": "cap",
    "expected_accuracy": "exp. accuracy",
    "oracle_informed": "oracle-informed",
    "unasked_per_episode": "unasked / episode",
    "tokens_per_question": "tokens / q",
    "utilisation": "util.",
    "run_dry_rate": "run dry",
    "reward_correctness": "correctness",
    "reward_efficiency_bonus": "efficiency",
    "reward_cost_penalty": "cost",
    "reward_overspend_penalty": "overspend",
    "reward_episode_bonus": "episode bonus",
    "acc_per_1k_tokens": "acc / 1k tok",
    "on_frontier": "frontier",
    "wall_s": "wall s",
}


def _num(v: Any, fmt: str = "{:.3f}") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, (bool,)):
        return "yes" if v else ""
    if isinstance(v, (int, float)):
        return fmt.format(v)
    return html.escape(str(v))


def _fmt_for(col: str) -> str:
    if col in ("tokens_per_question", "episodes", "token_cap"):
        return "{:.0f}"
    if col == "budget_ratio":
        return "{:g}"
    if col.startswith("reward"):
        return "{:+.3f}"
    if col == "wall_s":
        return "{:.1f}"
    return "{:.3f}"


def _table(frame: pd.DataFrame, columns: list[str], *, intervals: bool = True) -> str:
    cols = [
        c
        for c in columns
        if c in frame.columns and not (c in ("budget_ratio", "token_cap") and frame[c].nunique(dropna=True) < 2)
    ]
    if "reward_overspend_penalty" in cols and not frame["reward_overspend_penalty"].fillna(0).abs().gt(0).any():
        cols.remove("reward_overspend_penalty")
    head = "".join(f"<th>{html.escape(_SHORT.get(c, c))}</th>" for c in cols)
    body = []
    for _, r in frame.iterrows():
        cells = []
        for c in cols:
            text = _num(r[c], _fmt_for(c))
            lo, hi = stats.ci_columns(c)
            if intervals and lo in frame.columns and pd.notna(r[lo]):
                f = _fmt_for(c)
                text += f"<span class='ci'>[{f.format(r[lo])}, {f.format(r[hi])}]</span>"
            cells.append(f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _provenance(meta: dict[str, Any]) -> str:
    prov = meta.get("provenance") or {}
    warnings = prov.get("warnings") or []
    if not warnings:
        return (
            "<p class='ok'>Answers come from the evaluated models and the questions from "
            "the configured data sources.</p>"
        )
    items = "".join(f"<li>{html.escape(w)}</li>" for w in warnings)
    return f"<div class='prov'><b>Read this first: where these numbers come from.</b><ul>{items}</ul></div>"


def _comparisons(comparisons: pd.DataFrame | None, summary: pd.DataFrame) -> str:
    if comparisons is None or comparisons.empty:
        return "<p class='meta'>Fewer than two policies with common episodes: nothing to compare.</p>"
    parts = [
        "<p class='meta'>Policies played the same seeded episodes, so they are compared episode by episode: the mean "
        "difference, its 95% paired bootstrap interval, and a two-sided sign-flip "
        "permutation p-value (Holm-adjusted over "
        "the pairs of each metric). <b>Told apart</b> means one thing everywhere (here, the console, "
        "<code>comparisons.csv</code> and the Runs tab): the Holm-adjusted p-value is below "
        f"{analysis.ALPHA:g}. The interval is not adjusted for the number of pairs, so it may exclude 0 "
        "for a pair that is not told apart. Every pair is in <code>comparisons.csv</code>.</p>"
    ]
    for metric in ("accuracy", "reward", "regret"):
        for item in analysis.indistinguishable(comparisons, summary, metric=metric):
            where = f" ({html.escape(item['condition'])})" if item["condition"] else ""
            tied = ", ".join(map(html.escape, item["tied"]))
            verdict = (
                f"is not told apart from <b>{tied}</b> (Holm p &ge; {analysis.ALPHA:g})"
                if item["tied"]
                else f"is told apart from every other policy (Holm p &lt; {analysis.ALPHA:g})"
            )
            parts.append(f"<p><b>{metric}</b>{where}: the best, <b>{html.escape(item['best'])}</b>, {verdict}.</p>")
            rows = [
                f"<tr><td>{html.escape(item['best'])} − {html.escape(d['other'])}</td><td>{d['difference']:+.3f}</td>"
                f"<td>[{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]</td><td>{d['p_value']:.3g}</td>"
                f"<td>{d['p_holm']:.3g}</td>"
                f"<td>{'yes' if d['distinguishable'] else 'no'}</td><td>{d['episodes']}</td></tr>"
                for d in item["differences"]
            ]
            parts.append(
                "<table><thead><tr><th>difference</th><th>mean</th><th>95% interval</th><th>p</th><th>p (Holm)</th>"
                f"<th>told apart</th><th>episodes</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
            )
            for extra in (analysis.format_floor(item), analysis.format_power(item)):
                if extra:
                    parts.append(f"<p class='meta'>{html.escape(extra)}</p>")
    return "\n".join(parts)


def build_report(
    steps: pd.DataFrame,
    episodes: pd.DataFrame,
    summary: pd.DataFrame,
    meta: dict[str, Any] | None = None,
    *,
    comparisons: pd.DataFrame | None = None,
    seeds: pd.DataFrame | None = None,
) -> str:
    """The report as an HTML string.

    Args:
        steps, episodes, summary: The run's frames.
        meta: ``run.json`` contents (title, seeds, budget note, provenance, notes).
        comparisons: ``comparisons.csv`` (computed from ``episodes`` when ``None``).
        seeds: ``seeds.csv`` of a multi-seed run (computed from ``episodes`` when ``None``).
    """
    meta = dict(meta or {})
    if comparisons is None:
        comparisons = analysis.paired_comparisons(episodes)
    if seeds is None:
        seeds = analysis.seed_table(episodes)
    title = f"Evaluation {meta.get('run_id', '')}".strip()
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><meta name='viewport' "
        f"content='width=device-width'><title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
    ]
    parts.append(f"<h1>{html.escape(title)}</h1>")
    parts.append(_provenance(meta))
    facts = {
        k: meta.get(k)
        for k in (
            "created_at",
            "command",
            "n_episodes",
            "seeds",
            "budget_mode",
            "budget_ratios",
            "caps",
            "tokenizer_name",
            "curves",
            "server_url",
        )
        if meta.get(k) is not None
    }
    parts.append(
        "<p class='meta'>"
        + "<br>".join(f"<b>{html.escape(k)}</b>: {html.escape(str(v))}" for k, v in facts.items())
        + "</p>"
    )
    if meta.get("budget_note"):
        parts.append(f"<p class='note'>{html.escape(str(meta['budget_note']))}</p>")
    for note in meta.get("notes") or []:
        parts.append(f"<p class='note'>{html.escape(str(note))}</p>")
    figs = []
    if summary is not None and not summary.empty:
        parts.append("<h2>Summary</h2>")
        prov = analysis.provenance_line(meta.get("provenance"))
        if prov:
            parts.append(f"<p class='meta'>{html.escape(prov)}</p>")
        shown, blanked = analysis.model_free(summary)
        parts.append(_table(shown, _MAIN))
        if blanked:
            parts.append(f"<p class='note'>{html.escape(analysis.model_free_note(blanked))}</p>")
        parts.append(
            "<p class='meta'>Under each value: its 95% bootstrap interval over episodes "
            "(ratios such as accuracy resample each "
            "episode's counts together). accuracy: correct / questions served (unanswered "
            "= wrong); exp. accuracy: under the "
            "solver curves at the charged tokens; tokens / q: per answered question; "
            "regret: the oracle allocation's expected "
            "correct answers minus the policy's, per episode; frontier: no other row has "
            "at least its accuracy with at most "
            "its tokens per question. unasked / episode: questions never asked because the budget ran dry "
            "(forfeits; they count as wrong in accuracy, and the default reward charges each like a wrong "
            "answer): tokens / q and acc / 1k tok leave them out, so read those beside it. oracle-informed: the "
            "policy reads the difficulty label that sets the simulated solver's own success probability, which an "
            "LLM never sees (the *_blind simulated policies allocate from problem type and text length only). "
            "wall s: the policy's own time; the regret's oracle plans, solved once per episode for every policy, "
            "are timed apart (run.json oracle_s).</p>"
        )
        parts.append("<h3>Reward components (mean per episode)</h3>" + _table(summary, _COMPONENTS, intervals=False))
        parts.append("<h2>Can the policies be told apart?</h2>")
        parts.append(_comparisons(comparisons, summary))
        if meta.get("curve_sensitivity"):
            parts.append("<h2>Does the ranking survive other solver curves?</h2>")
            parts.append(
                "<pre class='meta'>"
                + html.escape(analysis.format_curve_sensitivity(meta["curve_sensitivity"]))
                + "</pre>"
            )
        parts.append("<h2>Budget and frontier</h2>")
        sweep = "budget_ratio" in summary and summary["budget_ratio"].nunique(dropna=True) > 1
        if sweep:
            figs.append(sweep_plots.accuracy_vs_budget_figure(summary))
        else:
            parts.append(
                "<p class='meta'>One budget: run <code>--budget-ratios 1,2,4,8</code> for accuracy against budget.</p>"
            )
        figs.append(sweep_plots.frontier_figure(summary))
        figs.append(sweep_plots.interval_figure(summary, "accuracy"))
    first = True
    for fig in figs:
        parts.append(
            "<div class='plot'>"
            + fig.to_html(full_html=False, include_plotlyjs=first, default_height="440px", default_width="100%")
            + "</div>"
        )
        first = False
    if seeds is not None and not seeds.empty:
        parts.append(
            "<h2>Per evaluation seed</h2><p class='meta'>How much one seed's result would "
            "have moved (reward_rank: 1 = best "
            "by mean episode reward among that seed's policies).</p>"
        )
        parts.append(
            _table(
                seeds.rename(columns={"reward_rank": "rank"}),
                [c if c != "reward_rank" else "rank" for c in seeds.columns],
                intervals=False,
            )
        )
    parts.append("<h2>Figures</h2>")
    for fig in report_figures(steps, episodes, summary):
        parts.append(
            "<div class='plot'>"
            + fig.to_html(full_html=False, include_plotlyjs=first, default_height="460px", default_width="100%")
            + "</div>"
        )
        first = False
    if meta.get("sources_used"):
        parts.append(
            "<h2>Data</h2><pre class='json meta'>" + html.escape(json.dumps(meta["sources_used"], indent=1)) + "</pre>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(
    run_dir: str | Path,
    steps: pd.DataFrame,
    episodes: pd.DataFrame,
    summary: pd.DataFrame,
    meta: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Path:
    """Write ``<run_dir>/report.html`` (keyword arguments as :func:`build_report`); returns its path."""
    path = Path(run_dir) / "report.html"
    path.write_text(build_report(steps, episodes, summary, meta, **kwargs), encoding="utf-8")
    return path

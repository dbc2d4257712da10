"""``report.html``: a self-contained evaluation report (summary table + Plotly figures).

Plotly's JavaScript is embedded once, so the file opens offline (about 4.7 MB).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Optional, Union

import pandas as pd

from workbench import plots

__all__ = ["build_report", "report_figures", "write_report"]


def report_figures(steps: pd.DataFrame, episodes: pd.DataFrame, summary: Optional[pd.DataFrame] = None) -> list:
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
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:4px 8px;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
.scroll{overflow-x:auto}.meta{font-size:13px;color:#555}.note{background:#fffbe6;border:1px solid #f0e0a0;padding:6px 10px;font-size:13px}
"""

_TABLE_FIELDS = [
    "policy", "kind", "accuracy", "expected_accuracy", "tokens_per_question", "utilisation", "run_dry_rate",
    "reward", "reward_correctness", "reward_efficiency_bonus", "reward_cost_penalty", "reward_overspend_penalty",
    "reward_episode_bonus", "acc_per_1k_tokens", "regret", "wall_s",
]


_SHORT = {
    "expected_accuracy": "exp. accuracy",
    "tokens_per_question": "tokens / q",
    "utilisation": "util.",
    "run_dry_rate": "run dry",
    "reward_correctness": "correctness",
    "reward_efficiency_bonus": "efficiency",
    "reward_cost_penalty": "cost",
    "reward_overspend_penalty": "overspend",
    "reward_episode_bonus": "episode bonus",
    "acc_per_1k_tokens": "acc / 1k tok",
    "wall_s": "wall s",
}


def build_report(steps: pd.DataFrame, episodes: pd.DataFrame, summary: pd.DataFrame, meta: Optional[dict[str, Any]] = None) -> str:
    """The report as an HTML string.

    Args:
        steps, episodes, summary: The run's frames.
        meta: ``run.json`` contents (title, seeds, budget note, notes).
    """
    meta = dict(meta or {})
    title = f"Evaluation {meta.get('run_id', '')}".strip()
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"]
    parts.append(f"<h1>{html.escape(title)}</h1>")
    facts = {k: meta.get(k) for k in ("created_at", "command", "n_episodes", "seed", "budget_mode", "tokenizer_name", "curves", "server_url") if meta.get(k) is not None}
    parts.append("<p class='meta'>" + "<br>".join(f"<b>{html.escape(k)}</b>: {html.escape(str(v))}" for k, v in facts.items()) + "</p>")
    if meta.get("budget_note"):
        parts.append(f"<p class='note'>{html.escape(str(meta['budget_note']))}</p>")
    for note in meta.get("notes") or []:
        parts.append(f"<p class='note'>{html.escape(str(note))}</p>")
    if summary is not None and not summary.empty:
        cols = [c for c in _TABLE_FIELDS if c in summary.columns]
        parts.append("<h2>Summary</h2>")
        table = summary[cols].rename(columns=lambda c: _SHORT.get(c, c))
        parts.append("<div class='scroll'>" + table.to_html(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-", border=0) + "</div>")
        parts.append(
            "<p class='meta'>accuracy: correct / questions served (unanswered = wrong); expected_accuracy: "
            "under the simulated solver's curves at the charged tokens; tokens_per_question: per answered "
            "question; regret: oracle allocation's expected correct answers minus the policy's, per episode.</p>"
        )
    parts.append("<h2>Figures</h2>")
    for i, fig in enumerate(report_figures(steps, episodes, summary)):
        parts.append(fig.to_html(full_html=False, include_plotlyjs=(i == 0), default_height="460px"))
    if meta.get("sources_used"):
        parts.append("<h2>Data</h2><pre class='meta'>" + html.escape(json.dumps(meta["sources_used"], indent=1)) + "</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(run_dir: Union[str, Path], steps: pd.DataFrame, episodes: pd.DataFrame, summary: pd.DataFrame, meta: Optional[dict[str, Any]] = None) -> Path:
    """Write ``<run_dir>/report.html``; returns its path."""
    path = Path(run_dir) / "report.html"
    path.write_text(build_report(steps, episodes, summary, meta), encoding="utf-8")
    return path

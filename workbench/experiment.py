"""The pre-registered learning experiment's report (docs/training.md, "The learning experiment").

:data:`LEARNING_EXPERIMENT` is the plan as registered before the run's first optimizer step: the steps compared, the
primary measure and the secondary ones with their predicted directions. :func:`report` reads a training run folder
(``eval_episodes.jsonl``, ``metrics.jsonl``, ``episodes.jsonl``) and returns, whatever the run shows:

- the primary measure: the paired change between the two evaluations of the same held-out episodes, its bootstrap
  95% interval and sign-flip p (:func:`workbench.held_out.change_table`), the verdict the plan fixed (decided on p at
  the plan's alpha; the interval is reported beside it, and a disagreement between the two is said), and the
  smallest change the comparison could detect with 80% power given the observed SD of the paired differences;
- the secondary measures, each with its unadjusted p and its Holm-adjusted p over the family;
- every other row of the comparison (per difficulty: tokens spent, right answers, answers cut by their turn cap,
  answers' reward, questions never asked; accuracy, ran dry, regret, reward...), labelled exploratory where the
  plan did not name it;
- the training curves: per optimizer step the mean episode reward, the share of groups dynamic sampling kept, and
  tokens per answered question by difficulty (training episodes, played at the training temperature).

If the run's last evaluation is before the plan's ``after_step`` the report compares that one and says the run is
incomplete: while the run goes on that comparison is descriptive (the plan tests ``after_step`` only); it becomes the
plan's test only if the run cannot reach ``after_step``.

    python -m workbench.experiment runs/learning-qwen0.5b-allocation            # Markdown
    python -m workbench.experiment runs/learning-qwen0.5b-allocation --json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from workbench.held_out import REGRET_NOTE, change_table, load_eval_episodes, paired_episodes
from workbench.stats import CONFIDENCE, detectable_difference, holm_adjust

__all__ = ["LEARNING_EXPERIMENT", "Measure", "Plan", "main", "markdown", "report", "training_curves"]


@dataclass(frozen=True)
class Measure:
    """A measure of :func:`workbench.held_out.change_table` (its ``metric`` and ``key``) and the direction the
    plan predicts for it (``"rise"`` or ``"fall"``)."""

    metric: str
    key: str | None
    predicted: str


@dataclass(frozen=True)
class Plan:
    """A pre-registered before/after comparison of a training run's held-out evaluations."""

    name: str
    before_step: int
    after_step: int
    primary: Measure
    secondary: tuple[Measure, ...] = field(default_factory=tuple)
    alpha: float = 1 - CONFIDENCE
    power: float = 0.8


#: The plan of docs/training.md, "The learning experiment (pre-registered)".
LEARNING_EXPERIMENT = Plan(
    name="learning-qwen0.5b-allocation",
    before_step=0,
    after_step=200,
    primary=Measure("correct", None, "rise"),
    secondary=(
        Measure("tokens_per_episode", "difficulty 1", "fall"),
        Measure("tokens_per_episode", "difficulty 3", "rise"),
        Measure("correct_per_episode", "difficulty 3", "rise"),
        Measure("cut_per_episode", "difficulty 3", "fall"),
        Measure("regret", None, "fall"),
    ),
)


def _verdict(change: float, p: float | None, predicted: str, alpha: float) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "no test"
    if p >= alpha or change == 0:
        return "no detectable change"
    went = "rise" if change > 0 else "fall"
    return "as predicted" if went == predicted else "opposite to the prediction"


def _pick(table: pd.DataFrame, m: Measure) -> dict | None:
    rows = table[(table["metric"] == m.metric) & (table["key"].isna() if m.key is None else table["key"] == m.key)]
    return rows.iloc[0].to_dict() if len(rows) else None


def _clean(x):
    return None if isinstance(x, float) and math.isnan(x) else x


def training_curves(run_dir: str | Path) -> pd.DataFrame:
    """Per optimizer step: mean episode reward and the share of groups kept by dynamic sampling
    (``metrics.jsonl``), and tokens per answered question by difficulty over the step's training episodes
    (``episodes.jsonl``; ``tokens <tier>`` columns). Empty when the run has no metrics yet."""
    run = Path(run_dir)
    rows: dict[int, dict] = {}
    path = run / "metrics.jsonl"
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                m = json.loads(line)
            except ValueError:
                continue
            rows[int(m["step"])] = {
                "step": int(m["step"]),
                "reward": m.get("reward"),
                "kept_share": m.get("dynamic_sampling/kept_share"),
                "accuracy": m.get("accuracy"),
                "ran_dry": m.get("ran_dry"),
            }
    tokens: dict[tuple[int, str], list[float]] = defaultdict(list)
    path = run / "episodes.jsonl"
    if path.is_file():
        from workbench.held_out import _answered, _tier

        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            step = int(e.get("train_step", -1)) + 1  # rollouts logged at train_step k fed optimizer step k + 1
            for s in _answered(e):
                tier = _tier(s)
                if tier is not None:
                    tokens[(step, tier)].append(float(s["tokens"]))
    for (step, tier), values in tokens.items():
        if step in rows:
            rows[step][f"tokens {tier}"] = sum(values) / len(values)
    return pd.DataFrame(sorted(rows.values(), key=lambda r: r["step"]))


def report(run_dir: str | Path, plan: Plan = LEARNING_EXPERIMENT, *, seed: int = 0) -> dict:
    """The plan's comparison on ``run_dir`` (see the module docstring) as a JSON-ready dict.

    Raises:
        ValueError: the run has no evaluation at the plan's ``before_step`` or none after it.
    """
    episodes = load_eval_episodes(run_dir)
    if plan.before_step not in episodes:
        raise ValueError(
            f"{run_dir} has no held-out evaluation at step {plan.before_step} (evaluated: {sorted(episodes)})"
        )
    later = [s for s in episodes if s > plan.before_step]
    if not later:
        raise ValueError(f"{run_dir} has no held-out evaluation after step {plan.before_step} yet")
    after = plan.after_step if plan.after_step in episodes else max(later)
    before_recs, after_recs = paired_episodes(episodes[plan.before_step], episodes[after])
    table = change_table(before_recs, after_recs, seed=seed)
    n = len(before_recs)

    def measured(m: Measure, role: str) -> dict:
        row = _pick(table, m)
        if row is None:
            return {**asdict(m), "role": role, "missing": True}
        sd_diff = row["sd_of_differences"]
        sd_diff = math.nan if sd_diff is None or (isinstance(sd_diff, float) and math.isnan(sd_diff)) else sd_diff
        return {
            **asdict(m),
            "role": role,
            "label": row["label"],
            "before": row["before"],
            "after": row["after"],
            "change": row["change"],
            "ci_low": row["change_ci_low"],
            "ci_high": row["change_ci_high"],
            "p_value": row["p_value"],
            "interval_excludes_zero": row["changed"],
            "verdict": _verdict(row["change"], row["p_value"], m.predicted, plan.alpha),
            "sd_of_differences": sd_diff,
            "detectable_change": _clean(detectable_difference(sd_diff, n, alpha=plan.alpha, power=plan.power)),
            "n": row["n"],
        }

    primary = measured(plan.primary, "primary")
    secondary = [measured(m, "secondary") for m in plan.secondary]
    ps = [s.get("p_value") for s in secondary]
    adjusted = holm_adjust([math.nan if p is None else p for p in ps])
    for s, ph in zip(secondary, adjusted):
        s["p_holm"] = _clean(float(ph))
        if not s.get("missing"):
            s["verdict_holm"] = _verdict(s["change"], s["p_holm"], s["predicted"], plan.alpha)
    named = {(plan.primary.metric, plan.primary.key)} | {(m.metric, m.key) for m in plan.secondary}
    rows = []
    for r in table.to_dict("records"):
        key = None if isinstance(r["key"], float) and math.isnan(r["key"]) else r["key"]
        rows.append(
            {**{k: _clean(v) for k, v in r.items()}, "key": key, "exploratory": (r["metric"], key) not in named}
        )
    curves = training_curves(run_dir)
    return {
        "plan": asdict(plan),
        "run": str(run_dir),
        "before_step": plan.before_step,
        "after_step": after,
        "complete": after == plan.after_step,
        "evaluated_steps": sorted(episodes),
        "episodes": n,
        "confidence": CONFIDENCE,
        "primary": primary,
        "secondary": secondary,
        "rows": rows,
        "training_curves": [{k: _clean(v) for k, v in r.items()} for r in curves.to_dict("records")],
        "notes": [REGRET_NOTE] if any(m.metric == "regret" for m in (plan.primary, *plan.secondary)) else [],
    }


def _fmt(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}g}" if abs(x) < 1e-3 and x != 0 else f"{x:.{digits}f}"


def markdown(rep: dict) -> str:
    """The report as Markdown: the primary's sentence, the pre-registered table, the exploratory rows."""
    p = rep["primary"]
    head = (
        f"**{rep['plan']['name']}**: held-out step {rep['before_step']} vs step {rep['after_step']}, "
        f"{rep['episodes']} paired episodes"
        + (
            ""
            if rep["complete"]
            else f" (incomplete: the plan compares step {rep['plan']['after_step']}; while the run goes on, an "
            "earlier evaluation is descriptive and its p-values and verdicts decide nothing; it becomes the plan's "
            "test only if the run cannot reach that step)"
        )
        + "."
    )
    lines = [head, ""]
    if p.get("missing"):
        lines.append(f"Primary measure {p['metric']} is missing from the comparison.")
    else:
        agree = p["interval_excludes_zero"] == (p["p_value"] is not None and p["p_value"] < rep["plan"]["alpha"])
        lines.append(
            f"Primary ({p['label']}): {_fmt(p['before'])} -> {_fmt(p['after'])}, change {_fmt(p['change'])} "
            f"[{_fmt(p['ci_low'])}, {_fmt(p['ci_high'])}], p = {_fmt(p['p_value'])}: **{p['verdict']}** "
            f"(predicted: {p['predicted']}); detectable with {rep['plan']['power']:.0%} power at this n and the "
            f"observed SD of the paired differences ({_fmt(p['sd_of_differences'])}): {_fmt(p['detectable_change'])}."
            + ("" if agree else " The interval and the test disagree on whether 0 is excluded.")
        )
    lines += [
        "",
        "| role | measure | predicted | before | after | change [95% interval] | p | p (Holm) | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in [p, *rep["secondary"]]:
        if r.get("missing"):
            lines.append(
                f"| {r['role']} | {r['metric']} {r['key'] or ''} | {r['predicted']} | - | - | - | - | - | missing |"
            )
            continue
        lines.append(
            f"| {r['role']} | {r['label']} | {r['predicted']} | {_fmt(r['before'])} | {_fmt(r['after'])} | "
            f"{_fmt(r['change'])} [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}] | {_fmt(r['p_value'])} | "
            f"{_fmt(r.get('p_holm'))} | {r.get('verdict_holm', r['verdict'])} |"
        )
    lines += [f"\n{note}" for note in rep.get("notes", ())]
    lines += [
        "",
        "Exploratory (not pre-registered; unadjusted p where the measure is per episode, none for pooled ratios):",
        "",
        "| measure | before | after | change [95% interval] | p |",
        "|---|---|---|---|---|",
    ]
    for r in rep["rows"]:
        if r["exploratory"]:
            lines.append(
                f"| {r['label']} | {_fmt(r['before'])} | {_fmt(r['after'])} | {_fmt(r['change'])} "
                f"[{_fmt(r['change_ci_low'])}, {_fmt(r['change_ci_high'])}] | {_fmt(r['p_value'])} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m workbench.experiment RUN_DIR [--json]``; returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m workbench.experiment", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", help="the experiment's run folder (eval_episodes.jsonl, metrics.jsonl)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    args = ap.parse_args(argv)
    try:
        rep = report(args.run_dir)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(rep, indent=2, default=str) if args.json else markdown(rep))
    return 0


if __name__ == "__main__":
    sys.exit(main())

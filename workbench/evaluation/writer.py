"""Writing an evaluation's run folder: rows, summary with intervals, paired comparisons, the
per-seed table, the solver curves, provenance and the report (schema: :mod:`workbench.runs`).

Files besides the rows: ``summary.csv`` (one row per policy and sweep condition, 95% bootstrap
intervals, ``on_frontier``), ``comparisons.csv`` (every pair of policies on their common
episodes), ``seeds.csv`` (several evaluation seeds only), ``curves.json`` (the solver curves of
the simulated policies, the oracle and the regret) and ``report.html``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from reasoning_env.config import EnvConfig
from reasoning_env.policies import SolverCurves
from reasoning_env.policies.llm import model_line
from workbench.evaluation.episodes import EpisodeResult

__all__ = ["budget_note", "provenance", "unlabelled_questions", "write_run"]


@dataclass
class EvalResult:
    """What :func:`evaluate` produced.

    Attributes:
        run_dir: The run folder (``None`` when nothing was written).
        steps, episodes, summary: The frames written to it (summary includes timing columns).
        meta: ``run.json`` contents. failed: policy name -> error message.
        comparisons: The paired comparisons (``comparisons.csv``).
    """

    run_dir: Path | None
    steps: pd.DataFrame
    episodes: pd.DataFrame
    summary: pd.DataFrame
    meta: dict
    failed: dict[str, str] = field(default_factory=dict)
    comparisons: pd.DataFrame | None = None


def budget_note(
    mode: str,
    total_budget: int | None,
    config: EnvConfig,
    tokenizers: list[str],
    episodes: pd.DataFrame,
    ratios: Sequence[float] | None = None,
    caps: Sequence[int] | None = None,
) -> str:
    """One sentence on how the episodes' budgets were set (printed and shown in the report)."""
    mean_b = float(episodes["total_budget"].mean()) if not episodes.empty else float("nan")
    mean_text = (
        f"mean budget {mean_b:.0f} tokens" if math.isfinite(mean_b) else "no episode finished, so no mean budget"
    )
    toks = ", ".join(tokenizers)
    if caps:
        return (
            f"Calibration sweep: per-question caps {', '.join(map(str, caps))} tokens, "
            f"budget cap x {config.num_questions} questions "
            f"(the cap is what limits each answer), counted with {toks}."
        )
    if total_budget is not None:
        return f"Budget: fixed at {total_budget} tokens per episode (--total-budget), counted with {toks}."
    sweep = ""
    if ratios:
        per = (
            episodes.groupby("budget_ratio")["total_budget"].mean()
            if "budget_ratio" in episodes and not episodes.empty
            else pd.Series(dtype=float)
        )
        means = ", ".join(f"x{r:g}: {per[r]:.0f}" for r in ratios if r in per.index)
        sweep = f" Budget sweep over budget_ratio {', '.join(f'{r:g}' for r in ratios)}" + (
            f" (mean budget {means} tokens)." if means else "."
        )
        mean_text = "budgets scale with the ratio"
    if mode == "config":
        return (
            f"Budget: config formula ({config.config_budget()} units: budget_ratio x num_questions x "
            f"(min_tokens + max_tokens) / 2, or total_budget), counted with {toks}.{sweep}"
        )
    return (
        "Budgets are tokenizer-native: "
        f"int({'budget_ratio' if ratios else f'{config.budget_ratio:g}'} x tokens of "
        "the episode's "
        f"question texts) in the policy tokenizer's units ({toks}); {mean_text} for "
        f"{_questions_served(config, episodes)}.{sweep}"
    )


def _questions_served(config: EnvConfig, episodes: pd.DataFrame) -> str:
    """``"10 questions"``, or, when the sources hold fewer questions than ``num_questions`` (the
    sampler then serves them all), the number the episodes had and why."""
    served = sorted(set(episodes["num_questions"].dropna().astype(int))) if "num_questions" in episodes else []
    if not served or served == [config.num_questions]:
        return f"{config.num_questions} questions"
    counts = f"{served[0]} to {served[-1]}" if len(served) > 1 else str(served[0])
    return (
        f"{counts} questions (num_questions is {config.num_questions}, but the sources hold fewer: "
        "an episode serves each question at most once)"
    )


def unlabelled_questions(steps: pd.DataFrame | None, curves: SolverCurves) -> dict[str, Any] | None:
    """The questions of a run that carry no difficulty label, or ``None`` when every one has one.

    Returns:
        ``{"unlabelled", "questions", "levels": {problem_type: default level used}}`` (distinct
        question ids).
    """
    if steps is None or steps.empty or "question_id" not in steps or "difficulty" not in steps:
        return None
    q = steps.drop_duplicates("question_id")
    missing = q[q["difficulty"].isna()]
    if missing.empty:
        return None
    types = sorted(set(missing["problem_type"].fillna("other").astype(str)))
    return {
        "unlabelled": int(len(missing)),
        "questions": int(len(q)),
        "levels": {t: int(curves.difficulty_for(t, None)) for t in types},
    }


def provenance(
    policies: Sequence[dict],
    sources_used: Sequence[dict] | None,
    curves: SolverCurves,
    *,
    unlabelled: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Where the run's numbers come from: which policies answered with the simulated solver (or a
    placeholder) and which with a model, the solver curves' origin, whether the questions are
    the builtin stand-ins or real data, and (``unlabelled``: :func:`unlabelled_questions`) whether
    questions lack a difficulty label, so that the solver uses one curve for all of them.
    ``warnings`` are the sentences the report shows first."""
    simulated, models, placeholder = [], [], []
    for p in policies:
        kind, name = p.get("kind"), p.get("name")
        if kind in ("simulated", "oracle") or (kind == "budget_baseline" and p.get("answer") == "solver"):
            simulated.append(name)
        elif kind == "llm":
            models.append(name)
        elif kind == "budget_baseline":
            placeholder.append(name)
        else:
            models.append(name)
    builtin = [s.get("source") for s in (sources_used or []) if str(s.get("used", "")).startswith("builtin")]
    real = [s.get("source") for s in (sources_used or []) if not str(s.get("used", "")).startswith("builtin")]
    # The `builtin` source itself serves them on purpose; any other source serving them fell back.
    fell_back = [s for s in builtin if s != "builtin"]
    warnings = []
    if simulated:
        warnings.append(
            f"Simulated solver: {', '.join(simulated)} answer with the simulated solver, "
            "not a model: their accuracy follows the "
            f"solver curves ({curves.provenance}). Expected accuracy and regret of every policy use those curves too."
        )
    elif models:
        warnings.append(
            f"Expected accuracy and regret use the solver curves ({curves.provenance}); accuracy is the model's own."
        )
    for p in policies:
        if p.get("kind") == "llm":
            warnings.append(f"{p.get('name')}: {model_line(p)}.")
    if placeholder:
        warnings.append(
            f"Placeholder answers: {', '.join(placeholder)} answer \\boxed{{0}} (a budget smoke test, not a solver)."
        )
    if fell_back:
        warnings.append(
            f"Builtin stand-in questions: {', '.join(map(str, fell_back))} could not be "
            "loaded and were replaced by the small builtin "
            "stand-in sets shipped with the package (not the real datasets); see sources_used."
        )
    if "builtin" in builtin:
        warnings.append(
            "Builtin questions: the `builtin` source serves the small sets written for this project and shipped "
            "with the package (in the style of MetaMathQA and NuminaMath-TIR), not a public dataset."
        )
    if unlabelled and (simulated or models):
        levels = ", ".join(f"{t} at level {lv}" for t, lv in unlabelled["levels"].items())
        warnings.append(
            f"No difficulty labels: {unlabelled['unlabelled']} of {unlabelled['questions']} questions carry no "
            "difficulty, so the simulated solver uses one curve for all of them per problem type (its family's "
            f"default level: {levels}); allocators that read the difficulty see them all alike, and expected "
            "accuracy and regret do not vary with their real difficulty. Map a difficulty field "
            "(difficulty_field in the hf/jsonl sources) to change this."
        )
    return {
        "unlabelled_questions": unlabelled,
        "simulated_policies": simulated,
        "model_policies": models,
        "placeholder_policies": placeholder,
        "real_models": {p.get("name"): model_line(p) for p in policies if p.get("kind") == "llm"},
        "curves": curves.provenance,
        "builtin_sources": builtin,
        "real_sources": real,
        "warnings": warnings,
    }


def write_run(
    run_dir: Path,
    results: Sequence[EpisodeResult],
    *,
    config: EnvConfig,
    curves: SolverCurves,
    meta: dict[str, Any],
    order: Sequence[str],
    timing: dict[str, dict[str, float]],
    failed: dict[str, str],
    report: bool,
    tokenizers: list[str],
    t_start: float,
    n_resamples: int = 2000,
):
    """Write every file of an evaluation run folder and return the
    :class:`EvalResult`.

    The written ``config.yaml`` records the run's (first) evaluation seed as ``seed``, so
    ``python -m workbench.evaluate --config <run>/config.yaml`` replays the same episodes.

    Raises:
        workbench.runs.RunFolderError: the folder cannot be written.
    """
    from workbench import analysis
    from workbench.runs import RunWriter

    seed = meta.get("seed")
    writer = RunWriter(
        run_dir, kind="evaluation", config=config.replace(seed=int(seed)) if seed is not None else config
    )
    for r in results:
        writer.add_steps(r.steps, r.step_extras)
        writer.add_episode(r.episode, r.episode_extras)
    steps = writer.steps_frame()
    episodes = writer.episodes_frame()
    summary = analysis.summary_table(episodes, steps, order=order, n_resamples=n_resamples)
    if not summary.empty:
        summary["wall_s"] = summary["policy"].map(lambda p: timing.get(p, {}).get("wall_s"))
        summary["latency_s_mean"] = summary["policy"].map(lambda p: timing.get(p, {}).get("latency_s_mean"))
    comparisons = analysis.paired_comparisons(episodes, order=order, n_resamples=n_resamples)
    by_seed = analysis.seed_table(episodes, order=order)
    meta = dict(meta)
    meta["budget_note"] = budget_note(
        meta.get("budget_mode", "tokenizer_native"),
        meta.get("total_budget"),
        config,
        tokenizers,
        episodes,
        meta.get("budget_ratios"),
        meta.get("caps"),
    )
    meta["provenance"] = provenance(
        meta.get("policies") or [],
        meta.get("sources_used"),
        curves,
        unlabelled=unlabelled_questions(steps, curves),
    )
    meta["wall_s"] = round(time.perf_counter() - t_start, 3)
    writer.meta.update(meta)
    writer.write()
    writer.write_summary(summary)
    comparisons.to_csv(run_dir / "comparisons.csv", index=False)
    if not by_seed.empty:
        by_seed.to_csv(run_dir / "seeds.csv", index=False)
    curves.save(run_dir / "curves.json")
    if report:
        from workbench.report import write_report

        write_report(
            run_dir,
            steps,
            episodes,
            summary,
            {"run_id": writer.run_id, **meta},
            comparisons=comparisons,
            seeds=by_seed,
        )
    return EvalResult(run_dir, steps, episodes, summary, meta, failed, comparisons)

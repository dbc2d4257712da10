"""The standard benchmark: ordered exams of three questions under one hard budget, the protocol of the field.

    python -m workbench.evaluate --benchmark --data-dir ../shared/data
    python -m workbench.evaluate --benchmark --data-dir ../shared/data --policies llm_local --serve-model \\
        --curves qwen2.5-coder-0.5b
    python -m workbench.benchmark runs/bench-...   # tabulate a benchmark folder's run folders again

Protocol (:data:`PROTOCOL`; docs/evaluation.md, "The benchmark"): every exam is an episode of
:data:`EXAM_QUESTIONS` questions of GSM8K test and MATH-500 (``examples/benchmark/exam3.yaml``), asked in order,
under one hard budget of 512, 1,024 or 2,048 tokens for the whole exam (the hard cap: what a question does not
leave is gone; the default reward, which the measures below do not use). Two fixed splits of exam seeds:
``dev`` and ``held-out`` (:data:`SPLITS`; seed ``i`` of a split is
:func:`~workbench.evaluation.episodes.episode_seed` of its base and ``i``, listed in
``examples/benchmark/splits.json``). Every policy plays the same exams, and two references are always played
beside it under the run's solver curves: ``oracle_allocation`` (the exact optimal split of the budget, knowing
every question's curve) and ``uniform`` (the even split: a third of the budget a question).

Measures, per split, budget and policy, each with its 95% bootstrap interval over exams (:mod:`workbench.stats`):

- ``exam_score``: right answers per exam (0-3);
- ``accuracy``: right answers / questions (a question the budget never reached counts as wrong);
- ``regret``: the oracle's expected right answers per exam minus the policy's (the project's regret: expected
  under the run's solver curves, at the tokens each policy spent);
- ``gap_closed``: the share of the gap between the even split and the oracle that the policy closes,
  ``mean(policy - even) / mean(oracle - even)`` in expected right answers, exam by exam (undefined, and said,
  where the oracle does not beat the even split on these exams).

Realised right answers would make the last two mostly noise (the oracle's edge over an even split is a few tenths
of an answer an exam). The references answer with the simulated solver, so a real model's regret and gap closed
compare its right answers (an unbiased estimate of its expectation) with the oracle's expectation *under the
curves*: they are given only when the curves are not the hand-chosen defaults (``--curves`` a set calibrated to
that model), and say so (``against``); otherwise they are null with the reason. Every
(split, budget) is a run folder of its own under the benchmark's folder, beside ``benchmark.json`` and
``benchmark.md``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from workbench import stats
from workbench.evaluation.episodes import episode_seed

__all__ = [
    "BUDGETS",
    "EXAM_QUESTIONS",
    "PROTOCOL",
    "REFERENCES",
    "SPLITS",
    "Split",
    "benchmark_config_path",
    "measures",
    "split_seeds",
    "tabulate",
    "to_markdown",
]

#: Questions per exam.
EXAM_QUESTIONS = 3
#: Hard budgets of a whole exam, in tokens of the policy's tokenizer.
BUDGETS = (512, 1024, 2048)
#: The reference policies every benchmark plays: the oracle and the even split.
REFERENCES = ("oracle_allocation", "uniform")
ORACLE, EVEN = REFERENCES


@dataclass(frozen=True)
class Split:
    """A fixed set of exams: ``n`` exam seeds derived from ``base_seed``."""

    name: str
    base_seed: int
    n: int


#: The published splits (``examples/benchmark/splits.json`` lists their seeds).
SPLITS = {"dev": Split("dev", 2601, 50), "held-out": Split("held-out", 3822, 100)}
#: One line naming the protocol, recorded in ``benchmark.json``.
PROTOCOL = (
    f"ordered exams of {EXAM_QUESTIONS} questions (GSM8K test, MATH-500) under one hard budget per exam of "
    f"{', '.join(map(str, BUDGETS))} tokens; splits "
    + ", ".join(f"{s.name} ({s.n} exams, base seed {s.base_seed})" for s in SPLITS.values())
    + "; after ROI-Reasoning (arXiv 2601.03822), with accuracy at fixed budgets as in L1 and Elastic Reasoning"
)


def benchmark_config_path() -> Path:
    """The benchmark's environment config (``examples/benchmark/exam3.yaml``)."""
    return Path(__file__).resolve().parents[1] / "examples" / "benchmark" / "exam3.yaml"


def split_seeds(split: Split) -> list[int]:
    """The exam seeds of a split, in order (what :func:`workbench.evaluation.runner.evaluate` plays)."""
    return [episode_seed(split.base_seed, i) for i in range(split.n)]


def _interval(iv: stats.Interval) -> dict[str, Any]:
    def num(x: float) -> float | None:
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 4)

    return {"value": num(iv.estimate), "ci95": [num(iv.low), num(iv.high)], "method": iv.method}


def measures(
    episodes: pd.DataFrame, *, modelled: Sequence[str], against: str | None, seed: int = 0, n_resamples: int = 2000
) -> dict[str, dict[str, Any]]:
    """Every measure of every policy of one (split, budget) run, each as ``{"value", "ci95", "method"}``.

    Exam score and accuracy count the right answers. Regret and the gap closed compare expected right answers
    under the run's curves, as the project's regret does (``basis``): the oracle's and the even split's, and a
    modelled policy's at the tokens it spent; a real model's expectation is estimated by its right answers (its
    interval carries that noise too), and only against curves that may stand for it (``against``).

    Args:
        episodes: The run's ``episodes`` frame (one row per policy and exam, with ``expected_correct`` and
            ``oracle_expected_correct``).
        modelled: Policies whose answers the solver curves model (simulated, oracle, budget baselines).
        against: The curves the references follow, when they may stand for a real model's oracle (``None``: the
            hand-chosen defaults, so a real model's regret and gap closed are left out, with the reason).
    """
    ep = episodes.sort_values(["policy", "episode"])
    by = {str(pol): g.set_index("episode") for pol, g in ep.groupby("policy")}
    out: dict[str, dict[str, Any]] = {}
    even = by.get(EVEN)
    for pol, g in by.items():
        s, q = g["num_correct"].astype(float), g["num_questions"].astype(float)
        row: dict[str, Any] = {
            "exams": len(s),
            "exam_score": _interval(stats.mean_interval(s.values, seed=seed, n_resamples=n_resamples)),
            "accuracy": _interval(stats.ratio_interval(s.values, q.values, seed=seed, n_resamples=n_resamples)),
        }
        real = pol not in modelled
        if real and against is None:
            why = (
                "not given: the references answer with the hand-chosen default curves, which do not model this "
                "model; run with --curves calibrated to it"
            )
            row["regret"] = row["gap_closed"] = {"value": None, "ci95": [None, None], "why": why}
            out[pol] = row
            continue
        mine = s if real else g["expected_correct"].astype(float)
        oracle = g["oracle_expected_correct"].astype(float)
        basis = (
            "the oracle's expected right answers under the curves minus this model's right answers"
            if real
            else "expected right answers under the curves (the oracle's minus the policy's)"
        )
        row["regret"] = _interval(stats.mean_interval((oracle - mine).values, seed=seed, n_resamples=n_resamples))
        row["regret"]["basis"] = basis
        if pol in REFERENCES:  # by definition: the even split closes none of its own gap, the oracle all of it
            row["gap_closed"] = {"value": float(pol == ORACLE), "ci95": [None, None], "why": "by definition"}
        elif even is not None:
            common = mine.index.intersection(even.index)
            base = even.loc[common, "expected_correct"].astype(float)
            try:
                row["gap_closed"] = _interval(
                    stats.share_of_gap(
                        (mine[common] - base).values,
                        (oracle[common] - base).values,
                        seed=seed,
                        n_resamples=n_resamples,
                    )
                )
            except ValueError:
                why = "the oracle does not beat the even split on these exams: the share of the gap is undefined"
                row["gap_closed"] = {"value": None, "ci95": [None, None], "why": why}
            if row["gap_closed"].get("value") is not None and row["gap_closed"]["ci95"][0] is None:
                row["gap_closed"]["why"] = "no interval: resamples of these exams leave the gap empty"
        if real:
            row["regret"]["against"] = against
            row["gap_closed"]["against"] = against
        out[pol] = row
    return out


def to_markdown(result: dict[str, Any]) -> str:
    """The benchmark's table: one line per split, budget and policy, every measure with its 95% interval."""

    def cell(m: dict[str, Any] | None, fmt: str) -> str:
        if not m or m.get("value") is None:
            return "n/a" + (f" ({m['why'].split(':')[0]})" if m and m.get("why") else "")
        lo, hi = m["ci95"]
        ci = f" [{format(lo, fmt)}, {format(hi, fmt)}]" if lo is not None else f" ({m.get('why', 'no interval')})"
        return format(m["value"], fmt) + ci

    lines = [
        "| split | budget | policy | exam score (of 3) | accuracy | regret vs oracle "
        "| share of even-to-oracle gap closed |",
        "|---|---|---|---|---|---|---|",
    ]
    for split, by_budget in result["results"].items():
        for budget, by_policy in by_budget.items():
            for pol, m in by_policy.items():
                lines.append(
                    f"| {split} | {budget} | {pol} | {cell(m['exam_score'], '.2f')} | {cell(m['accuracy'], '.3f')} "
                    f"| {cell(m.get('regret'), '.2f')} | {cell(m.get('gap_closed'), '.2f')} |"
                )
    return "\n".join(lines) + "\n"


def write(out: Path, result: dict[str, Any]) -> None:
    """``benchmark.json`` and ``benchmark.md`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "benchmark.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    (out / "benchmark.md").write_text(to_markdown(result), encoding="utf-8")


def tabulate(folder: Path, *, n_resamples: int = 2000) -> dict[str, Any]:
    """Compute ``benchmark.json`` / ``benchmark.md`` again from a benchmark folder's run folders (their
    ``episodes.parquet`` and ``run.json``): the measures are functions of the recorded exams alone."""
    result = json.loads((folder / "benchmark.json").read_text(encoding="utf-8"))
    against = result.get("against")
    for name, by_budget in result["results"].items():
        for budget in by_budget:
            run = folder / f"{name}-{budget}"
            meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
            kinds = {p["name"]: p.get("kind") for p in meta.get("policies") or []}
            modelled = [p for p, k in kinds.items() if k in MODELLED_KINDS]
            episodes = pd.read_parquet(run / "episodes.parquet")
            by_budget[budget] = measures(episodes, modelled=modelled, against=against, n_resamples=n_resamples)
    write(folder, result)
    return result


def finished_run(
    run: Path, *, split: str, budget: int, n: int, policies: Sequence[str], curves: str
) -> tuple[pd.DataFrame, dict[str, Any]] | None:
    """``(episodes, run.json)`` of a benchmark sub-run a resumed benchmark may read back instead of playing it
    again: its ``run.json`` names the same split, budget, number of exams, policies and curve set, no policy
    failed, and ``episodes.parquet`` holds every exam of every policy. ``None`` otherwise (play it again)."""
    try:
        meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
        episodes = pd.read_parquet(run / "episodes.parquet")
    except (OSError, ValueError):
        return None
    if (
        meta.get("benchmark") != {"split": split, "budget": budget}
        or meta.get("n_episodes") != n
        or meta.get("curves") != curves
        or meta.get("failed_policies")
        or sorted(p["name"] for p in meta.get("policies") or []) != sorted(policies)
    ):
        return None
    counts = episodes.groupby("policy").size() if "policy" in episodes else pd.Series(dtype=int)
    if any(int(counts.get(p, 0)) != n for p in policies):
        return None
    return episodes, meta


#: Policy kinds whose answers the solver curves model.
MODELLED_KINDS = ("simulated", "oracle", "budget_baseline")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m workbench.benchmark FOLDER``: tabulate a benchmark folder again and print its table."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m workbench.benchmark", description=main.__doc__)
    p.add_argument("folder", help="a folder written by python -m workbench.evaluate --benchmark")
    p.add_argument("--resamples", type=int, default=2000)
    args = p.parse_args(argv)
    print(to_markdown(tabulate(Path(args.folder), n_resamples=args.resamples)))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())

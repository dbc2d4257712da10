"""The standard benchmark: ordered exams of three questions under one hard budget, the protocol of the field.

    python -m workbench.evaluate --benchmark --data-dir ../shared/data
    python -m workbench.evaluate --benchmark --data-dir ../shared/data --policies llm_local --serve-model \\
        --curves qwen2.5-coder-0.5b

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
- ``regret``: the oracle's exam score minus the policy's, on the same exams (paired);
- ``gap_closed``: the share of the gap between the even split and the oracle that the policy closes,
  ``mean(policy - even) / mean(oracle - even)`` (paired; undefined, and said, where the oracle does not beat the
  even split on these exams).

The references answer with the simulated solver, so a real model's regret and gap closed compare it with the
oracle *under the curves*: they are given only when the curves are not the hand-chosen defaults (``--curves``
a set calibrated to that model), and say so (``against``); otherwise they are null with the reason. Every
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

    Args:
        episodes: The run's ``episodes`` frame (one row per policy and exam).
        modelled: Policies whose answers the solver curves model (simulated, oracle, budget baselines).
        against: The curves the references follow, when they may stand for a real model's oracle (``None``: the
            hand-chosen defaults, so a real model's regret and gap closed are left out, with the reason).
    """
    ep = episodes.sort_values(["policy", "episode"])
    score = {pol: g.set_index("episode")["num_correct"].astype(float) for pol, g in ep.groupby("policy")}
    questions = {pol: g.set_index("episode")["num_questions"].astype(float) for pol, g in ep.groupby("policy")}
    out: dict[str, dict[str, Any]] = {}
    for pol in score:
        s, q = score[pol], questions[pol]
        row: dict[str, Any] = {
            "exams": len(s),
            "exam_score": _interval(stats.mean_interval(s.values, seed=seed, n_resamples=n_resamples)),
            "accuracy": _interval(stats.ratio_interval(s.values, q.values, seed=seed, n_resamples=n_resamples)),
        }
        if pol not in modelled and against is None:
            why = (
                "not given: the references answer with the hand-chosen default curves, which do not model this "
                "model; run with --curves calibrated to it"
            )
            row["regret"] = row["gap_closed"] = {"value": None, "ci95": [None, None], "why": why}
        elif ORACLE in score and EVEN in score:
            common = s.index.intersection(score[ORACLE].index).intersection(score[EVEN].index)
            o, e, p = score[ORACLE][common].values, score[EVEN][common].values, s[common].values
            row["regret"] = _interval(stats.paired_difference(o, p, seed=seed, n_resamples=n_resamples).difference) | (
                {"against": against} if pol not in modelled else {}
            )
            if pol in REFERENCES:  # by definition: the even split closes none of its own gap, the oracle all of it
                row["gap_closed"] = {"value": float(pol == ORACLE), "ci95": [None, None], "why": "by definition"}
            else:
                try:
                    row["gap_closed"] = _interval(stats.share_of_gap(p - e, o - e, seed=seed, n_resamples=n_resamples))
                except ValueError:
                    why = "the oracle does not beat the even split on these exams: the share of the gap is undefined"
                    row["gap_closed"] = {"value": None, "ci95": [None, None], "why": why}
                if row["gap_closed"].get("value") is not None and row["gap_closed"]["ci95"][0] is None:
                    row["gap_closed"]["why"] = (
                        "no interval: too many resamples of these exams have the oracle no better than the even split"
                    )
            if pol not in modelled:
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

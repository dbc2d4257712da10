"""The shipped curve set fitted to the real model reproduces the model's measured accuracy on the sweep's
held-out questions, within their 95% intervals, and says where it comes from."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from reasoning_env.policies.curves import load_curves
from workbench.real_sweep import wilson

SWEEP = Path(__file__).resolve().parents[1] / "examples" / "calibration" / "qwen2.5-coder-0.5b"


def test_the_calibrated_set_predicts_held_out_accuracy_within_its_intervals():
    curves = load_curves("qwen2.5-coder-0.5b")
    rows = pd.read_parquet(SWEEP / "rows.parquet")
    held = rows[rows["split"] == "holdout"]
    assert held["question_id"].nunique() >= 30 and set(held["source"]) == {"gsm8k", "math500", "builtin"}
    cells = 0
    for (_source, cap), grp in held.groupby(["source", "token_cap"]):
        lo, hi = wilson(int(grp["correct"].sum()), len(grp))
        pred = sum(
            float(curves.p(int(cap), t, d if pd.notna(d) else None))
            for t, d in zip(grp["problem_type"], grp["difficulty"])
        )
        assert lo <= pred / len(grp) <= hi, (_source, cap)
        cells += 1
    assert cells == 15


def test_the_calibrated_set_names_the_model_engine_data_and_command():
    curves = load_curves("qwen2.5-coder-0.5b")
    assert "embedded:qwen2.5-coder-0.5b" in curves.provenance and "vLLM 0.32.0" in curves.provenance
    assert "python -m workbench.real_sweep" in curves.provenance
    record = json.loads((SWEEP / "sweep.json").read_text())
    assert record["holdout_within"] == "15 of 15 cells" and record["curves_source"] == curves.source


def test_a_fit_with_a_barely_identified_group_gives_an_unbounded_interval_not_an_overflow():
    """Per problem type, the sweep's 40-question groups hold a handful of right answers: a parameter's standard
    error on the log scale runs into the hundreds, whose interval bound exp() overflowed (OverflowError)."""
    from reasoning_env.policies import SolverCurves

    rows = pd.read_parquet(SWEEP / "rows.parquet")
    curves = SolverCurves.fit(rows[rows["split"] == "fit"], per="type", x="token_cap", cluster="question_id")
    assert "MATH-500" in curves.types

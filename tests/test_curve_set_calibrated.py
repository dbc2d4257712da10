"""The shipped curve set fitted to the real model: its held-out check as recorded, and where it comes from."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from reasoning_env.policies.curves import load_curves

SWEEP = Path(__file__).resolve().parents[1] / "examples" / "calibration" / "qwen2.5-coder-0.5b"


def test_the_sweep_record_holds_the_held_out_check_the_shipped_curves_give():
    """The check in sweep.json is what the shipped curves give on the held-out rows (not a per-cell count that
    could not fail: at n = 10 a cell any prediction from 0.06 to 0.28 lies inside every Wilson interval)."""
    from workbench.real_sweep import _holdout_check

    rows = pd.read_parquet(SWEEP / "rows.parquet")
    if "mode" not in rows:
        rows["mode"], rows["cell"] = "greedy", rows["source"]
    cells, check = _holdout_check(load_curves("qwen2.5-coder-0.5b"), rows[rows["split"] == "holdout"])
    record = json.loads((SWEEP / "sweep.json").read_text())
    assert len(cells) == 15 and record["holdout_cells"] == cells
    assert check == record["holdout_check"] | {"catches_low": check["catches_low"]}  # NaN != NaN
    assert "holdout_within" not in record


def test_the_calibrated_set_names_the_model_engine_data_and_command():
    curves = load_curves("qwen2.5-coder-0.5b")
    assert "embedded:qwen2.5-coder-0.5b" in curves.provenance and "vLLM 0.32.0" in curves.provenance
    assert "python -m workbench.real_sweep" in curves.provenance
    record = json.loads((SWEEP / "sweep.json").read_text())
    assert record["curves_source"] == curves.source


def test_a_fit_with_a_barely_identified_group_gives_an_unbounded_interval_not_an_overflow():
    """Per problem type, the sweep's 40-question groups hold a handful of right answers: a parameter's standard
    error on the log scale runs into the hundreds, whose interval bound exp() overflowed (OverflowError)."""
    from reasoning_env.policies import SolverCurves

    rows = pd.read_parquet(SWEEP / "rows.parquet")
    curves = SolverCurves.fit(rows[rows["split"] == "fit"], per="type", x="token_cap", cluster="question_id")
    assert "MATH-500" in curves.types

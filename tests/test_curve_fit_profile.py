"""Fits that say what they do not know: profile-likelihood intervals, unidentified parameters, no prediction past
the largest measured length, no silent default curve for a type a fitted set never measured, the held-out check's
power, and the sweep's size from a stated precision."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from reasoning_env.errors import UnmeasuredProblemTypeError
from reasoning_env.policies.curve_fit import fit_group
from reasoning_env.policies.curves import Curve, SolverCurves, load_curves
from workbench import stats
from workbench.sweep_table import grade_rows

SWEEP = Path(__file__).resolve().parents[1] / "examples" / "calibration" / "qwen2.5-coder-0.5b"


def test_a_steepness_the_caps_cannot_bound_is_unbounded_and_marked_unidentified():
    """Caps a factor 2 apart cannot say how steep the real model's curve is: its profile stays flat up to k -> inf
    (the shipped Wald interval [2.9, 6.15] claimed otherwise)."""
    fit = load_curves("qwen2.5-coder-0.5b").fits["pooled"]
    k = fit["estimates"]["k"]
    assert k["interval"] == "profile" and not k["identified"]
    assert k["high"] == math.inf and 1.3 < k["low"] < 2.0
    assert any(u.startswith("k: the profile likelihood does not bound it from above") for u in fit["unidentified"])
    assert fit["loglik_max"] > fit["loglik"]  # the shipped point sits on the ridge, below its top


def test_a_well_measured_curve_gets_bounded_profile_intervals_around_the_truth():
    truth = Curve(k=1.5, t50=60.0, growth=1.8, ceiling=0.8)
    rng = np.random.default_rng(0)
    caps = np.array([16, 32, 64, 128, 256, 512, 1024, 2048], dtype=float)
    x = np.tile(caps, 150)
    d = np.repeat(rng.integers(1, 6, 150), len(caps)).astype(float)
    y = (rng.random(len(x)) < np.array([truth.p(t, di) for t, di in zip(x, d)])).astype(float)
    _, rep = fit_group(x, d, y, group="family:MATH", prior=Curve(), x_name="token_cap")
    for name in ("k", "t50", "growth", "ceiling"):
        e = rep.estimates[name]
        assert e.identified and e.interval == "profile", name
        assert e.low <= getattr(truth, name) <= e.high, (name, e)


def test_a_fitted_curve_holds_its_value_past_the_largest_length_measured():
    curves = load_curves("qwen2.5-coder-0.5b")
    assert curves.curve_for("MATH-500").measured_up_to == 1024
    assert curves.p(2048, "MATH-500", 5) == curves.p(1024, "MATH-500", 5)
    assert curves.curve_for("MATH-500").tokens_for(0.17, 5) == math.inf


def test_a_pooled_fit_gives_a_type_it_did_not_name_the_calibrated_curve_not_a_default():
    curves = load_curves("qwen2.5-coder-0.5b")
    assert curves.curve_for("Precalculus") == curves.curve_for("GSM8K")
    assert curves.curve_for("Precalculus").ceiling < 0.2


def test_a_per_family_fit_refuses_a_family_it_never_measured():
    rng = np.random.default_rng(1)
    rows = [
        {"token_cap": cap, "problem_type": "GSM8K", "difficulty": None, "correct": bool(rng.random() < cap / 600)}
        for cap in (32, 64, 128, 256, 512)
        for _ in range(40)
    ]
    curves = SolverCurves.fit(rows, x="token_cap")
    assert curves.covers == ["GSM"]
    curves.curve_for("GSM8K")
    with pytest.raises(UnmeasuredProblemTypeError, match="not on 'reasoning_gym/chain_sum'"):
        curves.curve_for("reasoning_gym/chain_sum")
    again = SolverCurves.from_dict(json.loads(json.dumps(curves.to_dict())))
    with pytest.raises(UnmeasuredProblemTypeError):
        again.p(100, "MATH-500", 3)


def test_an_answer_the_cap_stopped_is_unfinished():
    answer = {
        "question_id": "q",
        "question": "1+1?",
        "gold": "2",
        "cell": "c",
        "source": "s",
        "problem_type": "t",
        "difficulty": 1,
        "temperature": 0.0,
        "sample": 0,
        "split": "fit",
        "ids": list(range(8)),
        "stopped": False,  # vLLM's finish_reason "length": it hit max_tokens
    }
    rows = grade_rows([answer], [4, 8], lambda ids: "x", lambda *a, **k: type("G", (), {"correct": False}))
    assert [r["finished"] for r in rows] == [False, False]
    rows = grade_rows(
        [answer | {"stopped": True}], [4, 8], lambda ids: "x", lambda *a, **k: type("G", (), {"correct": False})
    )
    assert [r["finished"] for r in rows] == [False, True]


def test_the_shipped_records_count_the_answers_cut_at_1024_tokens_as_unfinished():
    import pandas as pd

    rows = pd.read_parquet(SWEEP / "rows.parquet")
    last = rows[rows["token_cap"] == 1024]
    assert int((~last["finished"]).sum()) == 8 and (last.loc[~last["finished"], "tokens"] == 1024).all()


def test_the_held_out_check_of_the_shipped_set_states_what_it_could_catch():
    check = json.loads((SWEEP / "sweep.json").read_text())["holdout_check"]
    assert check["questions"] == 30 and check["passes"]
    assert 1.5 < check["catches_high"] < 4  # it would catch a model twice-and-a-half as good as the curve says
    assert check["catches_low"] != check["catches_low"]  # NaN: no over-prediction, however large, is caught


def test_the_held_out_check_fails_a_curve_that_under_predicts_and_passes_the_true_one():
    rng = np.random.default_rng(2)
    truth = np.tile(np.array([0.05, 0.2, 0.4, 0.5, 0.5]), (200, 1))
    u = rng.random((200, 1))
    observed = (u < truth).astype(float)  # nested verdicts: one uniform per question
    assert stats.nested_calibration_check(truth, observed, n_sims=4000)["passes"]
    low = stats.nested_calibration_check(truth / 3, observed, n_sims=4000)
    assert not low["passes"] and low["p_value"] < 0.01
    assert 1 < low["catches_high"] < 3


def test_the_sweep_size_follows_from_a_stated_precision():
    assert stats.questions_for_precision(0.05, 0.15) == 196  # research-3's table: plateau +-0.05 at 0.15
    assert stats.questions_for_precision(0.03, 0.15) == 545
    n = stats.questions_for_precision(0.1)
    assert stats.precision_of(n) <= 0.1 < stats.precision_of(n - 1)

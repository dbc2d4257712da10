"""Calibration: the fit's standard errors, goodness of fit and unidentified parameters, and the
whole protocol (cap sweep -> fit -> curves file -> --curves) recovering known curves."""

from __future__ import annotations

import json

import evalpol_fixtures as fx
import numpy as np
import pytest

from reasoning_env.config import EnvConfig
from reasoning_env.policies import Curve, SimulatedSolverPolicy, SolverCurves
from reasoning_env.policies.curve_fit import format_fit
from workbench.calibration import CALIBRATION_FILE, calibrate
from workbench.calibration import main as calibration_main

# its tests share a calibration sweep run (module fixture): one worker runs them all (pytest-xdist --dist loadgroup)
pytestmark = pytest.mark.xdist_group("test_calibration")

TRUE_MATH = Curve(k=1.5, t50=30.0, growth=1.8, ceiling=0.8)


def _rows(curve: Curve, n: int, seed: int, *, ptype="MATH-500", difficulty=True, lo=8, hi=3000, repeats=1):
    """``n`` questions with log-uniform lengths and levels 1-5, verdicts drawn from ``curve``;
    ``repeats`` copies of each row (perfectly correlated: the same verdict, the same question id)."""
    rng = np.random.default_rng(seed)
    t = np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    d = rng.integers(1, 6, n)
    y = rng.random(n) < np.array([curve.p(a, b) for a, b in zip(t, d)])
    one = [
        dict(
            tokens=float(a),
            problem_type=ptype,
            difficulty=int(b) if difficulty else None,
            correct=bool(c),
            question_id=f"q{i}",
        )
        for i, (a, b, c) in enumerate(zip(t, d, y))
    ]
    return one * repeats


def test_the_fit_reports_standard_errors_that_cover_the_truth():
    sc = SolverCurves.fit(_rows(TRUE_MATH, 6000, 3))
    est = sc.fits["family:MATH"]["estimates"]
    for name in ("k", "t50", "growth", "ceiling"):
        e = est[name]
        assert e["identified"] and e["se"] > 0 and e["low"] < e["value"] < e["high"], name
        assert abs(e["value"] - getattr(TRUE_MATH, name)) <= 3 * e["se"], (name, e)
    fit = sc.fits["family:MATH"]
    assert fit["hosmer_lemeshow"]["p_value"] > 0.01 and 0 < fit["pseudo_r2"] < 1
    assert sum(b["n"] for b in fit["calibration"]) == 6000
    assert "Hosmer-Lemeshow" in format_fit(fit) and "±" in format_fit(fit)


def test_growth_without_difficulty_labels_is_reported_not_silently_fixed():
    sc = SolverCurves.fit(_rows(TRUE_MATH, 3000, 4, ptype="GSM8K", difficulty=False))
    fit = sc.fits["family:GSM"]
    assert not fit["estimates"]["growth"]["identified"]
    assert any(u.startswith("growth:") and "no difficulty labels" in u for u in fit["unidentified"])
    assert sc.families["GSM"].growth == SolverCurves().families["GSM"].growth  # the prior's, and it says so


def test_a_ceiling_the_rows_do_not_reach_is_reported():
    sc = SolverCurves.fit(_rows(TRUE_MATH, 800, 5, hi=40))  # every length far below the plateau
    fit = sc.fits["family:MATH"]
    assert not fit["estimates"]["ceiling"]["identified"]
    assert any(u.startswith("ceiling:") for u in fit["unidentified"])


def test_correlated_rows_get_wider_cluster_robust_errors():
    rows = _rows(TRUE_MATH, 1500, 6, repeats=4)  # each question four times with the same verdict
    naive = SolverCurves.fit(rows).fits["family:MATH"]["estimates"]["k"]["se"]
    robust = SolverCurves.fit(rows, cluster="question_id").fits["family:MATH"]["estimates"]["k"]["se"]
    assert robust > 1.6 * naive  # about sqrt(4) x: four copies carry the information of one


def test_a_fit_survives_the_curves_file():
    sc = SolverCurves.fit(_rows(TRUE_MATH, 1500, 7))
    back = SolverCurves.from_dict(json.loads(json.dumps(sc.to_dict())))
    assert back.fits == sc.fits and back.families["MATH"] == sc.families["MATH"]


# ----------------------------------------------------------------------------- the protocol
#: The curves the scripted policy's correctness follows (GSM8K-like and MATH-like families).
TRUE = SolverCurves(
    families={
        "GSM": Curve(k=1.6, t50=40.0, growth=1.7, ceiling=0.85),
        "MATH": Curve(k=1.3, t50=60.0, growth=1.8, ceiling=0.8),
        "NuminaMath-TIR": Curve(k=1.3, t50=60.0, growth=1.8, ceiling=0.8),
        "other": Curve(),
    },
    source="true curves",
)
CAPS = [16, 32, 64, 128, 256, 512, 1024, 2048]
#: Stated tolerance of the protocol at 30 episodes x 8 caps (about 1,100 rows per family).
TOLERANCE = {"k": 0.30, "t50": 0.40, "growth": 0.30}


@pytest.fixture(scope="module")
def calibration_run(tmp_path_factory):
    from workbench.evaluate import evaluate

    scripted = SimulatedSolverPolicy(
        "uniform", TRUE, name="scripted"
    )  # spends the whole cap: budget = cap x questions
    out = tmp_path_factory.mktemp("calib") / "run"
    res = evaluate(
        [scripted],
        config=EnvConfig(),
        n_episodes=15,
        seeds=[1, 2],
        caps=CAPS,
        out=out,
        progress=False,
        report=False,
        curves=TRUE,
    )
    return res


@pytest.mark.slow
def test_a_cap_sweep_records_the_cap_and_limits_every_answer(calibration_run):
    s = calibration_run.steps
    assert sorted(s["token_cap"].unique()) == CAPS
    assert (s["tokens"] <= s["token_cap"] + 2).all()  # a minimal \\boxed{} answer can exceed the smallest cap
    assert calibration_run.meta["caps"] == CAPS and "Calibration sweep" in calibration_run.meta["budget_note"]
    summ = calibration_run.summary
    assert list(summ["token_cap"]) == CAPS and summ["accuracy"].is_monotonic_increasing


@pytest.mark.slow
def test_the_protocol_recovers_the_curves_a_scripted_policy_follows(calibration_run):
    """The whole protocol on a policy whose correctness follows TRUE: each identified parameter
    of the two large families lies within 3 cluster-robust standard errors of the truth and
    within TOLERANCE (relative; ceiling 0.07 absolute) at this sample size."""
    fitted = calibrate(calibration_run.run_dir, per="family")
    assert (calibration_run.run_dir / CALIBRATION_FILE).is_file()
    for fam in ("GSM", "MATH"):
        fit = fitted.fits[f"family:{fam}"]
        assert fit["n"] > 1000 and fit["x"] == "token_cap" and fit["clusters"] > 20
        for name, e in fit["estimates"].items():
            assert e["identified"], (fam, name, fit["unidentified"])
            true = getattr(TRUE.families[fam], name)
            assert abs(e["value"] - true) <= 3 * e["se"], (fam, name, e, true)
            if name in TOLERANCE:
                assert abs(e["value"] / true - 1) <= TOLERANCE[name], (fam, name, e["value"], true)
            else:
                assert abs(e["value"] - true) <= 0.07, (fam, name, e["value"], true)


@pytest.mark.slow
def test_the_curves_file_plugs_into_evaluation(calibration_run, tmp_path, capsys):
    from workbench.evaluate import main

    path = calibration_run.run_dir / CALIBRATION_FILE
    if not path.is_file():
        calibrate(calibration_run.run_dir, per="family")
    code = main(
        [
            "--n_episodes",
            "1",
            "--policies",
            "sim_greedy,oracle_allocation",
            "--curves",
            str(path),
            "--out",
            str(tmp_path / "r"),
            "--no-progress",
            "--no-report",
        ]
    )
    assert code == 0
    used = json.loads((tmp_path / "r" / "curves.json").read_text())
    assert used["source"].startswith("fit:") and "fits" in used
    assert "fit:" in capsys.readouterr().out


def test_the_calibration_command_line(calibration_run, capsys):
    assert calibration_main([str(calibration_run.run_dir), "--by", "family"]) == 0
    out = capsys.readouterr().out
    assert "family:GSM" in out and "clustered over" in out and "saved" in out


def test_calibration_refuses_a_run_that_is_not_a_cap_sweep(tmp_path, capsys):
    from workbench.evaluate import evaluate

    res = evaluate(
        [SimulatedSolverPolicy("uniform")],
        config=fx.config(),
        pools=fx.pools(),
        n_episodes=1,
        out=tmp_path / "r",
        progress=False,
        report=False,
    )
    with pytest.raises(ValueError, match="not a cap sweep"):
        calibrate(res.run_dir)
    assert calibration_main([str(res.run_dir)]) == 2 and "not a cap sweep" in capsys.readouterr().err

"""Named solver curve sets (``--curves NAME``) and the curve-sensitivity report of ``--curves A,B``."""

from __future__ import annotations

import json

import pytest

from reasoning_env.policies.curves import CURVE_SETS_DIR, SolverCurves, curve_set_names, load_curves
from workbench.evaluate import main


def test_defaults_is_a_name_and_shipped_sets_load_by_name():
    assert curve_set_names()[0] == "defaults" and load_curves("defaults").source == "defaults"
    for name in curve_set_names()[1:]:
        curves = load_curves(name)
        assert curves.source != "defaults" and (CURVE_SETS_DIR / f"{name}.json").is_file()


def test_a_curves_file_still_loads_by_path(tmp_path):
    path = tmp_path / "c.json"
    SolverCurves(source="mine").save(path)
    assert load_curves(str(path)).source == "mine"


def test_an_unknown_name_lists_the_shipped_sets():
    with pytest.raises(ValueError, match="defaults"):
        load_curves("no-such-set")


@pytest.mark.slow
def test_several_curve_sets_report_whether_the_ranking_survives(tmp_path, capsys):
    other = tmp_path / "steep.json"
    SolverCurves(source="test: every t50 x 4").save(other)
    data = json.loads(other.read_text())
    for fam in data["families"].values():
        fam["t50"] = fam["t50"] * 4
    other.write_text(json.dumps(data))
    out = tmp_path / "run"
    argv = ["--n_episodes", "2", "--policies", "sim_uniform,sim_greedy,uniform", "--curves", f"defaults,{other}"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "curve sensitivity" in printed and f"  {other}: " in printed
    report = json.loads((out / "curve_sensitivity.json").read_text())
    assert set(report["rankings"]) == {"defaults", str(other)}
    assert sorted(r["policy"] for r in report["rankings"]["defaults"]) == ["sim_greedy", "sim_uniform", "uniform"]
    verdict = report["verdicts"][str(other)]
    assert set(verdict) >= {"survives", "undetermined", "reversed", "ties_reordered", "told_apart_pairs"}
    assert (out / "curves-steep" / "summary.csv").is_file()
    assert "Does the ranking survive other solver curves?" in (out / "report.html").read_text()

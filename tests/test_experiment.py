"""The pre-registered learning experiment's report (workbench.experiment): the plan's primary and secondary
measures with intervals, p-values, Holm and verdicts, the rest labelled exploratory, and the training curves."""

from __future__ import annotations

import json

import pytest
from test_app_support import eval_episode

from workbench.experiment import LEARNING_EXPERIMENT, Measure, Plan, main, report, training_curves
from workbench.held_out import REGRET_NOTE


def _episode(i: int, step: int, right: int, easy_tokens: int, *, dry: bool) -> dict:
    """4 questions (2 easy, difficulty 1; 2 hard, difficulty 3); the easy two asked first, ``right`` of them right."""
    asked = 2 if dry else 4
    rec = eval_episode(i, step, [True] * asked, [easy_tokens] * asked, ran_dry=dry)
    rec.update(num_questions=4, num_correct=right, reward=0.1 * right)
    rec["questions"] = [{"problem_type": "t", "difficulty": d} for d in (1, 1, 3, 3)]
    rec["steps"] = [
        {"step": j, "tokens": easy_tokens if d == 1 else 150, "correct": j < right, "difficulty": d, "reward": 0.1}
        for j, d in enumerate((1, 1, 3, 3)[:asked])
    ]
    rec["turn_caps"], rec["turn_tokens"] = [240] * asked, [100] * asked
    return rec


def _run(tmp_path, *, after_step=200, gain=True, n=40):
    rows = []
    for i in range(n):
        rows.append(_episode(i, 0, 1, 200, dry=True))
        rows.append(_episode(i, after_step, 3 if gain and i % 2 == 0 else 1, 90, dry=not gain))
    (tmp_path / "eval_episodes.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    metrics = [{"step": s, "reward": 0.01 * s, "dynamic_sampling/kept_share": 0.75} for s in (1, 2)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(m) for m in metrics) + "\n")
    train = [{**_episode(0, s, 1, 100 + s, dry=False), "train_step": s} for s in (0, 1)]
    (tmp_path / "episodes.jsonl").write_text("\n".join(json.dumps(e) for e in train) + "\n")
    return tmp_path


def test_the_plan_is_the_registered_one():
    assert (LEARNING_EXPERIMENT.before_step, LEARNING_EXPERIMENT.after_step) == (0, 200)
    assert LEARNING_EXPERIMENT.primary == Measure("correct", None, "rise")
    assert len(LEARNING_EXPERIMENT.secondary) == 5 and LEARNING_EXPERIMENT.alpha == pytest.approx(0.05)
    assert Measure("tokens_per_episode", "difficulty 1", "fall") in LEARNING_EXPERIMENT.secondary


def test_a_rise_in_right_answers_is_reported_as_predicted_with_its_interval_and_p(tmp_path):
    rep = report(_run(tmp_path))
    p = rep["primary"]
    assert rep["complete"] and rep["episodes"] == 40
    assert p["before"] == 1.0 and p["after"] == 2.0 and p["change"] == 1.0
    assert p["ci_low"] > 0 and p["p_value"] < 0.001 and p["verdict"] == "as predicted"
    assert p["sd_of_differences"] == pytest.approx(1.0127, abs=1e-3) and p["detectable_change"] > 0
    easy = next(s for s in rep["secondary"] if s["key"] == "difficulty 1")
    assert easy["change"] == pytest.approx(-220.0) and easy["verdict_holm"] == "as predicted"
    assert all(s["p_holm"] >= s["p_value"] for s in rep["secondary"])
    exploratory = {(r["metric"], r["key"]) for r in rep["rows"] if r["exploratory"]}
    assert ("accuracy", None) in exploratory and ("correct", None) not in exploratory


def test_no_change_is_a_null_result_with_the_detectable_change(tmp_path):
    rep = report(_run(tmp_path, gain=False))
    assert rep["primary"]["verdict"] == "no detectable change" and rep["primary"]["change"] == 0


def test_a_run_stopped_early_compares_its_last_evaluation_and_says_it_is_incomplete(tmp_path, capsys):
    run = _run(tmp_path, after_step=50)
    rep = report(run)
    assert rep["after_step"] == 50 and not rep["complete"]
    assert main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "incomplete" in out and "**as predicted**" in out and "Exploratory" in out
    # an evaluation before the plan's step is not the plan's test while the run goes on
    assert "descriptive" in out and "decide nothing" in out


def test_a_run_without_a_later_evaluation_is_refused_with_the_reason(tmp_path, capsys):
    rows = [_episode(i, 0, 1, 200, dry=True) for i in range(4)]
    (tmp_path / "eval_episodes.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert main([str(tmp_path)]) == 2
    assert "no held-out evaluation after step 0" in capsys.readouterr().err
    with pytest.raises(ValueError, match="no held-out evaluation at step 5"):
        report(tmp_path, Plan("x", 5, 10, Measure("correct", None, "rise")))


def test_training_curves_give_reward_kept_share_and_tokens_by_difficulty_per_step(tmp_path):
    curves = training_curves(_run(tmp_path)).set_index("step")
    assert curves.loc[1, "reward"] == pytest.approx(0.01) and curves.loc[2, "kept_share"] == 0.75
    # the rollouts logged at train_step 0 fed optimizer step 1: easy tokens 100, hard 150
    assert curves.loc[1, "tokens difficulty 1"] == 100 and curves.loc[2, "tokens difficulty 3"] == 150


def test_regret_is_reported_with_what_it_assumes_of_the_curves(tmp_path, capsys):
    """Regret is under the untrained model's curves: the report says so beside it (the step-50 evaluation showed more
    right answers with fewer tokens and more regret)."""
    run = _run(tmp_path)
    assert report(run)["notes"] == [REGRET_NOTE]
    assert main([str(run)]) == 0
    assert "fitted to the untrained model" in capsys.readouterr().out
    plain = report(run, Plan("no regret", 0, 200, Measure("correct", None, "rise")))
    assert plain["notes"] == []

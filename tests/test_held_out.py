"""A training run's held-out evaluations compared before vs after, episode by episode (workbench.held_out)."""

from __future__ import annotations

import json

import pytest
from test_app_support import eval_episode as _episode
from test_app_support import write_held_out

from workbench.held_out import (
    allocation_by_difficulty,
    change_table,
    load_eval_episodes,
    main,
    power_table,
    run_allocation,
    step_timing,
)
from workbench.stats import paired_ratio_difference


def _run(folder):
    return write_held_out(folder)


def test_episodes_are_read_per_step_in_episode_order(tmp_path):
    episodes = load_eval_episodes(_run(tmp_path))
    assert sorted(episodes) == [0, 30] and [r["episode"] for r in episodes[30]] == list(range(12))


def test_the_change_is_paired_and_says_whether_its_interval_excludes_zero(tmp_path):
    episodes = load_eval_episodes(_run(tmp_path))
    table = change_table(episodes[0], episodes[30]).set_index(["metric", "key"], drop=False)
    acc = table.loc[("accuracy", None)]
    assert acc["before"] == 0 and acc["after"] == pytest.approx(4 / 24) and acc["changed"]
    assert acc["change_ci_low"] > 0 and acc["n"] == 12
    dry = table.loc[("ran_dry", None)]
    assert dry["change"] == -1.0 and dry["changed"] and dry["p_value"] < 0.001  # 12 of 12 pairs, exact test
    tokens = table.loc[("tokens_per_question", None)]
    assert tokens["before"] == 300 and tokens["change"] < 0 and tokens["changed"]
    assert table.loc[("tokens_by_difficulty", "1")]["change"] == -180
    assert table.loc[("tokens_by_type", "MATH-500")]["after"] == 120
    # a key answered on one side only (GSM8K: never reached before) has no ratio to compare
    assert ("tokens_by_type", "GSM8K") not in table.index and ("tokens_by_difficulty", "2") not in table.index
    assert table.loc[("regret", None)]["change"] == pytest.approx(-0.3)


def test_questions_left_unasked_by_running_dry_are_counted_apart_from_context_forfeits(tmp_path):
    episodes = load_eval_episodes(_run(tmp_path))  # before: one answer, then the budget ran dry; after: both asked
    table = change_table(episodes[0], episodes[30]).set_index("metric")
    unasked = table.loc["unasked"]
    assert unasked["label"] == "questions unasked (ran dry) per episode"
    assert (unasked["before"], unasked["after"], unasked["change"]) == (1.0, 0.0, -1.0)
    assert unasked["change_ci_low"] == unasked["change_ci_high"] == -1.0 and unasked["changed"]
    forfeits = table.loc["forfeited"]
    assert forfeits["label"] == "context forfeits per episode (context full)"
    assert (forfeits["before"], forfeits["after"]) == (0.0, 0.0) and not forfeits["changed"]


def test_a_context_forfeit_is_not_a_question_left_unasked():
    # one answer, then the context was full: the second question was forfeited (answered empty), not left unasked
    before = [_episode(i, 0, [False], [300], forfeited=1) for i in range(4)]
    after = [_episode(i, 5, [False, True], [100, 80]) for i in range(4)]
    table = change_table(before, after).set_index("metric")
    assert table.loc["forfeited", "before"] == 1.0 and table.loc["forfeited", "change"] == -1.0
    assert table.loc["unasked", "before"] == 0.0 and table.loc["unasked", "change"] == 0.0


def test_no_change_is_not_reported_as_one(tmp_path):
    episodes = load_eval_episodes(_run(tmp_path))
    table = change_table(episodes[30], episodes[30]).set_index("metric")
    assert not table["changed"].any() and (table["change"].fillna(0) == 0).all()


def test_evaluations_of_different_episodes_cannot_be_paired():
    with pytest.raises(ValueError, match="share no held-out episode"):
        change_table([_episode(0, 0, [True], [10])], [_episode(1, 5, [True], [10])])


def test_paired_ratio_difference_resamples_episodes_jointly():
    # the same pooled ratio on both sides: difference 0 with a degenerate interval around it
    iv = paired_ratio_difference([1, 2, 0, 1], [2, 2, 2, 2], [1, 2, 0, 1], [2, 2, 2, 2])
    assert iv.estimate == 0 and iv.low <= 0 <= iv.high
    with pytest.raises(ValueError, match="positive total"):
        paired_ratio_difference([1], [0], [1], [1])


def test_step_timing_reads_the_trainers_timing_rows(tmp_path):
    rows = [
        {"step": 1, "timing/step_s": 100.0, "timing/generation_s": 50.0, "timing/logprobs_s": 10.0,
         "timing/backward_s": 30.0, "timing/weight_handoff_s": 2.0, "tokens_spent": 1000},
        {"step": 2, "timing/step_s": 80.0, "timing/generation_s": 40.0, "timing/logprobs_s": 10.0,
         "timing/backward_s": 20.0, "timing/weight_handoff_s": 2.0, "tokens_spent": 900},
    ]  # fmt: skip
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    t = step_timing(tmp_path)
    assert t["steps"] == 2 and t["step_s"] == 90 and t["steps_per_hour"] == 40
    assert t["seconds"] == {"generation": 45, "weight_handoff": 2, "logprobs": 10, "backward": 25, "other": 8}
    assert t["generation_tokens_per_s"] == pytest.approx(950 / 45, abs=0.01)
    assert step_timing(tmp_path / "nowhere") is None


def test_the_cli_prints_the_table_and_refuses_a_run_without_two_evaluations(tmp_path, capsys):
    assert main([str(_run(tmp_path / "a" if (tmp_path / "a").mkdir() is None else tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "| accuracy (correct / questions) |" in out and "step 0" in out and "step 30" in out
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([str(empty)]) == 2 and "--eval_every" in capsys.readouterr().err
    assert main([str(tmp_path / "a"), "--after", "7"]) == 2 and "evaluated: [0, 30]" in capsys.readouterr().err


def test_the_grpo_step_bench_reads_a_runs_step_times(tmp_path, capsys):
    from training.bench import main as bench

    row = {"timing/step_s": 100.0, "timing/generation_s": 60.0, "timing/backward_s": 30.0}
    rows = [{"step": s, **row} for s in (1, 2)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "run.json").write_text(json.dumps({"model": "m", "backend": "vllm_server", "num_generations": 4}))
    assert bench(["grpo_step", "--from-run", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["steps_per_hour"] == 36 and out["seconds"]["other"] == 10 and out["model"] == "m"
    assert len(out["load_average"]) == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert bench(["grpo_step", "--from-run", str(empty)]) == 2 and "metrics.jsonl" in capsys.readouterr().err


def test_a_runs_records_are_exported_without_its_weights(tmp_path, capsys):
    from workbench.export_run import main as export

    src = write_held_out(tmp_path / "run")
    (src / "run.json").write_text("{}")
    (src / "metrics.jsonl").write_text("{}\n")
    for heavy in ("checkpoint-3", "final", "lora-handoff/policy-step-3"):
        (src / heavy).mkdir(parents=True)
        (src / heavy / "adapter_model.safetensors").write_bytes(b"w" * 100)
    (src / "weights.safetensors").write_bytes(b"w")
    (src / "vllm.log").write_text("log")
    dst = tmp_path / "example"
    assert export([str(src), str(dst)]) == 0
    assert sorted(p.name for p in dst.iterdir()) == ["eval_episodes.jsonl", "metrics.jsonl", "run.json"]
    assert export([str(src), str(dst)]) == 2 and "not empty" in capsys.readouterr().err  # never half overwritten
    assert export([str(tmp_path / "nowhere"), str(tmp_path / "x")]) == 2 and "no run.json" in capsys.readouterr().err


def test_a_run_still_training_refreshes_its_own_export_and_no_other(tmp_path, capsys):
    from workbench.export_run import main as export

    src = write_held_out(tmp_path / "run")
    (src / "run.json").write_text('{"run_id": "long"}')
    (src / "metrics.jsonl").write_text('{"step": 1}\n')
    dst = tmp_path / "example"
    assert export([str(src), str(dst)]) == 0
    (dst / "README.md").write_text("in progress")
    (src / "README.md").write_text("the trainer's model card")
    (src / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
    assert export([str(src), str(dst), "--update"]) == 0
    assert (dst / "metrics.jsonl").read_text().count("step") == 2 and (dst / "README.md").read_text() == "in progress"
    other = write_held_out(tmp_path / "other")
    (other / "run.json").write_text('{"run_id": "another"}')
    assert export([str(other), str(dst), "--update"]) == 2 and "not an export of" in capsys.readouterr().err


def test_the_allocation_by_difficulty_pairs_the_first_and_last_evaluations_with_intervals(tmp_path):
    frame = run_allocation(_run(tmp_path), "mine").set_index(["tier", "side"])
    assert set(frame["run"]) == {"mine"} and set(frame["before_step"]) == {0} and set(frame["after_step"]) == {30}
    before, after = frame.loc[("difficulty 1", "before")], frame.loc[("difficulty 1", "after")]
    assert (before["tokens"], after["tokens"]) == (300, 120) and before["answered"] == after["answered"] == 12
    assert after["tokens_change"] == -180 and after["tokens_change_ci_high"] == -180  # every pair fell by 180
    assert after["accuracy"] == pytest.approx(4 / 12) and after["accuracy_ci_low"] < 4 / 12 < after["accuracy_ci_high"]
    assert frame.loc[("difficulty 2", "after"), "problem_types"] == "GSM8K"
    assert ("difficulty 2", "before") not in frame.index  # never reached before: no row, no change
    assert run_allocation(tmp_path / "nowhere") is None


def test_a_question_without_a_level_is_its_own_tier_after_the_levels():
    before = [_episode(i, 0, [True, False], [50, 200]) for i in range(3)]
    for rec in before:
        rec["steps"][1].pop("difficulty")  # GSM8K: no level
    frame = allocation_by_difficulty(before, before)
    assert list(dict.fromkeys(frame["tier"])) == ["difficulty 1", "GSM8K"]
    assert not frame["tokens_change"].dropna().any()  # the same evaluation twice: no change


def test_right_answers_per_episode_is_compared_with_a_sign_flip_p_value(tmp_path):
    table = change_table(*load_eval_episodes(_run(tmp_path)).values()).set_index("metric")
    right = table.loc["correct"]
    assert right["label"] == "right answers per episode" and (right["before"], right["after"]) == (0.0, 4 / 12)
    assert right["p_value"] is not None and 0 < right["p_value"] < 0.2


def test_the_power_table_turns_one_evaluations_sds_into_detectable_paired_changes():
    # right answers 0, 1, 2 repeating over 30 episodes: SD 0.830; 192 planned pairs, rho 0 -> sd_d = 0.830 * sqrt 2
    records = [_episode(i, 0, [i % 3 >= 1, i % 3 == 2], [100, 200]) for i in range(30)]
    table = power_table(records, episodes=192).set_index(["metric", "key"])
    right = table.loc[("correct", None)]
    assert right["mean"] == pytest.approx(1.0) and right["sd"] == pytest.approx(0.8305, abs=1e-4)
    z = 1.959964 + 0.841621
    assert right["mde_rho_0"] == pytest.approx(z * 0.8305 * 2**0.5 / 192**0.5, rel=1e-3)
    assert right["mde_rho_0.5"] == pytest.approx(right["mde_rho_0"] / 2**0.5)
    # per difficulty tier: tokens spent per episode (every episode spent 100 on its difficulty-1 question)
    assert table.loc[("tokens_per_episode", "difficulty 1")]["sd"] == 0.0
    assert table.loc[("correct_per_episode", "difficulty 2")]["mean"] == pytest.approx(1 / 3)


def test_the_cli_prints_the_power_table_of_a_step_and_refuses_a_step_not_evaluated(tmp_path, capsys):
    run = _run(tmp_path)
    assert main([str(run), "--power", "0", "--episodes", "192"]) == 0
    out = capsys.readouterr().out
    assert "over 192 held-out episodes" in out and "| right answers per episode | 0.000 |" in out
    assert main([str(run), "--power", "5"]) == 2
    assert "--eval_only" in capsys.readouterr().err


def test_each_difficulty_tier_has_tokens_and_right_answers_per_episode_with_p_values(tmp_path):
    table = change_table(*load_eval_episodes(_run(tmp_path)).values()).set_index(["metric", "key"])
    easy = table.loc[("tokens_per_episode", "difficulty 1")]  # 300 -> 120 on the first question of every episode
    assert (easy["before"], easy["after"], easy["change"]) == (300.0, 120.0, -180.0) and easy["p_value"] < 0.001
    hard = table.loc[("tokens_per_episode", "difficulty 2")]  # never asked before: 0 tokens, then 100 + i
    assert hard["before"] == 0.0 and hard["after"] == pytest.approx(105.5)
    right = table.loc[("correct_per_episode", "difficulty 1")]
    assert right["after"] == pytest.approx(4 / 12) and right["p_value"] is not None


def _tiered(i: int, step: int, *, answered: int, cut_first: bool, reward: float) -> dict:
    """An episode of 2 easy (difficulty 1) then 2 hard (difficulty 3) questions with its first ``answered`` asked."""
    rec = _episode(i, step, [True] * answered, [100] * answered)
    rec["num_questions"] = 4
    rec["questions"] = [{"problem_type": "sum", "difficulty": d} for d in (1, 1, 3, 3)]
    rec["steps"] = [
        {"step": j, "tokens": 100, "correct": True, "difficulty": d, "problem_type": "sum", "reward": reward}
        for j, d in enumerate((1, 1, 3, 3)[:answered])
    ]
    rec["turn_caps"] = [100 if cut_first else 240] + [240] * (answered - 1)
    rec["turn_tokens"] = [100] * answered
    rec["reward"] = reward * answered
    return rec


def test_each_difficulty_tier_reports_cut_answers_rewards_and_unasked_questions_per_episode():
    before = [_tiered(i, 0, answered=2, cut_first=True, reward=0.5) for i in range(6)]  # ran dry after the easy two
    after = [_tiered(i, 9, answered=4, cut_first=False, reward=0.5) for i in range(6)]
    table = change_table(before, after).set_index(["metric", "key"])
    cut = table.loc[("cut_per_episode", "difficulty 1")]
    assert (cut["before"], cut["after"]) == (1.0, 0.0)
    hard_unasked = table.loc[("unasked_per_episode", "difficulty 3")]
    assert (hard_unasked["before"], hard_unasked["after"], hard_unasked["change"]) == (2.0, 0.0, -2.0)
    assert table.loc[("unasked_per_episode", "difficulty 1")]["before"] == 0.0
    assert table.loc[("reward_per_episode", "difficulty 3")]["after"] == 1.0
    assert table.loc[("reward", None)]["change"] == pytest.approx(1.0)


def test_records_without_their_question_list_have_no_unasked_per_difficulty():
    recs = [_tiered(i, 0, answered=2, cut_first=False, reward=0.1) for i in range(4)]
    for r in recs:
        del r["questions"]
    table = change_table(recs, recs).set_index(["metric", "key"])
    assert ("unasked_per_episode", "difficulty 1") not in table.index
    assert ("tokens_per_episode", "difficulty 1") in table.index


def test_the_before_after_table_explains_its_columns_and_why_a_p_is_missing(tmp_path):
    from workbench.held_out import REGRET_NOTE, TABLE_NOTES, run_change_markdown

    text = run_change_markdown(_run(tmp_path))
    assert TABLE_NOTES in text
    assert REGRET_NOTE in text  # regret rests on the run's curves: said beside the table that shows it
    for column in ("*step N*", "*change*", "*changed*", "*p*", 'A *p* of "-" is no test'):
        assert column in TABLE_NOTES
    rows = [line for line in text.splitlines() if line.startswith("| accuracy (correct / questions)")]
    assert rows and rows[0].split("|")[-3].strip() == "-"  # a pooled ratio: the note says why


def test_the_runs_summary_explains_every_column_it_shows():
    from workbench.app.runs_tab import COLUMN_NOTES, HEADERS

    shown = {"accuracy", "expected_accuracy", "unasked_per_episode", "tokens_per_question", "utilisation"}
    shown |= {"run_dry_rate", "reward", "acc_per_1k_tokens", "regret", "on_frontier", "mean_total_budget"}
    for key in shown:
        name = HEADERS[key].split(" [")[0].split(" (")[0]
        assert f"*{name}*" in COLUMN_NOTES, name

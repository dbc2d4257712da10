"""A training run stopped after a checkpoint continues when started again with the same output folder:
the optimizer step count, the logs and the run folder's rows carry on without duplicates, and the held-out
evaluations already written are not played again."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from training.grpo_train import latest_checkpoint, main

pytestmark = pytest.mark.slow


def _metrics_steps(out):
    return [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]


def _evaluated_steps(out):
    rows = [json.loads(line) for line in (out / "evaluations.jsonl").read_text().splitlines() if line.strip()]
    return sorted({r["step"] for r in rows})


def test_a_run_started_again_in_its_folder_continues_and_fresh_starts_over(tmp_path):
    out = tmp_path / "run"
    base = ["--smoke", "--output_dir", str(out), "--save_steps", "1", "--logging_steps", "1"]
    base += ["--eval_every", "5", "--eval_seeds", "2"]
    assert main([*base, "--max_steps", "1"]) == 0  # stands for a run stopped after its first checkpoint
    assert latest_checkpoint(out)[1] == 1 and _metrics_steps(out) == [1]
    assert _evaluated_steps(out) == [0, 1]  # before the first step and at the end
    first = pd.read_parquet(out / "episodes.parquet")
    assert main([*base, "--max_steps", "2"]) == 0
    state = json.loads((latest_checkpoint(out)[0] / "trainer_state.json").read_text())
    assert state["global_step"] == 2 and latest_checkpoint(out)[1] == 2
    assert _metrics_steps(out) == [1, 2]  # step 1 kept, not logged twice
    # the resumed process does not evaluate at its start (step 1 was evaluated; step 0 is not "before" it)
    assert _evaluated_steps(out) == [0, 1, 2]
    eval_rows = [json.loads(line) for line in (out / "evaluations.jsonl").read_text().splitlines()]
    assert len([r for r in eval_rows if r["step"] == 1]) == len([r for r in eval_rows if r["step"] == 2])
    episodes = pd.read_parquet(out / "episodes.parquet")
    assert sorted(set(episodes["train_step"])) == [0, 1] and len(episodes) == 2 * len(first)
    run = json.loads((out / "run.json").read_text())
    assert run["resumed"][0]["from_step"] == 1 and run["n_episodes"] == len(episodes)
    assert "--max_steps 1" in run["first_command"] and "--max_steps 2" in run["resumed"][0]["command"]
    # each process records the source revision it ran (a run spanning sittings may span commits)
    assert len(run["code"]["commit"]) == 40 and run["resumed"][0]["code"] == run["code"]
    assert run["resumed"][0]["at"].endswith("Z")
    # a second resume keeps the first one on record
    assert main([*base, "--max_steps", "3"]) == 0
    run = json.loads((out / "run.json").read_text())
    assert [r["from_step"] for r in run["resumed"]] == [1, 2] and "--max_steps 1" in run["first_command"]
    # --fresh starts over in the same folder (the checkpoints and logs of the earlier run are removed)
    assert main([*base, "--max_steps", "1", "--fresh"]) == 0
    fresh = json.loads((out / "run.json").read_text())
    assert _metrics_steps(out) == [1] and "resumed" not in fresh and "first_command" not in fresh
    assert latest_checkpoint(out)[1] == 1


def _eval_episode_steps(out):
    lines = (out / "eval_episodes.jsonl").read_text().splitlines()
    return [json.loads(line)["train_step"] for line in lines if line.strip()]


def test_eval_only_measures_step_0_and_the_run_that_follows_keeps_it(tmp_path):
    """A pre-registered experiment measures the untrained policy first (--eval_only), commits its plan,
    then trains in the same folder without playing step 0 again; a changed setting plays it again."""
    out = tmp_path / "run"
    base = ["--smoke", "--output_dir", str(out), "--save_steps", "1", "--eval_every", "5", "--eval_seeds", "2"]
    assert main([*base, "--max_steps", "1", "--eval_only"]) == 0
    assert _evaluated_steps(out) == [0] and latest_checkpoint(out) is None and not (out / "metrics.jsonl").exists()
    baseline = (out / "eval_episodes.jsonl").read_text()
    record = json.loads((out / "run.json").read_text())["step0_evaluation"]
    assert record["eval_only"] and "--eval_only" in record["command"] and record["fingerprint"]["eval_seeds"]
    assert main([*base, "--max_steps", "1"]) == 0
    assert _evaluated_steps(out) == [0, 1] and _eval_episode_steps(out).count(0) == 2  # step 0 not played again
    assert (out / "eval_episodes.jsonl").read_text().startswith(baseline)
    run = json.loads((out / "run.json").read_text())
    assert run["step0_evaluation"]["at"] == record["at"] and "--eval_only" not in run["step0_evaluation"]["kept_by"]
    # a resume keeps the record too
    assert main([*base, "--max_steps", "2"]) == 0
    assert json.loads((out / "run.json").read_text())["step0_evaluation"]["at"] == record["at"]


def test_eval_only_is_not_kept_when_a_setting_it_depends_on_changed(tmp_path):
    out = tmp_path / "run"
    base = ["--smoke", "--output_dir", str(out), "--eval_every", "5"]
    assert main([*base, "--eval_seeds", "2", "--max_steps", "1", "--eval_only"]) == 0
    assert main([*base, "--eval_seeds", "3", "--max_steps", "1"]) == 0
    assert _eval_episode_steps(out).count(0) == 3  # the 2-seed baseline was dropped and step 0 played on 3 seeds
    assert "step0_evaluation" not in json.loads((out / "run.json").read_text())


def test_eval_only_needs_held_out_evaluation(tmp_path, capsys):
    assert main(["--smoke", "--output_dir", str(tmp_path / "run"), "--eval_only"]) == 2
    assert "--eval_every" in capsys.readouterr().err


def test_held_out_episodes_can_come_from_their_own_config(tmp_path):
    """--eval_config: the held-out episodes draw their questions from another config (other generator seeds)."""
    held = tmp_path / "held_out.yaml"
    held.write_text(
        "sources:\n  - name: reasoning_gym\n    options: {datasets: [chain_sum], size: 20, seed: 1000000}\n"
        "mix: {reasoning_gym/chain_sum: 1.0}\n"
    )
    out = tmp_path / "run"
    args = ["--smoke", "--output_dir", str(out), "--eval_every", "5", "--eval_seeds", "2", "--eval_only"]
    assert main([*args, "--eval_config", str(held)]) == 0
    lines = (out / "eval_episodes.jsonl").read_text().splitlines()
    ids = [s["question_id"] for line in lines for s in json.loads(line)["steps"] if s.get("question_id")]
    assert ids and all(i.startswith("reasoning_gym/chain_sum/1000000/") for i in ids)
    run = json.loads((out / "run.json").read_text())
    assert run["eval_config"] == str(held) and run["step0_evaluation"]["fingerprint"]["config"]["num_questions"] == 3

"""GRPO training through TRL's GRPOTrainer: the CPU smoke path, the rollout_func contract, the
run folder, and the command line's errors."""

from __future__ import annotations

import contextlib
import json
import math
import time

import pytest

from training.grpo_train import build_trainer, main, parse_args
from training.run_folder import METRIC_KEYS, metrics_row
from training.trl_rollout import (
    assign_groups,
    build_episode_dataset,
    environment_reward,
    episode_prompt,
    parse_episode_prompt,
)

# its tests share the CPU GRPO smoke run (module fixture, ~20 s): one worker runs them all (pytest-xdist --dist
# loadgroup)
pytestmark = pytest.mark.xdist_group("test_training_grpo")


# ----------------------------------------------------------------------------- units
def test_episode_prompts_round_trip():
    assert parse_episode_prompt(episode_prompt(123)) == 123
    assert parse_episode_prompt([{"role": "user", "content": episode_prompt(7)}]) == 7
    with pytest.raises(ValueError, match="build_episode_dataset"):
        parse_episode_prompt("What is 2+2?")
    ds = build_episode_dataset(5, base_seed=3)
    assert len(set(ds["seed"])) == 5
    assert [parse_episode_prompt(p) for p in ds["prompt"]] == ds["seed"]
    assert build_episode_dataset(5, base_seed=3)["seed"] == ds["seed"]


def test_assign_groups_global_positions():
    specs = assign_groups([5, 5, 9, 9], num_generations=2, offset=0, first_group=10)
    assert [(s.group, s.member, s.episode) for s in specs] == [(10, 0, 10), (10, 1, 10), (11, 0, 11), (11, 1, 11)]
    # second process of two: its slice starts at global position 4
    specs = assign_groups([7, 7], num_generations=4, offset=2, first_group=0)
    assert [(s.group, s.member) for s in specs] == [(0, 2), (0, 3)]
    with pytest.raises(ValueError, match="misaligned"):
        assign_groups([5, 6], num_generations=2, offset=0, first_group=0)


def _stats(correct, questions, answered, forfeited, tokens, budget, ran_dry, turns, cap_hits, steps=()):
    return {
        "num_correct": correct,
        "num_questions": questions,
        "num_answered": answered,
        "forfeited": forfeited,
        "answered_tokens": tokens,
        "tokens_spent": tokens,
        "total_budget": budget,
        "ran_dry": ran_dry,
        "num_turns": turns,
        "cap_hits": cap_hits,
        "steps": list(steps),
    }


def test_environment_reward_returns_episode_rewards_and_logs_batch_metrics():
    logged = {}
    stats = [
        _stats(3, 3, 3, 0, 30, 60, 0, 3, 0),
        _stats(0, 3, 1, 1, 30, 30, 0, 1, 1),
        _stats(1, 3, 2, 0, 40, 40, 1, 2, 2),
        _stats(1, 3, 2, 0, 20, 40, 1, 2, 0),
    ]
    rewards = environment_reward(
        prompts=["p"] * 4,
        completions=["a"] * 4,
        episode_reward=[1.5, -0.2, 0.3, 0.4],
        episode_stats=stats,
        episode_group=[0, 0, 1, 1],
        episode_components=[{"correctness": 1.0}, {"correctness": -0.2}, {"correctness": 0.3}, {"correctness": 0.4}],
        log_metric=lambda k, v: logged.__setitem__(k, v),
    )
    assert rewards == [1.5, -0.2, 0.3, 0.4]
    assert logged["accuracy"] == pytest.approx(5 / 12)
    # one denominator: tokens of answered questions / answered questions; the forfeit is apart
    assert logged["tokens_per_question"] == pytest.approx(120 / 8)
    assert logged["forfeits_per_episode"] == 0.25 and logged["episode_length"] == 2.0
    assert logged["ran_dry"] == 0.5 and logged["utilisation"] == pytest.approx(120 / 170)
    assert logged["cap_hit_rate"] == pytest.approx(3 / 8) and logged["tokens_spent"] == 120
    assert logged["groups_tied_on_correctness"] == 0.5  # group 1: both members got 1 right
    assert logged["env/correctness"] == pytest.approx(0.375)
    with pytest.raises(ValueError, match="episode_reward"):
        environment_reward(prompts=["p"], completions=["a"])


def test_group_reward_scores_each_question_over_its_group():
    from reasoning_env.rewards import build_reward
    from reasoning_env.rewards.batch import StepBatch
    from training.trl_rollout import group_reward_function

    def step(q, correct, n):
        return {
            "question_index": q,
            "correct": correct,
            "has_answer": True,
            "raw_tokens": n,
            "tokens": n,
            "spent_before": 0,
            "difficulty": None,
            "problem_type": "t",
            "hard_cap_mode": True,
        }

    stats = [
        _stats(2, 2, 2, 0, 30, 99, 0, 2, 0, [step(0, True, 10), step(1, True, 20)]),
        _stats(1, 2, 2, 0, 50, 99, 0, 2, 0, [step(0, True, 30), step(1, False, 20)]),
        _stats(1, 2, 1, 0, 40, 99, 1, 1, 0, [step(0, True, 40)]),
    ]
    f = group_reward_function("kimi_length")
    got = f(prompts=["p"] * 3, completions=["c"] * 3, episode_stats=stats, episode_group=[5, 5, 5])
    # question 0: lengths 10, 30, 40 in one group; question 1: 20, 20 (members 0 and 1 only)
    ref = build_reward("kimi_length", context="training")
    q0 = ref.step_batch(
        StepBatch.build(3, correct=[True] * 3, tokens=[10, 30, 40], total_budget=99, num_questions=2, group=[0, 0, 0])
    )["kimi_length"]
    assert got == pytest.approx([q0[0] + 0.0, q0[1] + 0.0, q0[2]])
    assert f.__name__ == "group_kimi_length"


def test_smoke_defaults_respect_explicit_options():
    args = parse_args(["--smoke", "--report_to", "trackio", "--num_generations", "4"])
    assert args.report_to == "trackio" and args.num_generations == 4 and args.model == "tiny"
    assert parse_args(["--smoke"]).report_to == "none"
    assert parse_args(["--model", "x"]).report_to == "trackio"


def test_metrics_row_has_the_workbench_keys():
    row = metrics_row(3, {"reward": 0.5, "loss": 0.1, "kl": float("nan"), "note": "x", "flag": True})
    assert list(row)[: len(METRIC_KEYS)] == list(METRIC_KEYS)
    assert row["step"] == 3 and row["reward"] == 0.5 and row["accuracy"] is None
    assert row["loss"] == 0.1 and row["kl"] is None and "note" not in row and "flag" not in row


# ----------------------------------------------------------------------------- smoke run
@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "smoke"
    args = parse_args(["--smoke", "--output_dir", str(out), "--eval_every", "1", "--eval_seeds", "2"])
    t0 = time.time()
    setup = build_trainer(args)
    calls = []

    def recording_rollout(prompts, trainer):
        before = setup.rollout.backend.stats.calls if setup.rollout.backend else 0
        output = setup.rollout(prompts, trainer)
        streamed = (out / "trajectories.jsonl").read_text().splitlines()
        calls.append(
            {
                "prompts": list(prompts),
                "output": output,
                "traces": list(setup.rollout.last_traces),
                "step": trainer.state.global_step,
                "generate_calls": setup.rollout.backend.stats.calls - before,
                "rounds": setup.rollout.last_rounds,
                "streamed_steps": len(streamed),
            }
        )
        return output

    setup.trainer.rollout_func = recording_rollout
    setup.trainer.train()
    setup.writer.write()
    from training.grpo_train import save_final

    save_final(setup, out / "final")
    seconds = time.time() - t0
    print(f"\nCPU smoke run (build + 2 GRPO steps): {seconds:.1f} s")
    return setup, calls, out, seconds


@pytest.mark.slow
def test_smoke_run_two_steps_two_groups(smoke_run):
    setup, calls, out, seconds = smoke_run
    assert len(calls) == 2 and setup.trainer.state.global_step == 2
    for call in calls:
        assert len(call["prompts"]) == 4
        assert call["output"]["episode_member"] == [0, 1, 0, 1]
    assert calls[0]["output"]["episode_group"] == [0, 0, 1, 1]
    assert calls[1]["output"]["episode_group"] == [2, 2, 3, 3]
    # lockstep: at most one call per turn (3 questions), per play (dynamic sampling's rounds replay tied groups)
    assert all(c["generate_calls"] <= 3 * (1 + c["rounds"]) for c in calls)
    # step rows are appended as soon as they are played (a crash before the first save keeps them)
    played = 0
    for c in calls:
        played += sum(len(t.steps) for t in c["traces"])
        assert c["streamed_steps"] == played
    assert seconds < 300, f"smoke run took {seconds:.0f} s (target: under 180 s on 2 CPU cores)"


@pytest.mark.slow
def test_smoke_group_members_played_identical_episodes(smoke_run):
    _, calls, _, _ = smoke_run
    for call in calls:
        traces = call["traces"]
        for a, b in zip(traces[0::2], traces[1::2]):
            assert a.spec.group == b.spec.group and a.spec.seed == b.spec.seed
            assert a.prompt_ids == b.prompt_ids
            assert a.reset_metadata["question_ids"] == b.reset_metadata["question_ids"]
            assert a.reset_metadata["total_budget"] == b.reset_metadata["total_budget"] == 40
            n = min(len(a.steps), len(b.steps))  # members may run dry at different steps
            assert [s.question_id for s in a.steps][:n] == [s.question_id for s in b.steps][:n]


@pytest.mark.slow
def test_smoke_masks_and_logprobs_line_up_with_the_ids(smoke_run):
    setup, calls, _, _ = smoke_run
    tok = setup.policy.tokenizer
    for call in calls:
        out = call["output"]
        for i, tr in enumerate(call["traces"]):
            ids, mask, lps = out["completion_ids"][i], out["env_mask"][i], out["logprobs"][i]
            assert out["prompt_ids"][i] == tr.prompt_ids
            assert len(ids) == len(mask) == len(lps) >= 1
            assert set(mask) <= {0, 1}
            assert all(lp == 0.0 for lp, m in zip(lps, mask) if m == 0)
            assert all(lp < 0 and math.isfinite(lp) for lp, m in zip(lps, mask) if m == 1)
            for turn, step in zip(tr.turns, tr.steps):
                assert all(mask[turn.start : turn.end])
                assert tok.decode(ids[turn.start : turn.end], skip_special_tokens=True) == step.response
                assert turn.end - turn.start <= turn.cap <= 16


@pytest.mark.slow
def test_smoke_logged_rewards_equal_the_environments(smoke_run, tmp_path):
    setup, calls, out, _ = smoke_run
    for call in calls:
        for tr, r in zip(call["traces"], call["output"]["episode_reward"]):
            assert r == pytest.approx(tr.env_episode_reward) == pytest.approx(sum(s.reward for s in tr.steps))
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    for m, call in zip(metrics, calls):
        rewards = call["output"]["episode_reward"]
        assert m["reward"] == pytest.approx(sum(rewards) / len(rewards), abs=1e-6)
        traces = call["traces"]
        assert m["accuracy"] == pytest.approx(
            sum(t.num_correct for t in traces) / sum(t.num_questions for t in traces), abs=1e-6
        )
        assert m["episode_length"] == pytest.approx(sum(t.num_answered for t in traces) / 4, abs=1e-6)
        assert m["tokens_per_question"] == pytest.approx(
            sum(t.answered_tokens for t in traces) / sum(t.num_answered for t in traces), abs=1e-6
        )
        assert m["cap_hit_rate"] == pytest.approx(sum(t.cap_hits for t in traces) / sum(len(t.turns) for t in traces))
        assert 0.0 <= m["groups_tied_on_correctness"] <= 1.0
        for key in METRIC_KEYS:
            assert key in m
        assert "loss" in m and "entropy" in m
        # TRL's "last token is not EOS" reads 1.0 for every run-dry episode: replaced by cap_hit_rate
        assert "completions/clipped_ratio" not in m
    # TRL's own record of the rewards it normalised (a deque holding the last generation batch)
    trl_rewards = list(setup.trainer._logs["rewards"]["environment_reward"])
    assert trl_rewards == pytest.approx(calls[-1]["output"]["episode_reward"], abs=1e-6)
    # ... and of the advantages: the advantage study's replica of TRL's formula (scale_rewards="batch")
    from training.advantage_study import advantages

    expected = advantages(calls[-1]["output"]["episode_reward"], 2, "batch")
    assert list(setup.trainer._logs["advantages"])[-4:] == pytest.approx(list(expected), abs=1e-5)
    ours = [r for call in calls for r in call["output"]["episode_reward"]]
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [e["reward"] for e in episodes] == pytest.approx(ours)
    assert [e["train_step"] for e in episodes] == [0] * 4 + [1] * 4


@pytest.mark.slow
def test_smoke_run_folder_loads_in_the_workbench(smoke_run):
    from workbench.runs import load_run

    _, calls, out, _ = smoke_run
    run = load_run(out)
    assert run.meta["kind"] == "training" and run.meta["n_episodes"] == 8
    assert run.config is not None and run.config.num_questions == 3
    assert len(run.episodes) == 8 and run.metrics is not None and len(run.metrics) == 2
    assert {"group", "member", "train_step"} <= set(run.steps.columns)
    n_steps = sum(len(tr.steps) for call in calls for tr in call["traces"])
    assert len(run.steps) == n_steps
    for _key, rows in run.steps.groupby(["group", "member"]):
        assert rows["seed"].nunique() == 1
    per_group = run.steps.groupby("group")["seed"].nunique()
    assert (per_group == 1).all()
    assert run.episodes["episode_reward"].tolist() == pytest.approx(
        [tr.reward for call in calls for tr in call["traces"]]
    )


# ----------------------------------------------------------------------------- command-line errors
def test_unknown_model_path_is_a_clear_error(tmp_path, capsys):
    assert main(["--model", "./no/such/model", "--output_dir", str(tmp_path / "r")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_unsloth_without_a_gpu_is_a_clear_error(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present")
    assert main(["--model", "tiny", "--unsloth", "--output_dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("requires a CUDA GPU; install requirements-gpu.txt") == 1


def test_vllm_backend_without_vllm_is_a_clear_error(tmp_path, capsys):
    import importlib.util

    import torch

    if importlib.util.find_spec("vllm") and torch.cuda.is_available():
        pytest.skip("vLLM and a GPU are present")
    assert main(["--smoke", "--backend", "vllm", "--output_dir", str(tmp_path / "r")]) == 2
    assert "requires a CUDA GPU; install requirements-gpu.txt" in capsys.readouterr().err


def test_config_errors_are_clear(tmp_path, capsys):
    assert main(["--smoke", "--config", str(tmp_path / "missing.yaml"), "--output_dir", str(tmp_path / "r")]) == 2
    assert "does not exist" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("env:\n  num_questions: -3\n")
    assert main(["--model", "tiny", "--config", str(bad), "--output_dir", str(tmp_path / "r")]) == 2
    assert "num_questions" in capsys.readouterr().err
    assert main(["--smoke", "--num_generations", "1", "--output_dir", str(tmp_path / "r")]) == 2
    assert "num_generations" in capsys.readouterr().err
    assert main(["--output_dir", str(tmp_path / "r")]) == 2
    assert "--model is required" in capsys.readouterr().err
    assert main(["--smoke", "--reasoning_mode", "on", "--output_dir", str(tmp_path / "r")]) == 2
    assert "enable_thinking" in capsys.readouterr().err


# ----------------------------------------------------------------------------- held-out evaluation
@pytest.mark.slow
def test_smoke_held_out_evaluation_is_logged_with_intervals(smoke_run):
    setup, calls, out, _ = smoke_run
    rows = [json.loads(line) for line in (out / "evaluations.jsonl").read_text().splitlines()]
    assert sorted({r["step"] for r in rows}) == [0, 1, 2]  # before the first step, every step, at the end
    for step in (0, 1, 2):
        top = {r["metric"]: r for r in rows if r["step"] == step and r["key"] is None}
        assert {"accuracy", "tokens_per_question", "cap_hit_rate", "ran_dry", "forfeits", "regret"} <= set(top)
        for r in top.values():
            assert r["n"] == 2 and r["ci_low"] is not None and r["ci_low"] <= r["estimate"] <= r["ci_high"]
        assert top["regret"]["estimate"] >= -1e-9  # no allocation beats the oracle's
        keyed = {r["metric"] for r in rows if r["step"] == step and r["key"] is not None}
        assert {"tokens_by_position", "tokens_by_type", "accuracy_by_type"} <= keyed
    episodes = [json.loads(line) for line in (out / "eval_episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == 3 * 2 and {e["mode"] for e in episodes} == {"held_out"}
    # every question of an episode, asked or not, with its difficulty (a report counts the unasked per difficulty)
    for e in episodes:
        assert len(e["questions"]) == e["num_questions"] == 3
        asked = [(s["problem_type"], s["difficulty"]) for s in e["steps"]]
        assert [(q["problem_type"], q["difficulty"]) for q in e["questions"]][: len(asked)] == asked
    seeds = setup.writer.meta["eval_seeds"]
    assert len(seeds) == 2 and not set(seeds) & set(build_episode_dataset(2, base_seed=42)["seed"])
    assert [e["seed"] for e in episodes[:2]] == seeds
    # greedy (temperature 0): the step-0 evaluation is the same episode each time it is played
    assert setup.writer.meta["eval_temperature"] == 0.0
    # the held-out episodes are not in the training logs
    trained = [json.loads(line)["seed"] for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert not set(trained) & set(seeds)


@pytest.mark.slow
def test_smoke_final_folder_records_the_episode_format(smoke_run):
    from reasoning_env.policies import TransformersPolicy

    setup, _, out, _ = smoke_run
    fmt = json.loads((out / "final" / "episode_format.json").read_text())
    assert fmt == setup.writer.meta["episode_format"]
    assert fmt["format"] == "multi_turn" and fmt["history_thinking"] == "keep"
    pol = TransformersPolicy(str(out / "final"), device="cpu")
    assert (pol.format, pol.history_thinking, pol.episode_format_source) == (
        "multi_turn",
        "keep",
        "episode_format.json",
    )


def test_training_options_that_would_learn_nothing_are_refused(tmp_path, capsys):
    assert main(["--smoke", "--mask_truncated_completions", "--output_dir", str(tmp_path / "r")]) == 2
    assert "every run-dry episode" in capsys.readouterr().err
    assert main(["--smoke", "--history_thinking", "strip", "--output_dir", str(tmp_path / "r")]) == 2
    assert "ONE token sequence" in capsys.readouterr().err
    assert main(["--smoke", "--group_reward", "no_such_reward", "--output_dir", str(tmp_path / "r")]) == 2
    assert "--group_reward" in capsys.readouterr().err


def test_grpo_config_gets_the_episode_settings(tmp_path):
    args = parse_args(["--smoke", "--output_dir", str(tmp_path / "r")])
    setup = build_trainer(args)
    cfg = setup.trainer.args
    assert cfg.top_k == 0 and cfg.scale_rewards == "batch" and cfg.loss_type == "dapo"
    assert cfg.vllm_importance_sampling_mode == "token_truncate" and cfg.vllm_importance_sampling_clip_max == 3.0
    assert cfg.mask_truncated_completions is False
    meta = setup.writer.meta
    assert meta["scale_rewards"] == "batch" and meta["episode_format"]["format"] == "multi_turn"


def test_bf16_on_a_cpu_is_a_cpu_run(tmp_path):
    """--bf16 true without CUDA (a CPU with AVX512-BF16/AMX) builds: transformers refuses bf16 without use_cpu."""
    from training.grpo_train import _grpo_config, cuda_available

    if cuda_available():
        pytest.skip("a CUDA machine: bf16 runs on the GPU there")
    args = parse_args(["--smoke", "--output_dir", str(tmp_path / "r"), "--bf16", "true"])
    cfg = _grpo_config(args, "transformers", None)
    assert cfg.bf16 and cfg.use_cpu


def test_advantage_formulas():
    import numpy as np

    from training.advantage_study import advantages, study, token_weights

    r = np.array([1.0, 1.026, 0.0, 2.0])  # a tied pair (cost gap only) and a correctness gap
    g = advantages(r, 2, "group")
    assert g[:2] == pytest.approx([-0.7033, 0.7033], abs=1e-3) and g[2:] == pytest.approx([-0.7071, 0.7071], abs=1e-3)
    b = advantages(r, 2, "batch")
    assert abs(b[0]) < 0.02 and abs(b[3]) > 0.9  # batch scaling keeps the reward's proportions
    assert advantages(r, 2, "none")[:2] == pytest.approx([-0.013, 0.013])
    with pytest.raises(ValueError):
        advantages(r, 3, "group")
    w = token_weights(np.ones(2), np.array([10, 30]), "grpo")
    assert w[0] == pytest.approx(3 * w[1])  # grpo: a long episode's tokens weigh less
    assert token_weights(np.ones(2), np.array([10, 30]), "dapo").tolist() == [1 / 40, 1 / 40]
    data = {
        "rewards": r,
        "num_correct": np.array([1, 1, 0, 2]),
        "tokens": np.array([10, 20, 30, 40]),
        "group": np.array([0, 0, 1, 1]),
    }
    res = study(data, 2)
    assert res["tied_share"] == 0.5 and res["scale_rewards"]["group"]["tied_to_untied_adv"] > 0.9
    assert res["scale_rewards"]["batch"]["tied_to_untied_adv"] == pytest.approx(res["raw_tied_to_untied"], rel=1e-3)


def test_is_masked_fraction_counts_zeroed_or_clipped_weights():
    import torch

    from training.trainer import is_masked_fraction

    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    token = torch.tensor([[1.0, 0.0, 0.9, 0.0], [0.0, 1.1, 5.0, 5.0]])  # the last two columns are padding / env
    assert is_masked_fraction(token, mask, "token_mask", 3.0) == pytest.approx(2 / 5)
    clipped = torch.tensor([[1.0, 3.0, 0.9, 3.0], [3.0, 1.1, 3.0, 3.0]])
    assert is_masked_fraction(clipped, mask, "token_truncate", 3.0) == pytest.approx(2 / 5)
    seq = torch.tensor([[0.0], [1.2]])
    assert is_masked_fraction(seq, mask, "sequence_mask", 3.0) == 0.5
    assert is_masked_fraction(seq, torch.zeros_like(mask), "sequence_mask", 3.0) == 0.0
    with pytest.raises(ValueError, match="importance-sampling mode"):
        is_masked_fraction(seq, mask, "per_episode", 3.0)


# ----------------------------------------------------------------------------- training review (issue 21)
def test_gradient_checkpointing_is_on_by_default_as_in_trl(tmp_path):
    import dataclasses

    from trl import GRPOConfig

    from training.grpo_train import _grpo_config, build_parser

    trl_default = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}["gradient_checkpointing"]
    assert trl_default is True  # TRL 1.15 and 1.16
    args = parse_args(["--model", "tiny", "--output_dir", str(tmp_path / "r")])
    assert args.gradient_checkpointing is True
    assert _grpo_config(args, "transformers", None).gradient_checkpointing is True
    # Unsloth applies its own (get_peft_model(use_gradient_checkpointing="unsloth")); TRL's stays off
    assert _grpo_config(args, "vllm", None, unsloth=True).gradient_checkpointing is False
    off = parse_args(["--model", "tiny", "--output_dir", str(tmp_path / "r"), "--no_gradient_checkpointing"])
    assert _grpo_config(off, "transformers", None).gradient_checkpointing is False
    assert "on by default" in " ".join(build_parser().format_help().split())


def test_a_long_run_keeps_only_its_newest_checkpoints_when_asked(tmp_path):
    from training.grpo_train import _grpo_config

    base = ["--model", "tiny", "--output_dir", str(tmp_path / "r"), "--save_steps", "1"]
    assert _grpo_config(parse_args(base), "transformers", None).save_total_limit is None  # default: keep all
    assert _grpo_config(parse_args([*base, "--save_total_limit", "2"]), "transformers", None).save_total_limit == 2


def test_vllm_memory_share_is_one_value_in_cli_loader_docs_and_notebook():
    import inspect
    import re
    from pathlib import Path

    from training.grpo_train import build_parser
    from training.models import VLLM_GPU_MEMORY_UTILIZATION, load_policy, load_unsloth

    root = Path(__file__).resolve().parents[1]
    value = VLLM_GPU_MEMORY_UTILIZATION
    assert build_parser().parse_args([]).vllm_gpu_memory_utilization == value
    for fn in (load_policy, load_unsloth):
        assert inspect.signature(fn).parameters["gpu_memory_utilization"].default == value
    docs = re.findall(r"gpu_memory_utilization[^0-9\n]{0,40}([0-9]\.[0-9]+)", (root / "docs/training.md").read_text())
    notebook = json.loads((root / "notebooks/02_grpo_unsloth.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code")
    in_notebook = re.findall(r"gpu_memory_utilization\s*=\s*([0-9.]+)", code)
    assert docs and in_notebook
    assert {float(v) for v in docs + in_notebook} == {value}


def test_masked_fraction_is_computed_from_log_probs_when_trl_gives_no_ratio():
    """Unsloth (and the transformers backend) leave no ``importance_sampling_ratio`` in TRL's output:
    the project computes the weights itself from the trainer's and the sampler's log-probs."""
    import types

    import torch

    from training.trainer import episode_trainer_class, importance_sampling_weights

    old = torch.tensor([[0.0, -1.0, -2.0, 0.0], [-0.5, -0.5, 0.0, 0.0]])
    sampling = torch.tensor([[0.0, -3.0, -2.0, -9.0], [-0.5, -0.4, 0.0, 0.0]])  # token 1: ratio e^2 = 7.4
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    w = importance_sampling_weights(old, sampling, mask, "token_truncate", 3.0)
    assert w[0, 1] == pytest.approx(3.0) and w[0, 3] == pytest.approx(1.0)  # masked-out token: ratio 1
    assert importance_sampling_weights(old, sampling, mask, "token_mask", 3.0)[0, 1] == 0.0
    seq = importance_sampling_weights(old, sampling, mask, "sequence_mask", 3.0)
    assert seq.shape == (2, 1) and seq[0, 0] == 0.0 and seq[1, 0] == pytest.approx(math.exp(-0.1))

    calls = []

    def per_token_logps(self, model, ids, attention, keep, batch_size=None):
        calls.append((tuple(ids.shape), keep, batch_size))
        return old, None, None

    fake = types.SimpleNamespace(
        model=None,
        args=types.SimpleNamespace(
            per_device_train_batch_size=2,
            per_device_eval_batch_size=2,
            vllm_importance_sampling_mode="token_truncate",
            vllm_importance_sampling_clip_max=3.0,
            vllm_importance_sampling_clip_min=None,
        ),
    )
    fake._get_per_token_logps_and_entropies = types.MethodType(per_token_logps, fake)
    output = {  # what TRL returns without vLLM correction: sampling log-probs, no old_per_token_logps, no ratio
        "prompt_ids": torch.ones((2, 3), dtype=torch.long),
        "prompt_mask": torch.ones((2, 3), dtype=torch.long),
        "completion_ids": torch.ones((2, 4), dtype=torch.long),
        "completion_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]),
        "tool_mask": torch.tensor([[1, 1, 1, 0], [1, 1, 0, 1]]),
        "sampling_per_token_logps": sampling,
    }
    fraction = episode_trainer_class()._local_is_masked_fraction(fake, output, "train")
    assert calls == [((2, 7), 4, 2)]
    assert fraction == pytest.approx(1 / 5)  # 5 model tokens, one clipped at the cap
    output["old_per_token_logps"] = old  # TRL's own (vLLM path): no extra forward pass
    assert episode_trainer_class()._local_is_masked_fraction(fake, output, "train") == pytest.approx(1 / 5)
    assert len(calls) == 1


@pytest.mark.slow
def test_smoke_logs_the_masked_fraction_without_vllm(smoke_run):
    _, _, out, _ = smoke_run
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows and all(r.get("sampling/is_masked_fraction") == 0.0 for r in rows)  # sampler == trainer


@pytest.mark.slow
def test_a_step_logs_where_its_time_went(tmp_path):
    """timing/* in metrics.jsonl: the rollout, the rest of TRL's generation step (log-probs), backward, and
    the whole optimizer step, which holds the other three."""
    out = tmp_path / "timed"
    assert main(["--smoke", "--output_dir", str(out), "--max_steps", "1", "--logging_steps", "1"]) == 0
    (row,) = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    parts = [row["timing/generation_s"], row["timing/logprobs_s"], row["timing/backward_s"]]
    assert all(p > 0 for p in parts)
    assert sum(parts) <= row["timing/step_s"] * 1.01
    assert "timing/weight_handoff_s" not in row  # the transformers backend hands nothing over


def test_held_out_evaluation_syncs_vllm_weights_before_playing(tmp_path):
    """With TRL's vLLM engine the evaluation hands the current weights over first, as TRL does before a
    training rollout (TRL syncs only inside its own generation step)."""
    import types

    from training_helpers import ScriptedBackend, tiny_env_config, tiny_tokenizer

    from reasoning_env.conversation import ChatFormat
    from reasoning_env.policies import SolverCurves
    from training.envs import InProcessEnvFactory
    from training.evaluation import HeldOutEvaluator
    from training.rollout import RolloutLimits
    from training.trl_rollout import GRPORollout

    events = []
    tok = tiny_tokenizer()

    class Backend(ScriptedBackend):
        @contextlib.contextmanager
        def temperature(self, value):
            yield self

        def _generate(self, contexts, caps, call_max):
            events.append("generate")
            return super()._generate(contexts, caps, call_max)

    vg = types.SimpleNamespace(sync_weights=lambda: events.append("sync"))
    trainer = types.SimpleNamespace(
        use_vllm=True,
        vllm_generation=vg,
        _last_loaded_step=2,  # TRL synced before the step-2 rollout; the optimizer then made step 3
        state=types.SimpleNamespace(global_step=3),
        model=types.SimpleNamespace(training=False, train=lambda: None),
        accelerator=types.SimpleNamespace(process_index=0, num_processes=1),
        processing_class=tok,
    )
    cfg = tiny_env_config()
    rollout = GRPORollout(
        InProcessEnvFactory(cfg),
        ChatFormat(tok),
        RolloutLimits(max_episode_tokens=2048),
        [tok.convert_tokens_to_ids("<|im_end|>")],
        backend_factory=lambda trainer: Backend(tok, lambda text: "42"),
    )
    evaluator = HeldOutEvaluator(rollout, [5], tmp_path, curves=SolverCurves(), config=cfg)
    evaluator.run(trainer, 3)
    assert events[0] == "sync" and events.count("sync") == 1 and "generate" in events
    assert trainer._last_loaded_step == 3  # TRL's next rollout at step 3 does not sync again
    events.clear()
    trainer.state.global_step = 4
    trainer._last_loaded_step = 4  # already current: nothing to hand over
    evaluator.run(trainer, 4)
    assert "sync" not in events


def test_advantage_study_plays_the_tokenizer_native_budget_training_uses():
    from reasoning_env.config import EnvConfig
    from reasoning_env.env import ReasoningEconomicsEnv
    from training.advantage_study import play_groups

    cfg = EnvConfig().replace(num_questions=3)
    data = play_groups(1, 2, 0.5, 0, cfg)
    assert set(data["budget_source"]) == {"tokenizer_native"}
    env = ReasoningEconomicsEnv(cfg)
    config_budget = env.reset(seed=1).total_budget  # without a tokenizer: the config budget
    native = env.reset(seed=1, tokenizer_name=cfg.tokenizer_name).total_budget
    env.close()
    assert native < config_budget and max(data["budget"]) < config_budget
    fixed = play_groups(1, 2, 0.5, 0, cfg, total_budget=300)
    assert set(fixed["budget"].tolist()) == {300}

"""The grpo_step benchmark's two configurations, as TRL sees them (the measurement itself needs the real model and a
vLLM server: docs/training.md records it)."""

from __future__ import annotations

import argparse
from pathlib import Path

from training.bench import grpo_step
from training.grpo_train import _grpo_config, parse_args


def _config(name: str, tmp_path: Path, groups: int = 8, *extra: str):
    p = argparse.ArgumentParser()
    grpo_step.add_arguments(p)
    args = p.parse_args(["--groups", str(groups), *extra])
    url = "http://127.0.0.1:9/v1"
    argv, cfg = grpo_step.configuration_argv(name, args, url, "float32", tmp_path / name)
    parsed = parse_args(argv)
    return _grpo_config(parsed, "vllm_server", None), cfg, parsed


def test_the_shipped_configuration_is_one_group_a_step_on_trls_path(tmp_path):
    config, cfg, _ = _config("shipped", tmp_path)
    assert cfg["groups"] == 1 and not cfg["fold"] and not cfg["skip_zero_advantage"]
    assert config.generation_batch_size == 4 and config.per_device_train_batch_size == 4
    assert config.num_generations == 4 and config.steps_per_generation == 1 and config.gradient_checkpointing


def test_the_new_configuration_plays_every_group_of_a_step_in_one_rollout_and_folds_the_ratio(tmp_path):
    config, cfg, parsed = _config("new", tmp_path, 8, "--new-micro-batch", "4", "--new-gradient-checkpointing", "on")
    assert cfg["groups"] == 8 and cfg["fold"] and cfg["skip_zero_advantage"]
    # one rollout of 32 episodes per optimizer step, trained a group (4 episodes) a micro-batch
    assert config.generation_batch_size == 32 and config.per_device_train_batch_size == 4
    assert config.gradient_accumulation_steps == 8 and config.steps_per_generation == 8
    assert config.gradient_checkpointing
    # where the trainer folds the ratio: one iteration, the generation batch used within one optimizer step
    assert config.num_iterations == 1 and config.gradient_accumulation_steps % config.steps_per_generation == 0
    assert parsed.num_episodes >= 8 * parsed.max_steps


def test_the_new_configuration_defaults_to_the_learning_experiments_training_settings(tmp_path):
    """As scripts/learning_experiment.sh after its amendment: 4 groups of 4, one episode a micro-batch."""
    p = argparse.ArgumentParser()
    grpo_step.add_arguments(p)
    argv, cfg = grpo_step.configuration_argv("new", p.parse_args([]), "u", "float32", tmp_path)
    parsed = parse_args(argv)
    assert (cfg["groups"], cfg["micro_batch"], cfg["checkpointing"]) == (4, 1, False)
    assert parsed.per_device_train_batch_size == 1 and parsed.gradient_accumulation_steps == 16
    assert parsed.gradient_checkpointing is False
    script = (Path(__file__).resolve().parents[1] / "scripts" / "learning_experiment.sh").read_text()
    assert "--per_device_train_batch_size 1 --no_gradient_checkpointing" in script and "--groups_per_step 4" in script
    shipped, _ = grpo_step.configuration_argv("shipped", p.parse_args([]), "u", "float32", tmp_path)
    assert parse_args(shipped).gradient_checkpointing is True  # as the shipped run did


def test_the_bench_trains_in_bf16_only_where_the_cpu_has_it(tmp_path):
    from reasoning_env.model_server import _cpu_dtype

    p = argparse.ArgumentParser()
    grpo_step.add_arguments(p)
    assert p.parse_args([]).dtype == "auto"
    argv, _ = grpo_step.configuration_argv("new", p.parse_args([]), "u", "bfloat16", tmp_path)
    assert argv[argv.index("--dtype") + 1] == "bfloat16" and argv[argv.index("--bf16") + 1] == "true"
    argv, _ = grpo_step.configuration_argv("new", p.parse_args([]), "u", "float32", tmp_path)
    assert argv[argv.index("--bf16") + 1] == "false"
    assert _cpu_dtype() in ("bfloat16", "float32")


def test_the_merged_weights_handoff_is_the_new_configurations_only(tmp_path):
    p = argparse.ArgumentParser()
    grpo_step.add_arguments(p)
    args = p.parse_args(["--new-handoff", "merged"])
    new, _ = grpo_step.configuration_argv("new", args, "u", "float32", tmp_path)
    shipped, _ = grpo_step.configuration_argv("shipped", args, "u", "float32", tmp_path)
    assert parse_args(new).weight_handoff == "merged" and parse_args(shipped).weight_handoff == "lora"


def test_both_configurations_train_the_same_work_without_dynamic_sampling(tmp_path):
    for name in ("shipped", "new"):
        _, _, parsed = _config(name, tmp_path)
        assert parsed.dynamic_sampling == "off"  # a replayed tied group would add generation to one side only


def test_the_new_configuration_takes_one_episode_micro_batches_on_request(tmp_path):
    config, cfg, _ = _config("new", tmp_path, 8, "--new-micro-batch", "1")
    assert cfg["micro_batch"] == 1 and config.per_device_train_batch_size == 1
    assert config.gradient_accumulation_steps == 32
    config, cfg, _ = _config("new", tmp_path, 8, "--new-micro-batch", "0")  # 0: a group a micro-batch
    assert cfg["micro_batch"] == 4 and config.per_device_train_batch_size == 4


def test_both_configurations_play_the_learning_experiments_episodes_by_default(tmp_path):
    """On cpu_real_model.yaml most groups tie, so the new configuration skipped their backward (a bench run of
    2026-12-06 trained nothing): the default is the experiment's config at its temperature, for both sides."""
    for name in ("shipped", "new"):
        _, _, parsed = _config(name, tmp_path)
        assert parsed.config == "examples/training/cpu_allocation.yaml" and parsed.temperature == 0.7

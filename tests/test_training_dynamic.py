"""Several groups per step, dynamic sampling and per-question advantages (issue 29 item 2; F2, F4, F14).

The rollout and training tests use the tiny random Qwen2 with the transformers backend (real trainer,
real environment, real TRL loss)."""

from __future__ import annotations

import logging

import pytest

from training.grpo_train import (
    TrainSetupError,
    _grpo_config,
    batch_layout,
    build_trainer,
    parse_args,
    resolve_dynamic_sampling,
)
from training.trl_rollout import GroupLayoutError, check_local_groups, episode_prompt, resample_seed

pytestmark = pytest.mark.xdist_group("test_training_dynamic")


# ----------------------------------------------------------------------------- units
def test_resample_seeds_are_deterministic_distinct_and_never_held_out():
    a = resample_seed(42, 3, 1)
    assert a == resample_seed(42, 3, 1) and 0 <= a < 2**31
    assert len({resample_seed(42, g, r) for g in range(20) for r in (1, 2)}) == 40
    assert resample_seed(43, 3, 1) != a
    assert resample_seed(42, 3, 1, exclude={a}) != a


def test_whole_groups_must_be_local_to_a_process():
    check_local_groups(8, 4, "dynamic sampling")
    with pytest.raises(GroupLayoutError, match="dynamic sampling needs every GRPO group on one process"):
        check_local_groups(2, 4, "dynamic sampling")


def test_the_default_step_holds_four_groups(tmp_path):
    args = parse_args(["--model", "tiny", "--output_dir", str(tmp_path / "r")])
    cfg = _grpo_config(args, "transformers", None)
    assert cfg.generation_batch_size // cfg.num_generations == 4
    assert cfg.steps_per_generation == cfg.gradient_accumulation_steps  # one generation batch = one optimizer step


def test_groups_per_step_with_a_small_micro_batch_accumulates(tmp_path):
    args = parse_args(["--model", "tiny", "--output_dir", str(tmp_path / "r"), "--per_device_train_batch_size", "4"])
    assert batch_layout(args) == (4, 1, 1)  # a batch set by hand keeps its meaning: 1 group of 4
    args.groups_per_step = 4
    assert batch_layout(args) == (4, 4, 4)
    cfg = _grpo_config(args, "transformers", None)
    assert cfg.generation_batch_size == 16 and cfg.gradient_accumulation_steps == cfg.steps_per_generation == 4
    assert batch_layout(args, processes=2) == (4, 2, 4)
    args.gradient_accumulation_steps = 2
    with pytest.raises(TrainSetupError, match="needs --gradient_accumulation_steps 4"):
        batch_layout(args)
    args.gradient_accumulation_steps, args.per_device_train_batch_size = None, 3
    with pytest.raises(TrainSetupError, match="not a multiple"):
        batch_layout(args)


def test_fewer_episodes_than_groups_per_step_is_refused(tmp_path, capsys):
    from training.grpo_train import main

    assert main(["--smoke", "--groups_per_step", "4", "--output_dir", str(tmp_path / "r")]) == 2
    assert "would train no step" in capsys.readouterr().err


def test_dynamic_sampling_settings():
    args = parse_args(["--model", "tiny"])
    assert resolve_dynamic_sampling(args, 16) is True  # on by default
    assert resolve_dynamic_sampling(args, 2) is False  # auto: a group spans two processes
    args.dynamic_sampling = "on"
    with pytest.raises(TrainSetupError, match="every GRPO group on one process"):
        resolve_dynamic_sampling(args, 2)
    args.group_reward = "kimi_length"
    with pytest.raises(TrainSetupError, match="--dynamic_sampling off"):
        resolve_dynamic_sampling(args, 16)
    args.dynamic_sampling = "auto"
    assert resolve_dynamic_sampling(args, 16) is False
    args.max_resample_rounds = -1
    with pytest.raises(TrainSetupError, match="max_resample_rounds"):
        resolve_dynamic_sampling(args, 16)


# ----------------------------------------------------------------------------- with the tiny model
def _setup(tmp_path, *extra, env_config=None):
    from training_helpers import tiny_policy

    args = parse_args(["--smoke", "--output_dir", str(tmp_path / "run"), "--fresh", *extra])
    return build_trainer(args, policy=tiny_policy(), env_config=env_config)


def _batch(setup) -> list[str]:
    g = setup.trainer.num_generations
    seeds = list(setup.trainer.train_dataset["seed"])
    per_step = setup.trainer.args.generation_batch_size // g
    return [episode_prompt(s) for s in seeds[:per_step] for _ in range(g)]


def _tied_config():
    """Every member of every group gets the same reward: the random model answers neither question right
    (-0.1 each), there is no cost term (beta 0), and the episode bonus is 0 at accuracy 0. Both questions are
    asked within the smoke budget of 40 (16-token turns)."""
    from training_helpers import tiny_env_config

    return tiny_env_config(num_questions=2, beta=0.0)


def test_one_group_per_step_with_batch_scaling_warns(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="training.grpo_train"):
        _setup(tmp_path, "--per_device_train_batch_size", "2")
    assert "--groups_per_step 4" in caplog.text and "+-1 advantage" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="training.grpo_train"):
        _setup(tmp_path, "--per_device_train_batch_size", "2", "--scale_rewards", "none")
    assert "+-1 advantage" not in caplog.text


@pytest.mark.slow
def test_tied_groups_are_replayed_with_fresh_seeds_then_masked(tmp_path):
    setup = _setup(tmp_path, "--max_resample_rounds", "1", env_config=_tied_config())
    rollout, trainer = setup.rollout, setup.trainer
    trainer.model.train()
    prompts = _batch(setup)
    out = rollout(prompts, trainer)
    assert len(out["completion_ids"]) == len(prompts)  # one row per prompt TRL passed
    assert len(rollout.last_dropped) == len(prompts)  # every first-play group was tied and replaced
    for tr in rollout.last_traces:
        assert tr.spec.resample_round == 1 and tr.spec.seed == resample_seed(42, tr.spec.group, 1)
        assert tr.spec.seed not in set(trainer.train_dataset["seed"])
    assert [d.spec.seed for d in rollout.last_dropped] == [int(p.rsplit("=", 1)[1]) for p in prompts]
    # still tied after the last round: masked out of the loss, their traces kept for the record
    assert rollout.last_trained == [0] * len(prompts) and all(sum(m) == 0 for m in out["env_mask"])
    assert any(sum(tr.env_mask) > 0 for tr in rollout.last_traces)
    m = trainer._metrics["train"]
    assert m["dynamic_sampling/kept_share"][-1] == 0.0 and m["dynamic_sampling/masked_groups"][-1] == 2.0
    assert m["dynamic_sampling/resampled_groups"][-1] == 2.0 and m["dynamic_sampling/skipped_step"][-1] == 1.0
    episodes = (setup.output_dir / "episodes.jsonl").read_text().splitlines()
    assert len(episodes) == len(prompts) and all('"resample_round": 1' in e for e in episodes)


@pytest.mark.slow
def test_groups_with_variance_are_trained_and_tied_ones_replaced(tmp_path):
    setup = _setup(tmp_path, "--groups_per_step", "4", "--per_device_train_batch_size", "8", "--num_episodes", "4")
    rollout, trainer = setup.rollout, setup.trainer
    trainer.model.train()
    prompts = _batch(setup)
    out = rollout(prompts, trainer)
    g = trainer.num_generations
    groups = [rollout.last_traces[i : i + g] for i in range(0, len(prompts), g)]
    for i, group in enumerate(groups):
        assert len({tr.spec.seed for tr in group}) == 1 and len({tr.spec.group for tr in group}) == 1
        trained = rollout.last_trained[i * g]
        assert trained == int(rollout.has_signal(group))  # kept exactly when its rewards differ
        assert all((sum(out["env_mask"][i * g + j]) > 0) == bool(trained) for j in range(g))
        if group[0].spec.resample_round == 0:
            assert group[0].spec.seed == int(prompts[i * g].rsplit("=", 1)[1])
    assert not any(rollout.has_signal(rollout.last_dropped[i : i + g]) for i in range(0, len(rollout.last_dropped), g))


def _trainable(model) -> dict:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.slow
def test_a_step_without_any_group_variance_moves_no_weight(tmp_path):
    """Step 1 trains (AdamW builds momentum); before step 2 every episode ties: the loss and backward are
    skipped, no parameter has a gradient, and AdamW moves nothing (with a zero gradient its momentum would)."""
    from transformers import TrainerCallback

    setup = _setup(tmp_path, "--max_resample_rounds", "0", "--max_steps", "2")
    trainer = setup.trainer
    seen: dict = {}

    class TieAfterStepOne(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 1:
                seen["after_1"] = _trainable(trainer.model)
                opt = trainer.optimizer
                seen["adam_steps"] = [float(opt.state[p]["step"]) for grp in opt.param_groups for p in grp["params"]]
                seen["momentum"] = max(
                    float(opt.state[p]["exp_avg"].abs().max()) for grp in opt.param_groups for p in grp["params"]
                )
                setup.rollout.env_factory.config = _tied_config()  # from now on every group ties

    before = _trainable(trainer.model)
    trainer.add_callback(TieAfterStepOne())
    trainer.train()
    after = _trainable(trainer.model)
    assert trainer.state.global_step == 2
    assert any(not before[n].equal(seen["after_1"][n]) for n in before)  # step 1 did train
    assert seen["momentum"] > 0  # so a zero-gradient AdamW step would still have moved the weights
    assert all(after[n].equal(seen["after_1"][n]) for n in after)  # step 2 moved nothing
    opt = trainer.optimizer
    assert [float(opt.state[p]["step"]) for grp in opt.param_groups for p in grp["params"]] == seen["adam_steps"]
    assert trainer.state.log_history[1]["dynamic_sampling/skipped_step"] == 1.0


@pytest.mark.slow
def test_question_advantages_reach_the_loss_per_turn(tmp_path):
    """--advantage question: TRL's loss gets (B, T) advantages; each model turn's tokens carry its own
    question's advantage (own step reward + episode terms, normalised per question index in the group)."""
    from training.advantages import question_advantages

    setup = _setup(
        tmp_path, "--advantage", "question", "--max_steps", "1", "--groups_per_step", "4",
        "--per_device_train_batch_size", "8", "--num_episodes", "4",
    )  # fmt: skip
    trainer, rollout = setup.trainer, setup.rollout
    captured = []
    original = trainer._generate_and_score_completions

    def capture(inputs):
        output = original(inputs)
        captured.append({k: v.clone() if hasattr(v, "clone") else v for k, v in output.items()})
        return output

    trainer._generate_and_score_completions = capture
    trainer.train()
    (output,) = captured
    adv = output["advantages"]
    traces, trained = rollout.last_traces, rollout.last_trained
    assert tuple(adv.shape) == tuple(output["completion_ids"].shape)
    kept = [i for i, k in enumerate(trained) if k]
    expected = question_advantages(
        [rollout.credits(traces[i]) for i in kept], [traces[i].spec.group for i in kept], "batch"
    )
    differs = 0
    for i, per_turn in zip(kept, expected):
        tr = traces[i]
        for turn, a in zip(tr.turns, per_turn):
            assert adv[i, turn.start : turn.end].tolist() == pytest.approx([a] * (turn.end - turn.start), abs=1e-6)
        mask = output["tool_mask"][i]
        assert float(adv[i][mask == 0].abs().sum()) == 0.0  # environment tokens and padding carry nothing
        differs += len(per_turn) > 1 and abs(per_turn[0] - per_turn[1]) > 1e-6
    assert differs > 0  # the two answers of an episode are credited apart
    assert all(float(adv[i].abs().sum()) == 0.0 for i, k in enumerate(trained) if not k)
    assert trainer.state.log_history[0]["grad_norm"] > 0

"""TRL as a library: ``training.trl_env.grpo_environment`` gives a user's own ``trl.GRPOTrainer`` the rollout
function, reward and episode dataset. The shipped example (``examples/trl_grpo.py``) trains one GRPO step with
TRL's own ``GRPOTrainer`` (not the project's subclass) on the tiny random model on CPU, and what TRL normalised is
what the environment pays for the sequences it trained on: each episode's model turns, replayed into a fresh
environment (charged at least the ids generated), give its reward exactly."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from atropos_support import model_turns, replay_reward

REPO = Path(__file__).resolve().parents[1]


def _example():
    spec = importlib.util.spec_from_file_location("trl_grpo_example", REPO / "examples" / "trl_grpo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.timeout(1800)  # one GRPO step of the tiny model: ~45 s idle, over 10 min beside a training run
def test_the_example_trains_a_plain_grpo_trainer_on_the_environments_rewards(tmp_path):
    import trl

    example = _example()
    argv = ["--num_episodes", "2", "--max_steps", "1", "--output_dir", str(tmp_path / "run")]
    trainer, env = example.main(argv)
    assert type(trainer) is trl.GRPOTrainer and trainer.state.global_step == 1
    traces = env.rollout_func.last_traces
    assert len(traces) == 4 and len({t.spec.seed for t in traces}) == 2, "two groups of two members, one seed each"
    # TRL's own record of the rewards it normalised for the step
    assert list(trainer._logs["rewards"]["environment_reward"]) == pytest.approx([t.reward for t in traces])
    tokenizer = trainer.processing_class
    eos = set(env.rollout_func.eos_ids)
    name = env.rollout_func.limits.tokenizer_name
    for t in traces:
        assert len(t.completion_ids) == len(t.env_mask) == len(t.logprobs)
        masks = [tok if m else -100 for tok, m in zip(t.completion_ids, t.env_mask)]
        turns = model_turns(list(t.completion_ids), masks)
        paid = replay_reward(env.env_config, t.spec.seed, turns, tokenizer, name, eos)
        assert t.reward == pytest.approx(paid, abs=1e-9), "the reward is not what the environment pays"
    log = [row for row in trainer.state.log_history if "reward" in row]
    assert log and "accuracy" in log[0] and "env/correctness" in log[0], "the environment's metrics reach TRL's log"


def test_settings_that_would_drop_run_dry_episodes_are_refused():
    from trl import GRPOConfig

    from training.models import load_tokenizer, tiny_tokenizer_dir
    from training.trl_env import GRPOSetupError, check_trainer_args, grpo_environment

    env = grpo_environment(load_tokenizer(str(tiny_tokenizer_dir())), config={"sources": ["builtin"]}, num_episodes=3)
    assert env.grpo_config_kwargs["mask_truncated_completions"] is False
    assert env.grpo_config_kwargs["max_completion_length"] == 4096
    assert env.train_dataset.num_rows == 3 and env.reward_funcs[0].__name__ == "environment_reward"
    with pytest.raises(GRPOSetupError, match="run-dry"):
        check_trainer_args(GRPOConfig(output_dir="unused", mask_truncated_completions=True, use_cpu=True), 4096)

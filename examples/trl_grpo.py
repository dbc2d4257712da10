"""Train on this environment from your own TRL script: ``trl.GRPOTrainer`` with the environment's rollout
function, reward and episode dataset (``training.trl_env.grpo_environment``; docs/integrations.md, "TRL").

    python examples/trl_grpo.py                        # CPU: the tiny random model, 2 GRPO steps (~1 min here)
    python examples/trl_grpo.py --model Qwen/Qwen2.5-0.5B-Instruct --max_steps 50 --config examples/sources/gsm8k.yaml

Everything but the three environment pieces is plain TRL: swap in your model, LoRA config, GRPOConfig.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing it

#: Small offline episodes for the CPU run (the CLI's --smoke episodes): 3 reasoning-gym questions, answers of at most
#: 16 tokens, the cost penalty on (the tiny random model never answers right; the penalty can give its groups reward
#: variance).
CPU_ENV = {"sources": ["reasoning_gym"], "num_questions": 3, "max_tokens_per_step": 16, "beta": 0.05}


def load_model(name: str):
    """``(model, tokenizer)``: ``tiny`` is the project's tiny random Qwen2 with the embedded Qwen2.5 tokenizer
    (offline, CPU); anything else loads with transformers (a Hub id or a folder)."""
    if name == "tiny":
        from training.models import load_policy

        policy = load_policy("tiny", seed=0)
        return policy.model, policy.tokenizer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(name)
    if tokenizer.pad_token_id is None or tokenizer.pad_token_id == tokenizer.eos_token_id:
        tokenizer.pad_token = "<|endoftext|>" if "<|endoftext|>" in tokenizer.get_vocab() else tokenizer.unk_token
    return AutoModelForCausalLM.from_pretrained(name), tokenizer


def main(argv: list[str] | None = None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="tiny")
    p.add_argument("--config", default=None, help="the environment's EnvConfig YAML (default: small CPU episodes)")
    p.add_argument("--num_episodes", type=int, default=8)
    p.add_argument("--num_generations", type=int, default=2)
    p.add_argument("--max_steps", type=int, default=2)
    p.add_argument("--max_episode_tokens", type=int, default=1024)
    p.add_argument("--learning_rate", type=float, default=1e-5)
    p.add_argument("--output_dir", default="runs/trl-grpo-example")
    args = p.parse_args(argv)

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # TRL marks rollout_func experimental
    from trl import GRPOConfig, GRPOTrainer

    from training.trl_env import grpo_environment

    model, tokenizer = load_model(args.model)
    env = grpo_environment(
        tokenizer,
        config=args.config or CPU_ENV,
        num_episodes=args.num_episodes,
        model=model,
        max_episode_tokens=args.max_episode_tokens,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=GRPOConfig(
            output_dir=args.output_dir,
            max_steps=args.max_steps,
            learning_rate=args.learning_rate,
            num_generations=args.num_generations,
            per_device_train_batch_size=2 * args.num_generations,  # two GRPO groups per step
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            use_cpu=not _cuda(),
            **env.grpo_config_kwargs,
        ),
        train_dataset=env.train_dataset,
        reward_funcs=env.reward_funcs,
        rollout_func=env.rollout_func,
    )
    trainer.train()
    for row in trainer.state.log_history:
        if "reward" in row:
            keep = ("step", "reward", "reward_std", "accuracy", "tokens_per_question", "ran_dry", "loss")
            print(json.dumps({k: row[k] for k in keep if k in row}))
    return trainer, env


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:
        return False


if __name__ == "__main__":
    main()

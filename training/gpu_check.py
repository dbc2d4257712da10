"""A short GRPO run on a GPU with no Hub: a randomly initialised model of Qwen2.5-0.5B-Instruct's
configuration, the embedded offline Qwen2.5 tokenizer, the real environment, bf16.

    python -m training.gpu_check                      # CUDA: 4 GRPO steps, prints one JSON object
    python -m training.gpu_check --device cpu --tiny  # the same path on CPU with the tiny model (CI)

Prints ``step_seconds`` (mean wall time of an optimizer step, rollouts included), ``generated_tokens_per_s``
(model tokens the rollouts generated / seconds inside generate), ``peak_gpu_memory_gib``
(``torch.cuda.max_memory_allocated``), the settings, and the first/last logged metrics. The weights are
random, so the answers are noise: this measures the training path's speed and memory, not learning.
What it does not exercise: real weights, vLLM and Unsloth (``transformers`` generation only).

Needs torch, transformers, TRL, PEFT, accelerate and the project's own dependencies (a GPU machine with
CUDA torch and transformers gets the rest installed from wheels carried with the repository).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

#: ``Qwen/Qwen2.5-0.5B-Instruct``'s ``config.json`` (architecture fields; 494M parameters).
QWEN25_05B = dict(
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    max_position_embeddings=32768,
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    vocab_size=151936,
    hidden_act="silu",
)


def build_policy(tiny: bool, dtype: str, device: str, seed: int = 0):
    """The randomly initialised policy (:class:`training.models.LoadedPolicy`) on ``device``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from training.models import LoadedPolicy, build_tiny_model, load_tokenizer, tiny_tokenizer_dir

    tok_dir = tiny_tokenizer_dir()
    tok = load_tokenizer(str(tok_dir))
    torch_dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}[dtype]
    if tiny:
        model = build_tiny_model(tok, seed=seed)
    else:
        cfg = Qwen2Config(
            **{**QWEN25_05B, "vocab_size": max(QWEN25_05B["vocab_size"], len(tok))},
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
            bos_token_id=None,
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = Qwen2ForCausalLM(cfg)
        model.generation_config.pad_token_id = tok.pad_token_id
        model.generation_config.eos_token_id = tok.eos_token_id
    model = model.to(device=device, dtype=torch_dtype)
    return LoadedPolicy(model, tok, "qwen2.5-0.5b-config-random" if not tiny else "tiny", str(tok_dir))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.gpu_check", description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="The tiny 2-layer model instead of the 0.5B configuration.")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--num_generations", type=int, default=4)
    p.add_argument("--groups", type=int, default=2, help="Episode seeds (GRPO groups) per step.")
    p.add_argument("--num_questions", type=int, default=4)
    p.add_argument("--max_tokens_per_step", type=int, default=256)
    p.add_argument("--output_dir", default="runs/gpu-check")
    args = p.parse_args(argv)

    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(
            "error: --device cuda but torch.cuda.is_available() is False (use --device cpu --tiny for the CPU path)",
            file=sys.stderr,
        )
        return 2
    from reasoning_env.config import EnvConfig
    from training.grpo_train import build_trainer, parse_args

    bf16 = args.device.startswith("cuda") and torch.cuda.is_bf16_supported()
    policy = build_policy(args.tiny, "bfloat16" if bf16 else "float32", args.device)
    env = EnvConfig(
        sources=["reasoning_gym"], num_questions=args.num_questions, max_tokens_per_step=args.max_tokens_per_step
    )
    train_argv = [
        "--model",
        policy.name,
        "--output_dir",
        args.output_dir,
        "--backend",
        "transformers",
        "--report_to",
        "none",
        "--num_generations",
        str(args.num_generations),
        "--per_device_train_batch_size",
        str(args.num_generations * args.groups),
        "--max_steps",
        str(args.steps),
        "--num_episodes",
        str(args.steps * args.groups),
        "--max_episode_tokens",
        str(512 + args.num_questions * (args.max_tokens_per_step + 200)),
        "--bf16",
        "true" if bf16 else "false",
        "--learning_rate",
        "1e-5",
    ]
    setup = build_trainer(parse_args(train_argv), policy=policy, env_config=env)
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    setup.trainer.train()
    seconds = time.perf_counter() - t0
    stats = setup.rollout.backend.stats
    metrics = [json.loads(line) for line in (Path(args.output_dir) / "metrics.jsonl").read_text().splitlines()]
    result = {
        "device": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else args.device,
        "model": policy.name,
        "parameters": sum(p.numel() for p in policy.model.parameters()),
        "dtype": "bfloat16" if bf16 else "float32",
        "steps": args.steps,
        "episodes_per_step": args.num_generations * args.groups,
        "step_seconds": round(seconds / max(1, args.steps), 3),
        "generated_tokens": stats.tokens,
        "generated_tokens_per_s": round(stats.tokens / stats.seconds, 1) if stats.seconds else None,
        "generate_seconds": round(stats.seconds, 3),
        "peak_gpu_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)
        if args.device.startswith("cuda")
        else None,
        "first_metrics": {k: metrics[0].get(k) for k in ("reward", "accuracy", "tokens_per_question", "loss")}
        if metrics
        else None,
        "last_metrics": {k: metrics[-1].get(k) for k in ("reward", "accuracy", "tokens_per_question", "loss")}
        if metrics
        else None,
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

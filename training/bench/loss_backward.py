"""Benchmark: the training loss's forward and backward per episode, by micro-batch size and gradient checkpointing.

The learning run's steps spent three quarters of their time here (docs/training.md, "Amendment"). This times the model
body's forward and backward (LoRA on, the base weights frozen, as in training) on random episodes of ``--length``
tokens, for each ``(micro-batch, checkpointing)`` setting, interleaved over ``--rounds`` so machine load hits every
setting alike; the first pass of each setting warms caches and is not counted. The LM head is left out (TRL's chunked
log-prob kernel costs the same per scored token in every setting).

    python -m training.bench loss_backward                                  # real model, 1,000 tokens
    python -m training.bench loss_backward --settings 4:gc,1:gc,1:nogc,2:nogc --rounds 2 --length 800

Printed JSON: per setting ``seconds_per_episode`` (each round's, and their mean) and this process's peak RSS, the
model, dtype, length, and the 1-minute load average before and after. Compare settings within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

__all__ = ["add_arguments", "parse_settings", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The benchmark's options."""
    p.add_argument("--model", default="embedded:qwen2.5-coder-0.5b", help="model name or folder")
    p.add_argument("--dtype", default="float32", help="trainer dtype")
    p.add_argument("--lora-rank", type=int, default=8)
    p.add_argument("--length", type=int, default=1000, help="tokens an episode")
    p.add_argument(
        "--settings",
        default="4:gc,1:gc,1:nogc,2:nogc",
        help="comma list of MICRO_BATCH:gc|nogc (gradient checkpointing on or off)",
    )
    p.add_argument("--rounds", type=int, default=2, help="timed passes of every setting, interleaved")


def parse_settings(text: str) -> list[tuple[int, bool]] | None:
    """``"4:gc,1:nogc"`` -> ``[(4, True), (1, False)]``; ``None`` (with the reason on stderr) when malformed."""
    out = []
    for part in text.split(","):
        size, _, mode = part.strip().partition(":")
        if not size.isdigit() or int(size) < 1 or mode not in ("gc", "nogc"):
            print(
                f"error: --settings: {part!r} is not MICRO_BATCH:gc or MICRO_BATCH:nogc (e.g. 1:nogc)", file=sys.stderr
            )
            return None
        out.append((int(size), mode == "gc"))
    return out


def run(args: argparse.Namespace) -> int:
    """Measure and print the JSON of the module docstring; returns the exit status."""
    settings = parse_settings(args.settings)
    if settings is None:
        return 2
    if args.length < 2 or args.rounds < 1:
        print("error: --length must be >= 2 and --rounds >= 1", file=sys.stderr)
        return 2
    import torch
    from peft import get_peft_model

    from training.models import load_policy

    torch.manual_seed(0)
    policy = load_policy(args.model, lora_rank=args.lora_rank, dtype=args.dtype, gradient_checkpointing=True)
    model = get_peft_model(policy.model, policy.peft_config)
    model.train()
    body = model.get_base_model().model
    vocab = int(policy.model.config.vocab_size)
    load_before = round(os.getloadavg()[0], 2)

    def one(size: int, checkpointing: bool) -> float:
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.enable_input_require_grads()
        else:
            model.gradient_checkpointing_disable()
        ids = torch.randint(0, vocab, (size, args.length))
        t0 = time.perf_counter()
        hidden = body(input_ids=ids).last_hidden_state
        hidden.float().pow(2).mean().backward()
        model.zero_grad(set_to_none=True)
        return (time.perf_counter() - t0) / size

    for size, gc in settings:  # warm-up, not counted
        one(size, gc)
    times: dict[str, list[float]] = {f"{s}:{'gc' if g else 'nogc'}": [] for s, g in settings}
    for _ in range(args.rounds):
        for size, gc in settings:
            times[f"{size}:{'gc' if gc else 'nogc'}"].append(round(one(size, gc), 3))
    out = {
        "benchmark": "loss_backward",
        "model": policy.name,
        "dtype": args.dtype,
        "lora_rank": args.lora_rank,
        "length": args.length,
        "settings": {
            k: {"seconds_per_episode": round(sum(v) / len(v), 3), "rounds": v, "micro_batch": int(k.split(":")[0])}
            for k, v in times.items()
        },
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "load_average": {"before": load_before, "after": round(os.getloadavg()[0], 2)},
    }
    print(json.dumps(out, indent=1))
    return 0

"""Benchmarks of training: ``python -m training.bench <command> [options]``.

- ``rollout``: lockstep batched rollouts vs one episode at a time, same model, same episodes
  (:mod:`.rollout`).
- ``generation``: tokens/s of ``transformers`` vs vLLM's CPU server on the real model at 1/4/8/16
  answers in flight (:mod:`.generation`).
- ``lora_decode``: decode tokens/s of the base model vs the training's LoRA adapter vs the adapter merged into the
  weights and reloaded in place, on one vLLM CPU server (:mod:`.lora_decode`).
- ``loss_backward``: the training loss's forward and backward per episode, by micro-batch size and gradient
  checkpointing (:mod:`.loss_backward`).
- ``grpo_step``: GRPO steps per hour with the real model through vLLM's CPU server, and each step's
  breakdown (generation, weight hand-off, log-probs, backward) (:mod:`.grpo_step`).

Same protocol as :mod:`reasoning_env.bench` (one module per benchmark with ``add_arguments`` and
``run``).
"""

from __future__ import annotations

from collections.abc import Sequence

from reasoning_env.bench import main as _main

__all__ = ["SUBCOMMANDS", "main"]

#: Command -> (module path, one-line help).
SUBCOMMANDS = {
    "rollout": (
        "training.bench.rollout",
        "lockstep vs one-episode-at-a-time GRPO rollouts (with stop-token stragglers)",
    ),
    "generation": (
        "training.bench.generation",
        "tokens/s of transformers vs vLLM's CPU server on the real model, 1/4/8/16 in flight",
    ),
    "lora_decode": (
        "training.bench.lora_decode",
        "decode tokens/s of the base model, the training's LoRA adapter and merged weights on vLLM's CPU server",
    ),
    "loss_backward": (
        "training.bench.loss_backward",
        "the loss's forward and backward per episode by micro-batch size and gradient checkpointing",
    ),
    "grpo_step": (
        "training.bench.grpo_step",
        "GRPO steps/hour with the real model through vLLM's CPU server, and where a step's time goes",
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one training benchmark (``[command, options...]``); returns its exit status."""
    return _main(argv, prog="python -m training.bench", subcommands=SUBCOMMANDS, description=__doc__.splitlines()[0])

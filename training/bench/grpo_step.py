"""Benchmark: GRPO steps per hour with the real model on CPU through vLLM's server, and where a step's time goes.

    python -m training.bench grpo_step                          # 2 steps of the CPU learning run's settings
    python -m training.bench grpo_step --steps 3 --num-generations 2
    python -m training.bench grpo_step --from-run runs/grpo-cpu-qwen0.5b   # a run already made: its metrics

Without ``--from-run`` it trains ``--steps`` optimizer steps with :func:`training.grpo_train.main` on
``embedded:qwen2.5-coder-0.5b`` (``--backend vllm_server``, LoRA, the environment of
``examples/training/cpu_real_model.yaml``: the settings of docs/training.md's learning run) in a temporary
folder, the server started for the run (its start is reported apart, not in the steps), and reads the
``timing/*`` rows the trainer logs (:mod:`training.trainer`) from ``metrics.jsonl``. With ``--from-run`` it
reads those rows from an existing run folder instead.

Printed JSON: ``steps`` measured, ``steps_per_hour`` (3,600 / the mean ``timing/step_s``), the mean seconds of
each part of a step (``generation``: playing the episodes through the server, environment included;
``weight_handoff``: saving the LoRA adapter and loading it into the server; ``logprobs``: the trainer's
log-probs of the sampled tokens for the importance-sampling correction, rewards and advantages;
``backward``: the loss's forward and backward passes; ``other``: the optimizer and the rest), each part's
share of the step, the model tokens generated per step and the generation tokens/s, the model, the settings,
and the 1-minute load average before and after. The first step of a fresh run also warms caches: read
``per_step`` for the spread. The machine is shared: repeat for the spread and compare within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["add_arguments", "run", "summarize"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this benchmark's options to ``p`` (the :mod:`training.bench` protocol)."""
    p.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    p.add_argument("--from-run", default=None, help="summarize an existing run folder's metrics.jsonl instead")
    p.add_argument("--model", default="embedded:qwen2.5-coder-0.5b", help="model name or folder")
    p.add_argument("--steps", type=int, default=2, help="optimizer steps to train")
    p.add_argument("--num-generations", type=int, default=4, help="group size (one group per step)")
    p.add_argument("--config", default="examples/training/cpu_real_model.yaml", help="environment YAML")
    p.add_argument("--lora-rank", type=int, default=8)
    p.add_argument("--output-dir", default=None, help="run folder (default: a temporary one, removed after)")


def _load1() -> float:
    return round(os.getloadavg()[0], 2)


def summarize(metrics_path: str | Path) -> dict:
    """Steps per hour and the mean time of each part of a step from a run's ``metrics.jsonl``
    (:func:`workbench.held_out.step_timing`, the one reader of the trainer's ``timing/*`` rows).

    Raises:
        ValueError: the file holds no row with ``timing/step_s`` (a run made before the trainer logged it).
    """
    from workbench.held_out import step_timing

    path = Path(metrics_path)
    if not path.is_file():
        raise ValueError(f"{path} does not exist")
    timing = step_timing(path.parent)
    if timing is None:
        raise ValueError(f"{path} has no timing/step_s rows (made before the trainer logged step times?)")
    return timing


def run(args: argparse.Namespace) -> int:
    """Train (or read) the steps and print the JSON of the module docstring."""
    load_before = _load1()
    if args.from_run:
        folder = Path(args.from_run)
        try:
            result = summarize(folder / "metrics.jsonl")
        except (OSError, ValueError) as exc:
            print(f"error: --from-run {args.from_run}: {exc}", file=sys.stderr)
            return 2
        meta = {}
        if (folder / "run.json").is_file():
            run_json = json.loads((folder / "run.json").read_text(encoding="utf-8"))
            meta = {k: run_json.get(k) for k in ("model", "backend", "num_generations", "lora_rank", "learning_rate")}
        print(
            json.dumps(
                {
                    "benchmark": "grpo_step",
                    "source": str(folder),
                    **meta,
                    **result,
                    "load_average": [load_before, _load1()],
                },
                indent=2,
            )
        )
        return 0

    from training.grpo_train import main as train

    tmp = None
    out = args.output_dir
    if out is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench-grpo-")
        out = str(Path(tmp.name) / "run")
    argv = [
        "--model", args.model, "--backend", "vllm_server", "--lora_rank", str(args.lora_rank),
        "--dtype", "float32", "--bf16", "false", "--config", args.config,
        "--num_generations", str(args.num_generations), "--per_device_train_batch_size", str(args.num_generations),
        "--max_steps", str(args.steps), "--logging_steps", "1", "--learning_rate", "1e-4",
        "--report_to", "none", "--output_dir", out, "--fresh",
    ]  # fmt: skip
    t0 = time.perf_counter()
    status = train(argv)
    wall = time.perf_counter() - t0
    if status != 0:
        print(f"error: the training run failed (exit status {status})", file=sys.stderr)
        return status
    result = summarize(Path(out) / "metrics.jsonl")
    steps_total = sum(s["step_s"] for s in result["per_step"])
    report = {
        "benchmark": "grpo_step",
        "model": args.model,
        "backend": "vllm_server",
        "num_generations": args.num_generations,
        "config": args.config,
        **result,
        "wall_s": round(wall, 1),
        "setup_s": round(wall - steps_total, 1),  # loading, the server's start, saving: not in steps/hour
        "load_average": [load_before, _load1()],
    }
    print(json.dumps(report, indent=2))
    if tmp is not None:
        tmp.cleanup()
    return 0

"""Benchmark: GRPO episodes per hour on the real model through vLLM's CPU server, shipped vs new configuration.

The shipped run's configuration against the faster one on the same machine in one run, and where a step's time goes.

    python -m training.bench grpo_step                          # shipped vs new, 2 steps each, one server
    python -m training.bench grpo_step --steps 3 --groups 8     # new = 8 groups of 4 per optimizer step
    python -m training.bench grpo_step --new-micro-batch 4 --new-gradient-checkpointing on   # a group a micro-batch
    python -m training.bench grpo_step --configs new            # only one of them
    python -m training.bench grpo_step --from-run runs/grpo-cpu-qwen0.5b   # a run already made: its metrics

Without ``--from-run`` it starts one vLLM CPU server as training does
(:func:`training.vllm_server_backend.serve_for_training`: run-time LoRA, every core; not counted in the steps) or
uses ``--rollout-server-url``, and trains ``--steps`` optimizer steps of each configuration on it, one after the
other in this process (:func:`training.grpo_train.build_trainer`: ``embedded:qwen2.5-coder-0.5b``, LoRA rank 8,
``--backend vllm_server``, the environment of ``examples/training/cpu_allocation.yaml`` at temperature 0.7, the
learning experiment's, the same seed), each in
its own run folder, and reads the ``timing/*`` rows the trainer logs (:mod:`training.trainer`):

- ``shipped``: the CPU learning run's settings (docs/training.md, ``examples/runs/grpo-cpu-qwen0.5b``): one group
  of ``--num-generations`` episodes per optimizer step, TRL's separate no-grad forward for the importance-sampling
  ratio (``fold_importance_sampling`` off);
- ``new``: the learning experiment's settings (``scripts/learning_experiment.sh`` after its amendment):
  ``--groups`` groups per optimizer step (default 4), all played in one rollout (in flight together) and trained
  ``--new-micro-batch`` episodes per micro-batch (default 1: no padding to the longest episode of a micro-batch, a
  tied group's episodes skipped whole) without gradient checkpointing (``--new-gradient-checkpointing off``; one
  episode's activations fit in memory, and recomputing them cost more than the batching saved:
  ``python -m training.bench loss_backward``), the ratio folded into the loss forward, micro-batches without
  advantage skipped.

Both run with dynamic sampling off (``--dynamic_sampling off``), so each step trains the same episodes of work: a
replayed tied group would add generation to one configuration only. The shipped side keeps gradient
checkpointing on, as its run did (``peak_rss_gib`` reports this process's peak).

Both train in ``--dtype`` (default: bfloat16 where this CPU computes it natively, AVX512-BF16 or AMX, else float32:
``reasoning_env.model_server._cpu_dtype``; the server picks the same). Printed JSON: per configuration the
``episodes_per_step``, ``episodes_per_hour`` (3,600 x episodes per step / the mean ``timing/step_s``),
``seconds_per_episode``, the mean seconds of each part of a step (``generation``: playing the episodes through the
server, environment included; ``weight_handoff``: saving the LoRA adapter and loading it into the server;
``logprobs``: the rest of TRL's generation step: the trainer's log-probs of the sampled tokens when not folded,
rewards and advantages; ``backward``: the loss's forward and backward passes; ``other``: the optimizer and the
rest), each part's share, ``per_step``, and the 1-minute load average (before, after, and the mean and max of
samples every 10 s while it trained); then ``new_over_shipped`` (the ratio of episodes per hour), the model, dtype,
settings and the server's start. The first step of each configuration also warms caches; the machine is shared:
compare within one run and repeat it for the spread.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
    p.add_argument("--steps", type=int, default=2, help="optimizer steps to train per configuration")
    p.add_argument("--num-generations", type=int, default=4, help="group size")
    p.add_argument("--groups", type=int, default=4, help="groups per optimizer step in the new configuration")
    p.add_argument(
        "--new-micro-batch",
        type=int,
        default=1,
        help="episodes per micro-batch in the new configuration (0: the group size)",
    )
    p.add_argument(
        "--new-gradient-checkpointing",
        choices=("on", "off"),
        default="off",
        help="gradient checkpointing in the new configuration (the shipped one keeps it on, as its run did)",
    )
    p.add_argument("--configs", default="shipped,new", help="which configurations to measure, in this order")
    p.add_argument(
        "--config",
        default="examples/training/cpu_allocation.yaml",
        help="environment YAML (default: the learning experiment's, whose groups mostly differ, so the loss's "
        "backward runs; on cpu_real_model.yaml most groups tie and the new configuration skips their backward)",
    )
    p.add_argument("--temperature", type=float, default=0.7, help="sampling temperature of the rollouts")
    p.add_argument("--lora-rank", type=int, default=8)
    p.add_argument("--dtype", default="auto", help="trainer dtype (auto: bfloat16 where the CPU has it)")
    p.add_argument(
        "--new-handoff",
        choices=("auto", "lora", "merged"),
        default="auto",
        help="how the new configuration hands its weights to the server: a LoRA adapter, or merged weights "
        "reloaded in place (training.vllm_server_backend.MergedWeightsHandoff; the server gets vLLM's dev endpoints); "
        "auto: merged where the trainer and server compute in float32 (exact there), else lora",
    )
    p.add_argument("--rollout-server-url", default=None, help="a running training server (default: start one)")
    p.add_argument("--output-dir", default=None, help="parent of the run folders (default: a temporary one)")


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

    return _measure(args, load_before)


#: Configuration name -> groups per optimizer step (None: ``--groups``), episodes per micro-batch (None: a group),
#: and the trainer's two savings (:mod:`training.trainer`): the folded importance-sampling ratio and skipping
#: micro-batches without advantage.
CONFIGS = {
    "shipped": {"groups": 1, "micro_batch": None, "fold": False, "skip_zero_advantage": False, "checkpointing": True},
    "new": {"groups": None, "micro_batch": None, "fold": True, "skip_zero_advantage": True, "checkpointing": None},
}


class _LoadSampler:
    """The 1-minute load average every ``every_s`` seconds in a background thread, while in a ``with`` block."""

    def __init__(self, every_s: float = 10.0) -> None:
        import threading

        self.every_s = every_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(self.every_s)

    def __enter__(self) -> _LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict:
        s = self.samples or [os.getloadavg()[0]]
        return {"mean": round(sum(s) / len(s), 2), "max": round(max(s), 2), "samples": len(s)}


def new_handoff(choice: str, dtype: str) -> str:
    """``--new-handoff``: ``auto`` is ``merged`` where the trainer and the server compute in float32 (merging is
    exact there: ``lora_decode`` measured it), else ``lora``."""
    from reasoning_env.model_server import _cpu_dtype

    if choice != "auto":
        return choice
    return "merged" if dtype == "float32" and _cpu_dtype() == "float32" else "lora"


def configuration_argv(name: str, args: argparse.Namespace, url: str, dtype: str, out: Path) -> tuple[list, dict]:
    """The ``training.grpo_train`` command line of configuration ``name`` (:data:`CONFIGS`) and its settings
    (``groups`` per optimizer step, ``micro_batch`` episodes, ``fold``, ``skip_zero_advantage``)."""
    g = args.num_generations
    cfg = dict(CONFIGS[name])
    cfg["groups"] = cfg["groups"] or args.groups
    cfg["micro_batch"] = cfg["micro_batch"] or (getattr(args, "new_micro_batch", 0) if name == "new" else 0) or g
    if cfg["checkpointing"] is None:
        cfg["checkpointing"] = getattr(args, "new_gradient_checkpointing", "off") == "on"
    if (cfg["groups"] * g) % cfg["micro_batch"]:
        raise ValueError(f"--new-micro-batch {cfg['micro_batch']} must divide the step's {cfg['groups'] * g} episodes")
    accumulation = cfg["groups"] * g // cfg["micro_batch"]
    bf16 = "true" if dtype == "bfloat16" else "false"
    argv = [
        "--model", args.model, "--backend", "vllm_server", "--rollout_server_url", url,
        "--lora_rank", str(args.lora_rank), "--dtype", dtype, "--bf16", bf16, "--config", args.config,
        "--num_generations", str(g), "--per_device_train_batch_size", str(cfg["micro_batch"]),
        "--gradient_accumulation_steps", str(accumulation),
        "--num_episodes", str(max(64, cfg["groups"] * args.steps)),
        "--max_steps", str(args.steps), "--logging_steps", "1", "--learning_rate", "1e-4",
        "--temperature", str(getattr(args, "temperature", 1.0)),
        "--report_to", "none", "--output_dir", str(out), "--fresh", "--dynamic_sampling", "off",
        "--weight_handoff", new_handoff(args.new_handoff, dtype) if name == "new" else "lora",
        "--gradient_checkpointing" if cfg["checkpointing"] else "--no_gradient_checkpointing",
    ]  # fmt: skip
    return argv, cfg


def _train_one(name: str, args: argparse.Namespace, url: str, dtype: str, parent: Path) -> dict:
    """Train ``args.steps`` steps of configuration ``name`` against the server at ``url``; its summary."""
    import gc

    from training.grpo_train import build_trainer, parse_args

    argv, cfg = configuration_argv(name, args, url, dtype, parent / name)
    out = parent / name
    load_before = _load1()
    t0 = time.perf_counter()
    with _LoadSampler() as load:
        setup = build_trainer(parse_args(argv))
        setup.trainer.fold_importance_sampling = cfg["fold"]
        setup.trainer.skip_zero_advantage = cfg["skip_zero_advantage"]
        setup.trainer.train()
        setup.writer.write()
    wall = time.perf_counter() - t0
    del setup
    gc.collect()
    result = summarize(out / "metrics.jsonl")
    episodes = cfg["groups"] * args.num_generations
    step_s = float(result["step_s"])
    steps_total = sum(s["step_s"] for s in result["per_step"])
    return {
        "groups_per_step": cfg["groups"],
        "episodes_per_step": episodes,
        "episodes_per_micro_batch": cfg["micro_batch"],
        "gradient_checkpointing": cfg["checkpointing"],
        "fold_importance_sampling": cfg["fold"],
        "skip_zero_advantage": cfg["skip_zero_advantage"],
        "weight_handoff": args.new_handoff if name == "new" else "lora",
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "episodes_per_hour": round(3600.0 * episodes / step_s, 2),
        "seconds_per_episode": round(step_s / episodes, 2),
        **result,
        "wall_s": round(wall, 1),
        "setup_s": round(wall - steps_total, 1),  # loading the trainer, saving: not in episodes/hour
        "load_average": {"before": load_before, "after": _load1(), "while_training": load.summary()},
        "argv": argv,
    }


def _measure(args: argparse.Namespace, load_before: float) -> int:
    from reasoning_env.errors import ReasoningEconomicsError
    from reasoning_env.model_server import _cpu_dtype
    from training.vllm_server_backend import serve_for_training

    names = [c.strip() for c in str(args.configs).split(",") if c.strip()]
    if not names or not set(names) <= set(CONFIGS) or args.steps < 1 or args.groups < 1:
        print(f"error: --configs is a comma list of {sorted(CONFIGS)}; --steps and --groups >= 1", file=sys.stderr)
        return 2
    dtype = _cpu_dtype() if args.dtype == "auto" else args.dtype
    args.new_handoff = new_handoff(args.new_handoff, dtype)
    tmp = None
    parent = Path(args.output_dir) if args.output_dir else None
    if parent is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench-grpo-")
        parent = Path(tmp.name)
    parent.mkdir(parents=True, exist_ok=True)
    server = None
    report: dict = {"benchmark": "grpo_step", "model": args.model, "backend": "vllm_server", "dtype": dtype}
    report.update(num_generations=args.num_generations, steps=args.steps, config=args.config)
    try:
        url = args.rollout_server_url
        if url is None:
            server = serve_for_training(
                args.model,
                max_lora_rank=max(8, args.lora_rank),
                log_path=parent / "vllm.log",
                merged_weights=args.new_handoff == "merged",
            )
            url = server.base_url
            report["server"] = {k: server.describe()[k] for k in ("engine_version", "dtype", "startup_s")}
        else:
            report["server"] = {"base_url": url}
        report["configurations"] = {name: _train_one(name, args, url, dtype, parent) for name in names}
    except ReasoningEconomicsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if server is not None:
            server.stop()
        if tmp is not None:
            tmp.cleanup()
    configs = report["configurations"]
    if "shipped" in configs and "new" in configs:
        report["new_over_shipped"] = round(
            configs["new"]["episodes_per_hour"] / configs["shipped"]["episodes_per_hour"], 2
        )
    report["load_average"] = [load_before, _load1()]
    print(json.dumps(report, indent=2))
    return 0

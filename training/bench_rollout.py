"""Benchmark: lockstep batched rollouts vs one episode at a time, same model, same episodes.

    python -m training.bench_rollout                       # tiny CPU model, 8 episodes, JSON out
    python -m training.bench_rollout --model Qwen/Qwen2.5-0.5B-Instruct --episodes 16 --config env.yaml
    python -m training.bench_rollout --check               # exit 1 unless >= 5x fewer calls and >= 3x faster

Both modes play the same episode seeds (groups of ``--group_size`` members sharing a seed, as in
GRPO) with the ``transformers`` backend. Printed JSON (one object): per mode ``seconds`` (wall
time of the whole rollout, environment included), ``episodes_per_s``, ``generate_calls``,
``calls_per_episode``, ``model_tokens`` and ``generate_seconds``; plus ``call_ratio``
(sequential calls / lockstep calls) and ``speedup`` (sequential seconds / lockstep seconds).
Each mode runs ``--repeats`` times, interleaved; ``seconds``/``speedup`` use the median run,
``best_seconds``/``speedup_best`` the fastest (least disturbed when the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Optional

BENCH_ENV = {"sources": ["reasoning_gym"], "num_questions": 3, "max_tokens_per_step": 16}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m training.bench_rollout", description=__doc__.splitlines()[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="tiny", help="'tiny' (random 2-layer Qwen2) or a Hub id / local folder.")
    p.add_argument("--config", default=None, help="Environment YAML; default: 3 reasoning-gym questions, 16 tokens per turn.")
    p.add_argument("--episodes", type=int, default=8, help="Episodes per mode.")
    p.add_argument("--group_size", type=int, default=2, help="Members per seed (GRPO group).")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=1, help="Runs per mode (median reported).")
    p.add_argument("--max_episode_tokens", type=int, default=4096)
    p.add_argument("--device", default=None, help="cpu / cuda (default: cuda when available).")
    p.add_argument("--check", action="store_true", help="Exit 1 unless call_ratio >= 5 and speedup >= 3.")
    return p


def run(args: argparse.Namespace) -> dict:
    """Run the benchmark and return the JSON-ready result (see the module docstring)."""
    import torch

    from reasoning_env.config import EnvConfig
    from reasoning_env.conversation import ChatFormat
    from training.envs import InProcessEnvFactory
    from training.generation import TransformersBackend
    from training.models import eos_token_ids, load_policy
    from training.rollout import EpisodeRunner, EpisodeSpec, RolloutLimits
    from training.trl_rollout import episode_seeds

    cfg = EnvConfig.from_yaml(args.config) if args.config else EnvConfig().replace(**BENCH_ENV)
    policy = load_policy(args.model, seed=args.seed)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model = policy.model.to(device)
    backend = TransformersBackend(model=model, pad_token_id=policy.tokenizer.pad_token_id,
                                  eos_ids=eos_token_ids(policy.tokenizer, model), device=device)
    runner = EpisodeRunner(backend, InProcessEnvFactory(cfg), ChatFormat(policy.tokenizer),
                           limits=RolloutLimits(max_episode_tokens=args.max_episode_tokens,
                                                tokenizer_name=policy.tokenizer_name),
                           run_id="bench", policy="bench")
    n_groups = max(1, args.episodes // args.group_size)
    seeds = episode_seeds(n_groups, args.seed)
    specs = [EpisodeSpec(seed=seeds[i // args.group_size], group=i // args.group_size,
                         member=i % args.group_size, episode=i // args.group_size)
             for i in range(n_groups * args.group_size)]

    # warm-up: pools, tokenizer, first forward pass
    runner.play_lockstep(specs[:1])

    results: dict[str, list[dict]] = {"lockstep": [], "sequential": []}
    questions: dict[str, list] = {}
    for _ in range(args.repeats):
        for mode in ("sequential", "lockstep"):
            before = backend.stats.as_dict()
            torch.manual_seed(args.seed)
            t0 = time.perf_counter()
            traces = runner.play_lockstep(specs) if mode == "lockstep" else runner.play_sequential(specs)
            seconds = time.perf_counter() - t0
            after = backend.stats.as_dict()
            questions[mode] = [[s.question_id for s in tr.steps] for tr in traces]
            results[mode].append({
                "seconds": seconds,
                "generate_calls": after["calls"] - before["calls"],
                "generate_seconds": after["seconds"] - before["seconds"],
                "model_tokens": sum(tr.model_tokens for tr in traces),
                "env_steps": sum(tr.num_answered for tr in traces),
            })

    def summarise(rows: list[dict]) -> dict:
        secs = statistics.median(r["seconds"] for r in rows)
        calls = rows[0]["generate_calls"]
        return {
            "seconds": round(secs, 3),
            "best_seconds": round(min(r["seconds"] for r in rows), 3),
            "episodes_per_s": round(len(specs) / secs, 4),
            "generate_calls": calls,
            "calls_per_episode": round(calls / len(specs), 3),
            "generate_seconds": round(statistics.median(r["generate_seconds"] for r in rows), 3),
            "model_tokens": rows[0]["model_tokens"],
            "env_steps": rows[0]["env_steps"],
            "all_seconds": [round(r["seconds"], 3) for r in rows],
        }

    lock, seq = summarise(results["lockstep"]), summarise(results["sequential"])
    return {
        "model": args.model,
        "device": device,
        "episodes": len(specs),
        "group_size": args.group_size,
        "questions_per_episode": cfg.num_questions,
        "max_tokens_per_step": cfg.max_tokens_per_step,
        "torch_threads": torch.get_num_threads(),
        "lockstep": lock,
        "sequential": seq,
        "call_ratio": round(seq["generate_calls"] / max(1, lock["generate_calls"]), 2),
        "speedup": round(seq["seconds"] / lock["seconds"], 2),
        "speedup_best": round(seq["best_seconds"] / lock["best_seconds"], 2),
        "same_episodes": questions["lockstep"] == questions["sequential"],
    }


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    result = run(args)
    print(json.dumps(result, indent=2))
    if args.check and (result["call_ratio"] < 5 or result["speedup"] < 3):
        print(f"check failed: call_ratio {result['call_ratio']} (need >= 5), speedup {result['speedup']} (need >= 3)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

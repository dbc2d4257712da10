"""Benchmark: lockstep batched rollouts vs one episode at a time, same model, same episodes.

    python -m training.bench rollout                       # tiny CPU model, 8 episodes, JSON out
    python -m training.bench rollout --repeats 5           # repeat, report the spread
    python -m training.bench rollout --model Qwen/Qwen2.5-0.5B-Instruct --episodes 16 --config env.yaml
    python -m training.bench rollout --check               # exit 1 unless >= 5x fewer calls and >= 3x faster

Both modes play the same episode seeds (groups of ``--group_size`` members sharing a seed, as in
GRPO) with the ``transformers`` backend, in two cases:

- ``fixed``: every turn runs to its cap (the tiny random model never samples its stop token);
- ``stop_token``: each answer ends with the stop token at its own length, drawn from the context
  (a hash of its last ids, uniform in ``[1, cap]``), so the same turn stops at the same length in
  both modes. A lockstep call decodes until its longest answer ends, so it pays for stragglers:
  ``straggler_waste`` is the share of decoded sequence-steps spent on answers that had already
  stopped (``1 - tokens / decode_slots``); ``straggler_cost`` is the fixed case's speedup divided
  by this case's (how much of the lockstep gain the stragglers take back).

Printed JSON (one object): ``speedup`` (sequential seconds / lockstep seconds, median over
repeats, fixed case), ``call_ratio`` (sequential calls / lockstep calls), ``same_episodes`` (both
modes played the same questions in every case), ``speedup_spread`` (min and max of the per-repeat
ratios), ``stop_token`` (the same figures for that case, plus ``straggler_waste`` and
``straggler_cost``), per mode and case ``seconds``/``all_seconds``/``generate_calls``/
``model_tokens``, ``torch_threads`` and ``load_average`` (1-minute, before and after). Modes are
interleaved within each repeat; the machine is shared, so compare ratios from one run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time

BENCH_ENV = {"sources": ["reasoning_gym"], "num_questions": 3, "max_tokens_per_step": 16}
CASES = ("fixed", "stop_token")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this benchmark's options to ``p`` (the :mod:`training.bench` protocol)."""
    p.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    p.add_argument("--model", default="tiny", help="'tiny' (random 2-layer Qwen2) or a Hub id / local folder.")
    p.add_argument(
        "--config", default=None, help="Environment YAML; default: 3 reasoning-gym questions, 16 tokens per turn."
    )
    p.add_argument("--episodes", type=int, default=8, help="Episodes per mode.")
    p.add_argument("--group_size", type=int, default=2, help="Members per seed (GRPO group).")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3, help="Runs per mode and case (median reported, spread too).")
    p.add_argument("--max_episode_tokens", type=int, default=4096)
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1: on a shared machine more threads spin against other jobs; 0 = torch's default).",
    )
    p.add_argument("--device", default=None, help="cpu / cuda (default: cuda when available).")
    p.add_argument("--check", action="store_true", help="Exit 1 unless call_ratio >= 5 and speedup >= 3.")


def stop_length(context: list[int], turn_mark: int, longest: int) -> int:
    """The length (tokens, stop token included) at which the stop-token case ends a turn, uniform in
    ``[1, longest]``: a hash of the episode (the context's first 160 ids: system prompt and first
    question) and of the turn (how many ``turn_mark`` ids the context holds), so the same turn of the
    same episode stops at the same length in both modes whatever was sampled before it."""
    key = ",".join(map(str, context[:160])) + f"|{sum(1 for t in context if t == turn_mark)}"
    digest = hashlib.sha256(key.encode()).digest()
    return 1 + int.from_bytes(digest[:4], "big") % max(1, int(longest))


def stop_token_processors(eos_id: int, turn_mark: int, longest: int):
    """``extra_processors`` for :class:`~training.generation.TransformersBackend` that end row ``i``
    with ``eos_id`` at :func:`stop_length` of its context (only the stop token stays possible); the
    environment's per-turn cap still cuts longer answers."""

    def make(contexts: list[list[int]], caps: list[int], width: int) -> list:
        import torch
        from transformers import LogitsProcessor

        lengths = torch.tensor([stop_length(c, turn_mark, longest) for c in contexts])

        class StopAt(LogitsProcessor):
            def __call__(self, input_ids, scores):
                generated = input_ids.shape[1] - width
                rows = (lengths.to(scores.device) - 1) <= generated
                if rows.any():
                    scores[rows] = float("-inf")
                    scores[rows, eos_id] = 0.0
                return scores

        return [StopAt()]

    return make


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def measure(args: argparse.Namespace) -> dict:
    """Run the benchmark and return the JSON-ready result (see the module docstring)."""
    import torch

    from reasoning_env.config import EnvConfig
    from reasoning_env.conversation import ChatFormat
    from training.envs import InProcessEnvFactory
    from training.generation import TransformersBackend
    from training.models import eos_token_ids, load_policy
    from training.rollout import EpisodeRunner, EpisodeSpec, RolloutLimits
    from training.trl_rollout import episode_seeds

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    load_before = _load_average()
    cfg = EnvConfig.from_yaml(args.config) if args.config else EnvConfig().replace(**BENCH_ENV)
    policy = load_policy(args.model, seed=args.seed)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model = policy.model.to(device)
    eos = eos_token_ids(policy.tokenizer, model)
    vocab = policy.tokenizer.get_vocab()
    stop_id = vocab.get("<|im_end|>", eos[0])
    turn_mark = vocab.get("<|im_start|>", stop_id)
    backends = {
        "fixed": TransformersBackend(
            model=model, pad_token_id=policy.tokenizer.pad_token_id, eos_ids=eos, device=device
        ),
        "stop_token": TransformersBackend(
            model=model,
            pad_token_id=policy.tokenizer.pad_token_id,
            eos_ids=eos,
            device=device,
            extra_processors=stop_token_processors(stop_id, turn_mark, cfg.max_tokens_per_step),
        ),
    }
    runners = {
        case: EpisodeRunner(
            b,
            InProcessEnvFactory(cfg),
            ChatFormat(policy.tokenizer),
            limits=RolloutLimits(max_episode_tokens=args.max_episode_tokens, tokenizer_name=policy.tokenizer_name),
            run_id="bench",
            policy="bench",
        )
        for case, b in backends.items()
    }
    n_groups = max(1, args.episodes // args.group_size)
    seeds = episode_seeds(n_groups, args.seed)
    specs = [
        EpisodeSpec(
            seed=seeds[i // args.group_size],
            group=i // args.group_size,
            member=i % args.group_size,
            episode=i // args.group_size,
        )
        for i in range(n_groups * args.group_size)
    ]

    for runner in runners.values():  # warm-up: pools, tokenizer, first forward pass
        runner.play_lockstep(specs[:1])

    results: dict[tuple, list[dict]] = {(c, m): [] for c in CASES for m in ("lockstep", "sequential")}
    questions: dict[tuple, list] = {}
    for _ in range(args.repeats):
        for case in CASES:
            runner, backend = runners[case], backends[case]
            for mode in ("sequential", "lockstep"):
                before = backend.stats.as_dict()
                torch.manual_seed(args.seed)
                t0 = time.perf_counter()
                traces = runner.play_lockstep(specs) if mode == "lockstep" else runner.play_sequential(specs)
                seconds = time.perf_counter() - t0
                after = backend.stats.as_dict()
                questions[(case, mode)] = [[s.question_id for s in tr.steps] for tr in traces]
                results[(case, mode)].append(
                    {
                        "seconds": seconds,
                        "generate_calls": after["calls"] - before["calls"],
                        "generate_seconds": after["seconds"] - before["seconds"],
                        "tokens": after["tokens"] - before["tokens"],
                        "decode_slots": after["decode_slots"] - before["decode_slots"],
                        "model_tokens": sum(tr.model_tokens for tr in traces),
                        "env_steps": sum(tr.num_steps for tr in traces),
                        "turn_lengths": [t.end - t.start for tr in traces for t in tr.turns],
                    }
                )

    def summarise(rows: list[dict]) -> dict:
        secs = statistics.median(r["seconds"] for r in rows)
        calls = rows[0]["generate_calls"]
        return {
            "seconds": round(secs, 3),
            "best_seconds": round(min(r["seconds"] for r in rows), 3),
            "all_seconds": [round(r["seconds"], 3) for r in rows],
            "episodes_per_s": round(len(specs) / secs, 4),
            "generate_calls": calls,
            "calls_per_episode": round(calls / len(specs), 3),
            "generate_seconds": round(statistics.median(r["generate_seconds"] for r in rows), 3),
            "model_tokens": rows[0]["model_tokens"],
            "env_steps": rows[0]["env_steps"],
            "decode_slots": rows[0]["decode_slots"],
        }

    def case_result(case: str) -> dict:
        lock_rows, seq_rows = results[(case, "lockstep")], results[(case, "sequential")]
        lock, seq = summarise(lock_rows), summarise(seq_rows)
        ratios = [s["seconds"] / lk["seconds"] for s, lk in zip(seq_rows, lock_rows)]
        same = questions[(case, "lockstep")] == questions[(case, "sequential")]
        return {
            "lockstep": lock,
            "sequential": seq,
            "call_ratio": round(seq["generate_calls"] / max(1, lock["generate_calls"]), 2),
            "speedup": round(seq["seconds"] / lock["seconds"], 2),
            "speedup_best": round(seq["best_seconds"] / lock["best_seconds"], 2),
            "speedup_spread": [round(min(ratios), 2), round(max(ratios), 2)],
            "same_episodes": bool(same),
            "straggler_waste": round(1 - lock_rows[0]["tokens"] / max(1, lock_rows[0]["decode_slots"]), 3),
            "mean_turn_tokens": round(statistics.mean(lock_rows[0]["turn_lengths"]), 2),
        }

    fixed, stop = case_result("fixed"), case_result("stop_token")
    stop["straggler_cost"] = round(fixed["speedup"] / stop["speedup"], 2) if stop["speedup"] else None
    return {
        "model": args.model,
        "device": device,
        "episodes": len(specs),
        "group_size": args.group_size,
        "questions_per_episode": cfg.num_questions,
        "max_tokens_per_step": cfg.max_tokens_per_step,
        "repeats": args.repeats,
        "torch_threads": torch.get_num_threads(),
        "load_average": {"before": load_before, "after": _load_average()},
        "speedup": fixed["speedup"],
        "call_ratio": fixed["call_ratio"],
        "same_episodes": fixed["same_episodes"] and stop["same_episodes"],
        "speedup_spread": fixed["speedup_spread"],
        "fixed": fixed,
        "stop_token": stop,
    }


def run(args: argparse.Namespace) -> int:
    """Measure (see :func:`add_arguments` for ``args``), print the JSON result; returns the exit
    status (1 when ``--check`` fails, 2 for bad options)."""
    if args.repeats < 1 or args.episodes < 1:
        print("error: --repeats and --episodes must be >= 1", file=sys.stderr)
        return 2
    result = measure(args)
    print(json.dumps(result, indent=2))
    if args.check and (result["call_ratio"] < 5 or result["speedup"] < 3):
        print(
            f"check failed: call_ratio {result['call_ratio']} (need >= 5), speedup {result['speedup']} (need >= 3)",
            file=sys.stderr,
        )
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m training.bench rollout [options]`` with ``argv`` as the options; returns the exit status."""
    from training.bench import main as bench_main

    return bench_main(["rollout", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())

"""``python -m reasoning_env.bench steps``: throughput and latency of ``env.step()``.

Each step is the environment's real ``step()``: token counting with the Qwen2.5 tokenizer,
grading, and the reward. Responses are the datasets' own worked solutions: MATH-500
``solution`` fields (they end in ``\\boxed{answer}``) and GSM8K ``answer`` fields rewritten to
end with ``\\boxed{N}`` (the ``#### N`` line replaced), interleaved MATH, GSM8K, MATH, ...

* ``--mode right``: each question gets its own solution; a correct grader grades 100% correct.
* ``--mode wrong``: each question gets the solution of the next case whose gold answer differs
  (as text, after normalisation; skipping only identical answers such as two consecutive
  ``23``), so a correct grader grades 0% correct.

Questions are served in episodes of 10 (``hard_cap_mode=False`` so no step is clipped); gold
answers are prepared and the grading worker started before the timed loop, as the environment
does when it loads its questions. The process is pinned to one CPU core, the idlest one at
start (``--no-pin`` to skip). The whole set is timed ``--repeat`` times (default 3) and the fastest pass is reported,
as ``timeit`` does, because on a shared machine other processes' preemptions only ever add
time. Output: one JSON line ``{"steps", "steps_per_s", "p50_ms", "p99_ms", "max_ms", "mode",
"graded_correct", ...}``: ``graded_correct`` is the fraction graded correct, ``reasons`` counts
grade reasons, ``cpu_steps_per_s`` is the same rate on this thread's CPU time (insensitive to
preemption), ``runs_steps_per_s`` lists every pass.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time
from pathlib import Path
from typing import Any

EPISODE_SIZE = 10


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of the ``steps`` subcommand."""
    p.add_argument(
        "--data-dir",
        default=str(Path("..") / "shared" / "data"),
        help="folder with math500_test.jsonl and gsm8k_test.jsonl (default ../shared/data)",
    )
    p.add_argument("--n", type=int, default=400, help="number of steps (half MATH-500, half GSM8K)")
    p.add_argument("--mode", choices=("right", "wrong"), default="right")
    p.add_argument(
        "--tokenizer",
        default=None,
        help="tokenizer (default: <data-dir>/qwen2.5_tokenizer if present, else Qwen/Qwen2.5-0.5B-Instruct)",
    )
    p.add_argument("--timeout-s", type=float, default=2.0, help="grading time limit per step (seconds)")
    p.add_argument("--no-pin", action="store_true", help="do not pin the process to one CPU core")
    p.add_argument(
        "--grader",
        choices=("ours", "math-verify", "naive"),
        default="ours",
        help="grader to time: ours (default), math-verify used directly (in-process, its "
        "default configs and signal timeouts), or a naive regex grader (for scale)",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="time the whole set this many times and report the fastest pass (as timeit does; "
        "other passes' rates are listed in runs_steps_per_s)",
    )


def gsm8k_boxed(answer: str) -> str:
    """A GSM8K ``answer`` with its final ``#### N`` line replaced by ``\\boxed{N}``."""
    head, sep, tail = answer.rpartition("####")
    if not sep:
        raise ValueError("GSM8K answer without '####'")
    return head.rstrip() + "\n\\boxed{" + tail.strip() + "}"


def build_cases(data_dir: str, n: int) -> list:
    """``n`` interleaved (question, right response) pairs from MATH-500 and GSM8K."""
    from reasoning_env.sources import load_pools

    pools = load_pools(["math500", "gsm8k"], data_dir=data_dir, hub=False)
    math_q = pools.pools["MATH-500"]
    gsm_q = pools.pools["GSM8K"]
    cases = []
    for i in range(max(len(math_q), len(gsm_q))):
        if i < len(math_q):
            q = math_q[i]
            cases.append((q, q.metadata["solution"]))
        if i < len(gsm_q):
            q = gsm_q[i]
            cases.append((q, gsm8k_boxed(q.metadata["solution"])))
        if len(cases) >= n:
            break
    return cases[:n]


def wrong_responses(cases: list) -> list:
    """For each case, the response of the next case (cyclically) whose gold answer differs."""
    from reasoning_env.grading import normalize_answer

    keys = [normalize_answer(q.gold_answer).replace(" ", "") for q, _ in cases]
    out = []
    n = len(cases)
    for i in range(n):
        j = (i + 1) % n
        while keys[j] == keys[i] and j != i:
            j = (j + 1) % n
        out.append(cases[j][1])
    return out


class _MathVerifyDirect:
    """math-verify as commonly used: ``verify(parse("\\boxed{gold}"), parse(response))`` with its
    default extraction configs, in the calling thread (for comparison only: it can hang and its
    expression config evaluates model text)."""

    def __init__(self) -> None:
        from math_verify import parse, verify

        self._parse, self._verify = parse, verify
        self._golds: dict = {}

    def prepare_golds(self, golds: Any) -> None:
        for g in golds:
            self._golds[g] = self._parse("\\boxed{" + g + "}")

    def warm_up(self, wait_s: float = 0.0) -> bool:
        return True

    def grade(self, text: str, gold: str, *, timeout_s: Any = None) -> Any:
        from reasoning_env.grading import GradeResult

        t0 = time.perf_counter()
        g = self._golds.get(gold) or self._parse("\\boxed{" + gold + "}")
        ok = bool(self._verify(g, self._parse(text)))
        return GradeResult(ok, None, "symbolic" if ok else "mismatch", time.perf_counter() - t0, "boxed")


class _NaiveRegex:
    """The naive grader: first-``}`` box regex or ``####``, then string or float equality."""

    _BOX = re.compile(r"\\boxed\{([^}]*)\}")
    _GSM = re.compile(r"####\s*(.+)")

    def prepare_golds(self, golds: Any) -> None:
        pass

    def warm_up(self, wait_s: float = 0.0) -> bool:
        return True

    def grade(self, text: str, gold: str, *, timeout_s: Any = None) -> Any:
        from reasoning_env.grading import GradeResult

        t0 = time.perf_counter()
        found = self._BOX.findall(text) or self._GSM.findall(text)
        pred = found[-1].strip() if found else None
        ok = False
        if pred is not None:
            a, b = pred.replace(",", "").strip("$ ."), gold.replace(",", "").strip("$ .")
            ok = a == b
            if not ok:
                try:
                    ok = abs(float(a) - float(b)) < 1e-6
                except ValueError:
                    ok = False
        return GradeResult(ok, pred, "exact" if ok else "mismatch", time.perf_counter() - t0, "boxed")


def _cpu_busy() -> dict:
    """cpu index -> (busy, total) jiffies from /proc/stat (empty where unavailable)."""
    out = {}
    try:
        with open("/proc/stat") as fh:
            for line in fh:
                parts = line.split()
                if parts and parts[0].startswith("cpu") and parts[0] != "cpu":
                    vals = [int(v) for v in parts[1:]]
                    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
                    out[int(parts[0][3:])] = (sum(vals) - idle, sum(vals))
    except (OSError, ValueError):
        pass
    return out


def _idlest_cpu(allowed: list, sample_s: float = 0.5) -> int:
    """The allowed CPU that was least busy over ``sample_s`` seconds (other processes on a
    shared machine would otherwise preempt the pinned benchmark)."""
    a = _cpu_busy()
    time.sleep(sample_s)
    b = _cpu_busy()
    best, best_frac = allowed[0], 2.0
    for cpu in allowed:
        if cpu in a and cpu in b and b[cpu][1] > a[cpu][1]:
            frac = (b[cpu][0] - a[cpu][0]) / (b[cpu][1] - a[cpu][1])
            if frac < best_frac:
                best, best_frac = cpu, frac
    return best


def _timed_pass(envs: list, by_id: dict, action_cls: Any) -> dict:
    """One pass over every episode: reset (untimed), then each step timed (wall and CPU)."""
    times = []
    cpu_total = 0.0
    correct = 0
    reasons: dict = {}
    for k, env in enumerate(envs):
        env.reset(seed=k)  # outside the timed loop (loads the tokenizer the first time)
        for q in env.questions:
            action = action_cls(response=by_id[q.id])
            c0 = time.thread_time()
            t0 = time.perf_counter()
            obs = env.step(action)
            times.append(time.perf_counter() - t0)
            cpu_total += time.thread_time() - c0
            rec = obs.last_step
            correct += int(rec.correct)
            reasons[rec.grade_reason] = reasons.get(rec.grade_reason, 0) + 1
    times.sort()
    total = sum(times)
    return {
        "steps": len(times),
        "steps_per_s": len(times) / total if total > 0 else float("inf"),
        "cpu_steps_per_s": len(times) / cpu_total if cpu_total > 0 else float("inf"),
        "p50_ms": round(1000 * statistics.median(times), 3),
        "p99_ms": round(1000 * times[min(len(times) - 1, int(0.99 * len(times)))], 3),
        "max_ms": round(1000 * times[-1], 3),
        "graded_correct": round(correct / len(times), 4),
        "reasons": dict(sorted(reasons.items())),
    }


def run(args: argparse.Namespace) -> int:
    """Run the benchmark and print one JSON line. Returns 0."""
    from reasoning_env.config import EnvConfig
    from reasoning_env.env import ReasoningEconomicsEnv
    from reasoning_env.grading import Grader
    from reasoning_env.models import ReasoningEconomicsAction
    from reasoning_env.sources import PoolSet

    if args.n < 1:
        raise SystemExit("--n must be at least 1")
    data_dir = args.data_dir
    tokenizer = args.tokenizer
    if tokenizer is None:
        local = Path(data_dir) / "qwen2.5_tokenizer"
        tokenizer = str(local) if local.is_dir() else "Qwen/Qwen2.5-0.5B-Instruct"
    cases = build_cases(data_dir, args.n)
    responses = [r for _, r in cases] if args.mode == "right" else wrong_responses(cases)
    by_id = {q.id: resp for (q, _), resp in zip(cases, responses)}

    if args.grader == "ours":
        grader: Any = Grader(timeout_s=args.timeout_s)
    elif args.grader == "math-verify":
        grader = _MathVerifyDirect()
    else:
        grader = _NaiveRegex()
    grader.prepare_golds(q.gold_answer for q, _ in cases)  # load time: parse every gold once
    grader.warm_up(wait_s=60.0)
    config = EnvConfig(
        sources=["math500", "gsm8k"],
        data_dir=data_dir,
        hard_cap_mode=False,
        num_questions=EPISODE_SIZE,
        tokenizer_name=tokenizer,
    )
    envs = []
    for k in range(0, len(cases), EPISODE_SIZE):
        chunk = tuple(q for q, _ in cases[k : k + EPISODE_SIZE])
        env = ReasoningEconomicsEnv(
            config.replace(num_questions=len(chunk)), pools=PoolSet(pools={"bench": chunk}), grader=grader
        )
        envs.append(env)
    pinned = None
    if not args.no_pin and hasattr(os, "sched_setaffinity"):
        pinned = _idlest_cpu(sorted(os.sched_getaffinity(0)))
        os.sched_setaffinity(0, {pinned})

    passes = [_timed_pass(envs, by_id, ReasoningEconomicsAction) for _ in range(max(1, args.repeat))]
    best = max(passes, key=lambda p: p["steps_per_s"])
    out: dict[str, Any] = {
        "steps": best["steps"],
        "steps_per_s": round(best["steps_per_s"], 1),
        "p50_ms": best["p50_ms"],
        "p99_ms": best["p99_ms"],
        "max_ms": best["max_ms"],
        "mode": args.mode,
        "graded_correct": best["graded_correct"],
        "reasons": best["reasons"],
        "cpu_steps_per_s": round(best["cpu_steps_per_s"], 1),
        "runs_steps_per_s": [round(p["steps_per_s"], 1) for p in passes],
        "tokenizer": Path(tokenizer).name if os.path.isdir(tokenizer) else tokenizer,
        "pinned": pinned,
        "grader": args.grader,
    }
    print(json.dumps(out))
    return 0

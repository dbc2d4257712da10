"""Load benchmark of the OpenEnv server: many concurrent WebSocket sessions playing whole episodes.

    python -m reasoning_env.bench server --sessions 64 --episodes 256

Starts ``python -m reasoning_env.server`` on a free loopback port (configured like any server by
the ``REE_*`` environment variables, e.g. ``REE_SOURCES=gsm8k,math500 REE_DATA_DIR=../shared/data``)
and connects ``--sessions`` asynchronous :class:`~reasoning_env.client.ReasoningEconomicsClient`
sessions from this process. Each session plays one warm-up episode, then episodes (reset with a
seed, steps until done) are handed out to the sessions in three phases of ``N = --episodes``:

1. ``throughput``: N episodes as fast as answers come (no think time): the server's capacity.
2. ``at_rate``: N episodes with steps paced to ``--rate`` steps/s in all (default 500): the step
   latency a trainer sees at that load.
3. ``memory`` (``--memory-check``, default on): on to 10 N episodes in all, as fast as possible;
   the server's resident memory after N and after 10 N episodes shows whether it stays flat.

Responses are realistic: each question's own worked solution (GSM8K, MATH-500) or a written-out
chain of arithmetic, ending in ``\\boxed{}``, right with probability ``--accuracy`` and otherwise a
plausible wrong answer; a third of the sessions count tokens with Qwen2.5's tokenizer, a third
with Qwen3's, a third with the config's default.

Prints one JSON object: per phase steps/s, step latency percentiles (ms, as the client sees it:
send to answer), server and client CPU milliseconds per step; the server's memory (MiB) at
start, after N and 10 N episodes and at its peak; the machine's load average before the run
(other processes on the machine skew the figures).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

TOKENIZERS = (None, "Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen3-4B")
#: The throughput target (issue 15): steps/s over 64 sessions, load client included, and p99 latency (ms).
TARGET_STEPS_PER_S = 2000
TARGET_P99_MS = 100
_GSM_CALC = re.compile(r"<<[^>]*>>")


# ------------------------------------------------------------------------------ responses
def _wrong(gold: str, rng: random.Random) -> str:
    """A plausible wrong answer: a nearby number, or the gold with a term added."""
    g = gold.strip()
    try:
        value = float(g.replace(",", ""))
    except ValueError:
        return f"{g}+{rng.randint(1, 9)}"
    delta = rng.choice([-10, -2, -1, 1, 2, 3, 10])
    return str(int(value) + delta) if value.is_integer() else f"{value + delta / 10:g}"


def worked_solution(question: Any) -> str:
    """The question's worked solution with its final answer left as ``{ANSWER}``."""
    solution = str((question.metadata or {}).get("solution") or "")
    if "####" in solution:  # GSM8K: "steps ... #### 42"
        steps = _GSM_CALC.sub("", solution.split("####")[0]).strip()
        return f"Let me work through this step by step.\n{steps}\nSo the final answer is \\boxed{{ANSWER}}."
    if "\\boxed" in solution:  # MATH-500: the solution boxes its answer once; box ours instead
        i = solution.rfind("\\boxed{")
        depth, j = 0, i + len("\\boxed")
        while j < len(solution):
            depth += {"{": 1, "}": -1}.get(solution[j], 0)
            j += 1
            if depth == 0:
                break
        return solution[:i] + "\\boxed{ANSWER}" + solution[j:]
    # No solution in the data (reasoning_gym, builtin): a chain of arithmetic of varying length.
    rng = random.Random(question.id)
    lines = [f"Step {k + 1}: {rng.randint(2, 99)} + {rng.randint(2, 99)} = ..." for k in range(rng.randint(3, 25))]
    return "Let me think this through.\n" + "\n".join(lines) + "\nTherefore the answer is \\boxed{ANSWER}."


def make_response(question: Any, rng: random.Random, accuracy: float) -> tuple[str, bool]:
    """``(response text, whether its answer is right)`` for ``question``."""
    right = rng.random() < accuracy
    answer = question.gold_answer if right else _wrong(question.gold_answer, rng)
    return worked_solution(question).replace("{ANSWER}", "{" + answer + "}"), right


# ------------------------------------------------------------------------------ server process
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid: int) -> dict[str, float | None]:
    """``{"rss": current, "peak": high-water mark}`` of process ``pid`` in MiB (Linux ``/proc``)."""
    out: dict[str, float | None] = {"rss": None, "peak": None}
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    out["rss"] = round(int(line.split()[1]) / 1024, 1)
                elif line.startswith("VmHWM:"):
                    out["peak"] = round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return out


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds used so far by process ``pid`` (Linux ``/proc``), or ``None``."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux ``/proc``): with ``--workers`` the server is several processes."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(_children(p))
    return out


def _children(pid: int) -> list[int]:
    """The direct children of process ``pid`` (Linux ``/proc``; ``[]`` where unreadable)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def server_rss_mib(pid: int, workers: int = 1) -> dict[str, float | None]:
    """:func:`rss_mib` of the server: of process ``pid`` with one worker; with ``--workers N`` the
    sum over its worker processes (``pid`` is then uvicorn's supervisor, which serves nothing;
    multiprocessing's resource tracker is left out, as the workers' grading processes are with
    one worker). Returns ``{"rss": MiB, "peak": MiB}`` (with workers, each worker's peak summed),
    a value ``None`` where ``/proc`` could not be read."""
    if workers <= 1:
        return rss_mib(pid)
    children = _children(pid)
    if not children:
        return {"rss": None, "peak": None}
    out: dict[str, float | None] = {"rss": 0.0, "peak": 0.0}
    for child in children:
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                if b"resource_tracker" in f.read():
                    continue
        except OSError:
            continue
        for key, value in rss_mib(child).items():
            out[key] = None if value is None or out[key] is None else round(out[key] + value, 1)
    return out


def start_server(
    port: int, max_sessions: int, log: Any, timeout_s: float = 180.0, workers: int = 1
) -> subprocess.Popen:
    """Start ``python -m reasoning_env.server`` on ``127.0.0.1:port`` and wait for ``/health``.

    Args:
        port: TCP port on 127.0.0.1.
        max_sessions: At least this many sessions are allowed (``REE_MAX_SESSIONS`` if larger).
        log: Open binary file receiving the server's output (a pipe nobody reads would fill
            up and stall the server).
        timeout_s: Longest wait for ``/health`` (seconds).

    Raises:
        RuntimeError: the server exited or did not answer within ``timeout_s`` seconds.
    """
    env = dict(os.environ)
    env["REE_MAX_SESSIONS"] = str(max(max_sessions, int(env.get("REE_MAX_SESSIONS", "0") or 0)))
    # every load session comes from this one address
    env["REE_MAX_SESSIONS_PER_CLIENT"] = str(max(max_sessions, int(env.get("REE_MAX_SESSIONS_PER_CLIENT", "0") or 0)))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reasoning_env.server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--workers",
            str(workers),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.flush()
            log.seek(0)
            tail = log.read()[-3000:].decode("utf-8", "replace")
            raise RuntimeError(f"the server exited with status {proc.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/capacity", timeout=1) as r:
                if r.status == 200 and json.loads(r.read()).get("workers", 1) >= workers:
                    return proc
        except OSError:
            time.sleep(0.25)
    proc.kill()
    raise RuntimeError(f"the server did not answer /health within {timeout_s:.0f} s")


# ------------------------------------------------------------------------------ load
async def run_load(
    url: str,
    questions: dict[str, Any],
    sessions: int,
    phases: Sequence[tuple[str, int, float]],
    accuracy: float,
    snapshot: Callable[[], dict[str, Any]],
) -> list[dict[str, Any]]:
    """Connect ``sessions`` clients, play one warm-up episode on each (not counted), then run
    ``phases`` one after the other: ``(name, episodes, rate)`` plays that many episodes across all
    sessions, as fast as answers come (``rate`` 0) or paced so that all sessions together offer
    about ``rate`` steps per second (each session's steps start ``sessions / rate`` seconds
    apart, or as soon as the previous answer arrives if that is later; resets are not paced).

    Returns:
        One dict per phase: ``name``, ``rate``, ``latencies`` (seconds per step), ``steps``,
        ``episodes``, ``right``, and ``start`` / ``end`` snapshots.
    """
    from reasoning_env.client import ReasoningEconomicsClient

    clients = [ReasoningEconomicsClient(base_url=url, message_timeout_s=120) for _ in range(sessions)]
    await asyncio.gather(*(c.connect() for c in clients))

    async def play(k: int, episode: int, record: dict | None, pacer: dict | None) -> None:
        env, rng = clients[k], random.Random(episode)
        result = await env.reset(seed=episode, tokenizer_name=TOKENIZERS[k % len(TOKENIZERS)])
        while not result.done:
            if pacer is not None:  # the session's next step is due `interval` after its previous one
                pacer["due"] += pacer["interval"]
                await asyncio.sleep(max(0.0, pacer["due"] - time.perf_counter()))
            response, _ = make_response(questions[result.observation.question_id], rng, accuracy)
            t0 = time.perf_counter()
            result = await env.step(response)
            if record is not None:
                record["latencies"].append(time.perf_counter() - t0)
                record["steps"] += 1
                record["right"] += int(result.observation.last_step.correct)
        if record is not None:
            record["episodes"] += 1

    try:
        await asyncio.gather(*(play(k, 10**9 + k, None, None) for k in range(sessions)))
        out, first_episode = [], 0
        for name, episodes, rate in phases:
            record = {
                "name": name,
                "rate": rate,
                "latencies": [],
                "steps": 0,
                "episodes": 0,
                "right": 0,
                "start": snapshot(),
            }
            queue = iter(range(first_episode, first_episode + episodes))

            async def worker(k: int, rate: float = rate, queue=queue, record: dict = record) -> None:
                pacer = None
                if rate > 0:  # start the sessions spread over one interval
                    interval = sessions / rate
                    pacer = {"interval": interval, "due": time.perf_counter() + random.Random(k).uniform(0, interval)}
                for episode in queue:
                    await play(k, episode, record, pacer)

            await asyncio.gather(*(worker(k) for k in range(sessions)))
            record["end"] = snapshot()
            out.append(record)
            first_episode += episodes
        return out
    finally:
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)


async def raw_load(ws_url: str, sessions: int, seconds: float) -> dict[str, Any]:
    """Steps per second of ``sessions`` raw WebSocket sessions playing whole episodes (reset, then
    steps with one fixed short answer until ``done``) for ``seconds``: the same frames against
    any OpenEnv server, so the real server and the no-op one are measured alike."""
    import websockets

    step = json.dumps({"type": "step", "data": {"response": "We add 2 and 3, so the answer is \\boxed{5}."}})
    counts = {"steps": 0}
    end = time.perf_counter() + seconds

    async def one(k: int) -> None:
        async with websockets.connect(ws_url, max_size=None, compression=None) as ws:
            while time.perf_counter() < end:
                await ws.send(json.dumps({"type": "reset", "data": {"seed": k}}))
                await ws.recv()
                done = False
                while not done and time.perf_counter() < end:
                    await ws.send(step)
                    done = bool(json.loads(await ws.recv())["data"].get("done"))
                    counts["steps"] += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(one(k) for k in range(sessions)))
    return {"steps": counts["steps"], "steps_per_s": round(counts["steps"] / (time.perf_counter() - t0), 1)}


def start_noop_server(port: int, log: Any, timeout_s: float = 60.0) -> subprocess.Popen:
    """Start :mod:`reasoning_env.bench.noop_server` on ``127.0.0.1:port`` and wait for ``/health``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "reasoning_env.bench.noop_server", str(port)], stdout=log, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the no-op server exited with status {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"the no-op server did not answer /health within {timeout_s:.0f} s")


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def _percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q / 100 * (len(s) - 1)))))]


def _phase_report(phase: dict[str, Any]) -> dict[str, Any]:
    a, b = phase["start"], phase["end"]
    elapsed = b["t"] - a["t"]
    lat = phase["latencies"]
    out: dict[str, Any] = {
        "episodes": phase["episodes"],
        "steps": phase["steps"],
        "elapsed_s": round(elapsed, 2),
        "steps_per_s": round(phase["steps"] / elapsed, 1),
        "step_latency_ms": {
            "p50": round(1000 * _percentile(lat, 50), 1),
            "p99": round(1000 * _percentile(lat, 99), 1),
            "max": round(1000 * max(lat), 1),
        },
        "accuracy": round(phase["right"] / max(1, phase["steps"]), 3),
        "client_cpu_ms_per_step": round(1000 * (b["client_cpu"] - a["client_cpu"]) / max(1, phase["steps"]), 3),
    }
    if phase["rate"] > 0:
        out = {"offered_steps_per_s": phase["rate"], **out}
    if a.get("server_cpu") is not None:
        out["server_cpu_ms_per_step"] = round(1000 * (b["server_cpu"] - a["server_cpu"]) / max(1, phase["steps"]), 3)
    return out


def _number(kind: type, low: float, high: float = float("inf")) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside [{low:g}, {high:g}]")
        return value

    return parse


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this benchmark's options to ``p`` (the ``bench`` dispatcher's protocol)."""
    p.add_argument("--sessions", type=_number(int, 1), default=64, help="concurrent WebSocket sessions (default 64)")
    p.add_argument("--episodes", type=_number(int, 1), default=256, help="episodes N per measured phase (default 256)")
    p.add_argument(
        "--rate",
        type=_number(float, 0),
        default=500.0,
        help="steps/s offered in the latency phase (default 500; 0 skips the phase)",
    )
    p.add_argument(
        "--memory-check",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="go on to 10 N episodes in all and report the server's memory after N and after 10 N (default on)",
    )
    p.add_argument("--accuracy", type=_number(float, 0, 1), default=0.6, help="share of right answers (default 0.6)")
    p.add_argument(
        "--url", default=None, help="benchmark a running server instead of starting one (no server figures)"
    )
    p.add_argument(
        "--workers",
        type=_number(int, 1),
        default=1,
        help="server processes (python -m reasoning_env.server --workers N)",
    )
    p.add_argument(
        "--baseline-s",
        type=_number(float, 0),
        default=5.0,
        help="seconds of the raw load on this server and on a no-op OpenEnv server, for the ratio "
        "(0: skip; default 5)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark for parsed ``args`` (see :func:`add_arguments`); prints the JSON report.

    Raises:
        RuntimeError: the server could not be started.
        ServerConfigError: the ``REE_*`` variables are invalid.
    """
    from reasoning_env.server.settings import config_from_env
    from reasoning_env.sources import load_pools

    config = config_from_env()
    pools = load_pools(config.sources, data_dir=config.data_dir, offline_fallback=config.offline_fallback)
    questions = {q.id: q for qs in pools.pools.values() for q in qs}

    proc = None
    url = args.url
    log = tempfile.TemporaryFile()
    if url is None:
        port = _free_port()
        proc = start_server(port, args.sessions, log, workers=args.workers)
        url = f"http://127.0.0.1:{port}"
    rss_at_start = server_rss_mib(proc.pid, args.workers)["rss"] if proc is not None else None

    def snapshot() -> dict[str, Any]:
        snap: dict[str, Any] = {"t": time.perf_counter(), "client_cpu": time.process_time()}
        if proc is not None:
            cpus = [cpu_seconds(p) for p in process_tree(proc.pid)]
            snap["server_cpu"] = sum(c for c in cpus if c is not None)  # workers and grading processes included
            snap["server_rss"] = server_rss_mib(proc.pid, args.workers)["rss"]
        return snap

    n = args.episodes
    phases = [("throughput", n, 0.0)]
    if args.rate > 0:
        phases.append(("at_rate", n, args.rate))
    if args.memory_check:
        phases.append(("memory", 10 * n - sum(e for _, e, _ in phases), 0.0))
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    baseline: dict[str, Any] | None = None
    try:
        measured = asyncio.run(run_load(url, questions, args.sessions, phases, args.accuracy, snapshot))
        peak = server_rss_mib(proc.pid, args.workers)["peak"] if proc is not None else None
        if args.baseline_s > 0:
            # The same raw load on this server and on a no-op OpenEnv server, back to back.
            ws_url = url.replace("http://", "ws://").replace("https://", "wss://").rstrip("/") + "/ws"
            ours = asyncio.run(raw_load(ws_url, args.sessions, args.baseline_s))
            noop_port = _free_port()
            noop = start_noop_server(noop_port, log)
            try:
                noop_rate = asyncio.run(raw_load(f"ws://127.0.0.1:{noop_port}/ws", args.sessions, args.baseline_s))
            finally:
                _stop(noop)
            baseline = {"this_server_raw": ours, "noop_openenv_server_raw": noop_rate}
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        log.close()

    by_name = {ph["name"]: ph for ph in measured}
    report: dict[str, Any] = {
        "sessions": args.sessions,
        "episodes": n,
        "server_workers": args.workers,
        "throughput": _phase_report(by_name["throughput"]),
    }
    tp = report["throughput"]
    report["target"] = {
        "steps_per_s": TARGET_STEPS_PER_S,
        "p99_ms": TARGET_P99_MS,
        "met": tp["steps_per_s"] >= TARGET_STEPS_PER_S and tp["step_latency_ms"]["p99"] <= TARGET_P99_MS,
        "note": "64 sessions from one load process on the same machine, no think time",
    }
    if "at_rate" in by_name:
        report["at_rate"] = _phase_report(by_name["at_rate"])
    if proc is not None:
        rss = {"at_start": rss_at_start, f"after_{n}_episodes": by_name["throughput"]["end"]["server_rss"]}
        if "memory" in by_name:
            rss[f"after_{10 * n}_episodes"] = by_name["memory"]["end"]["server_rss"]
        rss["peak"] = peak
        if args.workers > 1:
            rss["of"] = f"the {args.workers} worker processes summed (each its peak, summed, as the peak)"
        report["server_rss_mib"] = rss
    if baseline is not None:
        noop_rate = baseline["noop_openenv_server_raw"]["steps_per_s"] or float("nan")
        baseline["ratio_raw"] = round(baseline["this_server_raw"]["steps_per_s"] / noop_rate, 3)
        baseline["ratio_throughput_phase"] = round(tp["steps_per_s"] / noop_rate, 3)
        baseline["note"] = (
            "the same raw WebSocket load (reset, then one fixed short answer per step) on this server and on a "
            "no-op OpenEnv server (OpenEnv's create_app, an environment that does nothing), measured in this run: "
            "the ratio is what the environment reaches of what this machine can serve at all right now"
        )
        report["vs_noop_server"] = baseline
    report.update(
        {
            "load_average_1min_before": load_before,
            "load_average_1min_after": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
            "cpu_count": os.cpu_count(),
            "sources": [s.name for s in config.sources],
            "questions": len(questions),
            "client": "ReasoningEconomicsClient (async), one process on the same machine",
        }
    )
    print(json.dumps(report, indent=2))
    return 0

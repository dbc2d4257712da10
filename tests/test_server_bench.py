"""``python -m reasoning_env.bench server`` reports the load average and its throughput beside a
no-op OpenEnv server's, measured in the same run (so a busy machine still gives a figure that
means something)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from test_server import _sources_env

pytestmark = pytest.mark.timeout(300)


def test_bench_server_reports_the_ratio_to_a_noop_openenv_server():
    env = {**os.environ, **_sources_env()}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "reasoning_env.bench",
            "server",
            "--sessions",
            "4",
            "--episodes",
            "8",
            "--rate",
            "0",
            "--no-memory-check",
            "--baseline-s",
            "1",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=280,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout[out.stdout.index("{") :])
    vs = report["vs_noop_server"]
    assert vs["noop_openenv_server_raw"]["steps_per_s"] > 0 and vs["this_server_raw"]["steps_per_s"] > 0
    # the ratios are this server's rate over the no-op server's, both played in this run; their size
    # depends on the machine's load (a 1 s baseline beside other jobs gave 32.8), so only that is checked
    raw = vs["this_server_raw"]["steps_per_s"] / vs["noop_openenv_server_raw"]["steps_per_s"]
    assert vs["ratio_raw"] == pytest.approx(raw, rel=0.01, abs=0.002) and vs["ratio_throughput_phase"] > 0
    assert report["load_average_1min_before"] is not None and report["load_average_1min_after"] is not None


_TWO_WORKERS = """
import multiprocessing as mp, sys, time

def hold():
    block = bytearray(60 * 1024 * 1024)
    for i in range(0, len(block), 4096):
        block[i] = 1
    time.sleep(60)

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    lock = ctx.Lock()  # starts multiprocessing's resource tracker beside the workers, as uvicorn's does
    workers = [ctx.Process(target=hold) for _ in range(2)]
    for w in workers:
        w.start()
    print("ready", flush=True)
    time.sleep(60)
"""


def test_bench_server_memory_with_workers_is_the_workers_not_the_supervisor(tmp_path):
    from reasoning_env.bench.server import rss_mib, server_rss_mib

    script = tmp_path / "two_workers.py"
    script.write_text(_TWO_WORKERS)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 30
        while (server_rss_mib(parent.pid, workers=2)["rss"] or 0) < 120 and time.monotonic() < deadline:
            time.sleep(0.2)
        supervisor = rss_mib(parent.pid)["rss"]
        workers = server_rss_mib(parent.pid, workers=2)
        assert workers["rss"] >= 120, workers  # two workers of 60+ MiB each
        assert workers["peak"] >= workers["rss"]
        assert supervisor < 60  # what the bench reported before: the supervisor, which serves nothing
        assert server_rss_mib(parent.pid, workers=1)["rss"] < 60  # one worker: the process itself
    finally:
        parent.kill()
        parent.wait()

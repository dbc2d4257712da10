"""``python -m reasoning_env.bench server`` reports the load average and its throughput beside a
no-op OpenEnv server's, measured in the same run (so a busy machine still gives a figure that
means something)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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

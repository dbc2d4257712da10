"""The Play tab's local engine with a stand-in for vLLM (tests/fake_vllm.py): a failed start is written into
the status line with its cause and the log's path; while it starts, the line gives the estimate from this machine
and vLLM's last log line; and the engine stops with the app however the app ends (SIGTERM, SIGINT, SIGKILL), though
it was started from a handler thread."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from workbench.play import LocalEngine, start_estimate

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    shim = tmp_path / "fake-vllm-python"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{ROOT / "tests" / "fake_vllm.py"}" "$@"\n')
    shim.chmod(0o755)
    return shim


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    d = tmp_path / "model"
    d.mkdir()
    return d


def _wait(engine: LocalEngine, states: tuple[str, ...], timeout_s: float = 120) -> dict:
    deadline = time.monotonic() + timeout_s
    while (st := engine.status())["state"] not in states:
        assert time.monotonic() < deadline, st
        time.sleep(0.2)
    return st


def _group_gone(pgid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def test_a_failed_start_is_written_into_the_status_line_with_its_cause_and_log(
    fake_python, model_dir, tmp_path, monkeypatch
):
    from workbench.app.common import AppContext
    from workbench.app.play_tab import PlayTab

    monkeypatch.setenv("FAKE_VLLM", "fail")
    tab = PlayTab(AppContext(runs_root=str(tmp_path / "runs"), environ={}))
    log = tmp_path / "vllm.log"
    tab.engine = LocalEngine(python=fake_python, log_path=str(log))
    outputs = list(tab.start_engine("", str(model_dir)))  # no exception: the line says it
    line = outputs[-1][2]
    assert line.startswith("**The engine did not start** after ")
    assert "ValueError: Available memory on node 0 (1.25/23.59 GiB) on kv cache allocation" in line
    assert f"(log: {log})" in line and "\n" not in line and "Traceback" not in line
    assert "fake-vllm-python" not in line  # not the command line


def test_while_it_starts_the_line_gives_the_estimate_from_this_machine_and_vllms_last_log_line(
    fake_python, model_dir, tmp_path, monkeypatch
):
    from workbench.app.play_tab import render_engine

    monkeypatch.setenv("REE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_VLLM_DELAY", "4")
    assert start_estimate().startswith("about a minute on 2 quiet cores, longer under load (load ")
    engine = LocalEngine(python=fake_python, log_path=str(tmp_path / "vllm.log"))
    engine.start(str(model_dir))
    try:
        deadline = time.monotonic() + 60
        while "loading weights" not in str((st := engine.status()).get("progress")):
            assert st["state"] == "starting" and time.monotonic() < deadline, st
            time.sleep(0.1)
        line = render_engine(st)
        assert "s so far; about a minute on 2 quiet cores" in line
        assert "vLLM: `INFO fake vllm: loading weights`" in line and f"Log: `{tmp_path / 'vllm.log'}`" in line
        _wait(engine, ("running",))
        assert start_estimate().startswith("its last 1 start(s) here took ")  # remembered for the next start
    finally:
        engine.stop()


APP = textwrap.dedent(
    """
    import sys, time
    from workbench.play import LocalEngine
    engine = LocalEngine(python=sys.argv[1], log_path=sys.argv[3])
    engine.start(sys.argv[2])  # from the engine's own thread, as the Play tab's handler does
    while engine.status()["state"] == "starting":
        time.sleep(0.2)
    print(engine.status()["state"], engine.server._proc.pid, flush=True)
    time.sleep(3600)
    """
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_the_engine_stops_with_the_app_however_the_app_ends(fake_python, model_dir, tmp_path, sig):
    app = subprocess.Popen(
        [sys.executable, "-c", APP, str(fake_python), str(model_dir), str(tmp_path / "vllm.log")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        state, pid = app.stdout.readline().split()
        assert state == "running"
        pgid = int(pid)
        os.killpg(pgid, 0)  # the engine (and its worker) run
        app.send_signal(sig)
        app.wait(timeout=60)
        assert _group_gone(pgid, timeout_s=60), f"the engine outlived the app ({sig.name})"
    finally:
        if app.poll() is None:
            app.kill()

"""The Space installs only the root requirements.txt: it holds no training stack, and app.py starts
in a virtual environment that holds nothing else (built by scripts/ci_venvs.sh, which
``bash scripts/setup.sh --test`` runs)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from ci_venvs import ci_venv_python

REPO = Path(__file__).resolve().parents[1]
TRAINING_STACK = {
    "torch",
    "trl",
    "accelerate",
    "peft",
    "trackio",
    "vllm",
    "unsloth",
    "unsloth_zoo",
    "xformers",
    "bitsandbytes",
    "pytest",
    "playwright",
}


def _names(path: Path) -> set[str]:
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            names.add(re.split(r"[=<>!~\[ ]", line, maxsplit=1)[0].lower().replace("-", "_"))
    return names


def test_root_requirements_hold_no_training_or_test_stack():
    root = _names(REPO / "requirements.txt")
    assert not (root & TRAINING_STACK), root & TRAINING_STACK
    assert {"gradio", "openenv", "transformers"} <= root
    assert {"torch", "trl", "accelerate", "peft"} <= _names(REPO / "requirements-train.txt")
    assert "pytest" in _names(REPO / "requirements-test.txt")
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert "requirements-train.txt" in setup and "requirements-test.txt" in setup


def test_verifiers_lives_in_its_own_requirements_file():
    assert "verifiers" in _names(REPO / "requirements-verifiers.txt")
    for core in ("requirements.txt", "requirements-train.txt", "requirements-test.txt"):
        assert not {"verifiers", "mcp", "fastmcp"} & _names(REPO / core), core


@pytest.fixture(scope="module")
def app_python() -> Path:
    return ci_venv_python("app")


@pytest.mark.slow
def test_the_app_venv_has_no_torch(app_python):
    code = "import importlib.util, sys; sys.exit(1 if importlib.util.find_spec('torch') else 0)"
    assert subprocess.run([str(app_python), "-c", code]).returncode == 0, "torch is installed in the app-only venv"
    code = (
        "import sys; import app; from workbench.app.server import create_app; create_app(); "
        "bad = sorted(m for m in ('torch', 'trl', 'peft', 'accelerate') if m in sys.modules); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    out = subprocess.run(
        [str(app_python), "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]


@pytest.mark.slow
def test_app_py_serves_from_the_app_venv(app_python):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", PATH=f"{app_python.parent}:{env.get('PATH', '')}")
    proc = subprocess.Popen(
        [str(app_python), "app.py", "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.time() + 180
        status = None
        while time.time() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    status = r.status
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
                    page = r.read(4096).decode("utf-8", "replace")
                break
            except OSError:
                time.sleep(1)
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert status == 200 and "<html" in page.lower()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert sys.executable != str(app_python)

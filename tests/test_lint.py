"""The repository is lint-clean and formatted: ``ruff check`` and ``ruff format --check`` with the
configuration in pyproject.toml, run by the test suite so CI (the README's test command) runs them."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _pinned_version() -> str | None:
    text = (REPO / "requirements-test.txt").read_text()
    m = re.search(r"^ruff==(\S+)", text, re.M)
    return m.group(1) if m else None


def _ruff() -> list[str]:
    if importlib.util.find_spec("ruff") is not None:
        cmd = [sys.executable, "-m", "ruff"]
    elif shutil.which("ruff"):
        cmd = [shutil.which("ruff")]
    else:
        pytest.skip("ruff is not installed: pip install -r requirements-test.txt")
    version = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=60).stdout.split()[-1]
    pinned = _pinned_version()
    if pinned and version != pinned:
        pytest.skip(f"ruff {version} is installed; the formatting is pinned to ruff {pinned} (requirements-test.txt)")
    return cmd


def test_ruff_check_finds_nothing():
    out = subprocess.run([*_ruff(), "check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, (
        f"ruff check found problems (fix them, or run `ruff check --fix`):\n{out.stdout}{out.stderr}"
    )


def test_ruff_format_leaves_every_file_as_it_is():
    out = subprocess.run(
        [*_ruff(), "format", "--check", "--no-cache", "."], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, f"files not formatted (run `ruff format .`):\n{out.stdout}{out.stderr}"

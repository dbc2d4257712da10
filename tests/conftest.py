"""Shared fixtures: paths to ../shared (skipped cleanly when absent) and small configs; how many
parallel workers ``-n auto`` (pyproject's ``addopts``) starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO / ".." / "shared").resolve()
SHARED_DATA = SHARED / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Tests run offline: never let a library try the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


#: Most workers ``-n auto`` starts: the suite's big tests start servers, browsers, notebook kernels and
#: training processes of their own, and each worker holds up to ~1.5 GB.
MAX_WORKERS = 4


@pytest.hookimpl(optionalhook=True)  # (a hook of pytest-xdist: absent where it is not installed)
def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto``: one worker per CPU this process may use (2 on a 2-core CI machine), at most
    :data:`MAX_WORKERS`, for the suite or a folder of it; none (tests run in this process) when the
    command line names test files or tests, where starting workers (each imports the stack and
    builds the modules' fixtures again) costs more than it saves: measured here, one file ran 1.2
    to 1.6 times slower with 2 workers. ``-n N`` on the command line overrides it, ``-n 0`` turns
    workers off."""
    import os

    if any(a.split("::")[0].endswith(".py") for a in config.args):
        return 0
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_WORKERS, cpus))


def shared_data_or_skip() -> Path:
    """``../shared/data`` or a skip with the reason."""
    if not (SHARED_DATA / "gsm8k_test.jsonl").is_file() or not (SHARED_DATA / "math500_test.jsonl").is_file():
        pytest.skip(f"../shared/data not found at {SHARED_DATA}: the real GSM8K/MATH-500 files are needed")
    return SHARED_DATA


@pytest.fixture
def shared_data() -> Path:
    return shared_data_or_skip()


@pytest.fixture
def real_config(shared_data):
    """A config on the real GSM8K + MATH-500 files."""
    from reasoning_env import EnvConfig

    return EnvConfig(sources=["gsm8k", "math500"], data_dir=str(shared_data))

"""Shared fixtures: paths to ../shared (skipped cleanly when absent) and small configs."""

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

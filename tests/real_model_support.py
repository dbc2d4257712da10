"""Where the real-model tests find the offline model and vLLM's CPU venv, and why they skip without them."""

from __future__ import annotations

from pathlib import Path

import pytest

from reasoning_env.model_server import vllm_python
from reasoning_env.offline_model import QWEN25_CODER_05B, built_model_dir

MODEL = QWEN25_CODER_05B.name
BUILD_HINT = "build it with `bash scripts/real_model.sh` (setup.sh --test does)"


def model_dir_or_skip() -> Path:
    """The built offline model folder, or a skip saying how to build it."""
    built = built_model_dir(QWEN25_CODER_05B)
    if built is None:
        pytest.skip(f"the offline real model {MODEL} is not built: {BUILD_HINT}")
    return built


def vllm_or_skip() -> Path:
    """The interpreter with vLLM's CPU engine (and the built model), or a skip saying how to build them."""
    model_dir_or_skip()
    py = vllm_python()
    if not py.is_file():
        pytest.skip(f"vLLM's CPU venv is not built ({py} missing): {BUILD_HINT}")
    return py

"""The training code runs on the versions GPU users get: the training tests (the CPU smoke run included)
again, in the venv holding the pure-Python packages ``requirements-gpu.txt`` pins (TRL 1.15,
transformers 5.17, accelerate, PEFT, datasets 4.8) with CPU torch; vLLM, Unsloth, xformers and
bitsandbytes need CUDA and are left out (built by ``scripts/ci_venvs.sh``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from ci_venvs import ci_venv_python

REPO = Path(__file__).resolve().parents[1]
#: The test files that exercise TRL, transformers, PEFT and accelerate.
TRAINING_TESTS = (
    "tests/test_training_grpo.py",
    "tests/test_training_rollout.py",
    "tests/test_training_export_bench.py",
    "tests/test_conversation.py",
)


def _version(py: Path, module: str) -> str:
    out = subprocess.run(
        [str(py), "-c", f"import {module}; print({module}.__version__)"], capture_output=True, text=True, timeout=120
    )
    return out.stdout.strip()


def _pin(name: str) -> str:
    for line in (REPO / "requirements-gpu.txt").read_text().splitlines():
        if line.split("==")[0].strip().lower() == name:
            return line.split("==")[1].split("#")[0].strip()
    raise AssertionError(f"{name} is not pinned in requirements-gpu.txt")


@pytest.mark.slow
def test_training_tests_pass_on_the_gpu_pins():
    py = ci_venv_python("gpu_pins")
    for module, pin in (("trl", _pin("trl")), ("transformers", _pin("transformers"))):
        assert _version(py, module) == pin, (
            f"the gpu_pins venv has {module} {_version(py, module)}, requirements-gpu.txt pins {pin}"
        )
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    # TRL 1.15's loss kernel is Triton-only: tests/trl_cpu_kernel.py supplies its plain-PyTorch equivalent on CPU.
    env.update(PYTHONPATH="tests", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    # `-o addopts=-ra`: in this process, not in parallel workers (the venv has no pytest-xdist; the suite's own workers
    # already use the cores)
    out = subprocess.run(
        [
            str(py),
            "-m",
            "pytest",
            "-o",
            "addopts=-ra",
            "-p",
            "trl_cpu_kernel",
            "-q",
            "-x",
            "-p",
            "no:cacheprovider",
            *TRAINING_TESTS,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    tail = (out.stdout + out.stderr)[-4000:]
    assert out.returncode == 0, tail
    assert " passed" in tail and " failed" not in tail, tail

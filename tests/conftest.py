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


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """Keep ``--dist loadgroup`` grouping on pytest 9.2: pytest-xdist 3.8 marks an ``xdist_group``
    test by appending ``@<group>`` to ``item._nodeid``, which pytest 9.2 no longer reads (node ids
    come from ``item._id``), so groups were silently ignored and each worker built the shared module
    fixtures again (pytest-dev/pytest-xdist#1386). Carry the suffix over; a no-op where xdist's mark
    took effect, or without xdist. In workers, also start the slow single tests first."""
    result = yield
    for item in items:
        legacy = item.__dict__.get("_nodeid")
        if legacy and "@" in legacy and legacy != item.nodeid:
            from _pytest.nodeid import NodeId

            item._id = NodeId.parse(legacy)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # In parallel workers, slow tests outside a group start first (the scheduler sends groups first, then
        # single tests in this order), so that no long test is left for the end while the other worker idles.
        items[:] = sorted(
            items, key=lambda it: not (it.get_closest_marker("slow") and not it.get_closest_marker("xdist_group"))
        )
    return result


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


def pytest_sessionstart(session):
    """Ctrl-C handling starts as Python's own, however pytest was launched. A shell that starts pytest in the
    background without job control hands it SIGINT ignored; the first test whose code installs Python's handler
    (a notebook kernel's client does) then failed the check below, though it restored what a foreground run has.
    Normalising here makes the check measure the test, not the launching shell."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _sigint_untouched():
    """No test leaves this process's Ctrl-C handling changed: the subprocesses of every later test
    in the same worker would inherit it (a test that loaded the grading worker's script left SIGINT
    ignored, and a later Ctrl-C test's program then slept through its interrupt)."""
    import signal

    before = (signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, []))
    yield
    after = (signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, []))
    assert after == before, f"the test changed SIGINT handling (handler, blocked signals): {before} -> {after}"


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory):
    """vLLM's CPU engine serving the offline real model on loopback, shared by the real-model test modules
    (one ``xdist_group("vllm_cpu")``, so one worker starts it once): run-time LoRA on and the sampling
    distribution's log-probs, as GRPO rollouts need. Skips, with the reason, where the model or the venv is
    not built. vLLM's development endpoints are on (loopback), for the merged-weights hand-off."""
    from real_model_support import MODEL, vllm_or_skip

    vllm_or_skip()
    from training.vllm_server_backend import serve_for_training

    srv = serve_for_training(
        MODEL, max_lora_rank=8, merged_weights=True, log_path=tmp_path_factory.mktemp("vllm") / "server.log"
    )
    yield srv
    srv.stop()

"""Two evaluations racing for one ``--out`` never interleave their files: the folder is claimed
atomically (an ``O_EXCL`` claim file) before any episode is played and held until the run is
written; the loser is refused in one line naming ``--overwrite``, with ``--overwrite`` too."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

import evalpol_fixtures as fx
import pytest

from reasoning_env.policies import UniformPolicy
from workbench.evaluate import evaluate
from workbench.runs import CLAIM_FILE, RunFolderError, claim_run_dir


def _race(out, *, overwrite: bool) -> list[object]:
    """Two threads claim ``out`` at the same moment; each holds its claim until both have tried."""
    barrier = threading.Barrier(2)
    tried = threading.Barrier(2)
    outcomes: list[object] = []

    def claim() -> None:
        barrier.wait()
        try:
            with claim_run_dir(out, overwrite=overwrite) as path:
                outcomes.append(path)
                tried.wait()
        except RunFolderError as exc:
            outcomes.append(exc)
            tried.wait()

    threads = [threading.Thread(target=claim) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return outcomes


@pytest.mark.parametrize("overwrite", [False, True])
def test_of_two_runs_racing_for_one_folder_exactly_one_gets_it(tmp_path, overwrite) -> None:
    out = tmp_path / "run"
    for _ in range(20):
        outcomes = _race(out, overwrite=overwrite)
        errors = [o for o in outcomes if isinstance(o, RunFolderError)]
        assert len(outcomes) == 2 and len(errors) == 1, outcomes
        message = str(errors[0])
        assert "being written by another run" in message and "--overwrite" in message and "\n" not in message
        assert not (out / CLAIM_FILE).exists()  # released when the winner's block ends


def test_an_evaluation_into_a_claimed_folder_is_refused_before_playing(tmp_path) -> None:
    out = tmp_path / "run"
    with claim_run_dir(out):
        with pytest.raises(RunFolderError, match="being written by another run"):
            evaluate(
                [UniformPolicy()],
                config=fx.config(num_questions=3),
                n_episodes=1,
                out=out,
                overwrite=True,
                progress=False,
                report=False,
                pools=fx.pools(),
            )
        assert sorted(p.name for p in out.iterdir()) == [CLAIM_FILE]


def test_an_existing_run_is_refused_only_once_claimed_and_the_claim_is_released(tmp_path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text("{}")
    with pytest.raises(RunFolderError, match="already holds a run"):
        with claim_run_dir(out):
            pass
    assert sorted(p.name for p in out.iterdir()) == ["run.json"]


def test_a_claim_left_by_a_killed_run_says_so_and_how_to_continue(tmp_path) -> None:
    """A run killed with SIGKILL leaves its claim file; the refusal names the dead process as no
    longer running and says to remove the file (it said 'being written by another run now')."""
    out = tmp_path / "run"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (out / CLAIM_FILE).write_text(f"{dead.pid} {socket.gethostname()}\n")
    with pytest.raises(
        RunFolderError, match=f"left by process {dead.pid} of this machine, which is no longer running"
    ):
        with claim_run_dir(out):
            pass
    assert (out / CLAIM_FILE).exists()  # not taken over: the user removes it


def test_a_claim_held_by_a_live_run_is_reported_as_being_written(tmp_path) -> None:
    out = tmp_path / "run"
    with claim_run_dir(out):
        assert (out / CLAIM_FILE).read_text().split() == [str(os.getpid()), socket.gethostname()]
        with pytest.raises(RunFolderError, match=f"being written by another run now \\(process {os.getpid()} on"):
            with claim_run_dir(out):
                pass

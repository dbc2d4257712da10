"""``python -m workbench.compare`` on bad folders: one error line naming the file and the fix, never a
traceback, and never a write over a run folder (a compare's ``summary.csv`` would replace the run's)."""

from __future__ import annotations

import evalpol_fixtures as fx
import pytest

from reasoning_env.policies import UniformPolicy
from workbench.compare import main
from workbench.evaluate import evaluate
from workbench.runs import RunFolderError, load_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("cmp") / "run"
    evaluate(
        [UniformPolicy()],
        config=fx.config(num_questions=3),
        n_episodes=2,
        out=out,
        progress=False,
        report=False,
        pools=fx.pools(),
    )
    return out


def test_out_on_a_file_is_one_error_line(run_dir, tmp_path, capsys) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    assert main([str(run_dir), "--out", str(blocker)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot write the comparison") and "a file is in the way" in err


def test_out_on_a_run_folder_is_refused_and_the_run_kept(run_dir, capsys) -> None:
    before = (run_dir / "summary.csv").read_bytes()
    assert main([str(run_dir), "--out", str(run_dir)]) == 2
    assert "holds a run" in capsys.readouterr().err
    assert (run_dir / "summary.csv").read_bytes() == before


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (("run.json", "{not json"), r"run\.json is not valid JSON"),
        (("run.json", "[1, 2]"), r"run\.json does not hold a JSON object"),
        (("episodes.parquet", "garbage"), r"episodes\.parquet cannot be read"),
        (("trajectories.parquet", "garbage"), r"trajectories\.parquet cannot be read"),
    ],
)
def test_a_damaged_file_is_named(run_dir, tmp_path, damage, says) -> None:
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(run_dir, broken)
    (broken / damage[0]).write_text(damage[1])
    with pytest.raises(RunFolderError, match=says):
        load_run(broken)


def test_without_out_the_comparison_is_written_under_runs_not_the_current_folder(run_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main([str(run_dir)]) == 0
    written = list((tmp_path / "runs").glob("compare-*/summary.csv"))
    assert len(written) == 1 and not list(tmp_path.glob("compare-*"))

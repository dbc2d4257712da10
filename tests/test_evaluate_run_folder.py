"""Evaluating into a run folder loses nothing: a folder that already holds a run is refused (its
files would be overwritten, and the files the new run does not write, such as ``seeds.csv`` or
``report.html``, would be left beside it, describing the old run); ``--overwrite`` replaces the whole
run; two evaluations started in the same second never share a default folder; a bootstrap with too
few resamples is refused before any episode is played."""

from __future__ import annotations

import evalpol_fixtures as fx
import pytest

from reasoning_env.policies import UniformPolicy
from workbench.evaluate import evaluate, main
from workbench.runs import RunFolderError, fresh_run_dir


def _run(out, **kw):
    args = dict(
        config=fx.config(num_questions=3), n_episodes=1, out=out, progress=False, report=False, pools=fx.pools()
    )
    args.update(kw)
    return evaluate([UniformPolicy()], **args)


def test_an_existing_run_is_refused_and_left_untouched(tmp_path) -> None:
    out = tmp_path / "run"
    _run(out, seeds=[1, 2])
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(RunFolderError, match=r"already holds a run.*--overwrite"):
        _run(out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_overwrite_replaces_the_whole_run(tmp_path) -> None:
    out = tmp_path / "run"
    _run(out, seeds=[1, 2])
    assert (out / "seeds.csv").is_file()
    _run(out, overwrite=True)
    assert not (out / "seeds.csv").exists()  # no file of the old run is left beside the new one
    assert (out / "run.json").is_file() and (out / "summary.csv").is_file()


def test_an_empty_existing_folder_is_used(tmp_path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    _run(out)
    assert (out / "run.json").is_file() and (out / "notes.txt").read_text() == "mine"


def test_the_cli_refuses_an_existing_run_in_one_line(tmp_path, capsys) -> None:
    out = tmp_path / "run"
    _run(out)
    argv = ["--n_episodes", "1", "--policies", "uniform", "--out", str(out), "--no-progress", "--no-report"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: run folder") and "--overwrite" in err and err.count("\n") == 1


def test_default_folders_started_in_the_same_second_differ(tmp_path) -> None:
    first = fresh_run_dir(tmp_path, "eval", stamp="20250101-000000")
    second = fresh_run_dir(tmp_path, "eval", stamp="20250101-000000")
    assert first != second and first.is_dir() and second.is_dir()
    assert first.name == "eval-20250101-000000" and second.name == "eval-20250101-000000-2"


@pytest.mark.parametrize("resamples", [0, 99])
def test_too_few_resamples_are_refused_before_playing(tmp_path, resamples) -> None:
    with pytest.raises(ValueError, match="n_resamples must be at least 100"):
        _run(tmp_path / "r", n_resamples=resamples)
    assert not (tmp_path / "r").exists()


def test_a_failed_evaluation_leaves_no_empty_run_folder(tmp_path) -> None:
    """A run that fails before writing anything (here: a bad argument found after the claim) left
    an empty runs/eval-<time>/ per attempt; a folder that existed before is kept."""
    out = tmp_path / "run"
    with pytest.raises(ValueError, match="n_resamples"):
        _run(out, n_resamples=True)
    from workbench.runs import claim_run_dir

    with pytest.raises(RuntimeError, match="boom"), claim_run_dir(out):
        raise RuntimeError("boom")
    assert not out.exists()
    out.mkdir()
    with pytest.raises(RuntimeError, match="boom"), claim_run_dir(out):
        raise RuntimeError("boom")
    assert out.is_dir()  # the user's own folder stays


def test_the_regret_oracle_is_timed_apart_from_the_policies(tmp_path) -> None:
    """The first policy solved every episode's oracle plan for the ones after it (its 'wall s' was
    4.0 s against 0.2-0.6 s): that time is run.json's oracle_s, in no policy's wall_s."""
    import json

    from reasoning_env.policies import OracleCache, SolverCurves

    cache = OracleCache(SolverCurves(), cap=64, min_tokens=1)
    questions = [("MATH", 3), ("GSM", 2)]
    cache.plan(questions, 100)
    solved = cache.solve_s
    cache.plan(questions, 100)
    assert solved > 0 and cache.solve_s == solved  # a cached plan costs nothing
    _run(tmp_path / "run", n_episodes=2)
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["oracle_s"] > 0 and meta["oracle_s"] <= meta["wall_s"]


def test_progress_bars_are_text_bars_where_notebook_bars_cannot_draw(monkeypatch) -> None:
    """Without ipywidgets, tqdm.auto's notebook bar printed 'IProgress not found' in every notebook."""
    import importlib.util

    import tqdm.std

    from workbench.evaluation.runner import _progress_bar_class

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ipywidgets" else real(name, *a))
    assert _progress_bar_class() is tqdm.std.tqdm

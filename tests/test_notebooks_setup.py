"""The notebooks' set-up cells as a user meets them: 04 with a NOTEBOOK_OUTPUT_DIR that does not
exist yet, and 03 in a repository whose newest runs are one-episode Play saves (it loads the
evaluations). Only the cells up to the run picker are executed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_app_support import fixture_settings, play_session

ROOT = Path(__file__).resolve().parents[1]


def run_cells(path: Path, upto: str, cwd: Path, env: dict) -> str:
    """Execute ``path``'s cells up to the first code cell holding ``upto``; return what they printed."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(str(path), as_version=4)
    code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    last = next(i for i in code if upto in nb.cells[i].source)
    nb.cells = nb.cells[: last + 1]
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        nbclient.NotebookClient(
            nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
        ).execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return "".join(out.get("text", "") for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs)


BASE_ENV = {"PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg", "SMOKE": "0"}


@pytest.mark.slow
def test_notebook_04_creates_a_notebook_output_dir_that_does_not_exist(tmp_path):
    out = tmp_path / "not" / "made" / "yet"
    run_cells(
        ROOT / "notebooks" / "04_reward_shapes.ipynb",
        "NOTEBOOK_OUTPUT_DIR",
        ROOT,
        {**BASE_ENV, "NOTEBOOK_OUTPUT_DIR": str(out), "RUNS_ROOT": str(tmp_path / "runs")},
    )
    assert out.is_dir()


@pytest.mark.slow
def test_notebook_03_loads_the_evaluations_not_the_newer_play_saves(tmp_path):
    from reasoning_env.policies import make_policy
    from workbench.evaluate import evaluate

    runs = tmp_path / "runs"
    evaluate([make_policy("uniform")], n_episodes=2, seed=3, out=runs / "eval-mine", progress=False, report=False)
    for k in range(3):  # saved after the evaluation: the newest folders
        session = play_session()
        session.reset(fixture_settings(seed=k))
        session.step("\\boxed{7}")
        session.save_run(runs, name=f"play-{k}")
    printed = run_cells(
        ROOT / "notebooks" / "03_compare_runs.ipynb",
        "chosen =",
        ROOT,
        {**BASE_ENV, "RUNS_ROOT": str(runs), "NOTEBOOK_OUTPUT_DIR": str(tmp_path / "out")},
    )
    loads = printed.split("the next cell loads:")[1]
    assert "eval-mine" in loads and "play-" not in loads, printed


@pytest.mark.slow
def test_notebook_01_says_where_it_looked_for_the_real_data_and_how_to_point_at_it(tmp_path):
    missing = tmp_path / "no-data-here"
    printed = run_cells(
        ROOT / "notebooks" / "01_play_and_inspect.ipynb",
        "SHARED_DATA =",
        ROOT,
        {**BASE_ENV, "REE_DATA_DIR": str(missing)},
    )
    assert f"no gsm8k_test.jsonl in {missing}" in printed and "set REE_DATA_DIR" in printed, printed

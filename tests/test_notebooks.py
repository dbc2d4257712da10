"""Execute every notebook in notebooks/ top to bottom with SMOKE=1 (one test per notebook).

Notebooks added later (03_compare_runs, 04_reward_shapes, ...) are picked up automatically.
The kernel runs with the repository root as working directory and on PYTHONPATH, so the
notebooks import this checkout's packages. Committed notebooks must carry no outputs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TIMEOUT_S = 900


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT_S + 60)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_with_smoke(path: Path, monkeypatch, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("SMOKE", "1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    monkeypatch.setenv("NOTEBOOK_OUTPUT_DIR", str(tmp_path))  # notebooks may write their runs here
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(str(path), as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_committed_without_outputs(path: Path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.get("outputs") and cell.get("execution_count") is None, (
                f"{path.name} has outputs; clear them before committing (jupyter nbconvert --clear-output --inplace)"
            )


#: Notebooks that look for run folders (03_compare_runs, 04_reward_shapes, ...).
RUN_READERS = [p for p in NOTEBOOKS if "discover_runs(" in p.read_text(encoding="utf-8")]


@pytest.fixture(scope="module")
def repo_with_a_run(tmp_path_factory) -> Path:
    """A stand-in repository (``pyproject.toml``, ``notebooks/``, ``runs/eval-mine``) holding one real run."""
    from reasoning_env.policies import make_policy
    from workbench.evaluate import evaluate

    repo = tmp_path_factory.mktemp("repo").resolve()
    (repo / "pyproject.toml").write_text("[project]\nname = 'stand-in'\n", encoding="utf-8")
    (repo / "notebooks").mkdir()
    evaluate(
        [make_policy("uniform")], n_episodes=2, seed=3, out=repo / "runs" / "eval-mine", progress=False, report=False
    )
    return repo


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT_S + 60)
@pytest.mark.parametrize("path", RUN_READERS, ids=[p.stem for p in RUN_READERS])
def test_notebook_opened_in_notebooks_reads_the_repository_runs(path: Path, repo_with_a_run: Path, monkeypatch):
    """Opened as the README says (``jupyter lab notebooks/``), the kernel starts in ``notebooks/``: the
    notebook still reads the repository's ``runs/`` (not ``notebooks/runs``), says which folder, and
    uses the run found there instead of a demo run."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.delenv("SMOKE", raising=False)
    monkeypatch.delenv("RUNS_ROOT", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(str(path), as_version=4)
    code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    last = next(i for i in code if "discover_runs(" in nb.cells[i].source)
    nb.cells = nb.cells[: last + 1]  # set-up up to the cell that picks the runs: enough, and quick
    client = nbclient.NotebookClient(
        nb,
        timeout=TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(repo_with_a_run / "notebooks")}},
    )
    client.execute()
    printed = "".join(out.get("text", "") for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs)
    runs = repo_with_a_run / "runs"
    assert f"under {runs}" in printed, printed
    assert "eval-mine" in printed, printed
    assert "demo" not in printed, printed

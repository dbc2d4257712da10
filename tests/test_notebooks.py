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
    client = nbclient.NotebookClient(nb, timeout=TIMEOUT_S, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT)}})
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

"""Where the tests find the extra virtual environments that ``scripts/ci_venvs.sh`` builds
(``bash scripts/setup.sh --test`` runs it): ``$REE_CI_VENVS``, else ``ci-venvs`` under the project's cache
(``$REE_CACHE_DIR``, default ``~/.cache/reasoning_env``), as the script resolves it;
``$REE_APP_VENV`` / ``$REE_GPU_PINS_VENV`` / ``$REE_ATROPOS_VENV`` / ``$REE_VERIFIERS_VENV`` point at one directly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_OVERRIDES = {
    "app": "REE_APP_VENV",
    "gpu_pins": "REE_GPU_PINS_VENV",
    "atropos": "REE_ATROPOS_VENV",
    "verifiers": "REE_VERIFIERS_VENV",
}


def ci_venvs_root() -> Path:
    """The folder of the extra venvs, resolved as ``scripts/ci_venvs.sh`` does."""
    if os.environ.get("REE_CI_VENVS"):
        return Path(os.environ["REE_CI_VENVS"])
    cache = (
        os.environ.get("REE_CACHE_DIR")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "reasoning_env"
    )
    return Path(cache) / "ci-venvs"


def ci_venv_python(name: str) -> Path:
    """``bin/python`` of the extra venv ``name`` (``app``, ``gpu_pins``, ``atropos`` or ``verifiers``), or a skip
    with the fix."""
    direct = os.environ.get(_OVERRIDES[name])
    if direct:
        venv = Path(direct)
    else:
        venv = ci_venvs_root() / name
    py = venv / "bin" / "python"
    if not py.is_file() or not (venv / ".stamp").is_file():
        pytest.skip(
            f"the {name!r} venv is not built at {venv}: run `bash scripts/setup.sh --test` "
            "(it runs scripts/ci_venvs.sh)"
        )
    return py

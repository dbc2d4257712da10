"""Copy a run folder's records without its weights, e.g. to ship a training run as an example.

    python -m workbench.export_run runs/grpo-cpu-qwen0.5b examples/runs/grpo-cpu-qwen0.5b

Copied: what the workbench reads (:func:`workbench.runs.load_run`, the Runs tab, :mod:`workbench.held_out`):
``run.json``, ``config.yaml``, ``summary.csv``, the parquet tables and the JSONL logs (metrics, held-out
evaluations and their episodes, streamed episodes and steps, group rewards). Left out: checkpoints, the final
weights, LoRA hand-off folders, any ``*.safetensors`` / ``*.bin`` / ``*.pt`` file, server logs. The destination
must not exist yet (or be empty), so a shipped example is never half overwritten.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from workbench.runs import RunFolderError

__all__ = ["RECORD_FILES", "export_records", "main"]

#: File-name patterns of a run folder's records (top level only; folders are never copied).
RECORD_FILES = ("run.json", "config.yaml", "summary.csv", "README.md", "*.parquet", "*.jsonl", "curves*.json")
_WEIGHTS = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def _run_id(folder: Path) -> str | None:
    import json

    try:
        return json.loads((folder / "run.json").read_text(encoding="utf-8")).get("run_id")
    except (OSError, ValueError):
        return None


def export_records(src: str | Path, dst: str | Path, *, update: bool = False) -> list[Path]:
    """Copy the records of run folder ``src`` into a new folder ``dst``; returns the copied files.

    ``update``: ``dst`` may already hold an export of the same run (its ``run.json`` names the same ``run_id``),
    whose records are replaced by the current ones (a long run's records shipped as it goes; its README.md and
    files only ``dst`` holds stay).

    Raises:
        RunFolderError: ``src`` holds no ``run.json``, or ``dst`` exists and is not empty (with ``update``: and
            is not an export of the same run).
    """
    src, dst = Path(src), Path(dst)
    if not (src / "run.json").is_file():
        raise RunFolderError(f"{src} is not a run folder (no run.json)")
    if dst.exists() and any(dst.iterdir()):
        if not update:
            raise RunFolderError(f"{dst} exists and is not empty: choose a new folder, or remove it first")
        if _run_id(dst) is None or _run_id(dst) != _run_id(src):
            raise RunFolderError(
                f"{dst} is not an export of {src} (run_id {_run_id(dst)!r} vs {_run_id(src)!r}): --update only "
                "refreshes an export of the same run"
            )
    files = sorted({p for pattern in RECORD_FILES for p in src.glob(pattern) if p.is_file()})
    files = [p for p in files if p.suffix not in _WEIGHTS]
    if update and (dst / "README.md").is_file():  # the shipped folder's own description stays
        files = [p for p in files if p.name != "README.md"]
    dst.mkdir(parents=True, exist_ok=True)
    for path in files:
        shutil.copy2(path, dst / path.name)
    return [dst / p.name for p in files]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m workbench.export_run SRC DST``; returns the exit status (2 with the reason on stderr)."""
    p = argparse.ArgumentParser(prog="python -m workbench.export_run", description=__doc__.splitlines()[0])
    p.add_argument("src", help="a run folder (holding run.json)")
    p.add_argument("dst", help="a new folder for its records")
    p.add_argument(
        "--update", action="store_true", help="refresh an earlier export of the same run (a run still training)"
    )
    args = p.parse_args(argv)
    try:
        copied = export_records(args.src, args.dst, update=args.update)
    except RunFolderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    size = sum(f.stat().st_size for f in copied)
    print(f"copied {len(copied)} files ({size / 1e6:.2f} MB) to {args.dst}: " + ", ".join(f.name for f in copied))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Session counts of every worker process of one server, for ``/capacity``.

``python -m reasoning_env.server --workers N`` runs N uvicorn worker processes on one port; a
WebSocket connection (a session) stays on the process that accepted it, and each process has its
own :class:`~reasoning_env.server.sessions.SessionRegistry` and limits. To report all of them
from any process, each writes its counts to a small JSON file in a shared folder (``$REE_WORKER_BOARD``,
made by the parent) whenever a session opens or closes; ``/capacity`` reads the files of the
workers still alive. Without the variable (one process) the board is this process alone.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Environment variable naming the folder of the worker files (set by ``main`` for ``--workers``).
BOARD_VAR = "REE_WORKER_BOARD"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class WorkerBoard:
    """This process's entry on the board, and the sum over all entries.

    Args:
        folder: The shared folder, or ``None`` for a single process.
        counts: Returns this process's counts (``SessionRegistry.capacity``).
    """

    def __init__(self, folder: str | None, counts: Callable[[], dict[str, Any]]) -> None:
        self.folder = Path(folder) if folder else None
        self.counts = counts
        self.worker_id = f"pid{os.getpid()}"

    def publish(self) -> None:
        """Write this process's counts (atomically; a few hundred bytes)."""
        if self.folder is None:
            return
        data = {"worker": self.worker_id, "pid": os.getpid(), **self.counts()}
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".w", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, self.folder / f"{os.getpid()}.json")

    def withdraw(self) -> None:
        """Remove this process's entry (at shutdown)."""
        if self.folder is not None:
            try:
                (self.folder / f"{os.getpid()}.json").unlink()
            except OSError:
                pass

    def entries(self) -> list[dict[str, Any]]:
        """Counts of every live worker (this one read fresh)."""
        mine = {"worker": self.worker_id, "pid": os.getpid(), **self.counts()}
        if self.folder is None:
            return [mine]
        out = [mine]
        for path in sorted(self.folder.glob("*.json")):
            try:
                pid = int(path.stem)
            except ValueError:
                continue
            if pid == os.getpid() or not _alive(pid):
                continue
            try:
                out.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue
        return out


def total(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum of the workers' session counts and slots (limits are per worker)."""
    keys = ("active_sessions", "max_sessions", "available_slots", "unused_sessions")
    out: dict[str, Any] = {k: sum(int(e.get(k, 0) or 0) for e in entries) for k in keys}
    out["workers"] = len(entries)
    return out

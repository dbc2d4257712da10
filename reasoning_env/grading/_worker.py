"""Grading worker process: math-verify on answers the fast path could not decide.

This file is executed with :func:`runpy.run_path` in a process forked from the multiprocessing
forkserver (see :mod:`reasoning_env.grading.pool`), so it imports nothing from
``reasoning_env`` (importing the package pulls in openenv, seconds of start-up); only the
standard library and math-verify, which the forkserver has preloaded.

Protocol over a ``multiprocessing`` connection: the worker sends ``("ready", pid)``, then
answers each request ``("verify", pred, gold)`` with ``("ok", bool)`` or ``("error", name)``,
and ``("ping",)`` with ``("ok", "pong")``. ``None`` or a closed pipe ends it.

Safety: only math-verify's LaTeX extraction is used (``LatexExtractionConfig``): no
``ExprExtractionConfig``, whose ``parse_expr`` evaluates Python code found in model text.
Address space is capped with ``RLIMIT_AS`` so a runaway big-integer computation fails with
``MemoryError`` (or is killed by the parent's hard timeout) instead of exhausting the host.
Gold parses are cached (``functools.lru_cache``) for the life of the worker.
"""

from __future__ import annotations

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business (see pool.py)

# The imports below come after ignoring Ctrl-C on purpose: a signal during them must not print a traceback.
import os  # noqa: E402
import sys  # noqa: E402
from functools import lru_cache  # noqa: E402

_CONFIG = None


def _latex_config():
    global _CONFIG
    if _CONFIG is None:
        from math_verify import LatexExtractionConfig

        _CONFIG = [LatexExtractionConfig()]
    return _CONFIG


@lru_cache(maxsize=4096)
def _parse_gold(gold: str):
    from math_verify import parse

    return parse(f"${gold}$", extraction_config=_latex_config(), parsing_timeout=None)


def mv_equal(pred: str, gold: str) -> bool:
    """math-verify's verdict on ``pred`` (a normalised answer) against ``gold``.

    Both are wrapped in ``$...$`` so math-verify's LaTeX extractor reads them as maths (bare
    gold strings may be skipped or misread by math-verify 0.9). No timeouts here: the parent kills the
    process when its deadline passes.
    """
    from math_verify import parse, verify

    g = _parse_gold(gold)
    if not g:
        return False
    p = parse(f"${pred}$", extraction_config=_latex_config(), parsing_timeout=None)
    if not p:
        return False
    return bool(verify(g, p, timeout_seconds=None))


def _limit_memory(budget_bytes: int) -> None:
    if not budget_bytes:
        return
    try:
        import resource

        current = 0
        try:
            with open(f"/proc/{os.getpid()}/statm") as fh:
                current = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            pass
        limit = current + budget_bytes
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):  # pragma: no cover - non-POSIX
        pass


def serve(conn, memory_budget_bytes: int, nice: int = 0) -> None:
    """Serve requests on ``conn`` until it closes or a ``None`` arrives (at CPU priority +``nice``)."""
    _limit_memory(memory_budget_bytes)
    if nice:
        try:
            os.nice(nice)
        except OSError:  # pragma: no cover - not permitted here
            pass
    import logging

    # math-verify warns on every call that its own (signal) timeouts are off: ours is the kill.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
    try:
        mv_equal("1", "1")  # warm math-verify's parser before reporting ready
    except Exception:  # noqa: BLE001 - a failed warm-up is not fatal: the first real call reports its error
        pass
    try:
        conn.send(("ready", os.getpid()))
    except OSError:  # BrokenPipeError: the server stopped while this worker was starting; nothing to serve
        return
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        try:
            op = msg[0]
            if op == "verify":
                conn.send(("ok", mv_equal(msg[1], msg[2])))
            elif op == "ping":
                conn.send(("ok", "pong"))
            else:
                conn.send(("error", f"unknown request {op!r}"))
        except MemoryError:
            conn.send(("error", "MemoryError"))
        except RecursionError:
            conn.send(("error", "RecursionError"))
        except Exception as exc:  # noqa: BLE001 - math-verify / sympy failures are verdicts, not crashes
            try:
                conn.send(("error", type(exc).__name__))
            except (OSError, ValueError):
                return


if __name__ == "__reasoning_env_grading_worker__":
    serve(CONN, MEMORY_BUDGET, globals().get("NICE", 0))  # noqa: F821 - injected by runpy.run_path(init_globals=...)

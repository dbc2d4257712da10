"""A small process pool with hard timeouts for the math-verify fallback.

Why processes: sympy can spend minutes in C big-integer code (``9^{9^{9^9}}``) where no Python
signal is delivered, and math-verify's own timeouts use ``signal.alarm``, which only works in
the main thread (Math-Verify issue #65: ``signal.alarm`` raises ValueError outside the main
thread). A worker process can be killed at any moment from any thread, so every call returns by
its deadline.

Design:

* Workers are started lazily (on the first call or :meth:`WorkerPool.warm_up`) in a background
  thread, from the ``forkserver`` start method (safe inside threaded servers: the server
  process is single-threaded; ``fork`` from a threaded parent is not). The forkserver preloads
  math-verify, so replacing a worker costs a fork, not an interpreter start, and the child does
  not re-import the parent's ``__main__`` (:class:`_NoMainPopen`): the worker runs
  ``_worker.py`` with :func:`runpy.run_path` and never imports ``reasoning_env``.
* Each worker serves one request at a time; idle workers wait in a queue, so the pool is safe
  to share between threads. A caller waits for a free worker only until its deadline.
* A request past its deadline gets its worker killed (``SIGKILL``) and a replacement is started
  at once; the caller gets ``("timeout", ...)``. With ``cpu_time=True`` the limit is the
  worker's own CPU time on the request (read from ``/proc``), so that a busy machine does not
  time out a grade that would finish in time alone; waiting for a free or starting worker is
  not counted, and a wall-clock cap (:data:`CPU_WALL_CAP_FACTOR` times the limit, at least
  :data:`CPU_WALL_CAP_MIN_S`) still bounds every call. A worker that dies (e.g. ``MemoryError``
  under ``RLIMIT_AS``) is replaced the same way.
* Workers and the forkserver ignore Ctrl-C (SIGINT is blocked in the thread that starts them,
  and the mask is inherited through fork and exec): an interrupted notebook cell or script
  stops the parent only, and the workers end quietly when their pipe closes, instead of each
  printing a ``KeyboardInterrupt`` traceback.
* ``nice`` lowers the workers' CPU priority: a server gives the fast path the CPU first, and a
  client's answers that take seconds of sympy cannot starve everyone else's steps.
* :func:`get_pool` returns one process-wide pool (created under a lock); :func:`shutdown_pool`
  stops it and is registered with :mod:`atexit`. This pool is the grading package's only
  mutable global state.
"""

from __future__ import annotations

import atexit
import copyreg
import io
import logging
import multiprocessing
import os
import queue
import runpy
import signal
import threading
import time
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["WorkerPool", "get_pool", "shutdown_pool", "DEFAULT_MEMORY_BUDGET_BYTES"]

_WORKER_SCRIPT = str(Path(__file__).with_name("_worker.py"))
_RUN_NAME = "__reasoning_env_grading_worker__"
#: Extra address space a worker may map beyond its size at start (bytes).
DEFAULT_MEMORY_BUDGET_BYTES = 2 * 1024**3
#: Longest wait for a new worker to report ready (seconds) before it is discarded.
STARTUP_TIMEOUT_S = 120.0
_PRELOAD = ["math_verify", "latex2sympy2_extended", "sympy"]
#: With ``cpu_time=True`` a call still ends after this many times its CPU limit of wall time...
CPU_WALL_CAP_FACTOR = 30.0
#: ... and not before this many seconds (a worker that gets ~3% of a core is a machine in trouble).
CPU_WALL_CAP_MIN_S = 60.0
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_s(pid: int | None) -> float | None:
    """CPU seconds (user + system) process ``pid`` has used, or ``None`` where ``/proc`` cannot
    tell (then callers count wall time)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, IndexError, ValueError):
        return None


_preload_lock = threading.Lock()
_preload_done = False


def _configure_forkserver(ctx: Any) -> None:
    """Set the forkserver's preload list once (ignored if a forkserver already runs)."""
    global _preload_done
    with _preload_lock:
        if _preload_done:
            return
        try:
            ctx.set_forkserver_preload(list(_PRELOAD))
        except (AttributeError, ValueError):  # pragma: no cover - start method without preload
            pass
        _preload_done = True


try:  # CPython's forkserver internals (3.8-3.13 share this _launch); optional.
    from multiprocessing import forkserver as _forkserver
    from multiprocessing import popen_forkserver as _popen_forkserver
    from multiprocessing import reduction as _reduction
    from multiprocessing import spawn as _spawn
    from multiprocessing import util as _mp_util
    from multiprocessing.context import ForkServerProcess as _ForkServerProcess
    from multiprocessing.context import set_spawning_popen as _set_spawning_popen

    class _NoMainPopen(_popen_forkserver.Popen):
        """Forkserver launch that does not re-import the parent's ``__main__`` in the child.

        multiprocessing normally re-runs the parent's main module in every spawned/forkserver
        child. The grading worker never needs it, and it would break scripts without an
        ``if __name__ == "__main__"`` guard and cost seconds when ``__main__`` imports the
        environment. Otherwise identical to ``popen_forkserver.Popen._launch``.
        """

        def _launch(self, process_obj):  # pragma: no cover - exercised in worker start-up
            prep_data = _spawn.get_preparation_data(process_obj._name)
            prep_data.pop("init_main_from_name", None)
            prep_data.pop("init_main_from_path", None)
            buf = io.BytesIO()
            _set_spawning_popen(self)
            try:
                _reduction.dump(prep_data, buf)
                _reduction.dump(process_obj, buf)
            finally:
                _set_spawning_popen(None)
            self.sentinel, w = _forkserver.connect_to_new_process(self._fds)
            _parent_w = os.dup(w)
            self.finalizer = _mp_util.Finalize(self, _mp_util.close_fds, (_parent_w, self.sentinel))
            with open(w, "wb", closefd=True) as f:
                f.write(buf.getbuffer())
            self.pid = _forkserver.read_signed(self.sentinel)

    class _WorkerProcess(_ForkServerProcess):
        """A forkserver process launched with :class:`_NoMainPopen`. It pickles as a plain
        ``ForkServerProcess``, so the child never imports this module (nor ``reasoning_env``,
        whose import costs seconds)."""

        @staticmethod
        def _Popen(process_obj):
            return _NoMainPopen(process_obj)

        def __reduce__(self):
            return (copyreg._reconstructor, (_ForkServerProcess, object, None), self.__dict__)

except ImportError:  # pragma: no cover - platforms without forkserver
    _WorkerProcess = None


_plain_process_only = False  # set once if _NoMainPopen fails on this Python (pool machinery)


def _start_process(ctx: Any, **kwargs: Any) -> Any:
    """Create and start a worker process: with :class:`_WorkerProcess` when possible, else
    (other start method, or CPython internals changed) a stock ``ctx.Process``."""
    global _plain_process_only
    if _WorkerProcess is not None and not _plain_process_only and ctx.get_start_method() == "forkserver":
        proc = _WorkerProcess(**kwargs)
        try:
            proc.start()
            return proc
        except (AttributeError, TypeError, ImportError) as exc:  # pragma: no cover - future CPython
            logger.warning("grading worker: custom forkserver launch failed (%s); using the stock one", exc)
            _plain_process_only = True
    proc = ctx.Process(**kwargs)
    proc.start()
    return proc


class _Worker:
    """One worker slot: a process plus its pipe, (re)started in the background."""

    def __init__(self, pool: WorkerPool, index: int) -> None:
        self.pool = pool
        self.index = index
        self.proc: Any = None
        self.conn: Any = None
        self.ready = threading.Event()
        self._starting = False
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        proc = self.proc
        return proc.pid if proc is not None else None

    def alive(self) -> bool:
        proc = self.proc
        return proc is not None and self.ready.is_set() and proc.is_alive()

    def ensure_started(self) -> None:
        """Start a process in the background unless one is running or starting."""
        with self._lock:
            if self.pool.closed or self._starting or self.alive():
                return
            self._discard_locked()
            self._starting = True
            self.ready.clear()
        t = threading.Thread(target=self._start, name=f"grading-worker-start-{self.index}", daemon=True)
        t.start()

    def _start(self) -> None:
        # Ctrl-C goes to the whole process group: block it in this thread so the forkserver
        # (spawned from here on first use) and the worker inherit a mask without it.
        masked = _block_sigint()
        try:
            self._start_masked()
        finally:
            if masked:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    def _start_masked(self) -> None:
        ctx = self.pool.ctx
        proc = parent = None
        try:
            _configure_forkserver(ctx)
            parent, child = ctx.Pipe(duplex=True)
            proc = _start_process(
                ctx,
                target=runpy.run_path,
                args=(_WORKER_SCRIPT,),
                kwargs={
                    "init_globals": {
                        "CONN": child,
                        "MEMORY_BUDGET": self.pool.memory_budget_bytes,
                        "NICE": self.pool.nice,
                    },
                    "run_name": _RUN_NAME,
                },
                name=f"grading-worker-{self.index}",
                daemon=True,
            )
            child.close()
            if parent.poll(STARTUP_TIMEOUT_S):
                msg = parent.recv()
                if msg and msg[0] == "ready":
                    with self._lock:
                        if self.pool.closed:
                            raise RuntimeError("pool closed")
                        self.proc, self.conn = proc, parent
                        self.ready.set()
                    return
            raise RuntimeError("worker did not report ready")
        except Exception as exc:  # noqa: BLE001 - any start failure is logged; the pool retries or degrades
            logger.warning("grading worker %d failed to start: %s", self.index, exc)
            _kill(proc, parent)
        finally:
            with self._lock:
                self._starting = False

    def _discard_locked(self) -> None:
        _kill(self.proc, self.conn)
        self.proc = self.conn = None
        self.ready.clear()

    def kill(self) -> None:
        """Kill the process now (SIGKILL) and forget it."""
        with self._lock:
            self._discard_locked()

    def call(self, request: tuple, deadline: float, cpu_limit_s: float | None = None) -> tuple:
        """Run ``request`` by ``deadline`` (``time.monotonic()``); with ``cpu_limit_s``, also
        stop once the worker has spent that much CPU time on it (whichever comes first)."""
        if not self.alive():
            self.ensure_started()
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not self.ready.wait(remaining):
            return ("timeout", "no worker ready in time")
        conn = self.conn
        try:
            start = process_cpu_s(self.pid) if cpu_limit_s is not None else None
            conn.send(request)
            if start is None:
                remaining = deadline - time.monotonic()
                if remaining > 0 and conn.poll(remaining):
                    return conn.recv()
            else:
                while True:
                    used = (process_cpu_s(self.pid) or start) - start
                    # the worker cannot use CPU faster than the clock runs: wait out what is left
                    wait = min(cpu_limit_s - used, deadline - time.monotonic())
                    if wait <= 0:
                        break
                    if conn.poll(max(wait, 0.01)):
                        return conn.recv()
        except (EOFError, OSError, BrokenPipeError, ValueError, TypeError):
            self.kill()
            self.ensure_started()
            return ("error", "worker died")
        # Past the deadline: the worker may be stuck in C code. Kill it and start another.
        self.kill()
        self.ensure_started()
        return ("timeout", "killed")


def _block_sigint() -> bool:
    """Block SIGINT in the calling thread; returns whether it was done (POSIX only)."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    except (AttributeError, ValueError, OSError):  # pragma: no cover - non-POSIX
        return False
    return signal.SIGINT not in old


def _kill(proc: Any, conn: Any) -> None:
    if conn is not None:
        try:
            conn.close()
        except OSError:
            pass
    if proc is not None:
        try:
            if proc.is_alive():
                proc.kill()
            proc.join(timeout=2.0)
        except (OSError, ValueError, AssertionError):
            pass


class WorkerPool:
    """Worker processes that answer ``("verify", pred, gold)`` within a hard deadline.

    Args:
        size: Number of worker processes (default ``min(4, max(2, cpu_count))``).
        memory_budget_bytes: ``RLIMIT_AS`` headroom per worker beyond its start-up size
            (bytes; 0 disables the limit).
        start_method: ``"forkserver"`` (default) or ``"spawn"``; ``"fork"`` is refused because
            forking a threaded process can deadlock.
        nice: CPU priority increment of the workers (0: as the parent; a server uses 5).

    Raises:
        ValueError: bad size or start method.
    """

    def __init__(
        self,
        size: int | None = None,
        *,
        memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET_BYTES,
        start_method: str = "forkserver",
        nice: int = 0,
    ) -> None:
        if size is None:
            size = min(4, max(2, os.cpu_count() or 2))
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"pool size must be a positive integer, got {size!r}")
        if start_method not in ("forkserver", "spawn"):
            raise ValueError(f"start_method must be 'forkserver' or 'spawn', got {start_method!r}")
        if start_method not in multiprocessing.get_all_start_methods():  # pragma: no cover - Windows
            start_method = "spawn"
        self.ctx = multiprocessing.get_context(start_method)
        self.memory_budget_bytes = int(memory_budget_bytes)
        if not isinstance(nice, int) or not 0 <= nice <= 19:
            raise ValueError(f"nice must be an integer from 0 to 19, got {nice!r}")
        self.nice = nice
        self.closed = False
        self._workers = [_Worker(self, i) for i in range(size)]
        self._idle: queue.LifoQueue[_Worker] = queue.LifoQueue()
        for w in self._workers:
            self._idle.put(w)

    @property
    def size(self) -> int:
        """Number of worker slots."""
        return len(self._workers)

    def pids(self) -> list:
        """Process ids of the live workers (for monitoring and tests)."""
        return [w.pid for w in self._workers if w.alive()]

    def warm_up(self, wait_s: float = 0.0) -> bool:
        """Start every worker in the background; wait up to ``wait_s`` seconds for all of them.

        Returns:
            True when all workers are ready.
        """
        for w in self._workers:
            w.ensure_started()
        deadline = time.monotonic() + max(0.0, wait_s)
        for w in self._workers:
            if not w.ready.wait(max(0.0, deadline - time.monotonic())):
                return False
        return True

    def call(self, request: tuple, timeout_s: float, *, cpu_time: bool = False) -> tuple:
        """Send ``request`` to a free worker and wait at most ``timeout_s`` seconds in total
        (including waiting for a free or starting worker).

        With ``cpu_time``, ``timeout_s`` is the worker's CPU time on the request instead
        (where ``/proc`` can tell; else wall time from the moment a worker takes it): waiting
        for a free or starting worker does not count, nor do moments the machine gives the
        worker no CPU; the call still ends within the wall-clock cap (the larger of
        :data:`CPU_WALL_CAP_MIN_S` and :data:`CPU_WALL_CAP_FACTOR` x ``timeout_s``).

        Returns:
            ``("ok", value)``, ``("error", name)`` or ``("timeout", why)``.
        """
        if self.closed:
            return ("error", "pool closed")
        limit = max(0.0, timeout_s)
        wall = max(CPU_WALL_CAP_MIN_S, CPU_WALL_CAP_FACTOR * limit) if cpu_time else limit
        deadline = time.monotonic() + wall
        try:
            w = self._idle.get(timeout=wall)
        except queue.Empty:
            return ("timeout", "all workers busy")
        try:
            if cpu_time:
                return w.call(request, deadline, cpu_limit_s=limit)
            return w.call(request, deadline)
        finally:
            self._idle.put(w)

    def verify(self, pred: str, gold: str, timeout_s: float, *, cpu_time: bool = False) -> tuple:
        """math-verify's verdict on ``pred`` vs ``gold`` (see :meth:`call` for the result)."""
        return self.call(("verify", pred, gold), timeout_s, cpu_time=cpu_time)

    def shutdown(self) -> None:
        """Stop every worker (idempotent). Safe to call at interpreter exit."""
        self.closed = True
        for w in self._workers:
            conn = w.conn
            if conn is not None:
                try:
                    conn.send(None)
                except (OSError, ValueError):
                    pass
            w.kill()


_pool: WorkerPool | None = None
_pool_lock = threading.Lock()


def get_pool() -> WorkerPool:
    """The process-wide worker pool (created on first use, thread-safe)."""
    global _pool
    pool = _pool
    if pool is not None and not pool.closed:
        return pool
    with _pool_lock:
        if _pool is None or _pool.closed:
            _pool = WorkerPool()
        return _pool


def shutdown_pool() -> None:
    """Stop the process-wide pool if it exists (registered with :mod:`atexit`)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown()


atexit.register(shutdown_pool)

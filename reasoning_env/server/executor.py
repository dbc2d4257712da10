"""The thread pool that runs every session's resets and steps, and lets waits step aside.

A step mostly computes (counting tokens, the fast grader, the reward), but a grade the fast path
cannot settle waits on a math-verify worker process for up to ``grading_timeout_s``. In a plain
thread pool such a wait holds a thread: 8 steps that wait 2 s each held all 4 threads of the
server, and every other session's steps queued behind them (a canary session fell from 1,741 to
162 steps/s). :class:`ElasticExecutor` keeps ``threads`` threads for computing and treats a thread
inside :func:`blocking` (a wait on another process) as not there: a spare thread takes its place
for as long as the wait lasts, and the extra thread ends once the pool is back to size. This is
the "managed blocking" of Java's ``ForkJoinPool``.

Waits are bounded elsewhere (the grading fallback admits a bounded number per client, see
:mod:`reasoning_env.server.fallback`); ``max_threads`` is the hard cap on threads in all.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections import deque
from concurrent.futures import Executor, Future
from typing import Any, Callable, Iterator, Optional

__all__ = ["ElasticExecutor", "blocking"]

_local = threading.local()


@contextlib.contextmanager
def blocking() -> Iterator[None]:
    """Mark the code inside as waiting (not computing): when it runs on an
    :class:`ElasticExecutor` thread, another thread serves the queue meanwhile. Elsewhere it
    does nothing."""
    pool: Optional[ElasticExecutor] = getattr(_local, "pool", None)
    if pool is None:
        yield
        return
    pool._enter_wait()
    try:
        yield
    finally:
        pool._leave_wait()


class ElasticExecutor(Executor):
    """``threads`` computing threads, plus one stand-in per thread waiting in :func:`blocking`.

    Args:
        threads: Threads that compute at once (>= 1).
        max_threads: Most threads in all, waiting ones included (>= ``threads``).
        name: Prefix of the thread names.

    Calls run in submission order. A cancelled future whose call has not started never runs
    (a session whose client went away drops its queued work).
    """

    def __init__(self, threads: int, max_threads: int, name: str = "ree-worker") -> None:
        if threads < 1 or max_threads < threads:
            raise ValueError(f"need 1 <= threads <= max_threads, got threads={threads}, max_threads={max_threads}")
        self.threads = threads
        self.max_threads = max_threads
        self._name = name
        self._cond = threading.Condition()
        self._work: deque[tuple[Future, Callable[..., Any], tuple, dict]] = deque()
        self._computing = 0  # threads running a call, not inside blocking()
        self._idle = 0       # threads waiting for work
        self._alive = 0      # all threads
        self._waiting = 0    # threads inside blocking()
        self._shutdown = False
        self._ids = itertools.count()

    # ------------------------------------------------------------------ Executor
    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        """Queue ``fn(*args, **kwargs)``; returns its future.

        Raises:
            RuntimeError: the executor was shut down.
        """
        future: Future = Future()
        with self._cond:
            if self._shutdown:
                raise RuntimeError("the executor was shut down")
            self._work.append((future, fn, args, kwargs))
            self._wake_or_spawn()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking calls; with ``cancel_futures`` drop the queued ones. Running calls finish."""
        with self._cond:
            self._shutdown = True
            if cancel_futures:
                while self._work:
                    self._work.popleft()[0].cancel()
            self._cond.notify_all()
        if wait:
            with self._cond:
                while self._alive:
                    self._cond.wait(0.1)

    def stats(self) -> dict[str, int]:
        """``threads`` (target), ``alive``, ``computing``, ``waiting`` (in :func:`blocking`) and ``queued``."""
        with self._cond:
            return {"threads": self.threads, "alive": self._alive, "computing": self._computing,
                    "waiting": self._waiting, "queued": len(self._work)}

    # ------------------------------------------------------------------ internals (hold _cond)
    def _wake_or_spawn(self) -> None:
        if not self._work:
            return
        if self._idle:
            self._cond.notify()
        elif self._computing + self._idle < self.threads and self._alive < self.max_threads:
            self._alive += 1
            self._idle += 1  # counted idle until it takes the work
            t = threading.Thread(target=self._run, name=f"{self._name}-{next(self._ids)}", daemon=True)
            t.start()

    def _enter_wait(self) -> None:
        with self._cond:
            self._computing -= 1
            self._waiting += 1
            self._wake_or_spawn()

    def _leave_wait(self) -> None:
        with self._cond:
            self._waiting -= 1
            self._computing += 1

    def _run(self) -> None:
        _local.pool = self
        cond = self._cond
        while True:
            with cond:
                while not self._work:
                    if self._shutdown:
                        self._idle -= 1
                        self._alive -= 1
                        cond.notify_all()
                        return
                    cond.wait()
                if self._computing >= self.threads:
                    # A thread came back from a wait: the pool is over size, this one goes.
                    self._idle -= 1
                    self._alive -= 1
                    return
                future, fn, args, kwargs = self._work.popleft()
                self._idle -= 1
                self._computing += 1
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        result = fn(*args, **kwargs)
                    except BaseException as exc:  # noqa: BLE001 - handed to the caller
                        future.set_exception(exc)
                    else:
                        future.set_result(result)
            finally:
                del future, fn, args, kwargs
                with cond:
                    self._computing -= 1
                    if self._computing + self._idle >= self.threads:
                        self._alive -= 1
                        cond.notify_all()
                        return
                    self._idle += 1

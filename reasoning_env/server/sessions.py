"""OpenEnv's session registry with two changes: resets and steps run on a small shared thread pool,
and reaping an idle WebSocket session also closes its socket.

Threads. OpenEnv's :class:`HTTPEnvServer` runs each session's calls on a thread of its own. With
64 busy sessions on 2 cores that cost 15-40% more server CPU per step than a shared pool of 2-8
threads (GIL hand-offs between 64 runnable threads), and the tokenizer's native allocations,
spread over 64 threads, grew the server's memory steadily (+80 MB from 256 to 2,560 episodes and
still growing; +10 MB with 4 threads). :class:`SessionServer` runs every session's resets and steps on
one pool of ``worker_threads`` threads. A session never has two calls in flight (the route awaits
each), so its environment is still used by one thread at a time. The price: ``worker_threads``
steps that wait on slow grades (up to the grader's time limit) hold up the others meanwhile.

Reaping. OpenEnv reaps a session idle past ``session_timeout`` by closing its environment and
freeing its slot, but leaves the WebSocket open: the client keeps talking to a closed environment
that no longer counts against the cap. :class:`SessionServer` binds each ``/ws`` session to its
connection (published by :class:`~reasoning_env.server.guard.MessageGuard`); every message counts
as activity (OpenEnv counts only resets and steps), and when the reaper destroys the session the
client gets an error frame saying why and the socket is closed (close code
:data:`~reasoning_env.server.guard.IDLE_CLOSE_CODE`). The capacity check and the reaper's
schedule are OpenEnv's.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from openenv.core.env_server.http_server import HTTPEnvServer

from reasoning_env.server.guard import WSConnection, current_connection


class SessionServer(HTTPEnvServer):
    """:class:`HTTPEnvServer` with a shared worker pool and a reaper that closes idle sockets.

    Args:
        *args, **kwargs: :class:`HTTPEnvServer`'s arguments.
        worker_threads: Threads running all sessions' resets and steps.
    """

    def __init__(self, *args: Any, worker_threads: int = 4, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._connections: dict[str, WSConnection] = {}
        self._workers = ThreadPoolExecutor(max_workers=worker_threads, thread_name_prefix="ree-worker")

    async def _run_in_session_executor(self, session_id: str, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._workers, functools.partial(func, *args, **kwargs))

    def shutdown_workers(self) -> None:
        """Stop the worker pool (queued calls are cancelled; running ones finish)."""
        self._workers.shutdown(wait=False, cancel_futures=True)

    async def _create_session(self) -> tuple[str, Any]:
        session_id, env = await super()._create_session()
        conn = current_connection()
        if conn is not None:
            self._connections[session_id] = conn
            # OpenEnv counts only resets and steps as activity; any message should keep a session.
            conn.on_frame = functools.partial(self._update_session_activity, session_id)
        return session_id, env

    async def _destroy_session(self, session_id: str) -> None:
        conn = self._connections.pop(session_id, None)
        await super()._destroy_session(session_id)
        reaping = self._reaper_task is not None and asyncio.current_task() is self._reaper_task
        if conn is not None and reaping:
            timeout = self._session_idle_timeout_s
            await conn.close(
                f"session closed by the server after more than {timeout:g} s without a message "
                "(REE_SESSION_TIMEOUT_S); reconnect and reset to start again"
            )

    def capacity(self) -> dict[str, Any]:
        """``active_sessions``, ``max_sessions``, ``available_slots`` and ``session_timeout_s``."""
        status = self.get_capacity_status()
        return {
            "active_sessions": status.active_sessions,
            "max_sessions": status.max_sessions,
            "available_slots": status.available_slots,
            "session_timeout_s": self._session_idle_timeout_s,
        }

"""The ``/ws`` route: one session per WebSocket connection, speaking OpenEnv's protocol.

Why this route and not OpenEnv's own (``HTTPEnvServer.register_routes``' ``/ws``): what a shared
server needs sits inside that route's loop, where a wrapper cannot reach. Here:

- admission says which limit refused a session (all slots, or this client's share) and the
  shared token (``REE_API_TOKEN``) is checked before anything else;
- each frame is parsed once, in a worker thread (a 4 MB frame never stalls the event loop), and
  the answer is serialised there too, straight to JSON text;
- while a call runs, the route keeps reading the socket: a client that goes away frees its slot
  at once and its queued work is cancelled (OpenEnv's route noticed only after the call ended,
  so a killed client with 64 one-megabyte steps queued held its slots for 35 s and the server
  computed them all);
- the call runs on the shared :class:`~reasoning_env.server.executor.ElasticExecutor` in fair
  order (round-robin over address groups, then clients: ``submit_for``), tagged with the
  client's address for the grading fallback's fair share
  (:data:`reasoning_env.server.fallback.client_key`).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from reasoning_env.errors import ReasoningEconomicsError
from reasoning_env.server.executor import address_group, on_wait
from reasoning_env.server.fallback import client_gone, client_key
from reasoning_env.server.protocol import (
    FrameError,
    HistoryCache,
    error_frame,
    observation_frame,
    parse_message,
    state_frame,
)
from reasoning_env.server.sessions import IDLE_CLOSE_CODE, AdmissionError, SessionRegistry
from reasoning_env.server.settings import ServerSettings
from reasoning_env.server.share import ComputeShare, Ticket

logger = logging.getLogger(__name__)

Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: RFC 6455 close codes used here.
POLICY_VIOLATION = 1008
TRY_AGAIN_LATER = 1013
#: Messages a session may send ahead of its answers that are read while a call runs (the rest wait in
#: the socket): a disconnect behind them is seen at once.
READ_AHEAD = 32
#: ... and at most this many characters of them (a session pipelining frames at the message limit
#: kept 32 of them: ~450 MiB of 15 MiB frames; now about one message at the limit ahead, and a
#: client killed with three 1 MB steps queued is still seen to go at once).
READ_AHEAD_CHARS = 4 * 1024 * 1024
#: Messages larger than this (bytes of text) make the process hand freed memory back afterwards.
_BIG_MESSAGE_CHARS = 256 * 1024


class Connection:
    """The server side of one WebSocket: sends text frames, error frames and the close, and drops
    anything sent after the close or once the peer is gone."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.closed = False

    async def send(self, message: Message) -> None:
        if self.closed:
            return
        if message.get("type") == "websocket.close":
            self.closed = True
        try:
            await self._send(message)
        except (OSError, RuntimeError):  # the peer is gone (uvicorn's ClientDisconnected is an OSError)
            self.closed = True

    async def send_text(self, text: str) -> None:
        await self.send({"type": "websocket.send", "text": text})

    async def refuse(self, message: str, code: str, close_code: int, **extra: Any) -> None:
        """Send an error frame saying why, then close."""
        await self.send_text(error_frame(message, code, **extra))
        await self.send({"type": "websocket.close", "code": close_code, "reason": message[:120]})

    async def close_idle(self, message: str) -> None:
        """Close a session the server expired: ``SESSION_ERROR`` saying why, then code 4000."""
        if not self.closed:
            await self.refuse(message, "SESSION_ERROR", IDLE_CLOSE_CODE)


def client_address(scope: dict) -> str:
    """The client's address as uvicorn reports it (``X-Forwarded-For`` when uvicorn trusts the proxy)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


class _Trimmer:
    """Hands freed heap memory back to the OS (glibc ``malloc_trim``) after large messages: at
    most every ``min_interval_s`` seconds, and once more after a burst (a trim asked for within
    the interval is done when it ends: when 64 big sessions close together, the first close's
    trim ran while the others' buffers were still live and the rest were skipped, so ~700 MiB
    stayed resident). A no-op where glibc is absent."""

    def __init__(self, min_interval_s: float = 2.0) -> None:
        self._fn = None
        name = ctypes.util.find_library("c")
        try:
            self._fn = ctypes.CDLL(name).malloc_trim if name else None
        except (OSError, AttributeError):
            self._fn = None
        self._last = 0.0
        self._interval = min_interval_s
        self._lock = threading.Lock()
        self._trailing: threading.Timer | None = None
        self.trims = 0  # done so far (for tests)

    def __call__(self) -> None:
        if self._fn is None:
            return
        with self._lock:
            now = time.monotonic()
            wait = self._last + self._interval - now
            if wait > 0:
                if self._trailing is None:
                    self._trailing = threading.Timer(wait, self._run_trailing)
                    self._trailing.daemon = True
                    self._trailing.start()
                return
            self._last = now
        self._trim()

    def _run_trailing(self) -> None:
        with self._lock:
            self._trailing = None
            self._last = time.monotonic()
        self._trim()

    def _trim(self) -> None:
        self._fn(0)
        self.trims += 1


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> None:
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:  # the loop is closed: the server is stopping
        pass


class WebSocketRoute:
    """ASGI app of ``/ws`` (see the module docstring).

    Args:
        settings: Limits. registry: The process's :class:`SessionRegistry`.
        executor: Runs each call (an :class:`~reasoning_env.server.executor.ElasticExecutor`).
        make_env: Builds a session's environment.
        auth: ``auth(scope) -> None`` or why the request is refused.
    """

    def __init__(
        self,
        settings: ServerSettings,
        registry: SessionRegistry,
        executor: Any,
        make_env: Callable[[], Any],
        auth: Callable[[dict], str | None],
        share: ComputeShare | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.executor = executor
        self.make_env = make_env
        self.auth = auth
        self.share = share if share is not None else ComputeShare()
        self._trim = _Trimmer()

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        first = await receive()
        if first.get("type") != "websocket.connect":
            return
        conn = Connection(send)
        await conn.send({"type": "websocket.accept"})  # accept first, so that a refusal can say why
        problem = self.auth(scope)
        if problem is not None:
            await conn.refuse(problem, "UNAUTHORIZED", POLICY_VIOLATION)
            return
        query = parse_qs((scope.get("query_string") or b"").decode("latin-1"))
        if query.get("session_id"):
            sid = query["session_id"][0]
            await conn.refuse(
                f"Unknown session_id: {sid[:80]}: this server does not attach WebSockets to HTTP sessions (its /mcp "
                "routes are off); connect to /ws without a session_id: each connection is its own session",
                "SESSION_ERROR",
                1000,
            )
            return
        client = client_address(scope)
        try:
            session = self.registry.open(client, conn.close_idle)
        except AdmissionError as exc:
            await conn.refuse(exc.message, "CAPACITY_REACHED", TRY_AGAIN_LATER, **exc.extra)
            return
        big = False
        try:
            big = await self._serve(session, conn, receive)
        finally:
            self.registry.close(session)
            await conn.send({"type": "websocket.close", "code": 1000})
            if big:
                asyncio.get_running_loop().run_in_executor(None, self._trim)

    async def _serve(self, session: Any, conn: Connection, receive: Receive) -> bool:
        """The session's message loop; returns whether a large message was seen.

        While a call runs, up to :data:`READ_AHEAD` further messages are read and kept (a client
        may pipeline), so that a disconnect is seen at once: the slot is freed and the session's
        queued work is cancelled.
        """
        loop = asyncio.get_running_loop()
        group = address_group(session.client)
        env = self.make_env()
        history = HistoryCache()
        big = False
        inbox: deque = deque()
        inbox_chars = 0
        pending: asyncio.Future | None = None
        self.share.join(group)
        try:
            while not conn.closed:
                if inbox:
                    message = inbox.popleft()
                    inbox_chars -= len(message.get("text") or message.get("bytes") or "")
                else:
                    message = await (pending if pending is not None else receive())
                    pending = None
                kind = message.get("type")
                if kind == "websocket.disconnect" or conn.closed:
                    return big
                if kind != "websocket.receive":
                    continue
                session.last_activity = time.monotonic()
                text = message.get("text")
                if text is not None and len(text) > _BIG_MESSAGE_CHARS:
                    big = True
                args = (group, session, env, history, text)
                ticket = self.share.try_enter(group)
                call = self._submit(loop, ticket, *args) if ticket else asyncio.ensure_future(self._held(loop, *args))
                while not call.done():
                    if len(inbox) >= READ_AHEAD or inbox_chars >= READ_AHEAD_CHARS:
                        await asyncio.wait((call,))
                        break
                    if pending is None:
                        pending = asyncio.ensure_future(receive())
                    await asyncio.wait((call, pending), return_when=asyncio.FIRST_COMPLETED)
                    if pending.done():
                        nxt = pending.result()
                        pending = None
                        if nxt.get("type") == "websocket.disconnect":
                            call.cancel()  # queued work of a client that left never runs
                            return big
                        inbox.append(nxt)  # pipelined: answered in order after this one
                        inbox_chars += len(nxt.get("text") or nxt.get("bytes") or "")
                reply, close = call.result()[:2]
                if reply is not None:
                    await conn.send_text(reply)
                if close:
                    return big
            return big
        finally:
            self.share.part(group)
            if pending is not None and not pending.done():
                pending.cancel()

    def _submit(self, loop: asyncio.AbstractEventLoop, ticket: Ticket, group: str, session: Any, *args: Any):
        """Queue the call in fair order; its group's share hears when it ends and how long it computed."""
        future = self.executor.submit_for(group, session.client, self._handle, loop, ticket, session, *args)
        call = asyncio.wrap_future(future, loop=loop)

        def done(call: asyncio.Future) -> None:
            cpu = 0.0 if call.cancelled() or call.exception() is not None else call.result()[2]
            self.share.leave(ticket, cpu)

        call.add_done_callback(done)
        return call

    async def _held(self, loop: asyncio.AbstractEventLoop, group: str, *args: Any) -> tuple:
        """A call whose group must wait for its share first (see :mod:`reasoning_env.server.share`)."""
        ticket = await self.share.enter(group)
        return await self._submit(loop, ticket, group, *args)

    def _handle(
        self,
        loop: asyncio.AbstractEventLoop,
        ticket: Ticket,
        session: Any,
        env: Any,
        history: HistoryCache,
        text: str | None,
    ) -> tuple[str | None, bool, float]:
        """Run one message in a worker thread: ``(answer frame or None, close the session?, CPU
        seconds of this thread)``; a wait on another process (the grading fallback) costs no CPU
        here, and the group's share steps aside while it lasts."""
        cpu = time.thread_time()
        with on_wait(lambda: _call_soon(loop, self.share.step_aside, ticket)):
            reply, close = self._run(env, history, session, text)
        return reply, close, time.thread_time() - cpu

    def _run(self, env: Any, history: HistoryCache, session: Any, text: str | None) -> tuple[str | None, bool]:
        token = client_key.set(session.client)
        gone = client_gone.set(lambda: session.closed)
        try:
            try:
                request = parse_message(
                    text,
                    max_message_bytes=self.settings.max_message_bytes,
                    max_response_bytes=self.settings.max_response_bytes,
                )
            except FrameError as exc:
                return error_frame(exc.message, exc.code, **exc.extra), False
            if request.kind == "close":
                return None, True
            if request.kind == "state":
                return state_frame(env.state), False
            session.used = True
            if request.kind == "reset":
                obs = env.reset(**request.data)
            else:
                obs = env.step(request.data)
                session.steps += 1
            return observation_frame(obs, history), False
        except ReasoningEconomicsError as exc:  # a refused reset or step: its message is for the client
            return error_frame(str(exc), "EXECUTION_ERROR"), False
        except Exception as exc:  # a bug must not kill the session; the client sees what failed
            logger.exception("session %s: %s failed", session.id, "message")
            return error_frame(f"internal error: {type(exc).__name__}: {exc}", "EXECUTION_ERROR"), False
        finally:
            client_gone.reset(gone)
            client_key.reset(token)

"""ASGI middleware in front of OpenEnv's HTTP routes: caps request bodies and checks the
shared token, before the routes read anything; and charges every HTTP request to its client's
address group (:class:`~reasoning_env.server.share.ComputeShare`), as a WebSocket call is:
while groups compete, a group's HTTP requests run one at a time, so a flood of ``POST /reset``
or of 409 answers to ``POST /step`` is held back like a reset storm over the WebSocket (the
review: 0.04-0.27x of a canary's rate, not charged at all). Each request is charged the CPU
time it used: the event loop thread's in each step of its coroutine (:class:`LoopTimed`: body
parsing, validation, the route, the error path, writing the answer) plus its work on OpenEnv's
thread pool (:class:`ChargedThreadPool`: ``env.reset`` / ``env.step``). Charging its wall time
instead counted whatever else ran meanwhile (1.5-1.9 ms of CPU charged 11-12 ms on a loaded
machine), and its loop time was counted again in the loop cost per message that every group's
calls are charged (0.2 -> 0.6-1.4 ms), so a flood of HTTP requests made the canary pay for it.

OpenEnv's routes read request bodies of any size; the guard caps them (413, stating the response
cap). FastAPI's own ``max_body_size`` would cap every route of the app, including a UI mounted on
it later; the guard caps only OpenEnv's routes. With ``REE_API_TOKEN`` set, ``/reset``, ``/step``
and ``/state`` need ``Authorization: Bearer <token>`` (401 otherwise); ``/ws`` checks the same
token itself (:mod:`reasoning_env.server.ws`), and ``/health``, ``/schema``, ``/metadata`` and
``/capacity`` stay open for probes.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import ContextVar
from typing import Any

from starlette.routing import BaseRoute, Match

from reasoning_env.server.executor import address_group
from reasoning_env.server.protocol import MAX_INT_DIGITS, _huge_int_path
from reasoning_env.server.settings import ServerSettings

logger = logging.getLogger(__name__)

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: Bytes of a refused (too large) request body read and dropped before the 413 is sent; the
#: connection of a larger body is cut after the answer.
DRAIN_BYTES = 64 * 1024 * 1024
#: A run of digits longer than Python reads as an integer (checked before FastAPI parses a body).
_LONG_DIGITS = re.compile(rb"\d{%d}" % (MAX_INT_DIGITS + 1))

#: Paths that need the token when one is set (``/ws`` checks it in its own route).
TOKEN_PATHS = ("/reset", "/step", "/state")


def token_problem(scope: Scope, token: str | None) -> str | None:
    """Why a request lacks the shared ``token`` (``None``: no token is required, or it is right).

    The token travels as ``Authorization: Bearer <token>``; the comparison takes the same time
    whatever the guess (:func:`hmac.compare_digest`).
    """
    if not token:
        return None
    sent = None
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            sent = value.decode("latin-1").strip()
            break
    if sent is None:
        return (
            "this server requires its access token: send the header 'Authorization: Bearer <token>' "
            "(the typed client and the trainers send $REE_API_TOKEN)"
        )
    scheme, _, given = sent.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        return "the access token sent in 'Authorization: Bearer ...' is not this server's (REE_API_TOKEN)"
    return None


#: The CPU seconds of the HTTP request being served (a one-item list), for the thread pool's calls.
_REQUEST_CPU: ContextVar[list[float] | None] = ContextVar("ree_request_cpu", default=None)


class LoopTimed:
    """Awaits ``coro`` and adds up this thread's CPU time in each of its steps (``cpu_s``): what
    one request's coroutine costs the event loop, without the time other tasks ran while it
    waited."""

    __slots__ = ("_coro", "cpu_s")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._coro = coro
        self.cpu_s = 0.0

    def __await__(self) -> LoopTimed:
        return self

    def __iter__(self) -> LoopTimed:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def send(self, value: Any) -> Any:
        cpu = time.thread_time()
        try:
            return self._coro.send(value)
        finally:
            self.cpu_s += time.thread_time() - cpu

    def throw(self, *exc: Any) -> Any:
        cpu = time.thread_time()
        try:
            return self._coro.throw(*exc)
        finally:
            self.cpu_s += time.thread_time() - cpu

    def close(self) -> None:
        self._coro.close()


def _timed_call(spent: list[float], fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    cpu = time.thread_time()
    try:
        return fn(*args, **kwargs)
    finally:
        spent[0] += time.thread_time() - cpu


class ChargedThreadPool(ThreadPoolExecutor):
    """A thread pool whose calls' CPU time is added to the HTTP request that submitted them
    (:class:`MessageGuard` charges it to the request's group); calls from elsewhere run as in
    any pool. The app puts it in place of OpenEnv's route pool."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        spent = _REQUEST_CPU.get()
        if spent is None:
            return super().submit(fn, *args, **kwargs)
        return super().submit(_timed_call, spent, fn, args, kwargs)


class MessageGuard:
    """ASGI middleware: caps HTTP bodies of OpenEnv's routes and checks the shared token.

    Args:
        app: The wrapped ASGI app.
        settings: Server limits (``max_message_bytes``, ``max_response_bytes``, ``api_token``).
        http_routes: Routes whose request bodies are capped (OpenEnv's; later mounts, e.g. a
            Gradio UI, are left alone).
        share: The app's compute share (``None``: requests are not charged).
    """

    def __init__(
        self,
        app: Callable,
        *,
        settings: ServerSettings,
        http_routes: Iterable[BaseRoute] = (),
        share: Any = None,
    ) -> None:
        self.app = app
        self.settings = settings
        self.http_routes = tuple(http_routes)
        self.share = share

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "http" and self.share is not None:
            client = scope.get("client")
            group = address_group(str(client[0]) if client else "unknown")
            ticket = self.share.try_enter(group) or await self.share.enter(group)
            pool = [0.0]
            token = _REQUEST_CPU.set(pool)
            work = LoopTimed(self._serve(scope, receive, send))
            try:
                await work
            finally:
                _REQUEST_CPU.reset(token)
                self.share.leave(ticket, work.cpu_s + pool[0], loop_s=work.cpu_s)
            return
        await self._serve(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "http":
            if self.settings.api_token and scope.get("path") in TOKEN_PATHS:
                problem = token_problem(scope, self.settings.api_token)
                if problem is not None:
                    await _answer(send, 401, problem, [(b"www-authenticate", b"Bearer")])
                    return
            if scope.get("method") not in ("GET", "HEAD", "OPTIONS") and self._guarded_http(scope):
                await self._http(scope, receive, send)
                return
        await self.app(scope, receive, send)

    # ------------------------------------------------------------------ HTTP
    def _guarded_http(self, scope: Scope) -> bool:
        return any(route.matches(scope)[0] != Match.NONE for route in self.http_routes)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.settings.max_message_bytes
        declared = None
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = None
        if declared is not None and declared > limit:
            await self._drain(receive)
            await self._refuse_body(send, declared, limit)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message.get("type") != "http.request":
                return  # the client went away before sending its body
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                if message.get("more_body", False):
                    await self._drain(receive)
                await self._refuse_body(send, size, limit, at_least=True)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if _LONG_DIGITS.search(body):  # FastAPI would say only "There was an error parsing the body"
            found = _huge_int_path(body.decode("utf-8", "replace"))
            if found is not None:
                where, digits = found
                await _answer(
                    send,
                    400,
                    f"{where}: an integer of {digits:,} digits is out of range (at most {MAX_INT_DIGITS:,} digits are "
                    "read; seeds and token counts are far smaller)",
                )
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _drain(receive: Receive) -> None:
        """Read and drop the rest of a body that is refused, up to :data:`DRAIN_BYTES`, so that a
        client that sends its whole body before reading (urllib, requests) gets the 413 instead of
        a connection reset."""
        drained = 0
        while drained <= DRAIN_BYTES:
            message = await receive()
            if message.get("type") != "http.request":
                return
            drained += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    async def _refuse_body(self, send: Send, size: int, limit: int, at_least: bool = False) -> None:
        detail = (
            f"request body of {'more than ' if at_least else ''}{size:,} bytes exceeds this server's limit of "
            f"{limit:,} bytes; a step's response may be at most {self.settings.max_response_bytes:,} bytes of "
            "UTF-8 (REE_MAX_RESPONSE_BYTES)"
        )
        await _answer(send, 413, detail)


async def _answer(send: Send, status: int, detail: str, headers: list | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})

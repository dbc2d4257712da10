"""ASGI middleware in front of OpenEnv's routes: refuses hostile or malformed input with a clear
error before it reaches them, and keeps a handle on each WebSocket connection.

Why a middleware and not a fork of OpenEnv's ``/ws`` route: the route already runs every reset and
step off the event loop (one worker thread per session) and manages sessions, capacity and the
idle reaper; what it lacks is all at its edges. Without this guard, on OpenEnv 0.10:

- a frame of any size up to uvicorn's ``ws_max_size`` (16 MiB) is parsed on the event loop;
- a binary frame, or JSON that is not an object (``[1]``, ``"x"``) or nests too deeply, raises
  outside the route's per-message ``try`` and closes the session with an unclear message;
- a malformed step answers ``"Invalid message"`` with pydantic's raw error list (which echoes the
  offending input back, however large);
- an idle session reaped by OpenEnv has its environment closed but its socket left open.

For HTTP, OpenEnv's routes read request bodies of any size; the guard caps them (413, stating the
response cap). FastAPI's own ``max_body_size`` would cap every route of the app, including a UI
mounted on it later; the guard caps only OpenEnv's routes.

Each ``/ws`` connection gets a :class:`WSConnection`, published in a context variable while the
route runs so that :class:`~reasoning_env.server.sessions.SessionServer` can bind it to the
session it creates (and close the socket when it reaps the session).
"""

from __future__ import annotations

import contextvars
import json
import logging
from typing import Any, Awaitable, Callable, Iterable, Optional

from openenv.core.env_server.types import (
    WSCloseMessage,
    WSErrorCode,
    WSErrorResponse,
    WSResetMessage,
    WSStateMessage,
    WSStepMessage,
)
from pydantic import BaseModel, ValidationError
from starlette.routing import BaseRoute, Match

from reasoning_env.server.settings import ServerSettings

logger = logging.getLogger(__name__)

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

STEP_EXAMPLE = '{"type": "step", "data": {"response": "... \\\\boxed{42}", "metadata": {}}}'
MESSAGE_TYPES = {"reset": WSResetMessage, "step": WSStepMessage, "state": WSStateMessage, "close": WSCloseMessage}

#: Close code sent when the server closes an idle session (private-use range of RFC 6455).
IDLE_CLOSE_CODE = 4000

_current_connection: contextvars.ContextVar[Optional["WSConnection"]] = contextvars.ContextVar(
    "reasoning_env_ws_connection", default=None
)


def current_connection() -> Optional["WSConnection"]:
    """The ``/ws`` connection whose route is running in this task, or ``None``."""
    return _current_connection.get()


def utf8_len(text: str) -> int:
    """Length of ``text`` in bytes of UTF-8 (lone surrogates count 3 bytes, as JSON allows them)."""
    return len(text.encode("utf-8", "surrogatepass"))


def describe_validation_error(exc: ValidationError, limit: int = 3) -> str:
    """One readable line from a pydantic error: ``loc: what`` for the first ``limit`` errors."""
    parts = []
    errors = exc.errors()
    for err in errors[:limit]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(message)"
        kind = err.get("type", "")
        if kind == "extra_forbidden":
            parts.append(f"unknown field {loc!r}")
        elif kind == "missing":
            parts.append(f"missing field {loc!r}")
        else:
            got = type(err.get("input")).__name__ if "input" in err else None
            parts.append(f"{loc}: {err.get('msg', 'invalid')}" + (f" (got {got})" if got else ""))
    if len(errors) > limit:
        parts.append(f"and {len(errors) - limit} more")
    return "; ".join(parts)


def compact_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """Pydantic errors without the offending input (it may be megabytes) or doc links."""
    return [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in exc.errors()]


class WSConnection:
    """One ``/ws`` connection as the guard sees it: can send an error frame or close the socket
    from outside the route (the reaper), and drops anything sent after the close."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.closed = False
        #: Called for every frame the client sends (set by the session registry: any message,
        #: even a ``state`` request or a malformed one, shows the client is alive).
        self.on_frame: Optional[Callable[[], None]] = None

    async def send(self, message: Message) -> None:
        """Forward an ASGI message; after the close, or once the peer is gone, drop it."""
        if self.closed:
            return
        if message.get("type") == "websocket.close":
            self.closed = True
        try:
            await self._send(message)
        except OSError:  # uvicorn's ClientDisconnected: the peer is gone; the next receive says so
            self.closed = True

    async def send_error(self, message: str, code: WSErrorCode, **extra: Any) -> None:
        """Send an error frame in OpenEnv's shape: ``{"type": "error", "data": {"message", "code", ...}}``."""
        frame = WSErrorResponse(data={"message": message, "code": code.value, **extra})
        await self.send({"type": "websocket.send", "text": frame.model_dump_json()})

    async def close(self, message: str, code: int = IDLE_CLOSE_CODE) -> None:
        """Tell the client why in an error frame (``SESSION_ERROR``), then close the socket."""
        if self.closed:
            return
        await self.send_error(message, WSErrorCode.SESSION_ERROR)
        await self.send({"type": "websocket.close", "code": code, "reason": message[:120]})


class MessageGuard:
    """ASGI middleware: checks ``/ws`` frames and caps HTTP bodies of OpenEnv's routes.

    Args:
        app: The wrapped ASGI app.
        settings: Server limits (``max_message_bytes``, ``max_response_bytes``).
        action_cls: The action model steps are validated against.
        http_routes: Routes whose request bodies are capped (OpenEnv's; later mounts, e.g. a
            Gradio UI, are left alone).
        ws_path: Path of the WebSocket route to guard.
    """

    def __init__(self, app: Callable, *, settings: ServerSettings, action_cls: type[BaseModel],
                 http_routes: Iterable[BaseRoute] = (), ws_path: str = "/ws") -> None:
        self.app = app
        self.settings = settings
        self.action_cls = action_cls
        self.http_routes = tuple(http_routes)
        self.ws_path = ws_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind == "websocket" and scope.get("path") == self.ws_path:
            await self._websocket(scope, receive, send)
        elif kind == "http" and scope.get("method") not in ("GET", "HEAD", "OPTIONS") and self._guarded_http(scope):
            await self._http(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    # ------------------------------------------------------------------ WebSocket
    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        conn = WSConnection(send)

        async def checked_receive() -> Message:
            while True:
                message = await receive()
                if message.get("type") != "websocket.receive":
                    return message
                if conn.on_frame is not None:
                    conn.on_frame()
                problem = self.check_frame(message)
                if problem is None:
                    return message
                text, code, extra = problem
                await conn.send_error(text, code, **extra)

        token = _current_connection.set(conn)
        try:
            await self.app(scope, checked_receive, conn.send)
        finally:
            _current_connection.reset(token)

    def check_frame(self, message: Message) -> Optional[tuple[str, WSErrorCode, dict[str, Any]]]:
        """Why a ``websocket.receive`` message must not reach the route, or ``None`` if it may.

        Returns:
            ``(error text, error code, extra error fields)``.
        """
        text = message.get("text")
        if text is None:
            return ("binary frames are not accepted: send each message as a JSON text frame, e.g. "
                    + STEP_EXAMPLE, WSErrorCode.INVALID_JSON, {})
        limit = self.settings.max_message_bytes
        cap = self.settings.max_response_bytes
        if len(text) * 4 > limit and utf8_len(text) > limit:
            return (
                f"message of {utf8_len(text):,} bytes exceeds this server's limit of {limit:,} bytes per "
                f"message; a step's response may be at most {cap:,} bytes of UTF-8 (REE_MAX_RESPONSE_BYTES)",
                WSErrorCode.VALIDATION_ERROR, {"max_response_bytes": cap, "max_message_bytes": limit},
            )
        try:
            msg = json.loads(text)
        except json.JSONDecodeError as exc:
            return f"Invalid JSON: {exc}", WSErrorCode.INVALID_JSON, {}
        except RecursionError:
            return "Invalid JSON: nested too deeply", WSErrorCode.INVALID_JSON, {}
        if not isinstance(msg, dict):
            return (f"a message must be a JSON object such as {STEP_EXAMPLE}, got a JSON {type(msg).__name__}",
                    WSErrorCode.VALIDATION_ERROR, {})
        mtype = msg.get("type")
        if mtype == "mcp":
            return None  # OpenEnv's MCP passthrough answers it
        model = MESSAGE_TYPES.get(mtype) if isinstance(mtype, str) else None
        if model is None:
            return (f"unknown message type {mtype!r}: send one of {sorted(MESSAGE_TYPES)}, e.g. {STEP_EXAMPLE}",
                    WSErrorCode.UNKNOWN_TYPE, {})
        try:
            model.model_validate(msg)
        except ValidationError as exc:
            return (f"invalid {mtype} message: {describe_validation_error(exc)}",
                    WSErrorCode.VALIDATION_ERROR, {"errors": compact_errors(exc)})
        if mtype != "step":
            return None
        try:
            action = self.action_cls.model_validate(msg["data"])
        except ValidationError as exc:
            return (f"invalid step action: {describe_validation_error(exc)}; a step looks like {STEP_EXAMPLE}",
                    WSErrorCode.VALIDATION_ERROR, {"errors": compact_errors(exc)})
        grading = (getattr(action, "metadata", None) or {}).get("grading_response")
        for field, value in (("response", getattr(action, "response", None)), ("metadata.grading_response", grading)):
            if isinstance(value, str) and len(value) > cap // 4 and utf8_len(value) > cap:
                return (
                    f"{field} is {utf8_len(value):,} bytes of UTF-8; this server accepts at most {cap:,} bytes "
                    "(REE_MAX_RESPONSE_BYTES): cut the response or raise the server's cap",
                    WSErrorCode.VALIDATION_ERROR, {"max_response_bytes": cap},
                )
        return None

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
                await self._refuse_body(send, size, limit, at_least=True)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse_body(self, send: Send, size: int, limit: int, at_least: bool = False) -> None:
        detail = (
            f"request body of {'more than ' if at_least else ''}{size:,} bytes exceeds this server's limit of "
            f"{limit:,} bytes; a step's response may be at most {self.settings.max_response_bytes:,} bytes of "
            "UTF-8 (REE_MAX_RESPONSE_BYTES)"
        )
        body = json.dumps({"detail": detail}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

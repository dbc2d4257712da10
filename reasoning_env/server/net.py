"""Connection limits below the ASGI app: request-header timeout, per-address connection cap, and
which proxies' ``X-Forwarded-For`` is trusted.

The app only sees a request once its headers are complete, so a client that opens TCP
connections and sends a header line now and then (slowloris) is invisible to it: the reliability
review kept 500 half-open ``GET /ws`` handshakes open for over 40 s, each holding a descriptor.
:class:`GuardedHttpToolsProtocol` / :class:`GuardedH11Protocol` (uvicorn's HTTP protocols with
two additions) close such connections:

- a connection must complete a request's headers within ``handshake_timeout_s`` (default 10 s,
  ``REE_HANDSHAKE_TIMEOUT_S``) of opening, and again of finishing the previous response (uvicorn
  times out idle keep-alive connections after 5 s only until the next request's first byte);
- one peer address may hold at most ``max_connections_per_client`` connections at once (HTTP and
  WebSocket together; default the per-client session cap + 32, ``REE_MAX_CONNECTIONS_PER_CLIENT``);
  further ones get ``503`` and are closed. A trusted proxy's address (``FORWARDED_ALLOW_IPS``) is
  not capped: every client behind it shares it.

``X-Forwarded-For`` is trusted only from the addresses in ``FORWARDED_ALLOW_IPS`` (uvicorn's own
default trusts 127.0.0.1, which let any local process claim 120 different addresses).

:func:`uvicorn_options` gives the options that wire all of this into ``uvicorn.run`` /
``uvicorn.Config`` (``python -m reasoning_env.server`` uses them; a plain ``uvicorn ...:app``
command does not get the header timeout or the connection cap).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.auto import AutoWebSocketsProtocol

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools not installed
    HttpToolsProtocol = None

_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s"
)


@dataclass
class ConnectionGuard:
    """Per-address connection counts of one server process, and its limits.

    Attributes:
        max_per_client: Most connections one peer address may hold (``None``: no cap).
        handshake_timeout_s: Seconds a connection may take to send a request's headers.
        trusted: Peer addresses not capped (the trusted proxies of ``FORWARDED_ALLOW_IPS``;
            ``"*"``: none is capped).
    """

    max_per_client: int | None = None
    handshake_timeout_s: float | None = 10.0
    trusted: tuple[str, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)
    refused: int = 0
    timed_out: int = 0
    _held: dict[int, str] = field(default_factory=dict)  # id(transport) -> address, while counted

    def admit(self, address: str) -> bool:
        if self.max_per_client is None or "*" in self.trusted or address in self.trusted:
            self.counts[address] = self.counts.get(address, 0) + 1
            return True
        held = self.counts.get(address, 0)
        if held >= self.max_per_client:
            self.refused += 1
            return False
        self.counts[address] = held + 1
        return True

    def hold(self, transport: Any, address: str) -> None:
        self._held[id(transport)] = address

    def release(self, transport: Any) -> None:
        """Give ``transport``'s place back (idempotent)."""
        address = self._held.pop(id(transport), None)
        if address is None:
            return
        n = self.counts.get(address, 0) - 1
        if n > 0:
            self.counts[address] = n
        else:
            self.counts.pop(address, None)

    def __getstate__(self) -> dict:  # sent to --workers processes: limits only, fresh counts
        return {**self.__dict__, "counts": {}, "_held": {}}


def _peer(transport: Any) -> str:
    info = transport.get_extra_info("peername")
    return str(info[0]) if isinstance(info, tuple) and info else "unknown"


class _Guarded:
    """The additions to an uvicorn HTTP protocol (see the module docstring)."""

    config: Any
    transport: Any
    loop: Any
    cycle: Any

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)  # type: ignore[misc]
        guard: ConnectionGuard | None = getattr(self.config, "ree_guard", None)
        self._ree_guard = guard
        self._ree_address = _peer(transport)
        self._ree_timer = None
        if guard is None:
            return
        if not guard.admit(self._ree_address):
            body = (
                f"this client address ({self._ree_address}) already holds {guard.max_per_client} connections to this "
                "server (REE_MAX_CONNECTIONS_PER_CLIENT); close some and retry\n"
            ).encode()
            transport.write(_BUSY % (len(body), body))
            transport.close()
            return
        guard.hold(transport, self._ree_address)  # given back by whichever protocol sees the end
        if guard.handshake_timeout_s:
            self._ree_waiting_since = time.monotonic()
            self._ree_timer = self.loop.call_later(guard.handshake_timeout_s / 2, self._ree_tick)

    def _ree_tick(self) -> None:
        self._ree_timer = None
        transport = self.transport
        if transport.is_closing() or transport.get_protocol() is not self:
            return  # closed, or upgraded to a WebSocket (the session's own timeouts apply)
        guard = self._ree_guard
        now = time.monotonic()
        cycle = self.cycle
        if cycle is None or cycle.response_complete:  # waiting for a request's headers
            if self._ree_waiting_since is None:
                self._ree_waiting_since = now
            elif now - self._ree_waiting_since >= guard.handshake_timeout_s:
                guard.timed_out += 1
                transport.close()
                return
        else:
            self._ree_waiting_since = None
        self._ree_timer = self.loop.call_later(guard.handshake_timeout_s / 2, self._ree_tick)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._ree_timer is not None:
            self._ree_timer.cancel()
            self._ree_timer = None
        if self._ree_guard is not None and self.transport.get_protocol() is self:
            self._ree_guard.release(self.transport)
        super().connection_lost(exc)  # type: ignore[misc]


class GuardedH11Protocol(_Guarded, H11Protocol):
    """uvicorn's h11 protocol with the header timeout and the per-address cap."""


if HttpToolsProtocol is not None:

    class GuardedHttpToolsProtocol(_Guarded, HttpToolsProtocol):
        """uvicorn's httptools protocol with the header timeout and the per-address cap."""

    DEFAULT_HTTP = GuardedHttpToolsProtocol
else:  # pragma: no cover - httptools is a dependency of uvicorn[standard]
    DEFAULT_HTTP = GuardedH11Protocol


class GuardedWebSocketProtocol(AutoWebSocketsProtocol):  # type: ignore[misc, valid-type]
    """uvicorn's WebSocket protocol that gives the connection's count back when it ends."""

    def connection_lost(self, exc: Exception | None) -> None:
        guard = getattr(self.config, "ree_guard", None)
        if guard is not None:
            guard.release(self.transport)
        super().connection_lost(exc)


def trusted_proxies(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The addresses whose ``X-Forwarded-For`` is trusted: ``FORWARDED_ALLOW_IPS``, comma-separated
    (``*``: any); none when it is unset or blank."""
    environ = os.environ if environ is None else environ
    raw = (environ.get("FORWARDED_ALLOW_IPS") or "").strip()
    return tuple(p.strip() for p in raw.split(",") if p.strip())


def uvicorn_options(settings: Any, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``uvicorn.Config`` / ``uvicorn.run`` options for a server with ``settings``
    (:class:`~reasoning_env.server.settings.ServerSettings`): the guarded protocols and the
    proxy policy. Pass the result's ``ree_guard`` on with :func:`apply_guard` when building a
    ``uvicorn.Config`` yourself (``uvicorn.run`` does not take it)."""
    trusted = trusted_proxies(environ)
    return {
        "http": DEFAULT_HTTP,
        "ws": GuardedWebSocketProtocol,
        "proxy_headers": bool(trusted),
        "forwarded_allow_ips": ",".join(trusted) if trusted else "",
        "ree_guard": ConnectionGuard(
            max_per_client=settings.connection_cap_per_client,
            handshake_timeout_s=settings.handshake_timeout_s,
            trusted=trusted,
        ),
    }


def make_config(app: Any, settings: Any, environ: Mapping[str, str] | None = None, **options: Any) -> Any:
    """A ``uvicorn.Config`` serving ``app`` with :func:`uvicorn_options` (plus ``options``)."""
    import uvicorn

    opts = uvicorn_options(settings, environ)
    guard = opts.pop("ree_guard")
    config = uvicorn.Config(app, **{**opts, **options})
    config.ree_guard = guard
    return config

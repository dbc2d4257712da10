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

``X-Forwarded-For`` is trusted only from the addresses or networks named in
``FORWARDED_ALLOW_IPS`` (uvicorn's own default trusts 127.0.0.1, which let any local process
claim 120 different addresses). ``*`` is refused: uvicorn then takes the *leftmost* entry, which
the client writes itself, so one client took 8 sessions as 8 made-up addresses past a cap of 2;
with named proxies it takes the rightmost entry that is not a trusted proxy, the address the
proxy itself saw.

Below the app, every connection's input is also charged to its address group's share of the
compute (:class:`~reasoning_env.server.share.ComputeShare`): the event loop's CPU time spent
reading its bytes (frames, pings, their pongs, refusals of oversized or malformed ones, HTTP
parsing) is measured in ``data_received`` and charged, with the socket read before it
(:data:`READ_S_PER_BYTE`); while the group owes time, reading its
connections pauses (the kernel's buffers, then TCP, hold the rest). A WebSocket whose answers the
peer does not read stops being read too (no pong backlog grows), and one whose send buffer stays
full for ``REE_SEND_STALL_TIMEOUT_S`` seconds (10) is closed (code :data:`SEND_STALL_CLOSE_CODE`). At shutdown
a connection that has not closed within :data:`SHUTDOWN_GRACE_S` is aborted, so SIGTERM finishes
whatever the clients do.

:func:`uvicorn_options` gives the options that wire all of this into ``uvicorn.run`` /
``uvicorn.Config`` (``python -m reasoning_env.server`` uses them; a plain ``uvicorn ...:app``
command does not get the header timeout or the connection cap).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.auto import AutoWebSocketsProtocol

from reasoning_env.errors import ServerConfigError
from reasoning_env.server.executor import address_group

logger = logging.getLogger(__name__)

#: Close code of a WebSocket closed because its peer stopped reading (private-use range).
SEND_STALL_CLOSE_CODE = 4001
#: Seconds a connection gets to close after the server starts stopping; then it is aborted.
SHUTDOWN_GRACE_S = 3.0
#: Longest single pause of a connection's reading for its group's share (looked at again then).
MAX_HOLD_S = 1.0
#: Owed time below this does not pause reading (the next message is spaced by the share anyway).
HOLD_MIN_S = 0.005
#: The event loop's CPU seconds per byte read before ``data_received`` sees it (the socket read and
#: its copy into a bytes object, in uvloop's C code), charged with what ``data_received`` measures.
#: Measured: 0.35 ns a byte, the loop thread's CPU between consecutive 256 KB reads of one refused
#: 3.9 MB message (1.35 ms of the 4.1 ms it cost the loop; 2-core machine, load ~4); but a message
#: also costs the loop outside its reads (its first read, the session's coroutine, the reply):
#: everything a refused 3.9 MB message cost the loop beyond what a step does, over its bytes, was
#: 0.35-0.50 ns a byte, median ~0.39 (ten server processes, five rounds of 30 each, beside a
#: training run, load ~3; 2-core AMD EPYC, 2026-12-07). The upper part of that range is charged, so
#: that a sender of large messages pays at least what they cost the others (at the median it pays
#: ~0.2 ms, 5%, more).
READ_S_PER_BYTE = 0.45e-9

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
        send_stall_s: Seconds a WebSocket's send buffer may stay full before it is dropped.
        trusted: Peer addresses or networks not capped (the trusted proxies of
            ``FORWARDED_ALLOW_IPS``).
    """

    max_per_client: int | None = None
    handshake_timeout_s: float | None = 10.0
    send_stall_s: float = 10.0
    trusted: tuple[str, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)
    refused: int = 0
    timed_out: int = 0
    _held: dict[int, str] = field(default_factory=dict)  # id(transport) -> address, while counted

    def is_trusted(self, address: str) -> bool:
        """Whether ``address`` is a trusted proxy (named, or inside a named network)."""
        if not self.trusted:
            return False
        if address in self.trusted:
            return True
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        for entry in self.trusted:
            if "/" in entry:
                try:
                    if ip in ipaddress.ip_network(entry, strict=False):
                        return True
                except ValueError:
                    continue
        return False

    def admit(self, address: str) -> bool:
        if self.max_per_client is None or self.is_trusted(address):
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


def _share_of(config: Any) -> Any:
    """The :class:`ComputeShare` of the app ``config`` serves (found through its middleware
    wrappers; cached on the config), or ``None`` for another app."""
    cached = getattr(config, "_ree_share", False)
    if cached is not False:
        return cached
    app, share = getattr(config, "loaded_app", None), None
    for _ in range(8):
        runtime = getattr(getattr(app, "state", None), "reasoning_env", None)
        if runtime is not None:
            share = getattr(runtime, "share", None)
            break
        app = getattr(app, "app", None)
        if app is None:
            break
    config._ree_share = share
    return share


class GatedTransport:
    """A transport whose reading is paused while any of several holders asks: uvicorn's own
    flow control (``pause_reading`` / ``resume_reading``), the share (``hold("share")``) and a
    full send buffer (``hold("write")``). Everything else is the transport's."""

    def __init__(self, transport: Any) -> None:
        self._t = transport
        self._holds: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._t, name)

    @property
    def raw(self) -> Any:
        return self._t

    def hold(self, reason: str) -> None:
        if not self._holds and not self._t.is_closing():
            self._t.pause_reading()
        self._holds.add(reason)

    def release(self, reason: str) -> None:
        if reason in self._holds:
            self._holds.discard(reason)
            if not self._holds and not self._t.is_closing():
                self._t.resume_reading()

    def held(self, reason: str) -> bool:
        return reason in self._holds

    def pause_reading(self) -> None:
        self.hold("flow")

    def resume_reading(self) -> None:
        self.release("flow")


def _gated(transport: Any) -> GatedTransport:
    return transport if isinstance(transport, GatedTransport) else GatedTransport(transport)


class _Charged:
    """Charging a connection's input to its address group, and aborting it at shutdown."""

    config: Any
    transport: Any
    loop: Any

    def _ree_setup(self, address: str) -> None:
        self._ree_share = _share_of(self.config)
        self._ree_group = address_group(address)
        self._ree_hold_timer = None
        self._ree_abort_timer = None

    def _ree_charge(self, cpu_s: float) -> None:
        share = self._ree_share
        if share is None:
            return
        owed = share.charge(self._ree_group, cpu_s)
        if owed > HOLD_MIN_S and self._ree_hold_timer is None and not self.transport.is_closing():
            self.transport.hold("share")
            self._ree_hold_timer = self.loop.call_later(min(owed, MAX_HOLD_S), self._ree_unhold)

    def _ree_unhold(self) -> None:
        self._ree_hold_timer = None
        share = self._ree_share
        owed = share.owed(self._ree_group) if share is not None else 0.0
        if owed > HOLD_MIN_S and not self.transport.is_closing():
            self._ree_hold_timer = self.loop.call_later(min(owed, MAX_HOLD_S), self._ree_unhold)
            return
        self.transport.release("share")

    def _ree_timed(self, fn: Any, data: bytes) -> None:
        cpu = time.thread_time()
        try:
            fn(data)
        finally:
            self._ree_charge(time.thread_time() - cpu + len(data) * READ_S_PER_BYTE)

    def _ree_abort_later(self) -> None:
        """At shutdown: abort the connection if it has not closed within SHUTDOWN_GRACE_S (a
        peer that reads nothing never lets a close with unsent data finish)."""
        if self._ree_abort_timer is None:
            self._ree_abort_timer = self.loop.call_later(SHUTDOWN_GRACE_S, self._ree_abort)

    def _ree_abort(self) -> None:
        self._ree_abort_timer = None
        transport = getattr(self.transport, "raw", self.transport)
        if transport is not None and transport.get_protocol() is self:
            transport.abort()

    def _ree_teardown(self) -> None:
        for name in ("_ree_hold_timer", "_ree_abort_timer"):
            timer = getattr(self, name, None)
            if timer is not None:
                timer.cancel()
                setattr(self, name, None)


class _Guarded(_Charged):
    """The additions to an uvicorn HTTP protocol (see the module docstring)."""

    config: Any
    transport: Any
    loop: Any
    cycle: Any

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        transport = _gated(transport)
        super().connection_made(transport)  # type: ignore[misc]
        guard: ConnectionGuard | None = getattr(self.config, "ree_guard", None)
        self._ree_guard = guard
        self._ree_address = _peer(transport)
        self._ree_setup(self._ree_address)
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
        guard.hold(transport.raw, self._ree_address)  # given back by whichever protocol sees the end
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

    def data_received(self, data: bytes) -> None:
        self._ree_timed(super().data_received, data)  # type: ignore[misc]

    def shutdown(self) -> None:
        super().shutdown()  # type: ignore[misc]
        self._ree_abort_later()

    def connection_lost(self, exc: Exception | None) -> None:
        self._ree_teardown()
        if self._ree_timer is not None:
            self._ree_timer.cancel()
            self._ree_timer = None
        if self._ree_guard is not None and self.transport.get_protocol() is self:
            self._ree_guard.release(self.transport.raw)
        super().connection_lost(exc)  # type: ignore[misc]


class GuardedH11Protocol(_Guarded, H11Protocol):
    """uvicorn's h11 protocol with the header timeout and the per-address cap."""


if HttpToolsProtocol is not None:

    class GuardedHttpToolsProtocol(_Guarded, HttpToolsProtocol):
        """uvicorn's httptools protocol with the header timeout and the per-address cap."""

    DEFAULT_HTTP = GuardedHttpToolsProtocol
else:  # pragma: no cover - httptools is a dependency of uvicorn[standard]
    DEFAULT_HTTP = GuardedH11Protocol


class GuardedWebSocketProtocol(_Charged, AutoWebSocketsProtocol):  # type: ignore[misc, valid-type]
    """uvicorn's WebSocket protocol (websockets' sans-I/O one) with: its input charged to its
    address group, no reading while its send buffer is full (a peer that sends pings and never
    reads its pongs grew the server's memory 1:1), a close after ``send_stall_s`` seconds
    (``REE_SEND_STALL_TIMEOUT_S``) of a full send buffer, an abort after :data:`SHUTDOWN_GRACE_S` at shutdown, and the
    connection's count given back when it ends."""

    def connection_made(self, transport: Any) -> None:
        transport = _gated(transport)
        super().connection_made(transport)
        self._ree_setup(_peer(transport))
        self._ree_stall_timer = None

    def data_received(self, data: bytes) -> None:
        self._ree_timed(super().data_received, data)

    def pause_writing(self) -> None:
        super().pause_writing()
        self.transport.hold("write")
        if self._ree_stall_timer is None:
            guard = getattr(self.config, "ree_guard", None)
            self._ree_stall_s = getattr(guard, "send_stall_s", 10.0)
            self._ree_stall_timer = self.loop.call_later(self._ree_stall_s, self._ree_stalled)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._ree_stall_timer is not None:
            self._ree_stall_timer.cancel()
            self._ree_stall_timer = None
        self.transport.release("write")

    def _ree_stalled(self) -> None:
        """The peer read nothing for ``send_stall_s`` seconds: tell the app why, then drop the
        connection (a close frame could not reach a peer that does not read)."""
        self._ree_stall_timer = None
        if self.transport.is_closing() and self.transport.raw.get_protocol() is not self:
            return
        reason = f"the client read nothing for {self._ree_stall_s:g} s (send buffer full; REE_SEND_STALL_TIMEOUT_S)"
        logger.warning("closing WebSocket from %s: %s", self.client[0] if self.client else "?", reason)
        self.queue.put_nowait({"type": "websocket.disconnect", "code": SEND_STALL_CLOSE_CODE, "reason": reason})
        self.close_sent = True
        self.transport.raw.abort()

    def shutdown(self) -> None:
        super().shutdown()
        self._ree_abort_later()

    def connection_lost(self, exc: Exception | None) -> None:
        self._ree_teardown()
        if getattr(self, "_ree_stall_timer", None) is not None:
            self._ree_stall_timer.cancel()
            self._ree_stall_timer = None
        guard = getattr(self.config, "ree_guard", None)
        if guard is not None:
            guard.release(getattr(self.transport, "raw", self.transport))
        super().connection_lost(exc)


def trusted_proxies(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The addresses and networks whose ``X-Forwarded-For`` is trusted: ``FORWARDED_ALLOW_IPS``,
    comma-separated (e.g. ``10.0.0.5`` or ``10.0.0.0/8``); none when it is unset or blank.

    Raises:
        ServerConfigError: ``*`` (any peer: every client could choose its own address), or an
            entry that is not an IP address or network.
    """
    environ = os.environ if environ is None else environ
    raw = (environ.get("FORWARDED_ALLOW_IPS") or "").strip()
    entries = tuple(p.strip() for p in raw.split(",") if p.strip())
    for entry in entries:
        if entry == "*":
            raise ServerConfigError(
                "FORWARDED_ALLOW_IPS=*: trusting X-Forwarded-For from any peer lets every client choose its own "
                "address (and so pass the per-address session, connection and compute limits); name the proxy in "
                "front of the server instead, by address or network, e.g. FORWARDED_ALLOW_IPS=10.0.0.0/8 (the "
                "address the server logs for every client while the variable is unset is the proxy's)"
            )
        try:
            if "/" in entry:
                ipaddress.ip_network(entry, strict=False)
            else:
                ipaddress.ip_address(entry)
        except ValueError:
            raise ServerConfigError(
                f"FORWARDED_ALLOW_IPS: {entry[:60]!r} is not an IP address or network (e.g. 10.0.0.5 or 10.0.0.0/8)"
            ) from None
    return entries


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
        # A frame over the message limit is refused by the protocol (close 1009) before it is
        # kept: a 15 MiB frame held ~450 MiB per session in read-ahead; with permessage-deflate
        # this caps the inflated size too.
        "ws_max_size": settings.max_message_bytes,
        # A backstop behind the per-connection abort: tasks still running are cancelled.
        "timeout_graceful_shutdown": int(SHUTDOWN_GRACE_S + 3),
        "ree_guard": ConnectionGuard(
            max_per_client=settings.connection_cap_per_client,
            handshake_timeout_s=settings.handshake_timeout_s,
            send_stall_s=settings.send_stall_timeout_s,
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

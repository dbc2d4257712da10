"""Server settings and the ``REE_*`` environment variables that set them.

Two things configure a server: the :class:`~reasoning_env.config.EnvConfig` every session's
environment is built from, and the :class:`ServerSettings` (sessions, timeouts, size limits,
tokenizer policy). :func:`settings_from_env` reads both from environment variables:

==============================  ==========================================================  ===========
variable                        meaning                                                     default
==============================  ==========================================================  ===========
``REE_CONFIG``                  path of an EnvConfig YAML file (the base config)           defaults
``REE_DEFAULT_TOKENIZER_NAME``  ``tokenizer_name`` of the config (counting when a reset    config's
                                names none)
``REE_HARD_CAP_MODE``           ``true``/``false``: hard-cap or soft budget mode            config's
``REE_SOURCES``                 comma-separated question sources, e.g. ``gsm8k,math500``    config's
``REE_DATA_DIR``                folder searched for local data files of every source       config's
``REE_MAX_SESSIONS``            most simultaneous WebSocket sessions (integer >= 1)         256
``REE_SESSION_TIMEOUT_S``       idle seconds before a session is closed; ``none`` = never   900
``REE_MAX_RESPONSE_BYTES``      largest ``response`` (and ``grading_response``), UTF-8      1000000
``REE_ALLOWED_TOKENIZERS``      comma-separated ``fnmatch`` patterns of tokenizer names     any name
                                clients may ask for, e.g. ``Qwen/*``
``REE_ALLOW_LOCAL_TOKENIZERS``  ``true`` lets clients name tokenizer folders on the         false
                                server's disk
``REE_WORKER_THREADS``          threads that run resets and steps (all sessions share them) min(8, 2 x
                                                                                            CPUs)
``REE_MAX_SESSIONS_PER_CLIENT`` most sessions one client address may hold                   half of
                                                                                            the max
``REE_UNUSED_SESSION_TIMEOUT_S`` seconds a new session may go without a reset or step       30
``REE_API_TOKEN``               shared secret clients send (``Authorization: Bearer ...``)  none
``REE_GRADING_WORKERS``         math-verify worker processes of the grading fallback       min(4, max(2,
                                                                                            CPUs))
``REE_FALLBACK_PER_CLIENT``     fallback grades one client address may have in flight       workers - 1
``REE_MAX_CONNECTIONS_PER_CLIENT`` TCP connections one peer address may hold (HTTP + WS)    session cap
                                                                                            + 32
``REE_HANDSHAKE_TIMEOUT_S``     seconds a connection may take to send a request's headers  10
``REE_SEND_STALL_TIMEOUT_S``    seconds a WebSocket's send buffer may stay full (the peer   10
                                reads nothing) before the connection is closed
==============================  ==========================================================  ===========

Individual variables override the matching field of ``REE_CONFIG``'s file. A bad value raises
:class:`ServerConfigError` naming the variable, so a misconfigured server fails at start-up.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from reasoning_env.config import ConfigError, EnvConfig
from reasoning_env.errors import ServerConfigError

#: Default cap on simultaneous WebSocket sessions.
DEFAULT_MAX_SESSIONS = 256
#: Default idle time (seconds) after which a session is closed.
DEFAULT_SESSION_TIMEOUT_S = 900.0
#: Default cap on a step's ``response`` (and ``grading_response``), in bytes of UTF-8.
DEFAULT_MAX_RESPONSE_BYTES = 1_000_000
#: Default number of threads running resets and steps for all sessions.
DEFAULT_WORKER_THREADS = min(8, 2 * (os.cpu_count() or 1))
#: Longest tokenizer name accepted from a client (characters).
MAX_TOKENIZER_NAME_CHARS = 200
#: Default seconds a session may stay without a reset or step after it opened.
DEFAULT_UNUSED_SESSION_TIMEOUT_S = 30.0
#: Default seconds a connection may take to send a request's headers (slowloris bound).
DEFAULT_HANDSHAKE_TIMEOUT_S = 10.0
#: Default seconds a WebSocket's send buffer may stay full before the connection is closed.
DEFAULT_SEND_STALL_TIMEOUT_S = 10.0
#: Connections one address may hold beyond its session cap (HTTP requests, sessions opening and closing).
CONNECTION_HEADROOM = 32
#: Default number of math-verify worker processes (the grading fallback).
DEFAULT_GRADING_WORKERS = min(4, max(2, os.cpu_count() or 2))

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
# A Hub id ("org/name" or "name") or an embedded build ("embedded:qwen2.5").
_HUB_ID = re.compile(r"^(embedded:[A-Za-z0-9._-]+|[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?)$")


@dataclass(frozen=True)
class ServerSettings:
    """Limits and policies of one server app.

    Attributes:
        max_sessions: Most simultaneous WebSocket sessions; the next connection gets a
            ``CAPACITY_REACHED`` error and is closed.
        session_timeout_s: Seconds without a message after which a session is closed and its
            slot freed (``None``: never). The check runs every ``max(timeout / 4, 5)`` seconds,
            so a session goes at most that much later.
        max_response_bytes: Largest ``response`` or ``metadata.grading_response`` of a step, in
            bytes of UTF-8; larger ones are refused with a ``VALIDATION_ERROR`` stating the cap.
        allowed_tokenizers: ``fnmatch`` patterns of the tokenizer names clients may use (empty:
            any well-formed name). The config's own tokenizer is always allowed.
        allow_local_tokenizers: Let clients name tokenizer folders on the server's disk (off: only
            Hub ids such as ``Qwen/Qwen3-4B`` and ``embedded:...`` names).
        worker_threads: Threads that compute resets and steps, shared by all sessions (a session
            has at most one call in flight). A step waiting on the grading fallback does not hold
            one (:class:`~reasoning_env.server.executor.ElasticExecutor`).
        max_sessions_per_client: Most sessions one client address may hold (``None``: half of
            ``max_sessions``, at least 1). Behind a reverse proxy every client has the proxy's
            address unless uvicorn trusts its ``X-Forwarded-For`` (``FORWARDED_ALLOW_IPS``).
        unused_session_timeout_s: Seconds a new session may go without a reset or step before
            it is closed (``None``: only ``session_timeout_s`` applies): connections opened and
            never used cannot hold slots for long.
        api_token: Shared secret every client must send as ``Authorization: Bearer <token>`` on
            ``/ws``, ``/reset``, ``/step`` and ``/state`` (``None``: no authentication).
        grading_workers: math-verify worker processes of the grading fallback (this server's own
            pool, run at a lower CPU priority than the server).
        fallback_per_client: Fallback grades one client address may have in flight at once
            (``None``: ``grading_workers - 1``, at least 1); more wait for their own client's
            turn, so a client sending answers that take seconds to grade cannot take every
            worker.
        max_connections_per_client: TCP connections one peer address may hold at once, HTTP and
            WebSocket together (``None``: the per-client session cap + 32); more get ``503``.
            A trusted proxy (``FORWARDED_ALLOW_IPS``) is not capped. Applied by
            :mod:`reasoning_env.server.net` (``python -m reasoning_env.server``).
        handshake_timeout_s: Seconds a connection may take to send a complete request's
            headers, from opening or from its previous response (``None``: no limit).
        send_stall_timeout_s: Seconds a WebSocket's send buffer may stay full (its peer reads
            nothing) before the connection is dropped (close code 4001); meanwhile nothing more
            is read from it. Applied by :mod:`reasoning_env.server.net`.

    Raises:
        ServerConfigError: a value is out of range.
    """

    max_sessions: int = DEFAULT_MAX_SESSIONS
    session_timeout_s: float | None = DEFAULT_SESSION_TIMEOUT_S
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    allowed_tokenizers: tuple[str, ...] = ()
    allow_local_tokenizers: bool = False
    worker_threads: int = DEFAULT_WORKER_THREADS
    max_sessions_per_client: int | None = None
    unused_session_timeout_s: float | None = DEFAULT_UNUSED_SESSION_TIMEOUT_S
    api_token: str | None = field(default=None, repr=False)
    grading_workers: int = DEFAULT_GRADING_WORKERS
    fallback_per_client: int | None = None
    max_connections_per_client: int | None = None
    handshake_timeout_s: float | None = DEFAULT_HANDSHAKE_TIMEOUT_S
    send_stall_timeout_s: float = DEFAULT_SEND_STALL_TIMEOUT_S

    def __post_init__(self) -> None:
        if isinstance(self.max_sessions, bool) or not isinstance(self.max_sessions, int) or self.max_sessions < 1:
            raise ServerConfigError(f"max_sessions must be an integer >= 1, got {self.max_sessions!r}")
        t = self.session_timeout_s
        if t is not None and (
            isinstance(t, bool) or not isinstance(t, (int, float)) or not t > 0 or t == float("inf")
        ):
            raise ServerConfigError(f"session_timeout_s must be a positive number of seconds or None, got {t!r}")
        b = self.max_response_bytes
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= 256 * 1024 * 1024:
            raise ServerConfigError(
                f"max_response_bytes must be an integer between 1 and 268435456 (256 MiB), got {b!r}"
            )
        w = self.worker_threads
        if isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= 1024:
            raise ServerConfigError(f"worker_threads must be an integer between 1 and 1024, got {w!r}")
        if isinstance(self.allowed_tokenizers, str) or not all(
            isinstance(p, str) and p for p in self.allowed_tokenizers
        ):
            raise ServerConfigError(
                f"allowed_tokenizers must be a tuple of non-empty patterns, got {self.allowed_tokenizers!r}"
            )
        for name in ("max_sessions_per_client", "fallback_per_client"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ServerConfigError(f"{name} must be an integer >= 1 or None, got {v!r}")
        g = self.grading_workers
        if isinstance(g, bool) or not isinstance(g, int) or not 1 <= g <= 64:
            raise ServerConfigError(f"grading_workers must be an integer between 1 and 64, got {g!r}")
        u = self.unused_session_timeout_s
        if u is not None and (
            isinstance(u, bool) or not isinstance(u, (int, float)) or not u > 0 or u == float("inf")
        ):
            raise ServerConfigError(
                f"unused_session_timeout_s must be a positive number of seconds or None, got {u!r}"
            )
        m = self.max_connections_per_client
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
            raise ServerConfigError(f"max_connections_per_client must be an integer >= 1 or None, got {m!r}")
        h = self.handshake_timeout_s
        if h is not None and (
            isinstance(h, bool) or not isinstance(h, (int, float)) or not h > 0 or h == float("inf")
        ):
            raise ServerConfigError(f"handshake_timeout_s must be a positive number of seconds or None, got {h!r}")
        t = self.send_stall_timeout_s
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < float("inf"):
            raise ServerConfigError(f"send_stall_timeout_s must be a positive number of seconds, got {t!r}")
        if self.api_token is not None and (not isinstance(self.api_token, str) or len(self.api_token.strip()) < 8):
            raise ServerConfigError(
                "api_token must be a string of at least 8 characters (or None for no authentication)"
            )

    @property
    def session_cap_per_client(self) -> int:
        """Most sessions one client address may hold (``max_sessions_per_client`` resolved)."""
        if self.max_sessions_per_client is not None:
            return min(self.max_sessions_per_client, self.max_sessions)
        return max(1, self.max_sessions // 2)

    @property
    def connection_cap_per_client(self) -> int:
        """Most TCP connections one peer address may hold (``max_connections_per_client`` resolved)."""
        if self.max_connections_per_client is not None:
            return self.max_connections_per_client
        return self.session_cap_per_client + CONNECTION_HEADROOM

    @property
    def fallback_cap_per_client(self) -> int:
        """Fallback grades one client address may have in flight (``fallback_per_client`` resolved)."""
        if self.fallback_per_client is not None:
            return self.fallback_per_client
        return max(1, self.grading_workers - 1)

    @property
    def max_message_bytes(self) -> int:
        """Largest WebSocket text frame or HTTP body read at all (bytes): room for a response and
        a grading response at the cap, with JSON escaping (up to 2x) and the envelope. Larger
        messages are refused before they are parsed."""
        return 4 * self.max_response_bytes + 64 * 1024

    def check_tokenizer_name(self, name: str, config_tokenizer: str) -> str | None:
        """Why a client may not use tokenizer ``name`` here, or ``None`` if it may.

        Args:
            name: The requested name (already a string).
            config_tokenizer: The config's ``tokenizer_name`` (always allowed).
        """
        name = name.strip()
        if not name or name == config_tokenizer:
            return None
        if not name.isprintable() or any(0xD800 <= ord(c) <= 0xDFFF for c in name):
            return (
                "tokenizer_name holds control or surrogate characters; send a Hugging Face "
                "model id such as 'Qwen/Qwen3-4B'"
            )
        if len(name) > MAX_TOKENIZER_NAME_CHARS:
            return f"tokenizer_name is {len(name)} characters long; names are at most {MAX_TOKENIZER_NAME_CHARS}"
        if not self.allow_local_tokenizers and not _HUB_ID.match(name):
            return (
                f"tokenizer_name {name!r} is not a Hugging Face model id such as 'Qwen/Qwen3-4B'; this server "
                "does not load tokenizer folders from its own disk (the operator can allow that with "
                "REE_ALLOW_LOCAL_TOKENIZERS=true)"
            )
        if self.allowed_tokenizers and not any(fnmatch.fnmatchcase(name, p) for p in self.allowed_tokenizers):
            return (
                f"tokenizer_name {name!r} is not allowed on this server; allowed: "
                f"{', '.join(self.allowed_tokenizers)} (set by the operator in REE_ALLOWED_TOKENIZERS)"
            )
        return None

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (for the start-up line and ``/capacity``)."""
        d = asdict(self)
        d["allowed_tokenizers"] = list(self.allowed_tokenizers)
        d["max_message_bytes"] = self.max_message_bytes
        d["api_token"] = "(set)" if self.api_token else None  # never print the secret
        d["max_sessions_per_client"] = self.session_cap_per_client
        d["fallback_per_client"] = self.fallback_cap_per_client
        d["max_connections_per_client"] = self.connection_cap_per_client
        return d


# ------------------------------------------------------------------------ environment variables
def _text(raw: str, var: str) -> str:
    return raw


def _bool(raw: str, var: str) -> bool:
    v = raw.lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ServerConfigError(f"{var}={raw!r} is not a boolean; use true or false")


def _int(raw: str, var: str) -> int:
    try:
        return int(raw.replace("_", ""))
    except ValueError:
        raise ServerConfigError(f"{var}={raw!r} is not an integer") from None


def _number(raw: str, var: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ServerConfigError(f"{var}={raw!r} is not a number of seconds") from None


def _seconds(raw: str, var: str) -> float | None:
    if raw.lower() in ("none", "off", "never", "0"):
        return None
    try:
        return float(raw)
    except ValueError:
        raise ServerConfigError(f"{var}={raw!r} is not a number of seconds (or 'none')") from None


def _names(raw: str, var: str) -> tuple[str, ...]:
    items = tuple(p.strip() for p in raw.split(",") if p.strip())
    if not items:
        raise ServerConfigError(f"{var}={raw!r} names nothing; give a comma-separated list")
    return items


#: Variable -> (EnvConfig field, parser). They override the field of REE_CONFIG's file.
CONFIG_VARS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "REE_DEFAULT_TOKENIZER_NAME": ("tokenizer_name", _text),
    "REE_HARD_CAP_MODE": ("hard_cap_mode", _bool),
    "REE_SOURCES": ("sources", lambda raw, var: list(_names(raw, var))),
    "REE_DATA_DIR": ("data_dir", _text),
}
#: Variable -> (ServerSettings field, parser).
SETTINGS_VARS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "REE_MAX_SESSIONS": ("max_sessions", _int),
    "REE_SESSION_TIMEOUT_S": ("session_timeout_s", _seconds),
    "REE_MAX_RESPONSE_BYTES": ("max_response_bytes", _int),
    "REE_ALLOWED_TOKENIZERS": ("allowed_tokenizers", _names),
    "REE_ALLOW_LOCAL_TOKENIZERS": ("allow_local_tokenizers", _bool),
    "REE_WORKER_THREADS": ("worker_threads", _int),
    "REE_MAX_SESSIONS_PER_CLIENT": ("max_sessions_per_client", _int),
    "REE_UNUSED_SESSION_TIMEOUT_S": ("unused_session_timeout_s", _seconds),
    "REE_API_TOKEN": ("api_token", _text),
    "REE_GRADING_WORKERS": ("grading_workers", _int),
    "REE_FALLBACK_PER_CLIENT": ("fallback_per_client", _int),
    "REE_MAX_CONNECTIONS_PER_CLIENT": ("max_connections_per_client", _int),
    "REE_HANDSHAKE_TIMEOUT_S": ("handshake_timeout_s", _seconds),
    "REE_SEND_STALL_TIMEOUT_S": ("send_stall_timeout_s", lambda raw, var: _number(raw, var)),
}
#: Environment variables that configure the server (printed at start-up when set).
ENV_VARS = ("REE_CONFIG", *CONFIG_VARS, *SETTINGS_VARS, "REE_CACHE_DIR")


def _read(
    environ: Mapping[str, str], table: dict[str, tuple[str, Callable[[str, str], Any]]]
) -> dict[str, tuple[str, Any]]:
    """``{field: (variable, parsed value)}`` for the variables of ``table`` that are set (non-blank)."""
    out = {}
    for var, (name, parse) in table.items():
        raw = (environ.get(var) or "").strip()
        if raw:
            out[name] = (var, parse(raw, var))
    return out


def config_from_env(environ: Mapping[str, str] | None = None) -> EnvConfig:
    """The EnvConfig described by ``REE_CONFIG`` and the per-field variables of :data:`CONFIG_VARS`.

    Args:
        environ: Variables to read (default ``os.environ``).

    Raises:
        ServerConfigError: a variable is malformed, the file is missing or invalid, or the
            resulting config is invalid (the message names the variable).
    """
    environ = os.environ if environ is None else environ
    path = (environ.get("REE_CONFIG") or "").strip()
    try:
        config = EnvConfig.from_yaml(path) if path else EnvConfig()
    except ConfigError as exc:
        raise ServerConfigError(f"REE_CONFIG={path!r}: {exc}") from None
    changes = _read(environ, CONFIG_VARS)
    if not changes:
        return config
    try:
        return config.replace(**{field: value for field, (_, value) in changes.items()})
    except ConfigError as exc:
        names = ", ".join(var for var, _ in changes.values())
        raise ServerConfigError(f"the config from {names} is invalid: {exc}") from None


#: ``REE_*`` variables read elsewhere (start-up options, caches, the test tooling): not misspellings.
OTHER_VARS = (
    "REE_WORKERS",
    "REE_WORKER_BOARD",
    "REE_MAX_TOKENIZERS",
    "REE_HUB_CONNECT_TIMEOUT_S",
    "REE_CI_VENVS",
    "REE_SKIP_CI_VENVS",
    "REE_GPU_PINS_VENV",
    "REE_APP_VENV",
    "REE_VLLM_PYTHON",
    "REE_SKIP_REAL_MODEL",
    "REE_VLLM_REQUIREMENTS",
    "REE_RUN_DIR",
)


def unknown_env_vars(environ: Mapping[str, str] | None = None) -> list[str]:
    """One sentence per set ``REE_*`` variable this project does not read (a misspelt one is
    otherwise ignored without a word), naming the closest known variable when there is one."""
    import difflib

    environ = os.environ if environ is None else environ
    known = (*ENV_VARS, *OTHER_VARS)
    notes = []
    for var in sorted(v for v in environ if v.startswith("REE_") and v not in known):
        close = difflib.get_close_matches(var, known, n=1, cutoff=0.8)
        hint = f"; did you mean {close[0]}?" if close else ""
        notes.append(f"{var} is not a variable of this project (ignored){hint}")
    return notes


def settings_from_env(environ: Mapping[str, str] | None = None) -> ServerSettings:
    """The :class:`ServerSettings` described by the variables of :data:`SETTINGS_VARS`
    (defaults for unset ones).

    Raises:
        ServerConfigError: a variable is malformed or out of range (the message names it), or
            ``REE_API_TOKEN`` is set but blank.
    """
    environ = os.environ if environ is None else environ
    if "REE_API_TOKEN" in environ and not environ["REE_API_TOKEN"].strip():
        # e.g. REE_API_TOKEN=$SECRET with SECRET unset: taking it as "no token" would open the server
        raise ServerConfigError(
            "REE_API_TOKEN is set but blank, which would serve without authentication; give the secret "
            "(at least 8 characters), or unset it to run without a token"
        )
    values = _read(environ, SETTINGS_VARS)
    for name, (var, value) in values.items():
        try:  # check each value alone, so that the error names its variable
            ServerSettings(**{name: value})
        except ServerConfigError as exc:
            raise ServerConfigError(f"{var}: {exc}") from None
    return ServerSettings(**{name: value for name, (_, value) in values.items()})

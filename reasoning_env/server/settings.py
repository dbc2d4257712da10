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
==============================  ==========================================================  ===========

Individual variables override the matching field of ``REE_CONFIG``'s file. A bad value raises
:class:`ServerConfigError` naming the variable, so a misconfigured server fails at start-up.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Optional

from reasoning_env.config import ConfigError, EnvConfig

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

#: Environment variables that configure the server (printed at start-up when set).
ENV_VARS = (
    "REE_CONFIG",
    "REE_DEFAULT_TOKENIZER_NAME",
    "REE_HARD_CAP_MODE",
    "REE_SOURCES",
    "REE_DATA_DIR",
    "REE_MAX_SESSIONS",
    "REE_SESSION_TIMEOUT_S",
    "REE_MAX_RESPONSE_BYTES",
    "REE_ALLOWED_TOKENIZERS",
    "REE_ALLOW_LOCAL_TOKENIZERS",
    "REE_WORKER_THREADS",
    "REE_CACHE_DIR",
)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
# A Hub id ("org/name" or "name") or an embedded build ("embedded:qwen2.5").
_HUB_ID = re.compile(r"^(embedded:[A-Za-z0-9._-]+|[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?)$")


class ServerConfigError(ValueError):
    """A server setting or ``REE_*`` variable is invalid; the message names it and the fix."""


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
        worker_threads: Threads that run resets and steps, shared by all sessions (a session has
            at most one call in flight). More threads let more slow grades wait at once; fewer
            cost less CPU and memory (see :class:`~reasoning_env.server.sessions.SessionServer`).

    Raises:
        ServerConfigError: a value is out of range.
    """

    max_sessions: int = DEFAULT_MAX_SESSIONS
    session_timeout_s: Optional[float] = DEFAULT_SESSION_TIMEOUT_S
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    allowed_tokenizers: tuple[str, ...] = ()
    allow_local_tokenizers: bool = False
    worker_threads: int = DEFAULT_WORKER_THREADS

    def __post_init__(self) -> None:
        if isinstance(self.max_sessions, bool) or not isinstance(self.max_sessions, int) or self.max_sessions < 1:
            raise ServerConfigError(f"max_sessions must be an integer >= 1, got {self.max_sessions!r}")
        t = self.session_timeout_s
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not t > 0 or t == float("inf")):
            raise ServerConfigError(f"session_timeout_s must be a positive number of seconds or None, got {t!r}")
        b = self.max_response_bytes
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= 256 * 1024 * 1024:
            raise ServerConfigError(f"max_response_bytes must be an integer between 1 and 268435456 (256 MiB), got {b!r}")
        w = self.worker_threads
        if isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= 1024:
            raise ServerConfigError(f"worker_threads must be an integer between 1 and 1024, got {w!r}")
        if isinstance(self.allowed_tokenizers, str) or not all(isinstance(p, str) and p for p in self.allowed_tokenizers):
            raise ServerConfigError(f"allowed_tokenizers must be a tuple of non-empty patterns, got {self.allowed_tokenizers!r}")

    @property
    def max_message_bytes(self) -> int:
        """Largest WebSocket text frame or HTTP body read at all (bytes): room for a response and
        a grading response at the cap, with JSON escaping (up to 2x) and the envelope. Larger
        messages are refused before they are parsed."""
        return 4 * self.max_response_bytes + 64 * 1024

    def check_tokenizer_name(self, name: str, config_tokenizer: str) -> Optional[str]:
        """Why a client may not use tokenizer ``name`` here, or ``None`` if it may.

        Args:
            name: The requested name (already a string).
            config_tokenizer: The config's ``tokenizer_name`` (always allowed).
        """
        name = name.strip()
        if not name or name == config_tokenizer:
            return None
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
        return d


# ------------------------------------------------------------------------ environment variables
def _bool(environ: Mapping[str, str], var: str) -> Optional[bool]:
    raw = environ.get(var)
    if raw is None or not raw.strip():
        return None
    v = raw.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ServerConfigError(f"{var}={raw!r} is not a boolean; use true or false")


def _int(environ: Mapping[str, str], var: str) -> Optional[int]:
    raw = environ.get(var)
    if raw is None or not raw.strip():
        return None
    try:
        return int(raw.strip().replace("_", ""))
    except ValueError:
        raise ServerConfigError(f"{var}={raw!r} is not an integer") from None


def _list(environ: Mapping[str, str], var: str) -> Optional[list[str]]:
    raw = environ.get(var)
    if raw is None or not raw.strip():
        return None
    items = [p.strip() for p in raw.split(",") if p.strip()]
    if not items:
        raise ServerConfigError(f"{var}={raw!r} names nothing; give a comma-separated list")
    return items


def config_from_env(environ: Optional[Mapping[str, str]] = None) -> EnvConfig:
    """The EnvConfig described by ``REE_CONFIG`` and the per-field ``REE_*`` variables.

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
    changes: dict[str, Any] = {}
    tok = (environ.get("REE_DEFAULT_TOKENIZER_NAME") or "").strip()
    if tok:
        changes["tokenizer_name"] = tok
    hard = _bool(environ, "REE_HARD_CAP_MODE")
    if hard is not None:
        changes["hard_cap_mode"] = hard
    sources = _list(environ, "REE_SOURCES")
    if sources is not None:
        changes["sources"] = sources
    data_dir = (environ.get("REE_DATA_DIR") or "").strip()
    if data_dir:
        changes["data_dir"] = data_dir
    if not changes:
        return config
    try:
        return config.replace(**changes)
    except ConfigError as exc:
        names = {"tokenizer_name": "REE_DEFAULT_TOKENIZER_NAME", "hard_cap_mode": "REE_HARD_CAP_MODE",
                 "sources": "REE_SOURCES", "data_dir": "REE_DATA_DIR"}
        raise ServerConfigError(
            f"the config from {', '.join(names[k] for k in changes)} is invalid: {exc}"
        ) from None


def settings_from_env(environ: Optional[Mapping[str, str]] = None) -> ServerSettings:
    """The :class:`ServerSettings` described by the ``REE_*`` variables (defaults for unset ones).

    Raises:
        ServerConfigError: a variable is malformed or out of range (the message names it).
    """
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    n = _int(environ, "REE_MAX_SESSIONS")
    if n is not None:
        values["max_sessions"] = n
    raw = (environ.get("REE_SESSION_TIMEOUT_S") or "").strip()
    if raw:
        if raw.lower() in ("none", "off", "never", "0"):
            values["session_timeout_s"] = None
        else:
            try:
                values["session_timeout_s"] = float(raw)
            except ValueError:
                raise ServerConfigError(f"REE_SESSION_TIMEOUT_S={raw!r} is not a number of seconds (or 'none')") from None
    b = _int(environ, "REE_MAX_RESPONSE_BYTES")
    if b is not None:
        values["max_response_bytes"] = b
    allowed = _list(environ, "REE_ALLOWED_TOKENIZERS")
    if allowed is not None:
        values["allowed_tokenizers"] = tuple(allowed)
    local = _bool(environ, "REE_ALLOW_LOCAL_TOKENIZERS")
    if local is not None:
        values["allow_local_tokenizers"] = local
    threads = _int(environ, "REE_WORKER_THREADS")
    if threads is not None:
        values["worker_threads"] = threads
    try:
        return ServerSettings(**values)
    except ServerConfigError as exc:
        var = {"max_sessions": "REE_MAX_SESSIONS", "session_timeout_s": "REE_SESSION_TIMEOUT_S",
               "max_response_bytes": "REE_MAX_RESPONSE_BYTES", "worker_threads": "REE_WORKER_THREADS"}
        field = str(exc).split(" ", 1)[0]
        raise ServerConfigError(f"{var.get(field, 'server setting')}: {exc}") from None

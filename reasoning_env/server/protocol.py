"""OpenEnv's WebSocket protocol as this server reads and writes it.

Client messages are JSON text frames ``{"type": "reset"|"step"|"state"|"close", "data": ...}``;
answers are ``{"type": "observation", "data": {"observation", "reward", "done", "metadata"}}``,
``{"type": "state", "data": ...}`` or ``{"type": "error", "data": {"message", "code", ...}}``
(OpenEnv 0.10's ``WS*`` models, same fields and error codes).

:func:`parse_message` turns a frame into a :class:`Request` or raises :class:`FrameError` with
the OpenEnv error code and a message that says what was wrong and how to fix it. It parses the
JSON once and validates the envelope by hand (OpenEnv's route parsed each frame twice and built
three pydantic models per step); the action is validated by :class:`ReasoningEconomicsAction`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import to_json

from reasoning_env.errors import ReasoningEconomicsError
from reasoning_env.models import ReasoningEconomicsAction

STEP_EXAMPLE = '{"type": "step", "data": {"response": "... \\\\boxed{42}", "metadata": {}}}'
MESSAGE_TYPES = ("close", "reset", "state", "step")
#: Integers of more digits than this cannot be read (CPython's ``sys.get_int_max_str_digits``).
MAX_INT_DIGITS = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300
#: Longest error message sent to a client (characters); a longer one is cut, saying how much.
MAX_ERROR_CHARS = 2000
#: Most entries of an error's ``errors`` list (then a count of the rest).
MAX_ERROR_ENTRIES = 20
#: Longest text of one entry's location part or message (characters).
MAX_ERROR_PART_CHARS = 120
#: The fields a step's action may have (anything else is refused before pydantic reads it).
ACTION_FIELDS = frozenset(ReasoningEconomicsAction.model_fields)


class FrameError(ReasoningEconomicsError):
    """A client message that must not reach the environment.

    Attributes:
        message: What was wrong and how to fix it. code: OpenEnv's error code. extra: more fields
            of the error frame.
    """

    def __init__(self, message: str, code: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.extra = extra


@dataclass(frozen=True)
class Request:
    """A valid client message: ``kind`` is one of :data:`MESSAGE_TYPES`; ``data`` the reset
    arguments (dict) or the step's :class:`ReasoningEconomicsAction`."""

    kind: str
    data: Any = None


def utf8_len(text: str) -> int:
    """Length of ``text`` in bytes of UTF-8 (lone surrogates count 3 bytes, as JSON allows them).

    ASCII text is its length (``str.isascii`` reads a flag CPython keeps): encoding a refused
    3.9 MB response three times to measure it cost the worker as much as parsing its JSON, with
    the GIL held (refusals are read as floods, issue 34)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def _utf8_ok(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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


def clip(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how many more there were (an error may
    quote the client's input, which may be megabytes)."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"... ({len(text) - limit:,} more characters)"


def _part(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return clip(ascii(value)[1:-1] if isinstance(value, str) else str(value), MAX_ERROR_PART_CHARS)


def bounded_errors(errors: list) -> list[dict[str, Any]]:
    """Pydantic-style error entries without the offending input (it may be megabytes) or doc
    links: the first :data:`MAX_ERROR_ENTRIES`, each location part and message cut to
    :data:`MAX_ERROR_PART_CHARS` (lone surrogates written ``\\ud800``), then one entry counting the rest."""
    out = []
    for e in errors[:MAX_ERROR_ENTRIES]:
        if not isinstance(e, dict):
            out.append({"msg": _part(e)})
            continue
        out.append(
            {
                "loc": [_part(p) for p in list(e.get("loc", ()))[:8]],
                "msg": _part(e.get("msg", "")),
                "type": _part(e.get("type", "")),
            }
        )
    if len(errors) > MAX_ERROR_ENTRIES:
        out.append({"loc": [], "msg": f"and {len(errors) - MAX_ERROR_ENTRIES:,} more errors", "type": "more"})
    return out


def compact_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """Pydantic errors without the offending input or doc links, bounded (:func:`bounded_errors`)."""
    return bounded_errors(exc.errors())


class _TooLong:
    """Stands for an integer literal too long to convert (found by :func:`_huge_int_path`)."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _huge_int_path(text: str) -> tuple[str, int] | None:
    """``(dotted path, digits)`` of the first integer literal in ``text`` over the limit."""

    def parse_int(s: str) -> Any:
        return _TooLong(len(s.lstrip("-"))) if len(s) > MAX_INT_DIGITS else int(s)

    try:
        doc = json.loads(text, parse_int=parse_int)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[str, Any]] = [("", doc)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, _TooLong):
            return path or "(message)", node.digits
        if isinstance(node, dict):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(node))))
    return None


def parse_message(text: str | None, *, max_message_bytes: int, max_response_bytes: int) -> Request:
    """Read one client frame.

    Args:
        text: The frame's text (``None`` for a binary frame).
        max_message_bytes: Largest frame read at all (bytes of UTF-8).
        max_response_bytes: Largest ``response`` / ``metadata.grading_response`` (bytes of UTF-8).

    Returns:
        The :class:`Request`.

    Raises:
        FrameError: the frame is binary, too large, not JSON, not a known message, or its action
            is invalid (``INVALID_JSON``, ``VALIDATION_ERROR``, ``UNKNOWN_TYPE``).
    """
    if text is None:
        raise FrameError(
            "binary frames are not accepted: send each message as a JSON text frame, e.g. " + STEP_EXAMPLE,
            "INVALID_JSON",
        )
    if len(text) * 4 > max_message_bytes and (size := utf8_len(text)) > max_message_bytes:
        raise FrameError(
            f"message of {size:,} bytes exceeds this server's limit of {max_message_bytes:,} bytes per "
            f"message; a step's response may be at most {max_response_bytes:,} bytes of "
            "UTF-8 (REE_MAX_RESPONSE_BYTES)",
            "VALIDATION_ERROR",
            max_response_bytes=max_response_bytes,
            max_message_bytes=max_message_bytes,
        )
    try:
        msg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FrameError(f"Invalid JSON: {exc}", "INVALID_JSON") from None
    except RecursionError:
        raise FrameError("Invalid JSON: nested too deeply", "INVALID_JSON") from None
    except ValueError:  # an integer literal beyond CPython's digit limit
        found = _huge_int_path(text)
        where, digits = found if found else ("(message)", MAX_INT_DIGITS + 1)
        raise FrameError(
            f"{where}: an integer of {digits:,} digits is out of range (at most {MAX_INT_DIGITS:,} digits are read; "
            "seeds and token counts are far smaller)",
            "VALIDATION_ERROR",
        ) from None
    if not isinstance(msg, dict):
        raise FrameError(
            f"a message must be a JSON object such as {STEP_EXAMPLE}, got a JSON {type(msg).__name__}",
            "VALIDATION_ERROR",
        )
    kind = msg.get("type")
    if not isinstance(kind, str) or kind not in MESSAGE_TYPES:
        raise FrameError(
            f"unknown message type {kind!r}: send one of {list(MESSAGE_TYPES)}, e.g. {STEP_EXAMPLE}", "UNKNOWN_TYPE"
        )
    allowed = ("type",) if kind in ("state", "close") else ("type", "data")
    extra = [k for k in msg if k not in allowed]
    if extra:
        raise FrameError(f"invalid {kind} message: unknown field {extra[0]!r}", "VALIDATION_ERROR")
    if kind == "reset":
        data = msg.get("data", {})
        if not isinstance(data, dict):
            raise FrameError(
                f"invalid reset message: data must be an object of reset arguments such as "
                f'{{"seed": 7, "tokenizer_name": "Qwen/Qwen2.5-0.5B-Instruct"}}, got a JSON {type(data).__name__}',
                "VALIDATION_ERROR",
            )
        return Request("reset", data)
    if kind != "step":
        return Request(kind)
    if "data" not in msg:
        raise FrameError("invalid step message: missing field 'data'", "VALIDATION_ERROR")
    data = msg["data"]
    if not isinstance(data, dict):
        raise FrameError(
            f"invalid step message: data must be an action object such as {STEP_EXAMPLE}", "VALIDATION_ERROR"
        )
    for key in data:
        if not _utf8_ok(key):
            raise FrameError(
                f"invalid step action: unknown field {ascii(key[:40])} (a name with a lone surrogate, which is not "
                f"text); a step looks like {STEP_EXAMPLE}",
                "VALIDATION_ERROR",
            )
    unknown = [k for k in data if k not in ACTION_FIELDS]
    if unknown:  # said before pydantic reads them: 200,000 of them took it 13.5 s
        names = ", ".join(repr(k[:40]) for k in unknown[:5])
        more = f" and {len(unknown) - 5:,} more" if len(unknown) > 5 else ""
        raise FrameError(
            f"invalid step action: unknown field {names}{more}; the fields are {sorted(ACTION_FIELDS)}; a step "
            f"looks like {STEP_EXAMPLE}",
            "VALIDATION_ERROR",
        )
    try:
        action = ReasoningEconomicsAction.model_validate(data)
    except ValidationError as exc:
        raise FrameError(
            f"invalid step action: {describe_validation_error(exc)}; a step looks like {STEP_EXAMPLE}",
            "VALIDATION_ERROR",
            errors=compact_errors(exc),
        ) from None
    grading = action.metadata.get("grading_response") if action.metadata else None
    for field, value in (("response", action.response), ("metadata.grading_response", grading)):
        if (
            isinstance(value, str)
            and len(value) > max_response_bytes // 4
            and (size := utf8_len(value)) > max_response_bytes
        ):
            raise FrameError(
                f"{field} is {size:,} bytes of UTF-8; this server accepts at most "
                f"{max_response_bytes:,} bytes "
                "(REE_MAX_RESPONSE_BYTES): cut the response or raise the server's cap",
                "VALIDATION_ERROR",
                max_response_bytes=max_response_bytes,
            )
    return Request("step", action)


# ------------------------------------------------------------------------------ answers
def error_frame(message: str, code: str, **extra: Any) -> str:
    """An OpenEnv error frame (JSON text), bounded: the message cut to :data:`MAX_ERROR_CHARS`,
    an ``errors`` list to :func:`bounded_errors`, other fields' text to :data:`MAX_ERROR_PART_CHARS`."""
    for key, value in extra.items():
        if key == "errors" and isinstance(value, list):
            extra[key] = bounded_errors(value)
        elif isinstance(value, str):
            extra[key] = clip(value, MAX_ERROR_PART_CHARS)
    return to_json({"type": "error", "data": {"message": clip(message), "code": code, **extra}}).decode()


class HistoryCache:
    """The JSON of one session's history entries, kept across steps: an episode's history grows
    by one entry per step and every observation carries all of it, so each entry is serialised
    once instead of once per later step. Entries are matched by identity (the environment keeps
    its entry objects; a new episode has new ones)."""

    def __init__(self) -> None:
        self._entries: list[tuple[Any, str]] = []

    def json(self, history: list) -> str:
        """``history`` as a JSON array."""
        kept = self._entries
        n = 0
        while n < len(kept) and n < len(history) and kept[n][0] is history[n]:
            n += 1
        del kept[n:]
        kept.extend((e, e.model_dump_json()) for e in history[n:])
        return "[" + ",".join(text for _, text in kept) + "]"


def observation_frame(obs: BaseModel, history: HistoryCache | None = None) -> str:
    """An OpenEnv observation frame (JSON text) for ``obs``: the observation without ``reward`` and
    ``done``, which sit beside it, and its ``metadata`` once more at the top (as
    ``openenv.core.env_server.serialization.serialize_observation`` lays it out). With a
    :class:`HistoryCache`, the history entries are serialised once per session."""
    if history is not None and getattr(obs, "history", None):
        head = obs.model_dump_json(exclude={"reward", "done", "history"})
        body = head[:-1] + ',"history":' + history.json(obs.history) + "}"
    else:
        body = obs.model_dump_json(exclude={"reward", "done"})
    reward = to_json(obs.reward).decode()
    tail = ""
    metadata = getattr(obs, "metadata", None)
    if metadata:
        tail = ',"metadata":' + to_json(metadata).decode()
    return (
        '{"type":"observation","data":{"observation":'
        + body
        + ',"reward":'
        + reward
        + ',"done":'
        + ("true" if obs.done else "false")
        + tail
        + "}}"
    )


def state_frame(state: BaseModel) -> str:
    """An OpenEnv state frame (JSON text)."""
    return '{"type":"state","data":' + state.model_dump_json() + "}"

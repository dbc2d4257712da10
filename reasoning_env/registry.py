"""One registry shape for question sources, rewards and policies.

Each of the three packages keeps one :class:`Registry`, filled once when the package is imported
and read-only afterwards (no other global mutable state):

=============================== ==================================== ================================
registry                        entry                                built by
=============================== ==================================== ================================
``reasoning_env.sources.SOURCES`` a :class:`~.sources.QuestionSource`  ``@register_source`` (its ``name``)
``reasoning_env.rewards.REWARDS`` a reward class (frozen dataclass)    ``@register(name, ...)``
``reasoning_env.policies.POLICIES`` a factory ``(PolicyArgs) -> policy`` ``@register_policy(name, ...)``
=============================== ==================================== ================================

and the same four calls on each, with the same return types:

- ``REGISTRY.get(name)`` -> the entry; an unknown name raises :class:`UnknownNameError` (a
  ``ValueError``) listing the registered names. For sources it is also a ``SourceError``, for
  rewards a ``RewardSpecError``, as before.
- ``REGISTRY.names()`` -> ``list[str]``, registration order (aliases not included).
- ``REGISTRY.describe(name)`` -> a JSON-ready ``dict`` with at least ``name`` and ``summary`` (one
  line); ``REGISTRY.describe()`` -> ``{name: that dict}`` for every name.
- ``REGISTRY.register(name, summary=...)`` -> a decorator that adds an entry.

Each package also exposes ``available()`` (= ``names()``) and ``describe(name=None)`` as plain
functions, so ``sources.available()``, ``rewards.available()`` and ``policies.available()`` all
return a list of names, and the three ``describe()`` all return dicts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from reasoning_env.errors import UnknownNameError

__all__ = ["Registry", "UnknownNameError"]

T = TypeVar("T")

#: A registry name: lower-case letters, digits and underscores, starting with a letter.
NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class _Entry(Generic[T]):
    value: T
    summary: str
    meta: Mapping[str, Any] | Callable[[], Mapping[str, Any]] = field(default_factory=dict)


class Registry(Generic[T]):
    """Names -> entries of one kind, each with a one-line summary and JSON-ready metadata.

    Args:
        kind: What the entries are, singular (``"source"``): used in error messages.
        error: The :class:`UnknownNameError` subclass raised for an unknown name.
    """

    def __init__(self, kind: str, *, error: type[UnknownNameError] = UnknownNameError) -> None:
        self.kind = kind
        self.error = error
        self._entries: dict[str, _Entry[T]] = {}
        self._aliases: dict[str, str] = {}

    def add(
        self,
        name: str,
        value: T,
        *,
        summary: str,
        meta: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
        aliases: tuple[str, ...] = (),
    ) -> T:
        """Register ``value`` under ``name`` and return it.

        Args:
            name: Registry name (lower-case ``[a-z][a-z0-9_]*``).
            value: The entry.
            summary: One line: what it is.
            meta: More JSON-ready metadata for :meth:`describe` (a mapping, or a callable that
                returns one, read on each call); ``name`` and ``summary`` are added.
            aliases: Other names :meth:`get` accepts (not listed by :meth:`names`).

        Raises:
            ValueError: a bad or already registered name, or an empty summary (a programming
                error, found at import).
        """
        for n in (name, *aliases):
            if not isinstance(n, str) or not NAME_RE.match(n):
                raise ValueError(f"{self.kind} name must match {NAME_RE.pattern}, got {n!r}")
            if n in self._entries or n in self._aliases:
                raise ValueError(f"{self.kind} {n!r} is already registered")
        if not isinstance(summary, str) or not summary.strip():
            raise ValueError(f"{self.kind} {name!r} needs a one-line summary")
        self._entries[name] = _Entry(value, summary.strip(), meta if meta is not None else {})
        for a in aliases:
            self._aliases[a] = name
        return value

    def register(
        self, name: str, *, summary: str, meta: Mapping[str, Any] | None = None, aliases: tuple[str, ...] = ()
    ) -> Callable[[T], T]:
        """Decorator form of :meth:`add`: ``@REGISTRY.register("name", summary="...")``."""

        def deco(value: T) -> T:
            return self.add(name, value, summary=summary, meta=meta, aliases=aliases)

        return deco

    def canonical(self, name: str) -> str:
        """The registered name ``name`` stands for (itself, or the name an alias points to).

        Raises:
            UnknownNameError: not registered (the message lists the registered names).
        """
        if name in self._entries:
            return name
        if isinstance(name, str) and name in self._aliases:
            return self._aliases[name]
        names = self.names()
        raise self.error(
            f"unknown {self.kind} {name!r}; available: {', '.join(names)}",
            kind=self.kind,
            name=str(name),
            available=names,
        )

    def get(self, name: str) -> T:
        """The entry registered as ``name`` (or one of its aliases).

        Raises:
            UnknownNameError: not registered (the message lists the registered names).
        """
        return self._entries[self.canonical(name)].value

    def names(self) -> list[str]:
        """Registered names, in registration order (aliases not included)."""
        return list(self._entries)

    def summary(self, name: str) -> str:
        """The one-line summary of ``name``. Raises :class:`UnknownNameError`."""
        return self._entries[self.canonical(name)].summary

    def describe(self, name: str | None = None) -> dict[str, Any]:
        """JSON-ready metadata: of one entry (``{"name", "summary", ...}``), or, without a name,
        ``{name: metadata}`` of every entry in registration order.

        Raises:
            UnknownNameError: ``name`` is not registered.
        """
        if name is None:
            return {n: self.describe(n) for n in self._entries}
        canonical = self.canonical(name)
        entry = self._entries[canonical]
        meta = entry.meta() if callable(entry.meta) else entry.meta
        return {
            "name": canonical,
            "summary": entry.summary,
            **{k: v for k, v in meta.items() if k not in ("name", "summary")},
        }

    def __contains__(self, name: object) -> bool:
        return name in self._entries or name in self._aliases

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"

"""Question sources: a registry of loaders, one module each, all yielding `Question` records.

Registered names (:func:`available`, in this order): ``metamathqa``, ``numina_tir``, ``gsm8k``,
``math500``, ``hf``, ``jsonl``, ``reasoning_gym``, ``builtin``; :func:`describe` gives each one's
summary and options. The registry (:data:`SOURCES`) has the shape every registry of the core has
(:mod:`reasoning_env.registry`).

:func:`load_pools` loads the sources of a config into per-problem-type pools, cached for the
process, and falls back to the builtin stand-ins for ``metamathqa`` / ``numina_tir`` when they
cannot be reached (offline) and the config allows it; ``sources_used`` says what happened.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from reasoning_env.questions import Question
from reasoning_env.sources.base import (
    SOURCES,
    LoadContext,
    QuestionSource,
    SourceError,
    SourceUnavailable,
    UnknownSourceError,
    available,
    describe,
    get_source,
    register_source,
    validate_spec,
)

# Import the source modules so they register themselves. The order is the registry's order (what
# available() lists and the app shows), so the import sorter leaves it as written.
# isort: off
from reasoning_env.sources import metamathqa as _metamathqa  # noqa: F401
from reasoning_env.sources import numina_tir as _numina_tir  # noqa: F401
from reasoning_env.sources import gsm8k as _gsm8k  # noqa: F401
from reasoning_env.sources import math500 as _math500  # noqa: F401
from reasoning_env.sources import hf_dataset as _hf_dataset  # noqa: F401
from reasoning_env.sources import reasoning_gym_source as _reasoning_gym  # noqa: F401
from reasoning_env.sources import builtin as _builtin  # noqa: F401
# isort: on

logger = logging.getLogger(__name__)

__all__ = [
    "LoadContext",
    "PoolSet",
    "Question",
    "QuestionSource",
    "SOURCES",
    "SourceError",
    "SourceUnavailable",
    "UnknownSourceError",
    "available",
    "describe",
    "get_source",
    "load_pools",
    "load_source",
    "register_source",
    "validate_spec",
]


@dataclass(frozen=True)
class PoolSet:
    """Questions grouped by problem type, plus what was loaded from where.

    Attributes:
        pools: problem type -> questions (tuple, deterministic order); types sorted by name.
        sources_used: one dict per configured source: ``source`` (configured name), ``used``
            (what served it, e.g. ``"hub:meta-math/MetaMathQA"`` or ``"builtin:metamathqa"``),
            ``questions`` (count) and ``reason`` (why a stand-in was used, else ``None``).
    """

    pools: dict[str, tuple[Question, ...]]
    sources_used: tuple[dict, ...] = field(default_factory=tuple)

    @property
    def problem_types(self) -> list[str]:
        """Problem types with at least one question, sorted."""
        return sorted(k for k, v in self.pools.items() if v)

    def size(self) -> int:
        """Total number of questions."""
        return sum(len(v) for v in self.pools.values())


_cache: dict[str, tuple[list[Question], str]] = {}
_cache_lock = threading.Lock()
_key_locks: dict[str, threading.Lock] = {}


def _origin_of(questions: list[Question], name: str) -> str:
    if questions and isinstance(questions[0].metadata, dict) and questions[0].metadata.get("origin"):
        return str(questions[0].metadata["origin"])
    return name


def load_source(name: str, options: dict[str, Any] | None = None, ctx: LoadContext | None = None) -> list[Question]:
    """Load one source's questions, cached for the process (same name/options/context, same list).

    Raises:
        SourceError: unknown source or bad options/data.
        SourceUnavailable: the data cannot be reached here.
    """
    options = dict(options or {})
    ctx = ctx or LoadContext()
    src = get_source(name)
    src.validate(options)
    key = json.dumps([name, options, ctx.data_dir, ctx.hub], sort_keys=True, default=str)
    with _cache_lock:
        if key in _cache:
            return _cache[key][0]
        lock = _key_locks.setdefault(key, threading.Lock())
    with lock:
        with _cache_lock:
            if key in _cache:
                return _cache[key][0]
        questions = src.load(options, ctx)
        if not questions:
            raise SourceError(f"source {name!r} with options {options} yielded no questions")
        with _cache_lock:
            _cache[key] = (questions, _origin_of(questions, name))
        return questions


def load_pools(
    specs: Iterable[Any],
    *,
    data_dir: str | None = None,
    offline_fallback: bool = True,
    hub: bool | None = None,
) -> PoolSet:
    """Load every configured source into per-problem-type pools.

    Args:
        specs: ``SourceSpec`` objects (or ``(name, options)`` pairs / names).
        data_dir: Folder searched for local files of every source.
        offline_fallback: Replace unreachable ``metamathqa`` / ``numina_tir`` with their builtin
            stand-ins (one log line each, recorded in ``sources_used``).
        hub: Override Hub reachability (default: probe once, see :mod:`reasoning_env.hub`).

    Raises:
        SourceUnavailable: a source cannot be loaded and has no allowed stand-in.
        SourceError: bad names/options, or a question id repeated across sources.
    """
    from reasoning_env.hub import hub_reachable

    ctx = LoadContext(data_dir=data_dir, hub=hub_reachable() if hub is None else hub)
    pools: dict[str, list[Question]] = {}
    used: list[dict] = []
    seen: dict[str, tuple[Question, str]] = {}
    fallbacks: list[str] = []
    for spec in specs:
        if isinstance(spec, str):
            name, options = spec, {}
        elif isinstance(spec, tuple):
            name, options = spec
        else:
            name, options = spec.name, dict(spec.options)
        src = get_source(name)
        reason = None
        try:
            questions = load_source(name, options, ctx)
            origin = _origin_of(questions, name)
        except SourceUnavailable as exc:
            if not (offline_fallback and src.standin):
                raise
            types = options.get("types")
            questions = load_source("builtin", {"subset": src.standin, **({"types": types} if types else {})}, ctx)
            origin = f"builtin:{src.standin}"
            reason = str(exc)
            fallbacks.append(f"{name} -> {len(questions)} builtin stand-ins")
        used.append({"source": name, "used": origin, "questions": len(questions), "reason": reason})
        for q in questions:
            if q.id in seen:
                first, first_source = seen[q.id]
                if (first.text, first.gold_answer, first.problem_type) == (q.text, q.gold_answer, q.problem_type):
                    continue  # the same question listed twice (e.g. a source configured twice) is kept once
                raise SourceError(
                    f"question id {q.id!r} names two different questions (sources {first_source!r} and {name!r}): "
                    "give the entries different seeds or options that set them apart (reasoning_gym: a "
                    "different config, or a label), or drop one; no question is dropped silently"
                )
            seen[q.id] = (q, name)
            pools.setdefault(q.problem_type, []).append(q)
    if fallbacks:
        logger.warning(
            "question sources unavailable (%s): using %s; see sources_used for details",
            "Hub unreachable" if not ctx.hub else "load failed",
            ", ".join(fallbacks),
        )
    return PoolSet(pools={k: tuple(pools[k]) for k in sorted(pools)}, sources_used=tuple(used))

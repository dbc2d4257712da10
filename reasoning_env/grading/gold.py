"""Gold answers, parsed once: :func:`prepare_gold` and the :class:`GoldInfo` it caches.

The environment prepares every gold answer when it loads its questions
(:meth:`reasoning_env.grading.Grader.prepare_golds`), so a gold that the fast parser cannot read
is reported once at load time, not at every step; each ``grade()`` then reuses the cached parse.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from reasoning_env.grading.compare import describe_kind
from reasoning_env.grading.latex import ParseError, parse_answer
from reasoning_env.grading.normalize import is_wrapped_text, match_key, normalize_with_unit

__all__ = ["GoldInfo", "GoldReport", "prepare_gold", "log_gold_issues", "GOLD_CACHE_SIZE"]

logger = logging.getLogger(__name__)

#: Distinct gold strings kept parsed per process (MetaMathQA has ~395k rows; most repeat).
GOLD_CACHE_SIZE = 262_144


@dataclass(frozen=True)
class GoldInfo:
    """A gold answer prepared for grading.

    Attributes:
        gold: The gold answer as given.
        normalised: Its normalised form (:func:`~reasoning_env.grading.normalize.normalize_answer`).
        key: The exact-match key (normalised, spaces removed).
        value: The parsed value, or ``None`` when the fast parser cannot read it.
        kind: ``"number"``, ``"expression"``, ``"tuple"``, ``"set"``, ``"list"``, ``"union"``,
            ``"equation"``, ``"inequality"``, ``"assignment"``, ``"matrix"``, ``"text"``,
            ``"choice"``, ``"ratio"`` or ``"unparsed"``.
        unit: The canonical unit the gold carried (``"cm"``, ``"in^2"``, ``"deg"``), or ``None``.
        issue: Why it could not be parsed (``None`` when it was); such golds are still graded, by
            exact match and by math-verify in the worker process (slower).
    """

    gold: str
    normalised: str
    key: str
    value: Any
    kind: str
    issue: str | None = None
    unit: str | None = None


@dataclass(frozen=True)
class GoldReport:
    """Summary of :meth:`~reasoning_env.grading.Grader.prepare_golds`.

    Attributes:
        total: Distinct gold answers prepared.
        parsed: How many the fast parser read.
        issues: ``(gold, issue)`` for each gold it could not read (sorted by gold).
    """

    total: int
    parsed: int
    issues: tuple

    @property
    def ok(self) -> bool:
        """True when every gold was parsed."""
        return not self.issues


@lru_cache(maxsize=GOLD_CACHE_SIZE)
def prepare_gold(gold: str) -> GoldInfo:
    """Normalise and parse a gold answer (cached per process; values are immutable).

    Args:
        gold: The gold answer string (bare, no ``\\boxed{}`` needed; one is unwrapped if present).
    Returns:
        A :class:`GoldInfo`; ``issue`` is set when the fast parser cannot read it.
    Raises:
        TypeError: ``gold`` is not a ``str``.
        ValueError: ``gold`` is empty or blank (a data-loading bug, not a model error).
    """
    if not isinstance(gold, str):
        raise TypeError(f"gold answer must be a str, got {type(gold).__name__}")
    if not gold.strip():
        raise ValueError("gold answer is empty")
    normalised, unit = normalize_with_unit(gold)
    key = match_key(normalised)
    try:
        value = parse_answer(normalised, is_wrapped_text(gold))
    except ParseError as exc:
        return GoldInfo(gold, normalised, key, None, "unparsed", f"fast parser: {exc}", unit)
    except RecursionError:  # pragma: no cover - depth is capped well below the limit
        return GoldInfo(gold, normalised, key, None, "unparsed", "fast parser: too deep", unit)
    return GoldInfo(gold, normalised, key, value, describe_kind(value), None, unit)


_logged_golds: set[str] = set()
_logged_lock = threading.Lock()


def log_gold_issues(report: GoldReport) -> None:
    """Log (warning) the golds the fast parser could not read, with up to 5 examples.

    Each gold is reported once per process: environments are created per session (server) or
    per episode batch, and would otherwise repeat the same warning.
    """
    with _logged_lock:
        new = [(g, why) for g, why in report.issues if g not in _logged_golds]
        _logged_golds.update(g for g, _ in new)
    if not new:
        return
    examples = "; ".join(f"{g!r}: {why}" for g, why in new[:5])
    logger.warning(
        "%d of %d gold answers are outside the fast grader's subset; they are graded by exact "
        "match and math-verify (slower). Examples: %s",
        len(new),
        report.total,
        examples,
    )

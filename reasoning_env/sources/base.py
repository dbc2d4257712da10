"""Source registry and the shared loading path for Hugging Face datasets.

A source turns rows of some dataset into :class:`~reasoning_env.questions.Question` records.
Each lives in its own module and registers itself with :func:`register_source`; the registry
is filled at import time and never mutated afterwards.
"""

from __future__ import annotations

import glob
import json
import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from reasoning_env.errors import SourceError, SourceUnavailable, UnknownSourceError
from reasoning_env.questions import Question
from reasoning_env.registry import Registry

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadContext:
    """What a source may use while loading.

    Attributes:
        data_dir: Config-level folder searched for local files of every source (or ``None``).
        hub: Whether the Hugging Face Hub is reachable (see :func:`reasoning_env.hub.hub_reachable`).
    """

    data_dir: str | None = None
    hub: bool = False


class QuestionSource(ABC):
    """Base class of a registered source.

    Class attributes:
        name: Registry name used in configs.
        options: Accepted option names -> one-line documentation.
        description: One line: the summary in :func:`describe`.
        standin: Name of the builtin subset that replaces this source offline (``None`` if none).
    """

    name: ClassVar[str]
    options: ClassVar[dict[str, str]] = {}
    description: ClassVar[str] = ""
    standin: ClassVar[str | None] = None

    def validate(self, options: dict[str, Any]) -> None:
        """Raise :class:`SourceError` for unknown options (override to check values too)."""
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise SourceError(
                f"source {self.name!r} does not take option(s) {unknown}; "
                f"it accepts {sorted(self.options) or 'no options'}"
            )

    @abstractmethod
    def load(self, options: dict[str, Any], ctx: LoadContext) -> list[Question]:
        """Load every question of this source (deterministic order).

        Raises:
            SourceUnavailable: the data cannot be reached here.
            SourceError: the options or the data are malformed.
        """


#: The registered sources (one instance each), in registration order: :class:`reasoning_env.registry.Registry`.
SOURCES: Registry[QuestionSource] = Registry("source", error=UnknownSourceError)


def _source_meta(src: QuestionSource) -> Callable[[], dict[str, Any]]:
    return lambda: {"options": dict(src.options), "standin": src.standin}


def register_source(cls: type[QuestionSource]) -> type[QuestionSource]:
    """Class decorator: register one instance of a source under ``cls.name``, with its
    ``description`` as the summary.

    Raises:
        ValueError: a bad or repeated name, or no description.
    """
    src = cls()
    SOURCES.add(cls.name, src, summary=cls.description, meta=_source_meta(src))
    return cls


def get_source(name: str) -> QuestionSource:
    """The registered source called ``name``.

    Raises:
        UnknownSourceError: not registered (a :class:`SourceError`; the message lists the names).
    """
    return SOURCES.get(name)


def available() -> list[str]:
    """Registered source names, in registration order (what ``sources:`` in a config may name)."""
    return SOURCES.names()


def describe(name: str | None = None) -> dict[str, Any]:
    """JSON-ready metadata of one source (``name``, ``summary``, ``options``: option -> one line,
    ``standin``: the builtin subset used offline or ``None``), or ``{name: metadata}`` of all.

    Raises:
        UnknownSourceError: ``name`` is not registered.
    """
    return SOURCES.describe(name)


def validate_spec(name: str, options: dict[str, Any]) -> None:
    """Check a (name, options) pair without loading anything. Raises :class:`SourceError`."""
    get_source(name).validate(dict(options))


# ---------------------------------------------------------------------------- HF loading
HF_OPTIONS = {
    "hf_id": "Hugging Face dataset id to load from the Hub (default: the dataset's canonical id).",
    "hf_config": "Dataset config name on the Hub.",
    "split": "Split to load.",
    "revision": "Hub revision (commit, tag or branch).",
    "data_files": "Local file(s) (jsonl/json/parquet/csv) or glob(s) to load instead of the Hub.",
    "data_dir": "Local folder holding the dataset's files (or a saved Hub snapshot).",
    "max_rows": "Keep only the first N rows (after the split).",
}

_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv", ".arrow": "arrow"}


def _builder_for(files: Sequence[str]) -> str:
    exts = {Path(f).suffix.lower() for f in files}
    builders = {_BUILDERS.get(e) for e in exts}
    if None in builders or len(builders) != 1:
        raise SourceError(f"cannot load files {list(files)[:3]}: use one format among {sorted(_BUILDERS)}")
    return builders.pop()


def _expand(patterns: Iterable[str], base: str | None = None) -> list[str]:
    out: list[str] = []
    for pat in patterns:
        p = os.path.expanduser(pat)
        if base is not None and not os.path.isabs(p):
            p = os.path.join(base, p)
        for m in sorted(glob.glob(p)):
            if os.path.isfile(m) and m not in out:
                out.append(m)
    return out


def _load_files(files: list[str], source: str) -> list[dict]:
    """Rows of local data files (one format), read with ``datasets``.

    Raises:
        SourceError: a file cannot be read (malformed JSON line, broken CSV or parquet, empty file);
            the message names the file, the line for JSON lines, and the reader's reason.
    """
    import datasets  # heavy import, only when needed
    from datasets.exceptions import DatasetGenerationError

    datasets.disable_progress_bars()
    builder = _builder_for(files)
    try:
        ds = datasets.load_dataset(builder, data_files=files, split="train")
    except (DatasetGenerationError, ValueError, StopIteration) as exc:  # ArrowInvalid is a ValueError
        raise SourceError(f"source {source!r}: {_unreadable_files(files, exc)}") from exc
    return ds.to_list()


def _unreadable_files(files: Sequence[str], exc: BaseException) -> str:
    """Why ``datasets`` could not read ``files``: the first empty file or malformed JSON line,
    else the innermost reason of ``exc``."""
    for f in files:
        if os.path.getsize(f) == 0:
            return f"cannot read {f}: the file is empty"
        if f.lower().endswith(".jsonl"):
            with open(f, encoding="utf-8", errors="replace") as fh:
                for n, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as err:
                        return f"cannot read {f}, line {n}: {err.msg} (JSONL needs one JSON object per line)"
                    if not isinstance(row, dict):
                        return (
                            f"cannot read {f}, line {n}: a JSON {type(row).__name__}, not an object "
                            "(JSONL needs one JSON object per line)"
                        )
    cause = exc
    while cause.__cause__ is not None or cause.__context__ is not None:
        cause = cause.__cause__ or cause.__context__
    reason = str(cause) or type(cause).__name__
    return f"cannot read {', '.join(files[:3])}: {reason}"


def load_hf_rows(
    *,
    source: str,
    options: dict[str, Any],
    ctx: LoadContext,
    hf_id: str,
    hf_config: str | None = None,
    split: str = "train",
    local_patterns: Sequence[str] = (),
) -> tuple[list[dict], str]:
    """Load a dataset's rows: local files, else the Hub, else the local HF cache.

    Order: ``data_files`` option; ``data_dir`` option (files matching ``local_patterns``, else
    the folder as a dataset); config ``data_dir`` (files matching ``local_patterns``); the Hub
    (``hf_id``/``hf_config``/``split``/``revision``) when reachable; a snapshot already in the
    local HF cache. Returns ``(rows, origin)`` where origin says where they came from.

    Raises:
        SourceUnavailable: nothing could be loaded; the message says what was tried.
    """
    hf_id = options.get("hf_id", hf_id)
    hf_config = options.get("hf_config", hf_config)
    split = options.get("split", split)
    revision = options.get("revision")
    tried: list[str] = []

    files_opt = options.get("data_files")
    if files_opt:
        pats = [files_opt] if isinstance(files_opt, str) else list(files_opt)
        files = _expand(pats)
        if not files:
            raise SourceError(f"source {source!r}: data_files {pats} match no file")
        return _cap(_load_files(files, source), options), f"files:{','.join(files)}"

    dir_opt = options.get("data_dir")
    if dir_opt:
        d = os.path.expanduser(str(dir_opt))
        if not os.path.isdir(d):
            raise SourceError(f"source {source!r}: data_dir {d!r} is not a folder")
        files = _expand(local_patterns, d)
        if files:
            return _cap(_load_files(files, source), options), f"files:{','.join(files)}"
        import datasets

        datasets.disable_progress_bars()
        ds = datasets.load_dataset(d, hf_config, split=split)
        return _cap(ds.to_list(), options), f"folder:{d}"

    if ctx.data_dir:
        files = _expand(local_patterns, os.path.expanduser(ctx.data_dir))
        if files:
            return _cap(_load_files(files, source), options), f"files:{','.join(files)}"
        tried.append(f"no file matching {list(local_patterns)} in data_dir {ctx.data_dir!r}")

    if ctx.hub:
        try:
            import datasets

            datasets.disable_progress_bars()
            ds = datasets.load_dataset(hf_id, hf_config, split=split, revision=revision)
            return _cap(ds.to_list(), options), f"hub:{hf_id}"
        except Exception as exc:  # noqa: BLE001 - network errors, gated datasets...: recorded in the message
            tried.append(f"Hub load of {hf_id!r} failed: {type(exc).__name__}: {exc}")
    else:
        tried.append("the Hugging Face Hub is unreachable (or HF_HUB_OFFLINE is set)")

    try:
        from huggingface_hub import snapshot_download

        local = snapshot_download(hf_id, repo_type="dataset", revision=revision, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - not cached, in whatever form huggingface_hub says it: the next fallback
        local = None
        tried.append(f"no copy of {hf_id!r} in the local HF cache ({type(exc).__name__})")
    if local is not None:
        try:
            import datasets

            datasets.disable_progress_bars()
            ds = datasets.load_dataset(local, hf_config, split=split)
            return _cap(ds.to_list(), options), f"cache:{hf_id}"
        except Exception as exc:  # noqa: BLE001 - a Hugging Face load raises many types (OSError, ValueError, Hub HTTP errors): recorded in the message
            tried.append(f"the cached copy of {hf_id!r} could not be loaded ({type(exc).__name__}: {exc})")

    raise SourceUnavailable(
        f"source {source!r} could not load {hf_id!r}: "
        + "; ".join(tried)
        + ". Fix: pass the files with options.data_files / options.data_dir (or the config's "
        "data_dir), or run once with Hub access to fill the cache.",
        source=source,
        tried=tried,
        local_patterns=local_patterns,
    )


def _cap(rows: list[dict], options: dict[str, Any]) -> list[dict]:
    n = options.get("max_rows")
    if n is None:
        return rows
    if not isinstance(n, int) or n < 1:
        raise SourceError(f"max_rows must be a positive integer, got {n!r}")
    return rows[:n]


def require_fields(source: str, row: dict, fields: Sequence[str], origin: str) -> None:
    """Raise :class:`SourceError` if ``row`` lacks any of ``fields`` (names the dataset schema)."""
    missing = [f for f in fields if f not in row]
    if missing:
        raise SourceError(
            f"source {source!r}: rows from {origin} lack field(s) {missing}; "
            f"expected fields {list(fields)} (got {sorted(row)[:12]})"
        )

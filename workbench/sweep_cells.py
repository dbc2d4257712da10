"""The cells of a calibration sweep: configured question sources split by problem type and difficulty.

A sweep names its sources as an environment does: an environment config's ``sources:`` list
(``--config env.yaml``), a JSON list of ``{name, options}`` entries (``--spec``), or bare source names
(``--sources gsm8k,math500``, each with empty options). Every entry is loaded with its own options
(``reasoning_env.sources.load_source``: reasoning-gym generators, ``config``, ``difficulty`` and ``label``,
a jsonl file, GSM8K ...), and its questions are split into one cell per (entry, problem type,
difficulty): the unit a table row and a fitted curve describe.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Cell", "build_cells", "load_specs", "select_questions"]


@dataclass(frozen=True)
class Cell:
    """One sweep cell.

    Attributes:
        name: Unique label, ``"<problem type>@d<difficulty>"`` (``#<entry>`` added where two entries share it).
        entry: Index of the source entry it came from.
        source: The entry's source name.
        options: The entry's options (as configured).
        problem_type: The questions' problem type.
        difficulty: Their difficulty label (None when unlabelled).
        questions: Every question of the cell, in the source's order.
    """

    name: str
    entry: int
    source: str
    options: dict
    problem_type: str
    difficulty: Any
    questions: tuple


def load_specs(*, config: str | None = None, spec: str | None = None, sources: str | None = None) -> tuple:
    """The source entries to sweep and the data folder: ``(specs, data_dir)``.

    Args:
        config: An environment config YAML; its ``sources`` and ``data_dir`` are used.
        spec: A JSON file or inline JSON: a list of ``{"name": ..., "options": {...}}`` (or bare names), or an
            object with such a ``sources`` list.
        sources: Comma-separated source names, each with empty options.

    Returns:
        ``([(name, options), ...], data_dir or None)``.

    Raises:
        ValueError: none or more than one of the three given, or a spec that is not such a list.
        reasoning_env.errors.ConfigError: the config file does not load.
    """
    given = [x for x in (config, spec, sources) if x]
    if len(given) != 1:
        raise ValueError("name the sources one way: --config env.yaml, --spec JSON, or --sources a,b")
    if config:
        from reasoning_env.config import EnvConfig

        cfg = EnvConfig.from_yaml(config)
        return [(s.name, dict(s.options)) for s in cfg.sources], cfg.data_dir
    if spec:
        path = Path(spec)
        text = path.read_text(encoding="utf-8") if not spec.lstrip().startswith(("[", "{")) else spec
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--spec is not JSON ({exc}): give a list of {{name, options}} entries") from None
        data = data.get("sources") if isinstance(data, dict) else data
        if not isinstance(data, list) or not data:
            raise ValueError("--spec must be a non-empty list of {name, options} entries (or {sources: [...]})")
        out = []
        for item in data:
            if isinstance(item, str):
                out.append((item, {}))
            elif isinstance(item, dict) and isinstance(item.get("name"), str):
                extra = sorted(set(item) - {"name", "options"})
                if extra or not isinstance(item.get("options", {}), dict):
                    raise ValueError(f"--spec entry {item!r}: only 'name' and an 'options' mapping are allowed")
                out.append((item["name"], dict(item.get("options") or {})))
            else:
                raise ValueError(f"--spec entry {item!r} is neither a source name nor {{name, options}}")
        return out, None
    return [(n.strip(), {}) for n in sources.split(",") if n.strip()], None


def build_cells(specs: Iterable[tuple[str, dict]], ctx: Any, *, by: str = "type") -> list[Cell]:
    """Load every entry with its options and split it into cells (entry order, then type, then difficulty).

    ``by="entry"`` keeps each entry whole (one cell named after its source; problem type and difficulty
    then describe its first question only): the sweep of earlier versions, one cell per source.

    Raises:
        reasoning_env.sources.SourceError / SourceUnavailable: an entry does not load.
    """
    from reasoning_env.sources import load_source

    cells: list[Cell] = []
    for i, (name, options) in enumerate(specs):
        groups: dict[tuple, list] = {}
        loaded = load_source(name, dict(options), ctx)
        if by == "entry":
            if loaded:
                first = loaded[0]
                cells.append(Cell(name, i, name, dict(options), first.problem_type, first.difficulty, tuple(loaded)))
            continue
        for q in loaded:
            groups.setdefault((q.problem_type, q.difficulty), []).append(q)
        for (ptype, diff), qs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] is None, kv[0][1] or 0)):
            label = ptype + (f"@d{diff}" if diff is not None else "")
            cells.append(Cell(label, i, name, dict(options), ptype, diff, tuple(qs)))
    names = [c.name for c in cells]
    return [
        Cell(f"{c.name}#{c.entry}", c.entry, c.source, c.options, c.problem_type, c.difficulty, c.questions)
        if names.count(c.name) > 1
        else c
        for c in cells
    ]


def select_questions(questions: Sequence, n: int, seed: int) -> list:
    """``n`` questions drawn with ``seed``; when they carry difficulties, spread evenly over the levels."""
    rng = random.Random(seed)
    levels: dict[Any, list] = {}
    for q in questions:
        levels.setdefault(q.difficulty, []).append(q)
    if len(levels) == 1:
        return rng.sample(list(questions), min(n, len(questions)))
    keys = sorted(levels, key=lambda d: (d is None, d))
    for k in keys:
        rng.shuffle(levels[k])
    out: list = []
    i = 0
    while len(out) < n and any(levels[k] for k in keys):
        k = keys[i % len(keys)]
        if levels[k]:
            out.append(levels[k].pop())
        i += 1
    return out

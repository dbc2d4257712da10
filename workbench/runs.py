"""Run folders: what evaluation and training write, and what the analysis, reward lab and UI read.

Layout of ``<run_dir>/`` (schema version 1):

- ``run.json``: ``{"schema_version": 1, "kind": "evaluation"|"training", "run_id", "created_at",
  "command", "seed", "n_episodes", "policies", "versions", ...}``
- ``config.yaml``: the :class:`~reasoning_env.config.EnvConfig` the episodes ran with.
- ``trajectories.parquet`` and ``trajectories.jsonl``: one row per step,
  columns :data:`reasoning_env.records.STEP_COLUMNS` (``reward_<component>`` flattened).
- ``episodes.parquet``: one row per episode, columns :data:`reasoning_env.records.EPISODE_COLUMNS`.
- ``summary.csv``: one row per policy (evaluation) -- written by ``workbench.evaluate``.
- ``metrics.jsonl``: training only, one JSON object per logged trainer step
  (``step``, ``reward``, ``reward_std``, ``accuracy``, ``tokens_per_question``, ``episode_length``, ...;
  ``training.grpo_train`` also writes every other numeric value TRL logs: ``loss``, ``kl`` (when
  ``beta > 0``), ``entropy``, ``grad_norm``, ``ran_dry``, ``utilisation``, ``env/<component>``,
  ``rewards/environment_reward/mean``, ``completions/mean_length``, ...; ``null`` when not finite).
- Training runs only: ``trajectories`` and ``episodes`` carry an extra ``train_step`` column (the
  optimizer step whose rollouts they are; ``episode`` is the GRPO group index, ``member`` the
  rollout within it), and ``episodes.jsonl`` holds one JSON object per played episode, appended
  as it is played (seed, group, member, reward and components, tokens, turn caps, steps).
- ``report.html``: evaluation report with Plotly figures.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Optional, Union

import pandas as pd

from reasoning_env.config import EnvConfig
from reasoning_env.records import EPISODE_COLUMNS, STEP_COLUMNS, EpisodeRow, StepRow

SCHEMA_VERSION = 1


class RunFolderError(ValueError):
    """A folder is not a readable run folder; the message says what is missing."""


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for pkg in ("reasoning-economics-workbench", "transformers", "tokenizers", "math-verify", "openenv", "trl", "torch"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


class RunWriter:
    """Collects step and episode rows and writes a run folder.

    Args:
        run_dir: Folder to create (parents too). Existing run files in it are overwritten.
        kind: ``"evaluation"`` or ``"training"``.
        config: The environment config of the run.
        meta: Extra ``run.json`` fields (seed, n_episodes, policies...).
    """

    def __init__(self, run_dir: Union[str, Path], *, kind: str, config: EnvConfig, meta: Optional[dict] = None) -> None:
        if kind not in ("evaluation", "training"):
            raise ValueError(f"kind must be 'evaluation' or 'training', got {kind!r}")
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.kind = kind
        self.config = config
        self.meta = dict(meta or {})
        self.run_id = self.meta.get("run_id") or self.run_dir.name
        self.steps: list[StepRow] = []
        self.episodes: list[EpisodeRow] = []

    def add_steps(self, rows: Iterable[StepRow]) -> None:
        """Append step rows."""
        self.steps.extend(rows)

    def add_episode(self, row: EpisodeRow) -> None:
        """Append one episode row."""
        self.episodes.append(row)

    def steps_frame(self) -> pd.DataFrame:
        """The step rows as a frame with :data:`STEP_COLUMNS` first."""
        return _frame([r.to_flat() for r in self.steps], STEP_COLUMNS)

    def episodes_frame(self) -> pd.DataFrame:
        """The episode rows as a frame with :data:`EPISODE_COLUMNS` first."""
        return _frame([r.to_flat() for r in self.episodes], EPISODE_COLUMNS)

    def write(self) -> Path:
        """Write ``run.json``, ``config.yaml``, trajectories and episodes. Returns the folder."""
        meta = {
            "schema_version": SCHEMA_VERSION,
            "kind": self.kind,
            "run_id": self.run_id,
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]) if sys.argv else "",
            "versions": _versions(),
            **self.meta,
        }
        (self.run_dir / "run.json").write_text(json.dumps(meta, indent=2, default=str), encoding="utf-8")
        self.config.to_yaml(self.run_dir / "config.yaml")
        steps = self.steps_frame()
        steps.to_parquet(self.run_dir / "trajectories.parquet", index=False)
        steps.to_json(self.run_dir / "trajectories.jsonl", orient="records", lines=True, force_ascii=False)
        self.episodes_frame().to_parquet(self.run_dir / "episodes.parquet", index=False)
        return self.run_dir


def _frame(records: list[dict], columns: tuple[str, ...]) -> pd.DataFrame:
    df = pd.DataFrame.from_records(records)
    if df.empty:
        return pd.DataFrame(columns=list(columns))
    ordered = [c for c in columns if c in df.columns] + [c for c in df.columns if c not in columns]
    return df[ordered]


@dataclass
class Run:
    """A loaded run folder.

    Attributes:
        path: The folder. meta: ``run.json``. config: the EnvConfig (``None`` if absent/invalid).
        steps: one row per step. episodes: one row per episode. summary: ``summary.csv`` or ``None``.
        metrics: ``metrics.jsonl`` rows (training) or ``None``.
    """

    path: Path
    meta: dict
    config: Optional[EnvConfig]
    steps: pd.DataFrame
    episodes: pd.DataFrame
    summary: Optional[pd.DataFrame] = None
    metrics: Optional[pd.DataFrame] = None
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """Display name: ``run_id`` from ``run.json`` or the folder name."""
        return str(self.meta.get("run_id") or self.path.name)


def load_run(path: Union[str, Path]) -> Run:
    """Read a run folder.

    Raises:
        RunFolderError: the folder or its ``run.json`` is missing, or it holds neither
            trajectories nor metrics.
    """
    p = Path(path)
    if not p.is_dir():
        raise RunFolderError(f"{str(p)!r} is not a folder")
    meta_path = p / "run.json"
    if not meta_path.is_file():
        raise RunFolderError(f"{str(p)!r} has no run.json: not a run folder (written by workbench.evaluate or training.grpo_train)")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    notes: list[str] = []
    config = None
    if (p / "config.yaml").is_file():
        try:
            config = EnvConfig.from_yaml(p / "config.yaml")
        except Exception as exc:  # a config written by a newer version
            notes.append(f"config.yaml not loaded: {exc}")
    steps = pd.read_parquet(p / "trajectories.parquet") if (p / "trajectories.parquet").is_file() else pd.DataFrame(columns=list(STEP_COLUMNS))
    episodes = pd.read_parquet(p / "episodes.parquet") if (p / "episodes.parquet").is_file() else pd.DataFrame(columns=list(EPISODE_COLUMNS))
    summary = pd.read_csv(p / "summary.csv") if (p / "summary.csv").is_file() else None
    metrics = pd.read_json(p / "metrics.jsonl", lines=True) if (p / "metrics.jsonl").is_file() and (p / "metrics.jsonl").stat().st_size else None
    if steps.empty and metrics is None:
        raise RunFolderError(f"{str(p)!r} holds neither trajectories.parquet nor metrics.jsonl")
    return Run(path=p, meta=meta, config=config, steps=steps, episodes=episodes, summary=summary, metrics=metrics, notes=notes)

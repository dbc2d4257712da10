"""Training logs in the run-folder format the workbench reads (``workbench.runs``).

A training run folder holds, besides the trainer's own checkpoints:

- ``run.json`` (``kind: "training"``), ``config.yaml``, ``trajectories.parquet`` / ``.jsonl`` and
  ``episodes.parquet``: written by :class:`TrainingRunWriter` (a ``workbench.runs.RunWriter``) at
  every checkpoint save and at the end; step and episode rows carry ``group``/``member`` (GRPO
  groups) and an extra ``train_step`` column (the optimizer step whose rollouts they are).
- ``episodes.jsonl`` and ``trajectories.jsonl``: one JSON object per played episode / step,
  appended as soon as it is played (:meth:`TrainingRunWriter.add_trace`), so a crashed run keeps
  its rollouts (``trajectories.jsonl`` is rewritten whole at each save). With several processes,
  process ``k > 0`` writes ``episodes.rank<k>.jsonl`` / ``trajectories.rank<k>.jsonl`` and the
  parquet files hold the main process's episodes.
- ``metrics.jsonl``: one JSON object per logged trainer step (:class:`MetricsJsonlCallback`).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from reasoning_env.config import EnvConfig
from workbench.runs import RunWriter

#: Keys every metrics.jsonl row has (``None`` when the trainer did not log them).
METRIC_KEYS = ("step", "reward", "reward_std", "accuracy", "tokens_per_question", "episode_length")


class TrainingRunWriter(RunWriter):
    """A :class:`~workbench.runs.RunWriter` for training: adds ``train_step`` columns and the
    streaming ``episodes.jsonl``.

    Args:
        run_dir: The output folder.
        config: The environment config the episodes ran with.
        meta: Extra ``run.json`` fields.
        episodes_log: File name of the per-episode JSONL log (``None`` = no log).
    """

    def __init__(
        self,
        run_dir: str | Path,
        *,
        config: EnvConfig,
        meta: dict | None = None,
        episodes_log: str | None = "episodes.jsonl",
    ) -> None:
        super().__init__(run_dir, kind="training", config=config, meta=meta)
        self.step_train_steps: list[int] = []
        self.episode_train_steps: list[int] = []
        self.episodes_log = self.run_dir / episodes_log if episodes_log else None
        #: Step rows appended as episodes are played (rewritten whole, from the parquet rows, by :meth:`write`).
        self.trajectories_log = self.run_dir / "trajectories.jsonl" if episodes_log else None

    def use_rank(self, rank: int) -> None:
        """Process ``rank > 0`` of several: stream to ``episodes.rank<k>.jsonl`` and
        ``trajectories.rank<k>.jsonl`` (the parquet files hold the main process's episodes)."""
        if rank > 0:
            if self.episodes_log is not None:
                self.episodes_log = self.episodes_log.with_name(f"episodes.rank{rank}.jsonl")
            if self.trajectories_log is not None:
                self.trajectories_log = self.trajectories_log.with_name(f"trajectories.rank{rank}.jsonl")

    def add_trace(self, trace: Any, train_step: int, *, mode: str = "train") -> None:
        """Record one :class:`~training.rollout.EpisodeTrace` (rows kept for the parquet files,
        its summary appended to ``episodes.jsonl``)."""
        self.add_steps(trace.steps)
        self.step_train_steps += [int(train_step)] * len(trace.steps)
        if self.trajectories_log is not None and trace.steps:
            with open(self.trajectories_log, "a", encoding="utf-8") as fh:
                for s in trace.steps:
                    fh.write(json.dumps({**s.to_flat(), "train_step": int(train_step)}, default=_json_default) + "\n")
        row = trace.episode_row()
        if row is not None:
            self.add_episode(row)
            self.episode_train_steps.append(int(train_step))
        self.log_episode({"train_step": int(train_step), "mode": mode, "time": time.time(), **trace.summary()})

    def log_episode(self, record: dict) -> None:
        """Append one JSON line to ``episodes.jsonl``."""
        if self.episodes_log is None:
            return
        with open(self.episodes_log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, default=_json_default) + "\n")

    def steps_frame(self):
        """The base class's step rows plus ``train_step`` (the optimizer step that played each row), after
        the rows an earlier process of a resumed run kept (:meth:`resume`)."""
        df = super().steps_frame()
        if len(df) == len(self.step_train_steps) and len(df):
            df["train_step"] = self.step_train_steps
        return _after(getattr(self, "_prior_steps", None), df)

    def episodes_frame(self):
        """The base class's episode rows plus ``train_step`` (the optimizer step that played each), after
        the rows an earlier process of a resumed run kept (:meth:`resume`)."""
        df = super().episodes_frame()
        if len(df) == len(self.episode_train_steps) and len(df):
            df["train_step"] = self.episode_train_steps
        return _after(getattr(self, "_prior_episodes", None), df)

    def resume(self, checkpoint_step: int) -> dict:
        """Continue a run stopped after its checkpoint at optimizer step ``checkpoint_step``: keep what the
        earlier process wrote for the steps the checkpoint holds and drop the rest, which the resumed
        process plays again. Rollouts recorded with ``train_step`` ``k`` fed step ``k + 1``, so rows with
        ``train_step < checkpoint_step`` stay; ``metrics.jsonl`` / ``evaluations.jsonl`` rows with
        ``step <= checkpoint_step`` stay.

        Returns:
            How many rows of each file were kept.
        """
        import pandas as pd

        kept: dict[str, int] = {}
        for name, attr in (("trajectories.parquet", "_prior_steps"), ("episodes.parquet", "_prior_episodes")):
            path = self.run_dir / name
            if path.is_file():
                df = pd.read_parquet(path)
                if "train_step" in df.columns:
                    df = df[df["train_step"] < checkpoint_step].reset_index(drop=True)
                setattr(self, attr, df)
                kept[name] = len(df)
        for name, key, keep in (
            ("metrics.jsonl", "step", lambda v: v <= checkpoint_step),
            ("evaluations.jsonl", "step", lambda v: v <= checkpoint_step),
            ("episodes.jsonl", "train_step", lambda v: v < checkpoint_step),
            ("trajectories.jsonl", "train_step", lambda v: v < checkpoint_step),
            ("eval_episodes.jsonl", "train_step", lambda v: v <= checkpoint_step),
        ):
            path = self.run_dir / name
            if not path.is_file():
                continue
            lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
            good = []
            for ln in lines:
                try:
                    value = json.loads(ln).get(key)
                except ValueError:
                    continue  # a line cut by the stop
                if value is None or keep(int(value)):
                    good.append(ln)
            path.write_text("".join(ln + "\n" for ln in good), encoding="utf-8")
            kept[name] = len(good)
        # every earlier process's resume and command stay on record (a resumed run may change flags, e.g. dtype)
        before: dict = {}
        run_json = self.run_dir / "run.json"
        if run_json.is_file():
            try:
                before = json.loads(run_json.read_text(encoding="utf-8"))
            except ValueError:
                before = {}
        first = before.get("first_command") or before.get("command")
        if first:
            self.meta.setdefault("first_command", first)
        command = self.meta.get("command")
        if not command and sys.argv:
            command = " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]])
        entry = {
            "from_step": int(checkpoint_step),
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "kept": kept,
            "command": command,
            "code": self.meta.get("code"),
        }
        self.meta["resumed"] = [*(before.get("resumed") or []), entry]
        return kept

    def write(self) -> Path:
        """Write ``run.json`` (with ``n_episodes`` updated), config and parquet files."""
        prior = getattr(self, "_prior_episodes", None)
        self.meta["n_episodes"] = len(self.episodes) + (len(prior) if prior is not None else 0)
        return super().write()


def _after(prior: Any, df: Any) -> Any:
    """``prior`` rows then ``df`` rows (``df`` alone when there is no prior frame)."""
    if prior is None or not len(prior):
        return df
    import pandas as pd

    return pd.concat([prior, df], ignore_index=True) if len(df) else prior.copy()


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    return str(obj)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def code_revision(root: str | Path | None = None) -> dict | None:
    """The project's source revision a process runs (``run.json``'s ``code``, and each resume's): the git commit
    of the checkout holding this package and whether tracked files differ from it; ``None`` outside a git
    checkout or without git (an installed package)."""
    import subprocess

    where = Path(root) if root is not None else Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": bool(status.strip())} if commit else None


def metrics_row(step: int, logs: dict) -> dict:
    """A ``metrics.jsonl`` row from a trainer ``logs`` dict: :data:`METRIC_KEYS` first (the
    workbench's names), then every other numeric value TRL logged (``loss``, ``kl``,
    ``entropy``, ``rewards/environment_reward/mean``, ``completions/mean_length``...)."""
    row: dict = {"step": int(step)}
    for key in METRIC_KEYS[1:]:
        row[key] = _clean(logs.get(key))
    for key, value in logs.items():
        if key in row:
            continue
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            row[key] = _clean(float(value) if isinstance(value, float) else value)
    return row


def make_metrics_callback(path: str | Path, on_save: Any | None = None):
    """A ``transformers.TrainerCallback`` that appends one :func:`metrics_row` per training log
    (logs holding ``reward``) to ``path`` on the main process, and calls ``on_save()`` after each
    checkpoint save and at the end of training (to rewrite the run folder)."""
    from transformers import TrainerCallback

    class MetricsJsonlCallback(TrainerCallback):
        def __init__(self) -> None:
            self.path = Path(path)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs or "reward" not in logs:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(metrics_row(state.global_step, logs)) + "\n")

        def on_save(self, args, state, control, **kwargs):
            if on_save is not None and state.is_world_process_zero:
                on_save()

        def on_train_end(self, args, state, control, **kwargs):
            if on_save is not None and state.is_world_process_zero:
                on_save()

    return MetricsJsonlCallback()

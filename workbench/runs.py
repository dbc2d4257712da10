"""Run folders: what evaluation and training write, and what the analysis, reward lab and UI read.

Layout of ``<run_dir>/`` (schema version 1):

- ``run.json``: ``{"schema_version": 1, "kind": "evaluation"|"training"|"play", "run_id", "created_at",
  "command", "seed", "n_episodes", "policies", "versions", ...}``. Evaluation adds
  ``episode_seeds`` (list, episode i's seed), ``budget_mode``, ``budget_note``, ``tokenizer_name``,
  ``sources_used``, ``curves`` (their source), ``server_url``, ``workers``, ``wall_s`` and
  ``notes`` (warnings such as a tokenizer fallback); ``policies`` is a list of
  ``{"name", "kind", "class", ...settings}``.
- ``config.yaml``: the :class:`~reasoning_env.config.EnvConfig` the episodes ran with.
- ``trajectories.parquet`` and ``trajectories.jsonl``: one row per step, columns
  :data:`reasoning_env.records.STEP_COLUMNS` (``reward_<component>`` flattened), then any extra
  columns a writer adds (:meth:`RunWriter.add_steps` ``extras``). Evaluation adds
  (:data:`EVAL_STEP_EXTRAS`): ``kind`` (policy kind), ``graded_text`` (``response``,
  ``grading_response`` or ``paid_prefix``), ``expected_correct`` (the solver curve's probability
  of a correct answer at the charged tokens: the basis of the regret; 0 for no tokens), and
  ``policy_<key>`` columns from the policy's diagnostics (``policy_target_tokens``: length aimed
  for; ``policy_tokens``: tokens the generator/endpoint reported; ``policy_prompt_tokens``;
  ``policy_max_tokens``: the generation cap sent; ``policy_finish_reason``; ``policy_p_correct`` /
  ``policy_u`` / ``policy_intended_correct``: the simulated solver's probability, seeded draw and
  decision; ``policy_attempts``: HTTP attempts), present only for policies that report them; and
  the condition of the episode (:data:`EVAL_CONDITION_EXTRAS`): ``base_seed`` (the evaluation
  seed), ``budget_ratio`` (the budget formula's ratio; NaN for a fixed budget) and, in a
  calibration sweep, ``token_cap`` (the per-question cap).
- ``episodes.parquet``: one row per episode, columns :data:`reasoning_env.records.EPISODE_COLUMNS`,
  then extras; evaluation adds (:data:`EVAL_EPISODE_EXTRAS`) ``kind``, ``unanswered``,
  ``expected_correct`` (sum of the steps'), ``oracle_expected_correct`` (the oracle allocation's
  expected correct answers on the same questions and budget) and ``regret``
  (``oracle_expected_correct - expected_correct``; NaN when the questions are unknown, e.g. runs
  against a remote server).
- ``summary.csv``: one row per policy and sweep condition (evaluation) -- written by
  ``workbench.evaluate``; columns :data:`workbench.analysis.SUMMARY_COLUMNS` (every rate and mean
  with its 95% bootstrap interval over episodes, ``<metric>_ci_low`` / ``_ci_high``, and
  ``on_frontier``) then the timing columns ``wall_s`` and ``latency_s_mean`` (seconds; the only
  columns that differ between reruns with the same seed).
- ``comparisons.csv``: every pair of policies on their common episodes, per condition and metric
  (:data:`workbench.analysis.COMPARISON_COLUMNS`: difference, paired interval, permutation
  p-value and its Holm adjustment, ``distinguishable``).
- ``seeds.csv``: runs with several evaluation seeds: per seed, condition and policy, accuracy,
  reward, regret and the reward rank.
- ``fitted_curves.json``: calibration sweeps (``--caps``): the solver curves fitted to the run
  (:mod:`workbench.calibration`), with standard errors and goodness of fit under ``fits``.
- ``curves.json``: evaluation: the simulated solver's curves used for the simulated policies and
  the regret (:meth:`reasoning_env.policies.SolverCurves.to_dict`).
- ``metrics.jsonl``: training only, one JSON object per logged trainer step
  (``step``, ``reward``, ``reward_std``, ``accuracy``, ``tokens_per_question``, ``episode_length``, ...;
  ``training.grpo_train`` also writes every other numeric value TRL logs: ``loss``, ``kl`` (when
  ``beta > 0``), ``entropy``, ``grad_norm``, ``ran_dry``, ``utilisation``, ``env/<component>``,
  ``rewards/environment_reward/mean``, ``completions/mean_length``, ...; ``null`` when not finite).
- Training runs only: ``trajectories`` and ``episodes`` carry an extra ``train_step`` column (the
  optimizer step whose rollouts they are; ``episode`` is the GRPO group index, ``member`` the
  rollout within it), and ``episodes.jsonl`` holds one JSON object per played episode, appended
  as it is played (seed, group, member, reward and components, tokens, turn caps, steps).
- ``report.html``: evaluation report with Plotly figures (self-contained, works offline).

Readers must tolerate extra columns and missing optional files.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import socket
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from reasoning_env.config import ConfigError, EnvConfig
from reasoning_env.errors import ReasoningEconomicsError
from reasoning_env.records import EPISODE_COLUMNS, STEP_COLUMNS, EpisodeRow, StepRow

SCHEMA_VERSION = 1

#: Extra step columns written by ``workbench.evaluate`` (plus ``policy_<key>`` diagnostics).
EVAL_STEP_EXTRAS = ("kind", "graded_text", "expected_correct")
#: Extra episode columns written by ``workbench.evaluate``.
EVAL_EPISODE_EXTRAS = ("kind", "unanswered", "expected_correct", "oracle_expected_correct", "regret")
#: Condition columns of evaluation rows (steps and episodes); ``token_cap`` only in calibration sweeps.
EVAL_CONDITION_EXTRAS = ("base_seed", "budget_ratio")
#: ``run.json`` kinds: what wrote the folder, and how pickers and figures name it.
RUN_KINDS = {"evaluation": "evaluation", "training": "training", "play": "Play episode"}


def run_kind(meta: dict) -> str:
    """The kind of a run from its ``run.json``: ``"evaluation"``, ``"training"``, ``"play"`` (an
    episode saved from the workbench's Play tab; folders saved before Play wrote its own kind say
    ``"evaluation"`` with ``source: "workbench play tab"``) or ``"?"``."""
    kind = str(meta.get("kind") or "?")
    if kind == "evaluation" and meta.get("source") == "workbench play tab":
        return "play"
    return kind if kind in RUN_KINDS else "?"


class RunFolderError(ReasoningEconomicsError, ValueError):
    """A folder is not a readable run folder; the message says what is missing."""


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for pkg in (
        "reasoning-economics-workbench",
        "transformers",
        "tokenizers",
        "math-verify",
        "openenv",
        "trl",
        "torch",
    ):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


#: Every file a writer of this project may leave in a run folder (``--overwrite`` removes them all,
#: so no file of the old run is left beside the new one).
RUN_FILES = (
    "run.json",
    "config.yaml",
    "trajectories.parquet",
    "trajectories.jsonl",
    "episodes.parquet",
    "episodes.jsonl",
    "summary.csv",
    "comparisons.csv",
    "seeds.csv",
    "curves.json",
    "fitted_curves.json",
    "metrics.jsonl",
    "group_rewards.jsonl",
    "report.html",
)


def fresh_run_dir(parent: str | Path, prefix: str, *, stamp: str | None = None) -> Path:
    """Create and return a new folder ``<parent>/<prefix>-<stamp>`` (``stamp`` default: the local
    time, ``YYYYmmdd-HHMMSS``), or ``...-<stamp>-2``, ``-3``, ... when that name is taken: two runs
    started in the same second (by two processes too: the folder is created atomically) never share one.

    Raises:
        RunFolderError: ``parent`` cannot hold folders (a file is in the way, no permission).
    """
    stamp = stamp or datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path(parent) / f"{prefix}-{stamp}"
    for n in range(1, 10_000):
        path = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.mkdir()
        except FileExistsError:
            if path.parent.is_dir():
                continue
            raise RunFolderError(f"cannot create run folder {str(path)!r}: a file is in the way") from None
        except (NotADirectoryError, PermissionError) as exc:
            raise RunFolderError(f"cannot create run folder {str(path)!r}: {exc.strerror}") from None
        return path
    raise RunFolderError(f"too many run folders named {str(base)!r}-N; choose a folder with --out")  # pragma: no cover


#: The claim file of a run folder: created atomically (``O_EXCL``) before a run is played and
#: removed when it is written, so that two runs never write into one folder at once.
CLAIM_FILE = ".claim"


@contextmanager
def claim_run_dir(run_dir: str | Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Claim ``run_dir`` for one run, for as long as the ``with`` block lasts; yields it as a Path.

    The claim is the file :data:`CLAIM_FILE` (holding the claimer's process id), created with
    ``O_EXCL``, so of two runs racing for one folder (two processes or two threads) exactly one
    gets it; it is removed when the block ends, however it ends. Only once claimed is the folder
    checked: a folder that does not exist yet (it is created), or holds no ``run.json``, is fine
    (other files in it are kept); one that holds a run is refused unless ``overwrite`` (then call
    :func:`clear_run_files` just before writing, so that none of the old run is left beside the new).
    A folder created here that is still empty when the block ends (the run failed before writing
    anything) is removed.

    Raises:
        RunFolderError: another run holds the claim (with ``overwrite`` too: two runs would
            interleave their files), the folder already holds a run and ``overwrite`` is False, or
            the folder cannot be created. A claim file left by a run that was killed (``SIGKILL``,
            power loss) is not taken over: the message names it and says to remove it.
    """
    created = not Path(run_dir).expanduser().exists()
    path = make_run_dir(run_dir)
    claim = path / CLAIM_FILE
    try:
        fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        raise RunFolderError(_claimed_message(path, claim)) from None
    except OSError as exc:
        raise RunFolderError(f"cannot claim run folder {str(path)!r}: {exc.strerror}; choose another --out") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"{os.getpid()} {socket.gethostname()}\n")
        if (path / "run.json").exists() and not overwrite:
            raise RunFolderError(
                f"run folder {str(path)!r} already holds a run (run.json); choose another --out, "
                "or pass --overwrite to replace that run"
            )
        yield path
    finally:
        claim.unlink(missing_ok=True)
        if created:  # a run that failed before writing anything leaves no empty folder behind
            with contextlib.suppress(OSError):  # not empty (something was written), or already gone
                path.rmdir()


def _claimed_message(path: Path, claim: Path) -> str:
    try:
        words = claim.read_text(encoding="utf-8").split()
        pid, host = int(words[0]), (words[1] if len(words) > 1 else None)
    except (OSError, ValueError, IndexError):
        pid, host = None, None
    if pid and host == socket.gethostname() and not _alive(pid):
        return (
            f"run folder {str(path)!r} holds a claim file ({str(claim)!r}) left by process {pid} of this machine, "
            "which is no longer running (that run was killed before it could remove it): remove the claim file "
            "and run again (a stopped benchmark continues with --resume)"
        )
    who = f"process {pid}" + (f" on {host}" if host else "") if pid else "another process"
    return (
        f"run folder {str(path)!r} is being written by another run now ({who}, claim file {str(claim)!r}); "
        "choose another --out, or wait for that run and pass --overwrite to replace it "
        "(if no run is writing there, remove the claim file)"
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def make_run_dir(run_dir: str | Path) -> Path:
    """Create ``run_dir`` (parents too; an existing folder is fine) and return it as a Path.

    Raises:
        RunFolderError: a file is in the way, or no permission.
    """
    path = Path(run_dir)
    return _make_folder(path, f"cannot create run folder {str(path)!r}", "choose another folder")


def clear_run_files(run_dir: str | Path) -> None:
    """Remove every file of :data:`RUN_FILES` from ``run_dir`` (other files are kept)."""
    for name in RUN_FILES:
        (Path(run_dir) / name).unlink(missing_ok=True)


def output_folder(out: str | Path, what: str, files: str) -> Path:
    """The folder ``out`` (given as ``--out``) that a command writes ``what`` (e.g. "the
    comparison") into, created; ``files`` names the files it writes (for the message).

    Raises:
        RunFolderError: ``out`` holds a run (``run.json``: its files would be mixed with, or
            replaced by, the command's), or cannot be created (a file is in the way, no permission);
            the message names ``--out`` and says to choose another folder.
    """
    path = Path(out)
    if (path / "run.json").exists():
        raise RunFolderError(
            f"--out {str(path)!r} holds a run: {what}'s {files} would be written into the run's folder; "
            "choose another folder"
        )
    return _make_folder(path, f"cannot write {what} to {str(path)!r}", "choose another --out (a folder)")


def _make_folder(path: Path, cannot: str, choose: str) -> Path:
    """``path`` created with its parents, or :class:`RunFolderError` ``"<cannot>: <why>; <choose>"``
    (a file is in the way, or no permission)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise RunFolderError(f"{cannot}: a file is in the way; {choose}") from None
    except PermissionError as exc:
        raise RunFolderError(f"{cannot}: {exc.strerror}; {choose}") from None
    return path


class RunWriter:
    """Collects step and episode rows and writes a run folder.

    Args:
        run_dir: Folder to create (parents too). Existing run files in it are overwritten.
        kind: ``"evaluation"``, ``"training"`` or ``"play"`` (:data:`RUN_KINDS`).
        config: The environment config of the run.
        meta: Extra ``run.json`` fields (seed, n_episodes, policies...).

    Raises:
        RunFolderError: the folder cannot be created (a file is in the way, no permission).
    """

    def __init__(self, run_dir: str | Path, *, kind: str, config: EnvConfig, meta: dict | None = None) -> None:
        if kind not in RUN_KINDS:
            raise ValueError(f"kind must be one of {', '.join(map(repr, RUN_KINDS))}, got {kind!r}")
        self.run_dir = make_run_dir(run_dir)
        self.kind = kind
        self.config = config
        self.meta = dict(meta or {})
        self.run_id = self.meta.get("run_id") or self.run_dir.name
        self.steps: list[StepRow] = []
        self.episodes: list[EpisodeRow] = []
        self.step_extras: list[dict] = []
        self.episode_extras: list[dict] = []

    def add_steps(self, rows: Iterable[StepRow], extras: Iterable[dict] | None = None) -> None:
        """Append step rows; ``extras`` (one dict per row) become extra columns.

        Raises:
            ValueError: ``extras`` does not have one dict per row, or reuses a standard column.
        """
        rows = list(rows)
        ex = [dict(e or {}) for e in extras] if extras is not None else [{} for _ in rows]
        if len(ex) != len(rows):
            raise ValueError(f"extras must hold one dict per step row ({len(rows)} rows, {len(ex)} extras)")
        for e in ex:
            clash = set(e) & set(STEP_COLUMNS)
            if clash:
                raise ValueError(f"extra step columns may not reuse standard columns: {sorted(clash)}")
        self.steps.extend(rows)
        self.step_extras.extend(ex)

    def add_episode(self, row: EpisodeRow, extras: dict | None = None) -> None:
        """Append one episode row; ``extras`` become extra columns.

        Raises:
            ValueError: ``extras`` reuses a standard column.
        """
        e = dict(extras or {})
        clash = set(e) & set(EPISODE_COLUMNS)
        if clash:
            raise ValueError(f"extra episode columns may not reuse standard columns: {sorted(clash)}")
        self.episodes.append(row)
        self.episode_extras.append(e)

    def steps_frame(self) -> pd.DataFrame:
        """The step rows as a frame with :data:`STEP_COLUMNS` first, extra columns after."""
        extras = self.step_extras if len(self.step_extras) == len(self.steps) else [{}] * len(self.steps)
        return _frame([{**r.to_flat(), **e} for r, e in zip(self.steps, extras)], STEP_COLUMNS)

    def episodes_frame(self) -> pd.DataFrame:
        """The episode rows as a frame with :data:`EPISODE_COLUMNS` first, extra columns after."""
        extras = self.episode_extras if len(self.episode_extras) == len(self.episodes) else [{}] * len(self.episodes)
        return _frame([{**r.to_flat(), **e} for r, e in zip(self.episodes, extras)], EPISODE_COLUMNS)

    def write_summary(self, summary: pd.DataFrame) -> Path:
        """Write ``summary.csv`` (one row per policy). Returns its path."""
        path = self.run_dir / "summary.csv"
        summary.to_csv(path, index=False)
        return path

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
    df = df[ordered]
    # A component a row did not pay (another reward's, or the episode bonus before the end) is 0, not missing.
    reward_cols = [c for c in df.columns if c.startswith("reward_")]
    df[reward_cols] = df[reward_cols].fillna(0.0)
    return df


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
    config: EnvConfig | None
    steps: pd.DataFrame
    episodes: pd.DataFrame
    summary: pd.DataFrame | None = None
    metrics: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """Display name: ``run_id`` from ``run.json`` or the folder name."""
        return str(self.meta.get("run_id") or self.path.name)

    @property
    def kind(self) -> str:
        """:func:`run_kind` of ``run.json``: ``"evaluation"``, ``"training"``, ``"play"`` or ``"?"``."""
        return run_kind(self.meta)


def _read_table(folder: Path, name: str, read: Any, default: Any) -> Any:
    """``read(folder / name)``, or ``default`` when the file is absent.

    Raises:
        RunFolderError: the file exists but cannot be read (damaged, truncated, still being written).
    """
    path = folder / name
    if not path.is_file():
        return default
    try:
        return read(path)
    except (ValueError, OSError) as exc:  # pyarrow's ArrowInvalid and pandas' parser errors are ValueErrors
        raise RunFolderError(
            f"{name} cannot be read in {str(folder)!r} ({type(exc).__name__}: {str(exc)[:200]}): "
            "the run folder is damaged or still being written; re-run it or remove that file"
        ) from None


def load_run(path: str | Path) -> Run:
    """Read a run folder.

    Raises:
        RunFolderError: the folder or its ``run.json`` is missing, a file of it cannot be read
            (damaged JSON or Parquet), or it holds neither trajectories nor metrics.
    """
    p = Path(path)
    if not p.is_dir():
        raise RunFolderError(f"{str(p)!r} is not a folder")
    meta_path = p / "run.json"
    if not meta_path.is_file():
        raise RunFolderError(
            f"{str(p)!r} has no run.json: not a run folder (written by workbench.evaluate or training.grpo_train)"
        )
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise RunFolderError(
            f"run.json is not valid JSON in {str(p)!r} ({exc}): the run folder is damaged or still being written"
        ) from None
    if not isinstance(meta, dict):
        raise RunFolderError(f"run.json does not hold a JSON object in {str(p)!r}: not a run folder of this project")
    notes: list[str] = []
    config = None
    if (p / "config.yaml").is_file():
        try:
            config = EnvConfig.from_yaml(p / "config.yaml")
        except ConfigError as exc:  # a config written by a newer version
            notes.append(f"config.yaml not loaded: {exc}")
    steps = _read_table(p, "trajectories.parquet", pd.read_parquet, pd.DataFrame(columns=list(STEP_COLUMNS)))
    episodes = _read_table(p, "episodes.parquet", pd.read_parquet, pd.DataFrame(columns=list(EPISODE_COLUMNS)))
    summary = _read_table(p, "summary.csv", pd.read_csv, None)
    metrics = (
        _read_table(p, "metrics.jsonl", lambda f: pd.read_json(f, lines=True), None)
        if (p / "metrics.jsonl").is_file() and (p / "metrics.jsonl").stat().st_size
        else None
    )
    if steps.empty and metrics is None:
        raise RunFolderError(f"{str(p)!r} holds neither trajectories.parquet nor metrics.jsonl")
    return Run(
        path=p, meta=meta, config=config, steps=steps, episodes=episodes, summary=summary, metrics=metrics, notes=notes
    )

"""Playing one episode by hand or with a policy: the library behind the workbench's Play tab.

A :class:`PlaySession` owns one :class:`~reasoning_env.env.ReasoningEconomicsEnv` (one per
browser session in the app) and records what each step did, so that the UI is a thin layer:

    session = PlaySession()
    session.reset(PlaySettings(seed=7))                 # or parse_play_settings(...) from form fields
    session.step("Twelve minus five is 7. \\boxed{7}")   # a typed answer ("human")
    session.step_policy("sim_greedy")                    # or let a policy answer
    for item in session.stream_policy("llm_local", llm=...): ...  # a real model, streamed
    for result in session.run_iter("uniform"): ...       # ... to the end, one step at a time
    session.export()                                     # JSON-ready episode
    session.save_run("runs")                             # a run folder the Runs tab loads

Policies come from :func:`reasoning_env.policies.make_policy`; the simulated solver and the
oracle get the episode's questions (trusted, in-process) through
:func:`workbench.evaluation.episodes.make_episode_info`, like in evaluation, and a saved episode
gets the evaluation's extras (expected correctness, oracle, regret; :mod:`workbench.evaluation.extras`)
under the session's solver curves (``curves``: the defaults, or a calibrated file). A policy may take over in the
middle of an episode (it is reset with the episode's info when it first answers).

A real model answers through ``llm_local`` (any OpenAI-compatible server; by default the project's
vLLM CPU server on ``127.0.0.1:8001``): :meth:`PlaySession.stream_policy` yields a
:class:`StreamProgress` each time the server sends text, then the step's :class:`StepResult` (the
same step :meth:`PlaySession.step_policy` takes with the final text). :class:`LocalEngine` starts
vLLM's CPU engine for the app (one per process, stopped at exit). A saved run names the real model
and its engine in its provenance (:func:`workbench.evaluation.writer.provenance`).

Every user-facing failure (bad form values, an unknown tokenizer, a step before reset or after
the end, an unreachable LLM endpoint) raises :class:`PlayError` with a message meant for a person.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from reasoning_env.client import make_action
from reasoning_env.config import DEFAULT_TOKENIZER_NAME, MAX_TOTAL_BUDGET, ConfigError, EnvConfig
from reasoning_env.env import ReasoningEconomicsEnv
from reasoning_env.errors import ReasoningEconomicsError
from reasoning_env.models import ReasoningEconomicsObservation
from reasoning_env.policies import (
    DEFAULT_POLICIES,
    BasePolicy,
    PolicyError,
    PolicyOutput,
    SolverCurves,
    make_policy,
)
from reasoning_env.records import EpisodeRow, StepRow, episode_row_from_steps, step_row_from_observation
from reasoning_env.sources import SourceError, SourceUnavailable
from reasoning_env.tokenization import LoadedTokenizer, TokenizerLoadError
from workbench.evaluation.extras import BUDGET_MODES, budget_reset_kwargs, episode_extras, step_expected_correct

__all__ = [
    "BUDGET_MODES",
    "DEFAULT_LOCAL_BASE_URL",
    "HUMAN",
    "LocalEngine",
    "PlayError",
    "PlaySession",
    "PlaySettings",
    "StepResult",
    "StreamProgress",
    "TOKENIZER_CHOICES",
    "available_policies",
    "llm_settings",
    "local_engine",
    "local_model_defaults",
    "parse_play_settings",
    "token_spans",
]

#: Actor name of typed answers.
HUMAN = "human"
#: Tokenizers offered in the UI (others may be typed: a Hub id, a local folder when allowed).
TOKENIZER_CHOICES = (
    DEFAULT_TOKENIZER_NAME,
    "Qwen/Qwen2.5-7B-Instruct",
    "Qwen/Qwen3-4B",
    "embedded:qwen2.5",
    "embedded:qwen3",
)
#: Largest response accepted from the text box (characters), as a guard against pasted files.
MAX_RESPONSE_CHARS = 200_000
#: Largest number of questions per episode the Play tab accepts.
MAX_PLAY_QUESTIONS = 100
#: Where ``llm_local`` looks for a real model when ``BASELINE_LOCAL_BASE_URL`` is unset: the port
#: ``python -m reasoning_env.model_server`` serves on by default.
DEFAULT_LOCAL_BASE_URL = "http://127.0.0.1:8001/v1"


class PlayError(ReasoningEconomicsError, ValueError):
    """A user-facing problem with a Play action; the message says what is wrong and how to fix it."""


# ------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class PlaySettings:
    """What the Play tab's form sets for the next episode.

    Attributes:
        sources: Question sources (``reasoning_env.sources.available()`` names).
        budget_mode: ``"tokenizer_native"`` (``int(budget_ratio x tokens of the questions)``),
            ``"config"`` (``budget_ratio x num_questions x (min_tokens + max_tokens) / 2``) or
            ``"explicit"`` (``total_budget``).
        budget_ratio: The budget formulas' ratio (> 0).
        total_budget: The explicit budget (tokens; ``budget_mode="explicit"`` only).
        tokenizer_name: Counts the tokens (Hub id, local folder, or an embedded Qwen name).
        seed: Episode seed (``None``: a fresh one, reported after reset).
        hard_cap_mode: Hard cap (clip spend, stop when dry) or soft budget (overspend penalised).
        num_questions: Questions per episode.
        data_dir: Folder with local data files for the Hub-backed sources (``None``: none).
        own_file: Options of a ``jsonl`` source reading the user's own JSONL/JSON/CSV/parquet file
            (``data_files``, ``prompt_field``, ``answer_field``, optional ``answer_extraction``), played
            besides ``sources``; ``None``: none (see :func:`own_file_options`).
    """

    sources: tuple[str, ...] = ("metamathqa", "numina_tir")
    budget_mode: str = "tokenizer_native"
    budget_ratio: float = 4.0
    total_budget: int | None = None
    tokenizer_name: str = DEFAULT_TOKENIZER_NAME
    seed: int | None = None
    hard_cap_mode: bool = True
    num_questions: int = 10
    data_dir: str | None = None
    own_file: dict[str, str] | None = None


#: File types the Play tab's own-file field reads (the ``jsonl`` source's loaders).
OWN_FILE_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")


def own_file_options(
    path: Any, prompt_field: Any = None, answer_field: Any = None, answer_extraction: Any = None
) -> dict[str, str] | None:
    """The ``jsonl`` source options for the user's own question file, or ``None`` when ``path`` is blank.

    Args:
        path: A JSONL/JSON/CSV/parquet file.
        prompt_field: Column holding the question (blank: ``question``).
        answer_field: Column holding the answer (blank: ``answer``).
        answer_extraction: How to read the gold from it (blank: the field as is, refused when it
            holds worked solutions; see :mod:`reasoning_env.sources.hf_dataset`).

    Raises:
        PlayError: the file does not exist, has another type, or the options are invalid.
    """
    from reasoning_env.sources import validate_spec

    if _blank(path):
        return None
    file = os.path.expanduser(str(path).strip())
    if not os.path.isfile(file):
        raise PlayError(f"question file {str(path).strip()!r} does not exist (give the path of a JSONL or CSV file)")
    if not file.lower().endswith(OWN_FILE_SUFFIXES):
        raise PlayError(f"question file {file!r} must end in one of {', '.join(OWN_FILE_SUFFIXES)}")
    options = {
        "data_files": os.path.abspath(file),
        "prompt_field": "question" if _blank(prompt_field) else str(prompt_field).strip(),
        "answer_field": "answer" if _blank(answer_field) else str(answer_field).strip(),
    }
    how = "" if _blank(answer_extraction) else str(answer_extraction).strip()
    if how and how != "auto":
        options["answer_extraction"] = how
    try:
        validate_spec("jsonl", options)
    except SourceError as exc:
        raise PlayError(f"question file: {exc}") from None
    return options


def _blank(value: Any) -> bool:
    return (
        value is None
        or (isinstance(value, str) and not value.strip())
        or (isinstance(value, float) and math.isnan(value))
    )


def _shown(value: Any, most: int = 40) -> str:
    """``value`` quoted for an error message, cut to ``most`` characters (a 5,000-digit seed is
    not echoed whole)."""
    text = str(value)
    return repr(text if len(text) <= most else text[:most] + "...")


def _parse_int(value: Any, what: str, *, lo: int, hi: int) -> int:
    text = str(value).strip().replace(",", "").replace("_", "")
    try:
        number = float(text)
    except (ValueError, OverflowError):
        raise PlayError(f"{what} must be a whole number, got {_shown(value)}") from None
    if not math.isfinite(number) or number != int(number):
        raise PlayError(f"{what} must be a whole number between {lo:,} and {hi:,}, got {_shown(value)}")
    number = int(number)
    if not lo <= number <= hi:
        raise PlayError(f"{what} must be between {lo:,} and {hi:,}, got {_shown(f'{number:,}')}")
    return number


def _parse_bool(value: Any, what: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise PlayError(f"{what} must be true or false, got {_shown(value)}")


def parse_play_settings(
    sources: Sequence[str] | str | None = None,
    budget_mode: str | None = "tokenizer_native",
    budget_ratio: Any = 4.0,
    total_budget: Any = None,
    tokenizer_name: str | None = DEFAULT_TOKENIZER_NAME,
    seed: Any = None,
    hard_cap_mode: bool = True,
    num_questions: Any = 10,
    data_dir: str | None = None,
    own_file: dict[str, str] | None = None,
) -> PlaySettings:
    """Validate the Play form's raw values (strings or numbers, as a UI sends them).

    Args:
        sources: Source names (a list, or a comma-separated string); empty = the defaults (none
            when ``own_file`` is given).
        budget_mode: One of :data:`BUDGET_MODES`.
        budget_ratio: Positive number.
        total_budget: Whole number of tokens (1..100,000,000); required for ``"explicit"``.
        tokenizer_name: Non-empty name; blank = the default Qwen2.5 tokenizer.
        seed: Blank (fresh seed) or a whole number >= 0.
        num_questions: Whole number, 1..:data:`MAX_PLAY_QUESTIONS`.
        data_dir: Folder; blank = none.
        own_file: The user's own question file as :func:`own_file_options` returns it.

    Returns:
        The settings.

    Raises:
        PlayError: any value is invalid (the message names the field and the accepted values).
    """
    from reasoning_env.sources import available as available_sources

    if isinstance(sources, str):
        sources = [s.strip() for s in sources.split(",")]
    names = tuple(s for s in (sources or []) if s and str(s).strip())
    if not names and not own_file:
        names = PlaySettings.sources
    known = available_sources()
    unknown = [s for s in names if s not in known]
    if unknown:
        raise PlayError(f"unknown question source(s) {unknown}; available: {', '.join(known)}")
    mode = str(budget_mode or "tokenizer_native").strip()
    if mode not in BUDGET_MODES:
        raise PlayError(f"budget mode must be one of {list(BUDGET_MODES)}, got {budget_mode!r}")
    if _blank(budget_ratio):
        raise PlayError("budget ratio is empty: enter a positive number such as 4")
    try:
        ratio = float(str(budget_ratio).strip())
    except ValueError:
        raise PlayError(f"budget ratio must be a positive number, got {_shown(budget_ratio)}") from None
    if not math.isfinite(ratio) or ratio <= 0:
        raise PlayError(f"budget ratio must be a positive number, got {_shown(budget_ratio)}")
    budget = None
    if mode == "explicit":
        if _blank(total_budget):
            raise PlayError("budget mode 'explicit' needs a total budget: enter a whole number of tokens, e.g. 2000")
        budget = _parse_int(total_budget, "total budget (tokens)", lo=1, hi=MAX_TOTAL_BUDGET)
    tok = str(tokenizer_name or "").strip() or DEFAULT_TOKENIZER_NAME
    seed_value = None if _blank(seed) else _parse_int(seed, "seed", lo=0, hi=2**31 - 1)
    n_q = (
        10 if _blank(num_questions) else _parse_int(num_questions, "number of questions", lo=1, hi=MAX_PLAY_QUESTIONS)
    )
    folder = None if _blank(data_dir) else str(data_dir).strip()
    if folder is not None and not os.path.isdir(os.path.expanduser(folder)):
        raise PlayError(f"data folder {folder!r} does not exist")
    return PlaySettings(
        sources=tuple(names),
        budget_mode=mode,
        budget_ratio=ratio,
        total_budget=budget,
        tokenizer_name=tok,
        seed=seed_value,
        hard_cap_mode=_parse_bool(hard_cap_mode, "hard cap mode"),
        num_questions=n_q,
        data_dir=folder,
        own_file=dict(own_file) if own_file else None,
    )


def available_policies(environ: dict | None = None, *, real_model: bool = False) -> list[str]:
    """Policies the Play tab offers: the budget baselines, the simulated strategies and the
    oracle, plus ``llm_api`` / ``llm_local`` when their ``BASELINE_*_BASE_URL`` and
    ``BASELINE_*_MODEL`` variables are set; ``real_model=True`` offers ``llm_local`` in any case
    (its server URL and model are then given with the request, default :func:`local_model_defaults`)."""
    env = os.environ if environ is None else environ
    names = list(DEFAULT_POLICIES)
    for name, prefix in (("llm_api", "BASELINE_API_"), ("llm_local", "BASELINE_LOCAL_")):
        if (env.get(prefix + "BASE_URL") and env.get(prefix + "MODEL")) or (real_model and name == "llm_local"):
            names.append(name)
    return names


def local_model_defaults(environ: dict | None = None) -> tuple[str, str]:
    """``(base URL, model)`` of ``llm_local``: ``BASELINE_LOCAL_BASE_URL`` / ``BASELINE_LOCAL_MODEL``
    when set, else the project's vLLM CPU server (:data:`DEFAULT_LOCAL_BASE_URL`) serving the offline
    real model ``embedded:qwen2.5-coder-0.5b``."""
    from reasoning_env.model_server import DEFAULT_MODEL

    env = os.environ if environ is None else environ
    return (
        str(env.get("BASELINE_LOCAL_BASE_URL") or "").strip() or DEFAULT_LOCAL_BASE_URL,
        str(env.get("BASELINE_LOCAL_MODEL") or "").strip() or DEFAULT_MODEL,
    )


def llm_settings(
    name: str, environ: dict | None = None, *, timeout_s: float = 120.0, retries: int = 1
) -> dict[str, Any]:
    """Settings of ``llm_api`` / ``llm_local`` from ``BASELINE_*`` variables (of ``environ``,
    default ``os.environ``), with a shorter timeout and fewer retries than evaluation uses: a
    person is waiting for the answer.

    Returns:
        Keyword overrides for :func:`reasoning_env.policies.make_policy`'s ``llm`` (``base_url``,
        ``model``, ``api_key``, ``timeout_s``, ``retries``); unset variables are left out.

    Raises:
        ValueError: ``name`` is not an LLM policy of this kind.
    """
    if name not in ("llm_api", "llm_local"):
        raise ValueError(f"{name!r} is not an OpenAI-compatible LLM policy (llm_api, llm_local)")
    env = os.environ if environ is None else environ
    prefix = "BASELINE_API_" if name == "llm_api" else "BASELINE_LOCAL_"
    key = env.get(prefix + "KEY") if name == "llm_api" else env.get(prefix + "API_KEY")
    out: dict[str, Any] = {
        "base_url": env.get(prefix + "BASE_URL"),
        "model": env.get(prefix + "MODEL"),
        "api_key": key,
        "timeout_s": float(timeout_s),
        "retries": int(retries),
    }
    return {k: v for k, v in out.items() if v not in (None, "")}


# ------------------------------------------------------------------------------- tokens
def token_spans(
    tokenizer: LoadedTokenizer, text: str, *, charged: int | None = None, max_tokens: int = 4000
) -> list[tuple[str, str | None]]:
    """``text`` cut into the pieces its tokens cover, labelled for highlighting.

    Labels alternate ``"token"`` / ``"token·"`` so neighbouring tokens are told apart; tokens
    past ``charged`` (the hard cap clipped them: never paid for, never graded) are labelled
    ``"unpaid"``. Characters no token covers (rare) are kept unlabelled, so the pieces always
    join back to ``text``.

    Args:
        tokenizer: The episode's tokenizer.
        text: The response.
        charged: Tokens charged to the budget (``None``: all).
        max_tokens: Show at most this many tokens; the rest is one unlabelled piece.

    Returns:
        ``[(piece, label or None), ...]``.
    """
    if not text:
        return []
    enc = tokenizer.tokenizer.backend_tokenizer.encode(text, add_special_tokens=False)
    spans: list[tuple[str, str | None]] = []
    pos = 0
    for i, (start, end) in enumerate(enc.offsets):
        if i >= max_tokens:
            break
        if end <= pos:  # a token sharing the previous one's characters (multi-token character)
            continue
        start = max(start, pos)
        if start > pos:
            spans.append((text[pos:start], None))
        label = "unpaid" if charged is not None and i >= charged else ("token" if i % 2 == 0 else "token·")
        spans.append((text[start:end], label))
        pos = end
    if pos < len(text):
        spans.append((text[pos:], None))
    return spans


# ------------------------------------------------------------------------------- session
@dataclass
class StepResult:
    """What one step did.

    Attributes:
        observation: The observation the step returned (``last_step`` holds the verdict).
        row: The step's :class:`~reasoning_env.records.StepRow` (run-folder row).
        actor: ``"human"`` or the policy name that answered.
        response: The full response text. grading_response: the text graded instead, if any.
        latency_s: Seconds the policy took to answer (``None`` for typed answers).
        meta: The policy's diagnostics (:attr:`~reasoning_env.policies.PolicyOutput.meta`: an LLM's
            turn cap ``max_tokens``, ``tokens``, ``finish_reason``...), saved as ``policy_<key>`` columns.
    """

    observation: ReasoningEconomicsObservation
    row: StepRow
    actor: str
    response: str
    grading_response: str | None = None
    latency_s: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StreamProgress:
    """An answer while a model writes it (:meth:`PlaySession.stream_policy`).

    Attributes:
        actor: The policy answering. question_index: 0-based index of the question.
        text: The answer so far (reasoning a server sends apart re-joined in ``<think>`` tags).
        tokens: Tokens of ``text``, counted with the episode's tokenizer (what the step will charge,
            before any hard-cap clip).
        cap: The policy's per-answer cap (its turn cap; the environment's ``step_token_cap`` for a
            policy without one).
        remaining_budget: Budget left before this answer. total_budget: The episode's budget.
        elapsed_s: Seconds since the request was sent. first_text_s: Seconds to the first text.
        model: Where the answers come from (:func:`reasoning_env.policies.llm.model_line`), if a model.
    """

    actor: str
    question_index: int
    text: str
    tokens: int
    cap: int
    remaining_budget: int
    total_budget: int
    elapsed_s: float
    first_text_s: float | None
    model: str | None = None

    @property
    def budget_left(self) -> int:
        """Budget left if the answer ended now."""
        return max(0, self.remaining_budget - self.tokens)

    @property
    def tokens_per_s(self) -> float | None:
        """Tokens per second since the first text (``None`` before a second's tenth of streaming)."""
        if self.first_text_s is None or self.elapsed_s - self.first_text_s < 0.1:
            return None
        return self.tokens / (self.elapsed_s - self.first_text_s)

    def line(self) -> str:
        """``"answer 123 / cap 344 tokens · budget 1,597 of 1,720 left"``."""
        return (
            f"answer {self.tokens:,} / cap {self.cap:,} tokens · "
            f"budget {self.budget_left:,} of {self.total_budget:,} left"
        )


@dataclass
class _Episode:
    settings: PlaySettings
    config: EnvConfig
    reset_obs: ReasoningEconomicsObservation
    obs: ReasoningEconomicsObservation
    results: list[StepResult] = field(default_factory=list)
    policies: dict[str, BasePolicy] = field(default_factory=dict)
    policy_args: dict[str, Any] = field(default_factory=dict)
    model_lines: dict[str, str] = field(default_factory=dict)
    saved_to: Path | None = None


class PlaySession:
    """One person's episodes: an environment, the current episode and its steps. Thread-safe
    (one lock: a second action waits for the first).

    Args:
        base_config: Config whose other settings (reward, limits, grading time) every episode
            keeps; the Play form overrides sources, budget ratio, budget mode, questions and data
            folder. Default: the project default :class:`EnvConfig`.
        grader: A shared :class:`~reasoning_env.grading.Grader` (default: one per environment).
        curves: Solver curves of the simulated policies and of the saved run's regret.
        pools: Pre-loaded question pools used when the sources are the base config's (tests).
        tokenizer_policy: ``name -> reason or None``: why a tokenizer name may not be used here
            (e.g. the OpenEnv server's :meth:`~reasoning_env.server.settings.ServerSettings.check_tokenizer_name`,
            which refuses local folders on a public server); ``None`` allows every name.
    """

    def __init__(
        self,
        base_config: EnvConfig | None = None,
        *,
        grader: Any = None,
        curves: SolverCurves | None = None,
        pools: Any = None,
        tokenizer_policy: Callable[[str], str | None] | None = None,
    ) -> None:
        self.base_config = base_config or EnvConfig()
        self.tokenizer_policy = tokenizer_policy
        self.grader = grader
        self.curves = curves or SolverCurves()
        self._pools = pools
        self._env: ReasoningEconomicsEnv | None = None
        self._env_key: str | None = None
        self._episode: _Episode | None = None
        self._lock = threading.RLock()
        self._answering: str | None = None  # set while a policy streams an answer (no lock is held then)

    # ------------------------------------------------------------------ state
    @property
    def started(self) -> bool:
        """Whether an episode was reset in this session."""
        return self._episode is not None

    @property
    def observation(self) -> ReasoningEconomicsObservation | None:
        """The latest observation (``None`` before the first reset)."""
        return self._episode.obs if self._episode else None

    @property
    def reset_observation(self) -> ReasoningEconomicsObservation | None:
        """The current episode's reset observation (its ``metadata`` has budget, seed, sources)."""
        return self._episode.reset_obs if self._episode else None

    @property
    def done(self) -> bool:
        """Whether the current episode is over (``True`` before any reset)."""
        return self._episode is None or bool(self._episode.obs.done)

    @property
    def results(self) -> list[StepResult]:
        """The current episode's steps, in order."""
        return list(self._episode.results) if self._episode else []

    @property
    def config(self) -> EnvConfig | None:
        """The current episode's config."""
        return self._episode.config if self._episode else None

    @property
    def saved_to(self) -> Path | None:
        """The run folder the current episode was last saved to (``None``: not saved since its
        last step)."""
        return self._episode.saved_to if self._episode else None

    @property
    def tokenizer(self) -> LoadedTokenizer | None:
        """The tokenizer counting the current episode's tokens."""
        if self._episode is None:
            return None
        from reasoning_env.tokenization import get_tokenizer

        return get_tokenizer(
            str(self._episode.reset_obs.metadata.get("tokenizer_name") or self._episode.config.tokenizer_name)
        )

    # ------------------------------------------------------------------ reset
    def config_for(self, settings: PlaySettings) -> EnvConfig:
        """The EnvConfig an episode with ``settings`` runs with.

        Raises:
            PlayError: the resulting config is invalid (message from the config's validation).
        """
        # a source the base config names keeps its options there (a jsonl/hf/CSV source of REE_CONFIG
        # plays as configured); other names are the bare sources; the user's own file is one more
        base_specs = {spec.name: spec.model_dump() for spec in self.base_config.sources}
        sources: list[Any] = [base_specs.get(name, name) for name in settings.sources]
        if settings.own_file:
            if "jsonl" in settings.sources:
                raise PlayError(
                    "the question file and the config's jsonl source cannot be played together: untick jsonl "
                    "in “Question sources”, or clear the question file"
                )
            sources.append({"name": "jsonl", "options": dict(settings.own_file)})
        changes: dict[str, Any] = {
            "sources": sources,
            "budget_ratio": settings.budget_ratio,
            "hard_cap_mode": settings.hard_cap_mode,
            "num_questions": settings.num_questions,
            "tokenizer_name": settings.tokenizer_name,
            "total_budget": None,
        }
        if settings.data_dir is not None:
            changes["data_dir"] = settings.data_dir
        try:
            return self.base_config.replace(**changes)
        except ConfigError as exc:
            raise PlayError(str(exc)) from None

    def _env_for(self, config: EnvConfig) -> ReasoningEconomicsEnv:
        key = json.dumps(config.to_dict(), sort_keys=True, default=str)
        if self._env is None or self._env_key != key:
            pools = None
            if (
                self._pools is not None
                and config.sources == self.base_config.sources
                and config.data_dir == self.base_config.data_dir
            ):
                pools = self._pools
            kwargs: dict[str, Any] = {"pools": pools}
            if self.grader is not None:
                kwargs["grader"] = self.grader
            self._env = ReasoningEconomicsEnv(config, **kwargs)
            self._env_key = key
        return self._env

    def reset(self, settings: PlaySettings | None = None) -> ReasoningEconomicsObservation:
        """Start a new episode (the previous one is dropped; save it first to keep it).

        Returns:
            The reset observation; ``metadata`` holds ``total_budget``, ``budget_source``,
            ``seed``, ``sources_used`` and the tokenizer's origin.

        Raises:
            PlayError: invalid settings, sources that cannot be loaded here, a tokenizer that
                cannot be loaded (the message names it and what to try instead) or that the
                ``tokenizer_policy`` refuses.
        """
        settings = settings or PlaySettings()
        if self.tokenizer_policy is not None:
            why = self.tokenizer_policy(settings.tokenizer_name)
            if why:
                raise PlayError(why)
        with self._lock:
            self._require_idle()
            config = self.config_for(settings)
            if settings.budget_mode == "explicit" and settings.total_budget is None:
                raise PlayError("budget mode 'explicit' needs a total budget (tokens)")
            budget_kwargs, _step_tok = budget_reset_kwargs(
                settings.budget_mode,
                tokenizer_name=settings.tokenizer_name,
                config_tokenizer=config.tokenizer_name,
                total_budget=settings.total_budget,
            )
            kwargs: dict[str, Any] = {"seed": settings.seed, **budget_kwargs}
            try:
                env = self._env_for(config)
                obs = env.reset(**kwargs)
            except TokenizerLoadError as exc:
                raise PlayError(f"tokenizer {settings.tokenizer_name!r} cannot be loaded here: {exc}") from None
            except (SourceUnavailable, SourceError) as exc:
                raise PlayError(f"the questions cannot be loaded: {exc}") from None
            except (
                ReasoningEconomicsError,
                ValueError,
            ) as exc:  # a bad setting, a reward spec the environment rejects
                raise PlayError(str(exc)) from None
            for pol in self._episode.policies.values() if self._episode else ():
                pol.close()
            self._episode = _Episode(settings=settings, config=config, reset_obs=obs, obs=obs)
            return obs

    # ------------------------------------------------------------------ steps
    def _require_idle(self) -> None:
        if self._answering:
            raise PlayError(f"{self._answering}: wait for the answer, or press Stop")

    def _require_open(self) -> _Episode:
        self._require_idle()
        if self._episode is None:
            raise PlayError("no episode yet: press Reset to start one")
        if self._episode.obs.done:
            reason = self._episode.obs.done_reason or "over"
            raise PlayError(f"the episode is over ({reason.replace('_', ' ')}): press Reset to start a new one")
        return self._episode

    def _apply(
        self,
        ep: _Episode,
        actor: str,
        response: str,
        grading_response: str | None,
        latency: float | None,
        num_generated_tokens: int | None = None,
        meta: dict[str, Any] | None = None,
    ) -> StepResult:
        try:
            action = make_action(response, grading_response, num_generated_tokens=num_generated_tokens)
            md = action.metadata
            obs = self._env.step(action)
        except ReasoningEconomicsError as exc:  # a refused step (bad metadata, a tokenizer that cannot load)
            raise PlayError(str(exc)) from None
        if obs.last_step is None:  # the environment refused (after the end): nothing changed
            raise PlayError(str(obs.metadata.get("error") or "the episode is over: press Reset"))
        row = step_row_from_observation(
            obs,
            run_id="play",
            policy=actor,
            episode=0,
            reset_metadata=ep.reset_obs.metadata,
            hard_cap_mode=ep.config.hard_cap_mode,
            response=response,
            grading_response=md.get("grading_response"),
            latency_s=latency,
        )
        result = StepResult(obs, row, actor, response, md.get("grading_response"), latency, dict(meta or {}))
        for name, pol in ep.policies.items():  # multi-turn LLM policies keep the whole episode in context
            if name != actor and hasattr(pol, "record_answer"):
                pol.record_answer(ep.obs, response)
        ep.obs = obs
        ep.results.append(result)
        ep.saved_to = None
        return result

    def step(self, response: str, *, grading_response: str | None = None) -> StepResult:
        """Answer the current question with a typed response (actor ``"human"``).

        Raises:
            PlayError: no episode, the episode is over, or the response is empty or too long.
        """
        if not isinstance(response, str) or not response.strip():
            raise PlayError("the answer is empty: write a response ending in \\boxed{your answer}")
        if len(response) > MAX_RESPONSE_CHARS:
            raise PlayError(f"the answer is {len(response):,} characters long; the limit is {MAX_RESPONSE_CHARS:,}")
        with self._lock:
            ep = self._require_open()
            return self._apply(ep, HUMAN, response, grading_response, None)

    def _policy(self, ep: _Episode, name: str, llm: dict | None) -> BasePolicy:
        llm = dict(llm or {})
        engine = llm.pop("engine", None)
        adapter = llm.pop("adapter", None)  # the LoRA adapter the server applies for the model named, if any
        pol = ep.policies.get(name)
        if pol is not None and ep.policy_args.get(name) == llm:
            return pol
        if pol is not None:  # another server or model for the same policy: a fresh one, given the episode so far
            pol.close()
            del ep.policies[name]
            ep.model_lines.pop(name, None)
        from workbench.evaluation.episodes import make_episode_info

        try:
            pol = make_policy(name, curves=self.curves, llm=llm or None)
        except ValueError as exc:
            raise PlayError(str(exc)) from None
        if engine is not None and hasattr(pol, "engine"):
            pol.engine = dict(engine)
        if adapter is not None and hasattr(pol, "adapter"):
            pol.adapter = dict(adapter)
        info = make_episode_info(ep.reset_obs, ep.config, policy=pol, questions=self._env.questions, episode=0)
        try:
            pol.reset(info)
            if hasattr(pol, "record_answer"):  # answers given before this policy joined the episode
                before = ep.reset_obs
                for r in ep.results:
                    pol.record_answer(before, r.response)
                    before = r.observation
        except PolicyError as exc:
            raise PlayError(str(exc)) from None
        ep.policies[name] = pol
        ep.policy_args[name] = llm
        return pol

    def model_line(self, name: str) -> str | None:
        """Where policy ``name``'s answers in this episode come from, for a model policy
        (``"real model: embedded:qwen2.5-coder-0.5b (...), vLLM 0.32.0"``); ``None`` otherwise or
        before it answered. The server is asked once per policy."""
        ep = self._episode
        pol = ep.policies.get(name) if ep is not None else None
        if pol is None or pol.kind != "llm":
            return None
        if name not in ep.model_lines:
            from reasoning_env.policies.llm import model_line

            ep.model_lines[name] = model_line(pol.describe())
        return ep.model_lines[name]

    def step_policy(self, name: str, *, llm: dict | None = None) -> StepResult:
        """Let policy ``name`` answer the current question.

        Args:
            name: A :func:`available_policies` name (any :data:`reasoning_env.policies.POLICY_NAMES`).
            llm: Overrides for ``llm_api`` / ``llm_local`` (base URL, model, timeout...).

        Raises:
            PlayError: no open episode, unknown or unconfigured policy, or the policy failed
                (e.g. its endpoint is down after retries).
        """
        with self._lock:
            ep = self._require_open()
            pol = self._policy(ep, name, llm)
            t0 = time.perf_counter()
            try:
                out = pol.act(ep.obs)
            except PolicyError as exc:
                raise PlayError(f"policy {name!r} failed: {exc}") from None
            latency = time.perf_counter() - t0
            return self._apply(
                ep, name, out.response, out.grading_response, latency, out.num_generated_tokens, out.meta
            )

    def stream_policy(self, name: str, *, llm: dict | None = None) -> Iterator[StreamProgress | StepResult]:
        """:meth:`step_policy`, streamed: yields a :class:`StreamProgress` each time the model sends
        text, then the step's :class:`StepResult` as the last item. The step is the one
        :meth:`step_policy` takes with the same final text. A policy that cannot stream (the
        simulated ones, ``hf_local``) yields only the result.

        While the answer streams the session refuses other actions (a :class:`PlayError` saying
        so); closing the generator (the page's Stop) drops the answer and takes no step.

        Raises:
            PlayError: as :meth:`step_policy`.
        """
        with self._lock:
            ep = self._require_open()
            pol = self._policy(ep, name, llm)
            obs = ep.obs
            if not hasattr(pol, "act_stream"):
                result = self.step_policy(name, llm=llm)
            else:
                result = None
                self._answering = f"{name} is answering question {obs.question_index + 1}"
        if result is not None:
            yield result
            return
        try:
            model = self.model_line(name)
            cap_rule = getattr(pol, "turn_cap", None)
            cap = int(cap_rule(obs)) if callable(cap_rule) else int(obs.step_token_cap)
            tok = self.tokenizer
            out = None
            t0 = time.perf_counter()
            first = None
            stream = pol.act_stream(obs)
            try:
                for item in stream:
                    if isinstance(item, PolicyOutput):
                        out = item
                        continue
                    now = time.perf_counter() - t0
                    first = now if first is None else first
                    yield StreamProgress(
                        actor=name,
                        question_index=int(obs.question_index),
                        text=item,
                        tokens=tok.count(item) if tok is not None else 0,
                        cap=cap,
                        remaining_budget=int(obs.remaining_budget),
                        total_budget=int(ep.reset_obs.total_budget),
                        elapsed_s=now,
                        first_text_s=first,
                        model=model,
                    )
            except PolicyError as exc:
                hint = ""
                if "ConnectError" in str(exc):
                    hint = (
                        ": no server answers there; start one (`python -m reasoning_env.model_server --port 8001`, "
                        "or the Play tab's Start local vLLM engine) or correct the URL"
                    )
                raise PlayError(f"policy {name!r} failed: {exc}{hint}") from None
            finally:
                stream.close()
            if out is None:
                raise PlayError(f"policy {name!r} ended its stream without an answer")
            latency = time.perf_counter() - t0
            with self._lock:
                result = self._apply(
                    ep, name, out.response, out.grading_response, latency, out.num_generated_tokens, out.meta
                )
        finally:
            self._answering = None
        yield result

    def run_iter(self, name: str, *, max_steps: int | None = None, llm: dict | None = None) -> Iterator[StepResult]:
        """Let policy ``name`` answer until the episode ends (or ``max_steps`` steps), yielding
        each step's result as it happens.

        Raises:
            PlayError: as :meth:`step_policy` (steps already taken stay).
        """
        self._require_open()
        n = 0
        while not self.done and (max_steps is None or n < max_steps):
            yield self.step_policy(name, llm=llm)
            n += 1

    # ------------------------------------------------------------------ frames and export
    def steps_frame(self) -> pd.DataFrame:
        """The steps so far as a trajectories frame (run-folder columns, plus ``actor``)."""
        from reasoning_env.records import STEP_COLUMNS

        results = self.results
        if not results:
            return pd.DataFrame(columns=list(STEP_COLUMNS) + ["actor"])
        frame = pd.DataFrame([r.row.to_flat() for r in results])
        reward_cols = [c for c in frame.columns if c.startswith("reward_")]
        frame[reward_cols] = frame[reward_cols].fillna(0.0)
        frame["actor"] = [r.actor for r in results]
        return frame

    def label(self) -> str:
        """Policy label of the episode: the actor, or the actors joined by ``+`` when several
        answered (e.g. ``human+sim_greedy``)."""
        actors = list(dict.fromkeys(r.actor for r in self.results)) or [HUMAN]
        return "+".join(actors)

    def _kind(self) -> str:
        kinds = set()
        for r in self.results:
            pol = self._episode.policies.get(r.actor) if self._episode else None
            kinds.add(pol.kind if pol is not None else HUMAN)
        return kinds.pop() if len(kinds) == 1 else "mixed"

    def episode_row(self, *, run_id: str = "play") -> EpisodeRow | None:
        """The episode row of the steps so far (``None`` before the first step)."""
        rows = [r.row for r in self.results]
        if not rows:
            return None
        label = self.label()
        relabelled = [_relabel(r, label, run_id) for r in rows]
        return episode_row_from_steps(relabelled, num_questions=int(self._episode.reset_obs.num_questions))

    def summary(self) -> dict[str, Any]:
        """Numbers of the episode so far: budget, spent, remaining, answered, correct, accuracy
        (correct / answered), reward and its components (sums), done and why."""
        if self._episode is None:
            return {}
        obs, reset = self._episode.obs, self._episode.reset_obs
        results = self._episode.results
        comps: dict[str, float] = {}
        for r in results:
            for k, v in (r.observation.last_step.reward_components or {}).items():
                comps[k] = comps.get(k, 0.0) + float(v)
        spent = sum(r.row.tokens for r in results)
        correct = sum(int(r.row.correct) for r in results)
        return {
            "episode_id": reset.metadata.get("episode_id"),
            "seed": reset.metadata.get("seed"),
            "total_budget": int(reset.total_budget),
            "budget_source": reset.metadata.get("budget_source"),
            "tokenizer_name": reset.metadata.get("tokenizer_name"),
            "num_questions": int(reset.num_questions),
            "answered": len(results),
            "correct": correct,
            "accuracy": correct / len(results) if results else 0.0,
            "spent": int(spent),
            "remaining_budget": int(obs.remaining_budget),
            "utilisation": spent / reset.total_budget if reset.total_budget else 0.0,
            "reward": float(sum(r.row.reward for r in results)),
            "reward_components": comps,
            "done": bool(obs.done),
            "done_reason": obs.done_reason,
            "actors": list(dict.fromkeys(r.actor for r in results)),
        }

    def export(self) -> dict[str, Any]:
        """The episode as a JSON-ready dict: ``format``, ``config``, ``reset_metadata``,
        ``summary``, ``steps`` (run-folder step rows with ``actor``, full ``response`` and
        ``grading_response``) and ``episode`` (the episode row).

        Raises:
            PlayError: no episode yet.
        """
        with self._lock:
            if self._episode is None:
                raise PlayError("no episode yet: press Reset and play first")
            steps = []
            for r in self._episode.results:
                d = r.row.to_flat()
                d["actor"] = r.actor
                d["grading_response"] = r.grading_response
                d["question"] = r.observation.last_step.question
                d["graded_text"] = r.observation.last_step.graded_text
                steps.append(d)
            ep = self.episode_row()
            return {
                "format": "reasoning-economics/episode-v1",
                "exported_at": datetime.now().isoformat(timespec="seconds"),
                "config": self._episode.config.to_dict(),
                "reset_metadata": _jsonable(self._episode.reset_obs.metadata),
                "summary": self.summary(),
                "steps": steps,
                "episode": ep.to_flat() if ep else None,
            }

    def export_json(self, path: str | Path) -> Path:
        """Write :meth:`export` to ``path`` (UTF-8 JSON). Returns the path.

        Raises:
            PlayError: no episode yet.
        """
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(self.export(), indent=2, default=str, ensure_ascii=False), encoding="utf-8")
        return p

    def save_run(self, root: str | Path = "runs", *, name: str | None = None) -> Path:
        """Write the episode as a run folder (``workbench.runs`` layout, ``kind: "play"``,
        one episode, policy = :meth:`label`) under ``root``; the Runs tab and the reward lab load it.

        Adds the evaluation extras: ``expected_correct`` per step (the solver curves at the
        charged tokens), ``actor``, and per episode ``oracle_expected_correct`` and ``regret``.

        Args:
            root: Parent folder (created). name: Folder name (default ``play-<time>-<id>``).

        Returns:
            The run folder.

        Raises:
            PlayError: nothing to save (no answered question), or the folder cannot be written.
        """
        from reasoning_env.policies import OracleCache
        from reasoning_env.policies.text import minimal_tokens
        from workbench import analysis
        from workbench.evaluation.writer import provenance
        from workbench.runs import RunFolderError, RunWriter

        with self._lock:
            ep = self._episode
            if ep is None or not ep.results:
                raise PlayError("nothing to save yet: answer at least one question first")
            md = ep.reset_obs.metadata
            stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
            root = Path(root).expanduser()  # "~/runs" must not become a folder named "~"
            folder = root / (name or f"play-{stamp}-{str(md.get('episode_id', ''))[:8]}")
            if name is None:
                # Two saves within one second must not overwrite each other.
                base, n = folder, 2
                while folder.exists():
                    folder, n = base.with_name(f"{base.name}-{n}"), n + 1
            label, kind = self.label(), self._kind()
            rows = [_relabel(r.row, label, folder.name) for r in ep.results]
            extras = []
            for r in ep.results:
                ls = r.observation.last_step
                extras.append(
                    {
                        "kind": kind,
                        "actor": r.actor,
                        "graded_text": ls.graded_text,
                        "grading_response": r.grading_response,
                        "expected_correct": step_expected_correct(self.curves, ls),
                        # an LLM's turn cap, reported tokens, finish reason..., as evaluation records them
                        **{f"policy_{k}": v if _scalar(v) else str(v) for k, v in r.meta.items()},
                    }
                )
            episode = episode_row_from_steps(rows, num_questions=int(ep.reset_obs.num_questions))
            questions = self._env.questions
            tok = self.tokenizer
            oracle = OracleCache(self.curves, cap=ep.config.max_tokens_per_step, min_tokens=ep.config.min_tokens)
            lows = [minimal_tokens(tok, q.gold_answer) for q in questions] if tok is not None else None
            ep_extras = episode_extras(
                kind=kind,
                curves=self.curves,
                num_questions=int(episode.num_questions),
                total_budget=episode.total_budget,
                steps=[(r.problem_type, r.difficulty, r.tokens) for r in rows],
                questions=[(q.problem_type, q.difficulty) for q in questions],
                lows=lows,
                oracle=oracle,
            )
            actors = list(dict.fromkeys(r.actor for r in ep.results))
            answered_by = [self._describe_actor(ep, a) for a in actors if a != HUMAN]
            prov = provenance(answered_by, md.get("sources_used"), self.curves)
            if HUMAN in actors:
                prov["warnings"].insert(
                    0,
                    "human: answers typed in the Play tab; their expected accuracy and regret use the solver "
                    f"curves ({self.curves.provenance}), not the person.",
                )
            try:
                writer = RunWriter(
                    folder,
                    kind="play",
                    config=_with_seed(ep.config, md.get("seed")),
                    meta={
                        "run_id": folder.name,
                        "source": "workbench play tab",
                        "seed": md.get("seed"),
                        "n_episodes": 1,
                        "episode_seeds": [md.get("seed")],
                        "policies": [
                            {
                                "name": label,
                                "kind": kind,
                                "actors": actors,
                                "answered_by": answered_by,
                                **({"models": prov["real_models"]} if prov["real_models"] else {}),
                            }
                        ],
                        "budget_mode": ep.settings.budget_mode,
                        "tokenizer_name": [md.get("tokenizer_name")],
                        "sources_used": _jsonable(md.get("sources_used")),
                        "curves": self.curves.source,
                        "provenance": _jsonable(prov),
                        "notes": []
                        if ep.obs.done
                        else [
                            f"saved before the end: {len(ep.results)} of {ep.reset_obs.num_questions} "
                            "questions answered"
                        ],
                    },
                )
                writer.add_steps(rows, extras)
                writer.add_episode(episode, ep_extras)
                writer.write()
                writer.write_summary(analysis.summary_table(writer.episodes_frame(), writer.steps_frame()))
                self.curves.save(folder / "curves.json")
            except RunFolderError as exc:
                raise PlayError(str(exc)) from None
            except OSError as exc:
                raise PlayError(f"cannot write the run folder {str(folder)!r}: {exc}") from None
            ep.saved_to = folder
            return folder

    def _describe_actor(self, ep: _Episode, actor: str) -> dict[str, Any]:
        """A policy that answered, as ``run.json`` describes policies (a model's server asked once)."""
        pol = ep.policies.get(actor)
        if pol is None:
            return {"name": actor, "kind": "unknown"}
        if pol.kind == "llm":
            self.model_line(actor)  # asks the server what serves the model, once
        return _jsonable({**pol.describe(), "name": actor, "kind": pol.kind})

    def close(self) -> None:
        """Release the policies' resources and the environment (idempotent)."""
        with self._lock:
            if self._episode is not None:
                for pol in self._episode.policies.values():
                    pol.close()
            if self._env is not None:
                self._env.close()
            self._episode = None


# ------------------------------------------------------------------------------- local engine
class LocalEngine:
    """vLLM's CPU engine serving a real model for the app: one per process, started on request in a
    background thread (about a minute on 2 cores), stopped when the process exits.

    Thin wrapper over :class:`reasoning_env.model_server.ModelServer`; :meth:`status` is what the
    page shows while it starts.

    With a LoRA adapter folder (a training run's ``final/``) the engine serves it beside the base model
    (:mod:`reasoning_env.lora_adapter`): the model name ``trained`` (or the name given) plays the trained model,
    the base model's name the base.

    Args:
        python: The interpreter with vLLM (default :func:`reasoning_env.model_server.vllm_python`).
        log_path: The server's log (default: a temporary file).
    """

    def __init__(self, *, python: str | os.PathLike[str] | None = None, log_path: str | None = None) -> None:
        self.python = python
        self.log_path = log_path
        self.adapter: Any = None  # the AdapterInfo served beside the model, if any
        self.server: Any = None
        self.error: str | None = None
        self.started_at: float | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def available(self) -> bool:
        """Whether vLLM's venv is here (``bash scripts/real_model.sh`` builds it)."""
        from reasoning_env.model_server import vllm_python

        return Path(self.python).is_file() if self.python else vllm_python().is_file()

    def start(self, model: str | None = None, adapter: str | os.PathLike[str] | None = None) -> None:
        """Start serving ``model`` (default ``embedded:qwen2.5-coder-0.5b``), with the LoRA ``adapter`` folder
        beside it when given, in the background; a no-op while it starts or runs with the same model and adapter;
        running with others, it is stopped and started with these. :meth:`status` follows it.

        Raises:
            AdapterError: the adapter folder cannot be served on ``model`` (checked before anything starts).
            PlayError: it is starting with another model or adapter (wait until it runs, then start again).
        """
        from reasoning_env.lora_adapter import check_adapter, served_lora_rank
        from reasoning_env.model_server import DEFAULT_MODEL, ModelServer

        model = (model or "").strip() or DEFAULT_MODEL
        info = check_adapter(adapter, model) if str(adapter or "").strip() else None
        with self._lock:
            same = (
                self.server is not None
                and self.server.model == model
                and (self.adapter.path if self.adapter else None) == (info.path if info else None)
            )
            if self._thread is not None and self._thread.is_alive():
                if same:
                    return
                raise PlayError("the local engine is still starting with another model or adapter: wait, then start")
            if self.server is not None and self.server.alive():
                if same:
                    return
                self.server.stop()  # another model or adapter asked for: this one goes
            self.error = None
            self.adapter = info
            lora = (
                {}
                if info is None
                else {
                    "enable_lora": True,
                    "max_lora_rank": served_lora_rank(info.rank),
                    "extra_args": info.server_args(),
                }
            )
            self.server = ModelServer(model, port=0, python=self.python, log_path=self.log_path, **lora)
            self.started_at = time.monotonic()
            self._thread = threading.Thread(target=self._run, args=(self.server,), daemon=True, name="local-engine")
            self._thread.start()
            _register_stop(self)

    def _run(self, server: Any) -> None:
        from reasoning_env.model_server import log_cause

        try:
            server.start()
        except (ReasoningEconomicsError, OSError) as exc:
            first = str(exc).split("\n", 1)[0]
            # "vLLM exited with status 1 while starting (<the command line>); log PATH:" -> its cause, then the log
            first = re.sub(r" \(.*\); log \S+:?$", "", first)
            cause = log_cause(server.log_path)
            log = f" (log: {server.log_path})" if server.log_path else ""
            self.error = f"{first}: {cause}{log}" if cause else f"{first}{log}"
        except Exception as exc:  # noqa: BLE001 - shown in the page, never as a traceback
            self.error = f"{type(exc).__name__}: {exc}".split("\n", 1)[0]
        else:
            _remember_start(server.startup_s)

    def status(self) -> dict[str, Any]:
        """``state`` (``"idle"``, ``"starting"``, ``"running"``, ``"failed"`` or ``"stopped"``),
        ``elapsed_s`` since the start, and when running ``base_url``, ``model`` and ``engine``
        (what serves it, for provenance); ``error`` when it failed; ``adapter`` (name, path, base) when a LoRA
        adapter is served beside the model."""
        srv, thread = self.server, self._thread
        elapsed = time.monotonic() - self.started_at if self.started_at is not None else 0.0
        if srv is None:
            return {"state": "idle", "elapsed_s": 0.0}
        if thread is not None and thread.is_alive():
            from reasoning_env.model_server import log_progress

            return {
                "state": "starting",
                "elapsed_s": elapsed,
                "model": srv.served_name,
                "expected": start_estimate(),
                "progress": log_progress(srv.log_path),
                "log": str(srv.log_path) if srv.log_path else None,
            }
        if self.error:
            return {
                "state": "failed",
                "elapsed_s": elapsed,
                "error": self.error,
                "model": srv.served_name,
                "log": str(srv.log_path) if srv.log_path else None,
            }
        if not srv.alive():
            return {"state": "stopped", "elapsed_s": elapsed, "model": srv.served_name}
        d = srv.describe()
        engine = {k: d.get(k) for k in ("engine", "engine_version", "device", "distribution", "max_model_len")}
        return {
            "state": "running",
            "elapsed_s": elapsed,
            "startup_s": d.get("startup_s"),
            "base_url": srv.base_url,
            "model": srv.served_name,
            "engine": engine,
            **({"adapter": self.adapter.describe()} if self.adapter is not None else {}),
        }

    def engine_for(self, base_url: str | None) -> dict[str, Any] | None:
        """What serves ``base_url`` when it is this engine's (``None`` otherwise)."""
        st = self.status()
        if st["state"] == "running" and str(base_url or "").rstrip("/") == st["base_url"]:
            return dict(st["engine"])
        return None

    def stop(self) -> None:
        """Stop the engine (idempotent)."""
        srv = self.server
        if srv is not None:
            srv.stop()


_ENGINE: LocalEngine | None = None
_ENGINE_LOCK = threading.Lock()
_STOP_REGISTERED: set[int] = set()


#: Where the app remembers how long this machine's last engine starts took (under the project's cache).
START_TIMES_FILE = "engine-starts.json"


def _start_times_path() -> Path:
    from reasoning_env.tokenization import cache_root

    return cache_root() / START_TIMES_FILE


def _remember_start(startup_s: float | None) -> None:
    """Keep the last few start times here, with the load average then (for :func:`start_estimate`)."""
    if not startup_s:
        return
    path = _start_times_path()
    try:
        past = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
        past = (past if isinstance(past, list) else [])[-4:]
        past.append({"startup_s": round(float(startup_s), 1), "load": round(os.getloadavg()[0], 2)})
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(past), encoding="utf-8")
        tmp.replace(path)
    except (OSError, ValueError):
        pass


def start_estimate() -> str:
    """How long the engine's start should take here, from this machine: its last starts (with the load then)
    and the load now, else the quiet-machine figure (61 s on 2 cores) and the load now."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    cores = os.cpu_count() or 1
    now = f"load {load:.1f} on {cores} cores now" if load is not None else f"{cores} cores"
    try:
        past = json.loads(_start_times_path().read_text(encoding="utf-8"))
        times = [float(x["startup_s"]) for x in past if x.get("startup_s")]
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        times = []
    if times:
        last = past[-1]
        then = f" at load {last['load']:.1f}" if last.get("load") is not None else ""
        spread = f"{min(times):.0f}-{max(times):.0f} s" if len(times) > 1 else f"{times[0]:.0f} s"
        return f"its last {len(times)} start(s) here took {spread} (the last{then}; {now})"
    return f"about a minute on 2 quiet cores, longer under load ({now})"


def _register_stop(engine: LocalEngine) -> None:
    import atexit

    if id(engine) not in _STOP_REGISTERED:
        _STOP_REGISTERED.add(id(engine))
        atexit.register(engine.stop)


def local_engine() -> LocalEngine:
    """The process's :class:`LocalEngine` (created on first use)."""
    global _ENGINE
    with _ENGINE_LOCK:
        if _ENGINE is None:
            _ENGINE = LocalEngine()
        return _ENGINE


def _relabel(row: StepRow, policy: str, run_id: str) -> StepRow:
    from dataclasses import replace

    return replace(row, policy=policy, run_id=run_id)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _with_seed(config: EnvConfig, seed: Any) -> EnvConfig:
    """``config`` recording the episode's seed (a saved run's ``config.yaml`` replays it)."""
    try:
        return config.replace(seed=int(seed)) if seed is not None else config
    except (ConfigError, TypeError, ValueError):
        return config

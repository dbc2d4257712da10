"""The main job: evaluate policies on seeded episodes and write a run folder.

    python -m workbench.evaluate --n_episodes 20 --seed 42
    python -m workbench.evaluate --data-dir ../shared/data --sources gsm8k,math500
    python -m workbench.evaluate --policies llm_local,sim_greedy,oracle_allocation --n_episodes 2

Every policy plays the same episodes: episode ``i`` is reset with seed
:func:`episode_seed` ``(--seed, i)``, so it gets the same questions and (for the same tokenizer)
the same budget. By default the reset passes the policy's tokenizer name (the config's
``tokenizer_name`` unless the policy has its own), so budgets are tokenizer-native:
``int(budget_ratio * tokens of the question texts)`` in that tokenizer's units; ``--budget
config`` uses the config formula and ``--total-budget N`` a fixed budget.

Writes a run folder (schema: :mod:`workbench.runs`): ``run.json``, ``config.yaml``,
``trajectories.parquet`` / ``.jsonl``, ``episodes.parquet``, ``summary.csv``, ``curves.json``,
``report.html``; prints the summary table (metrics: :mod:`workbench.analysis`). Reruns with the
same arguments give byte-identical ``summary.csv`` apart from the timing columns.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import math
import os
import shlex
import sys
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

import pandas as pd

from reasoning_env.client import make_action
from reasoning_env.config import ConfigError, EnvConfig
from reasoning_env.remote import RemoteEnv, Replicas, as_observation, parse_urls
from reasoning_env.policies import (
    BUDGET_BASELINES,
    DEFAULT_POLICIES,
    POLICY_NAMES,
    BasePolicy,
    EpisodeInfo,
    PolicyError,
    SolverCurves,
    fit_run,
    make_policy,
    optimal_allocation,
)
from reasoning_env.records import EpisodeRow, StepRow, episode_row_from_steps, step_row_from_observation

logger = logging.getLogger(__name__)

__all__ = ["EvalResult", "OracleCache", "RemoteEnv", "episode_seed", "evaluate", "main", "make_episode_info", "oracle_allocation_for", "run_episode"]

BUDGET_MODES = ("tokenizer_native", "config")


def episode_seed(base_seed: int, index: int) -> int:
    """Seed of episode ``index`` of a run seeded ``base_seed``:
    ``int(sha256("reasoning-economics/<base>/<index>")[:8], 16) % 2**31`` (stable in any process)."""
    h = hashlib.sha256(f"reasoning-economics/{int(base_seed)}/{int(index)}".encode()).hexdigest()
    return int(h[:8], 16) % (2**31)


# ----------------------------------------------------------------------------- oracle bound
class OracleCache:
    """Expected correct answers of the oracle allocation per (questions, budget), cached.

    The oracle may give a question as little as its shortest possible response (``lows``, e.g.
    the tokens of ``\\boxed{gold}``), except the last question, which gets at least
    ``min_tokens`` so that a hard-cap episode never ends early (the remaining budget before any
    question is then at least the last question's share).

    Args:
        curves: The solver curves.
        cap: Per-question token cap (the config's ``max_tokens_per_step``).
        min_tokens: The config's ``min_tokens``.
        max_units: DP grid resolution (see :func:`reasoning_env.policies.optimal_allocation`).
    """

    def __init__(self, curves: SolverCurves, *, cap: int, min_tokens: int, max_units: int = 1000) -> None:
        self.curves = curves
        self.cap = int(cap)
        self.min_tokens = int(min_tokens)
        self.max_units = int(max_units)
        self._cache: dict[tuple, float] = {}
        self._lock = threading.Lock()

    def expected_correct(self, questions: Sequence[tuple[Optional[str], Optional[float]]], budget: int, lows: Optional[Sequence[int]] = None) -> float:
        """Oracle expected correct answers for ``(problem_type, difficulty)`` questions, a budget
        (tokens) and per-question minimum lengths (tokens; default 1)."""
        qs = tuple((str(p), None if d is None or (isinstance(d, float) and math.isnan(d)) else float(d)) for p, d in questions)
        lows = list(lows) if lows is not None else [1] * len(qs)
        key = (qs, int(budget), tuple(lows))
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        value = oracle_allocation_for(self.curves, qs, int(budget), lows, cap=self.cap, min_tokens=self.min_tokens, max_units=self.max_units).expected_correct
        with self._lock:
            self._cache[key] = value
        return value


def oracle_allocation_for(curves: SolverCurves, questions: Sequence[tuple[Optional[str], Optional[float]]], budget: int, lows: Sequence[int], *, cap: int, min_tokens: int, max_units: int = 400):
    """The oracle's allocation of ``budget`` tokens over ``(problem_type, difficulty)`` questions
    with minimum lengths ``lows`` (see :class:`OracleCache`); an
    :class:`~reasoning_env.policies.Allocation`."""
    from reasoning_env.policies.simulated import oracle_lows

    fns = [curves.question_fn(p, d) for p, d in questions]
    cap = max(1, min(int(cap), int(budget)))
    lo = oracle_lows(list(lows), int(budget), int(min_tokens), cap)
    return optimal_allocation(fns, int(budget), lo=lo, cap=cap, max_units=max_units)


# ----------------------------------------------------------------------------- remote server
def connect_remote(url: Union[str, Sequence[str], Replicas]) -> RemoteEnv:
    """A :class:`reasoning_env.remote.RemoteEnv` for the OpenEnv server(s) at ``url`` (one URL or
    several replicas: sessions are spread over them, and an episode whose replica dies is
    replayed from its seed on another).

    Raises:
        RuntimeError: no server can be reached.
    """
    env = RemoteEnv(url)
    try:
        env._ensure()
    except ConnectionError as exc:
        raise RuntimeError(
            f"cannot connect to the environment server at {', '.join(url.urls if isinstance(url, Replicas) else parse_urls(url))} ({exc}); is it running? "
            "(start one with: python -m reasoning_env.server --port 8000)"
        ) from None
    return env


# ----------------------------------------------------------------------------- one episode
def make_episode_info(
    reset_obs: Any,
    config: EnvConfig,
    *,
    policy: Optional[BasePolicy] = None,
    questions: Optional[Sequence[Any]] = None,
    episode: int = 0,
    seed: Optional[int] = None,
) -> EpisodeInfo:
    """The :class:`~reasoning_env.policies.EpisodeInfo` a policy is reset with, from the reset
    observation of an episode (its ``metadata`` holds budget, seed and tokenizer).

    Args:
        reset_obs: The observation ``env.reset(...)`` returned (or its dict).
        config: The environment's config (budget mode and token limits).
        policy: The policy to be reset; the episode's ``questions`` (gold answers included) are
            passed only when it declares ``needs_trusted_context``. ``None``: never passed.
        questions: ``env.questions`` of an in-process environment (trusted context), or ``None``.
        episode: Episode index in the run. seed: Fallback seed when the metadata has none.

    Returns:
        The info; ``tokenizer`` is ``None`` when the episode's tokenizer cannot be loaded here.
    """
    from reasoning_env.tokenization import TokenizerLoadError, get_tokenizer

    md = dict((reset_obs.get("metadata") if isinstance(reset_obs, dict) else getattr(reset_obs, "metadata", None)) or {})

    def field_of(name: str) -> Any:
        return reset_obs.get(name) if isinstance(reset_obs, dict) else getattr(reset_obs, name, None)

    try:
        tokenizer = get_tokenizer(md.get("tokenizer_name") or config.tokenizer_name)
    except (TokenizerLoadError, TypeError):
        tokenizer = None
    trusted = policy is not None and policy.needs_trusted_context
    return EpisodeInfo(
        episode=int(episode),
        seed=int(md.get("seed", seed if seed is not None else 0)),
        total_budget=int(md.get("total_budget", field_of("total_budget") or 0)),
        num_questions=int(md.get("num_questions", field_of("num_questions") or 0)),
        tokenizer_name=str(md.get("tokenizer_name") or config.tokenizer_name),
        tokenizer=tokenizer,
        min_tokens=config.min_tokens,
        max_tokens=config.max_tokens,
        max_tokens_per_step=config.max_tokens_per_step,
        hard_cap_mode=config.hard_cap_mode,
        reset_metadata=md,
        questions=list(questions) if (questions is not None and trusted) else None,
    )


@dataclass
class EpisodeResult:
    """What one episode produced: step rows with their extra columns, the episode row and its extras."""

    steps: list[StepRow]
    step_extras: list[dict]
    episode: EpisodeRow
    episode_extras: dict


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def run_episode(
    env: Any,
    policy: BasePolicy,
    *,
    index: int,
    seed: int,
    run_id: str,
    config: EnvConfig,
    reset_kwargs: dict[str, Any],
    curves: SolverCurves,
    oracle: Optional[OracleCache],
    step_tokenizer: Optional[str] = None,
    max_response_chars: Optional[int] = None,
) -> EpisodeResult:
    """Play one episode of ``policy`` on ``env`` (in-process env or :class:`RemoteEnv`).

    Args:
        index: Episode index in the run; seed: the episode seed.
        reset_kwargs: Extra reset arguments (``tokenizer_name``, ``total_budget``).
        step_tokenizer: Sent as ``metadata.tokenizer_name`` with every step (count with the
            policy's tokenizer when the reset did not set it).
        max_response_chars: Keep at most this many characters of each response in the rows.

    Raises:
        PolicyError: the policy failed (e.g. an endpoint down after its retries).
    """
    obs = as_observation(env.reset(seed=seed, episode_id=f"{policy.name}-{index:04d}", **reset_kwargs))
    md = dict(getattr(obs, "metadata", None) or {})
    questions = getattr(env, "questions", None)
    info = make_episode_info(obs, config, policy=policy, questions=questions, episode=index, seed=seed)
    tokenizer = info.tokenizer
    policy.reset(info)
    rows: list[StepRow] = []
    extras: list[dict] = []
    while not obs.done:
        t0 = time.perf_counter()
        out = policy.act(obs)
        latency = time.perf_counter() - t0
        action = make_action(out.response, out.grading_response, step_tokenizer, out.num_generated_tokens)
        action_md = action.metadata
        obs = as_observation(env.step(action))
        ls = obs.last_step
        subject = None
        if questions is not None and ls is not None and ls.index < len(questions):
            subject = questions[ls.index].subject
        row = step_row_from_observation(
            obs,
            run_id=run_id,
            policy=policy.name,
            episode=index,
            reset_metadata=md,
            hard_cap_mode=config.hard_cap_mode,
            response=out.response,
            grading_response=action_md.get("grading_response"),
            max_response_chars=max_response_chars,
            latency_s=latency,
            subject=subject,
        )
        ex: dict[str, Any] = {
            "kind": policy.kind,
            "graded_text": ls.graded_text,
            "expected_correct": float(curves.p(ls.tokens, ls.problem_type, ls.difficulty)) if ls.tokens > 0 else 0.0,
        }
        for k, v in (out.meta or {}).items():
            ex[f"policy_{k}"] = v if _scalar(v) else str(v)
        rows.append(row)
        extras.append(ex)
    n_q = int(md.get("num_questions", obs.num_questions))
    if rows:
        ep = episode_row_from_steps(rows, num_questions=n_q)
    else:  # the budget was below min_tokens at reset: nothing answered
        ep = EpisodeRow(
            run_id=run_id, policy=policy.name, episode=index, episode_id=str(md.get("episode_id", "")), seed=int(md.get("seed", seed)),
            num_correct=0, num_answered=0, num_questions=n_q, total_spent=0, total_budget=int(md.get("total_budget", 0)),
            utilisation=0.0, ran_dry=True, episode_reward=0.0, budget_source=str(md.get("budget_source", "")),
            tokenizer_name=str(md.get("tokenizer_name", "")),
        )
    exp = float(sum(e["expected_correct"] for e in extras))
    qinfo: Optional[list[tuple]] = None
    golds: list[str] = []
    if questions is not None:
        qinfo = [(q.problem_type, q.difficulty) for q in questions]
        golds = [q.gold_answer for q in questions]
    elif rows and len(rows) == n_q:
        qinfo = [(r.problem_type, r.difficulty) for r in rows]
        golds = [r.gold_answer for r in rows]
    oracle_exp = float("nan")
    if oracle is not None and qinfo is not None:
        from reasoning_env.policies.text import minimal_tokens

        lows = [minimal_tokens(tokenizer, g) for g in golds] if tokenizer is not None else None
        oracle_exp = oracle.expected_correct(qinfo, ep.total_budget, lows)
    ep_extras = {
        "kind": policy.kind,
        "unanswered": int(n_q - ep.num_answered),
        "expected_correct": exp,
        "oracle_expected_correct": oracle_exp,
        "regret": oracle_exp - exp,
    }
    return EpisodeResult(rows, extras, ep, ep_extras)


# ----------------------------------------------------------------------------- the evaluation
@dataclass
class EvalResult:
    """What :func:`evaluate` produced.

    Attributes:
        run_dir: The run folder (``None`` when nothing was written).
        steps, episodes, summary: The frames written to it (summary includes timing columns).
        meta: ``run.json`` contents. failed: policy name -> error message.
    """

    run_dir: Optional[Path]
    steps: pd.DataFrame
    episodes: pd.DataFrame
    summary: pd.DataFrame
    meta: dict
    failed: dict[str, str] = field(default_factory=dict)


def _resolve_tokenizer(policy: BasePolicy, config: EnvConfig, notes: list[str]) -> str:
    from reasoning_env.tokenization import TokenizerLoadError, get_tokenizer

    cand = policy.tokenizer_name
    if cand is None and policy.kind == "llm":
        cand = getattr(policy, "model", None) if isinstance(getattr(policy, "model", None), str) else None
    if cand:
        try:
            get_tokenizer(cand)
            policy.tokenizer_name = cand
            return cand
        except (TokenizerLoadError, TypeError) as exc:
            if policy.tokenizer_name:  # asked for explicitly: that is an error
                raise PolicyError(f"policy {policy.name!r}: tokenizer {cand!r} cannot be loaded: {exc}") from None
            notes.append(
                f"{policy.name}: model {cand!r} has no loadable tokenizer here; tokens are counted with the config's "
                f"{config.tokenizer_name!r} (pass --llm-tokenizer for exact counts)"
            )
    return config.tokenizer_name


def _budget_note(mode: str, total_budget: Optional[int], config: EnvConfig, tokenizers: list[str], episodes: pd.DataFrame) -> str:
    mean_b = float(episodes["total_budget"].mean()) if not episodes.empty else float("nan")
    mean_text = f"mean budget {mean_b:.0f} tokens" if math.isfinite(mean_b) else "no episode finished, so no mean budget"
    if total_budget is not None:
        return f"Budget: fixed at {total_budget} tokens per episode (--total-budget), counted with {', '.join(tokenizers)}."
    if mode == "config":
        return (
            f"Budget: config formula ({config.config_budget()} units: budget_ratio x num_questions x "
            f"(min_tokens + max_tokens) / 2, or total_budget), counted with {', '.join(tokenizers)}."
        )
    return (
        f"Budgets are tokenizer-native: int({config.budget_ratio:g} x tokens of the episode's question texts) in the "
        f"policy tokenizer's units ({', '.join(tokenizers)}); {mean_text} for "
        f"{config.num_questions} questions."
    )


def evaluate(
    policies: Sequence[BasePolicy],
    *,
    config: Optional[EnvConfig] = None,
    n_episodes: int = 20,
    seed: int = 42,
    out: Union[str, Path, None] = None,
    budget_mode: str = "tokenizer_native",
    total_budget: Optional[int] = None,
    server_url: Union[str, Sequence[str], None] = None,
    workers: int = 1,
    curves: Optional[SolverCurves] = None,
    progress: bool = True,
    report: bool = True,
    max_response_chars: Optional[int] = None,
    remote_factory: Optional[Callable[[str], Any]] = None,
    notes: Optional[list[str]] = None,
    run_meta: Optional[dict[str, Any]] = None,
    pools: Any = None,
) -> EvalResult:
    """Run every policy on ``n_episodes`` seeded episodes and write the run folder.

    Args:
        policies: Policies with unique names.
        config: Environment config (default: :class:`EnvConfig` defaults).
        n_episodes: Episodes per policy (>= 1). seed: Base seed (episode seeds: :func:`episode_seed`).
        out: Run folder (default ``runs/eval-<YYYYmmdd-HHMMSS>``); ``None`` with ``report=False``
            still writes to the default.
        budget_mode: ``"tokenizer_native"`` (reset with the policy's tokenizer name) or
            ``"config"`` (config formula; the policy's tokenizer still counts, via step metadata).
        total_budget: Fixed budget per episode (tokens); overrides ``budget_mode``.
        server_url: Play against a remote OpenEnv server instead of in-process (a URL, or several
            replicas: episodes are spread over them and replayed from their seed when one dies).
        workers: Episodes played in parallel per policy (threads; useful for LLM endpoints).
        curves: Solver curves for the regret (default: the defaults).
        progress: Show a tqdm bar per policy (stderr).
        report: Write ``report.html``.
        max_response_chars: Truncate stored responses (``None``: keep all).
        remote_factory: ``url -> RemoteEnv``-like object (tests; default :func:`connect_remote`).
        notes: Extra notes for ``run.json``. run_meta: extra ``run.json`` fields.
        pools: Pre-loaded question pools (:class:`reasoning_env.sources.PoolSet`) instead of the
            config's sources (in-process only).

    Returns:
        An :class:`EvalResult`. A policy that fails (:class:`PolicyError`) is reported in
        ``failed`` and left out; the others still run.

    Raises:
        ValueError: bad arguments (duplicate names, n_episodes < 1, unknown budget mode, a
            policy needing trusted context with ``server_url``).
    """
    from tqdm.auto import tqdm

    from reasoning_env.env import ReasoningEconomicsEnv
    from reasoning_env.grading import Grader
    from workbench import analysis
    from workbench.runs import RunWriter

    config = config or EnvConfig()
    curves = curves or SolverCurves()
    if n_episodes < 1:
        raise ValueError(f"n_episodes must be >= 1, got {n_episodes}")
    if budget_mode not in BUDGET_MODES:
        raise ValueError(f"budget_mode must be one of {list(BUDGET_MODES)}, got {budget_mode!r}")
    names = [p.name for p in policies]
    if not names:
        raise ValueError("no policies to evaluate; pass --policies with at least one of: " + ", ".join(POLICY_NAMES))
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1 (episodes played in parallel), got {workers!r}")
    if max_response_chars is not None and max_response_chars < 0:
        raise ValueError(f"max_response_chars must be >= 0 characters (or unset to keep whole responses), got {max_response_chars}")
    if len(set(names)) != len(names):
        raise ValueError(f"policy names must be unique, got {names}")
    if server_url:
        trusted = [p.name for p in policies if p.needs_trusted_context]
        if trusted:
            raise ValueError(
                f"policies {trusted} need the episode's gold answers (trusted context), which a remote server never "
                "sends; run them in-process (without --server-url)"
            )
    notes = list(notes or [])
    run_dir = Path(out) if out else Path("runs") / f"eval-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    run_id = run_dir.name
    seeds = [episode_seed(seed, i) for i in range(n_episodes)]
    oracle = OracleCache(curves, cap=config.max_tokens_per_step, min_tokens=config.min_tokens)

    env_pools = None
    grader = Grader(timeout_s=config.grading_timeout_s)
    if server_url:
        factory = remote_factory or connect_remote
        # One set of replicas for the whole run, so that its sessions spread over them.
        target = server_url if remote_factory else Replicas(server_url)

        def make_env() -> Any:
            return factory(target)
    else:
        env_pools = pools if pools is not None else ReasoningEconomicsEnv(config, grader=grader).pools  # load once, share

        def make_env() -> Any:
            return ReasoningEconomicsEnv(config, pools=env_pools, grader=grader)

    # Warm up what every policy needs (tokenizer, grader imports) so per-policy wall_s is comparable.
    try:
        from reasoning_env.tokenization import get_tokenizer

        get_tokenizer(config.tokenizer_name)
    except Exception:  # reported by the env on reset
        pass
    grader.grade("\\boxed{1}", "2")
    writer = RunWriter(run_dir, kind="evaluation", config=config)
    timing: dict[str, dict[str, float]] = {}
    failed: dict[str, str] = {}
    tokenizers_used: list[str] = []
    sources_used = None
    t_start = time.perf_counter()
    for policy in policies:
        try:
            tok_name = _resolve_tokenizer(policy, config, notes)
        except PolicyError as exc:
            failed[policy.name] = str(exc)
            print(f"[{policy.name}] skipped: {exc}", file=sys.stderr)
            continue
        if tok_name not in tokenizers_used:
            tokenizers_used.append(tok_name)
        reset_kwargs: dict[str, Any] = {}
        step_tok = None
        if total_budget is not None:
            reset_kwargs["total_budget"] = int(total_budget)
            reset_kwargs["tokenizer_name"] = tok_name
        elif budget_mode == "tokenizer_native":
            reset_kwargs["tokenizer_name"] = tok_name
        elif tok_name != config.tokenizer_name:
            step_tok = tok_name
        kwargs = dict(run_id=run_id, config=config, reset_kwargs=reset_kwargs, curves=curves, oracle=oracle, step_tokenizer=step_tok, max_response_chars=max_response_chars)
        results: list[Optional[EpisodeResult]] = [None] * n_episodes
        bar = tqdm(total=n_episodes, desc=f"{policy.name:>18}", unit="ep", disable=not progress, file=sys.stderr, leave=True, dynamic_ncols=True)
        t0 = time.perf_counter()
        try:
            if workers == 1:
                env = make_env()
                try:
                    for i in range(n_episodes):
                        results[i] = run_episode(env, policy, index=i, seed=seeds[i], **kwargs)
                        bar.update(1)
                finally:
                    if hasattr(env, "close"):
                        env.close()
            else:
                def task(i: int) -> EpisodeResult:
                    env_i = make_env()
                    try:
                        return run_episode(env_i, policy.clone(), index=i, seed=seeds[i], **kwargs)
                    finally:
                        if hasattr(env_i, "close"):
                            env_i.close()

                with ThreadPoolExecutor(max_workers=workers) as pool:
                    futures = {pool.submit(task, i): i for i in range(n_episodes)}
                    for fut in futures:
                        results[futures[fut]] = fut.result()
                        bar.update(1)
        except PolicyError as exc:
            failed[policy.name] = str(exc)
            print(f"[{policy.name}] failed: {exc}", file=sys.stderr)
            continue
        finally:
            bar.close()
        wall = time.perf_counter() - t0
        lat = [s.latency_s for r in results if r for s in r.steps if s.latency_s is not None]
        timing[policy.name] = {"wall_s": round(wall, 3), "latency_s_mean": round(sum(lat) / len(lat), 6) if lat else float("nan")}
        for r in results:
            writer.add_steps(r.steps, r.step_extras)
            writer.add_episode(r.episode, r.episode_extras)
        if sources_used is None and not server_url and env_pools is not None:
            sources_used = [dict(s) for s in env_pools.sources_used]
        policy.close()

    steps = writer.steps_frame()
    episodes = writer.episodes_frame()
    summary = analysis.summary_table(episodes, steps, order=[p.name for p in policies])
    if not summary.empty:
        summary["wall_s"] = summary["policy"].map(lambda p: timing.get(p, {}).get("wall_s"))
        summary["latency_s_mean"] = summary["policy"].map(lambda p: timing.get(p, {}).get("latency_s_mean"))
    budget_note = _budget_note(budget_mode, total_budget, config, tokenizers_used or [config.tokenizer_name], episodes)
    for name, err in failed.items():
        notes.append(f"policy {name} failed: {err}")
    meta = {
        "seed": seed,
        "n_episodes": n_episodes,
        "episode_seeds": seeds,
        "policies": [p.describe() for p in policies if p.name not in failed],
        "failed_policies": failed,
        "budget_mode": "client" if total_budget is not None else budget_mode,
        "total_budget": total_budget,
        "budget_note": budget_note,
        "tokenizer_name": tokenizers_used,
        "sources_used": sources_used,
        "curves": curves.source,
        "server_url": server_url,
        "workers": workers,
        "wall_s": round(time.perf_counter() - t_start, 3),
        "notes": notes,
        **(run_meta or {}),
    }
    writer.meta.update(meta)
    writer.write()
    writer.write_summary(summary)
    curves.save(run_dir / "curves.json")
    if report:
        from workbench.report import write_report

        full_meta = {"run_id": run_id, **meta}
        write_report(run_dir, steps, episodes, summary, full_meta)
    return EvalResult(run_dir, steps, episodes, summary, meta, failed)


# ----------------------------------------------------------------------------- command line
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m workbench.evaluate",
        description="Evaluate policies on seeded episodes of the Reasoning Economics environment and write a run folder.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--n_episodes", "--n-episodes", dest="n_episodes", type=int, default=20, help="episodes per policy")
    p.add_argument("--seed", type=int, default=42, help="base seed (episode i uses a seed derived from it and i)")
    p.add_argument("--policies", "--baselines", dest="policies", default=None,
                   help=f"comma list of: {', '.join(POLICY_NAMES)} (default: {','.join(DEFAULT_POLICIES)}; with --server-url "
                        f"the budget baselines {','.join(BUDGET_BASELINES)}, since the others need gold answers a server never sends)")
    p.add_argument("--include_llm", "--include-llm", dest="include_llm", action="store_true", help="also run llm_api / llm_local when their BASELINE_* variables are set (seed compatibility)")
    p.add_argument("--config", help="EnvConfig YAML file (an env: top-level key is accepted)")
    p.add_argument("--data-dir", "--data_dir", dest="data_dir", help="folder with local data files (e.g. ../shared/data)")
    p.add_argument("--sources", help="comma list of question sources, e.g. gsm8k,math500 (overrides the config's)")
    p.add_argument("--out", help="run folder (default runs/eval-<timestamp>)")
    p.add_argument("--server-url", "--env_base_url", dest="server_url", nargs="+", default=None,
                   help="play against remote OpenEnv server(s) instead of in-process; several replicas spread the episodes, "
                        "and an episode whose replica dies is replayed from its seed on another")
    p.add_argument("--workers", type=int, default=1, help="episodes in parallel per policy (threads)")
    p.add_argument("--budget", choices=BUDGET_MODES, default="tokenizer_native", help="tokenizer_native: reset with the policy tokenizer; config: the config formula")
    p.add_argument("--total-budget", dest="total_budget", type=int, help="fixed budget per episode in tokens (overrides --budget)")
    p.add_argument("--baseline-answer", dest="baseline_answer", choices=("solver", "placeholder"), default=None,
                   help="budget baselines answer like the simulated solver at the length they spend (solver; the default in-process) "
                        "or with \\boxed{0} (placeholder: the seed's smoke test; the default with --server-url, where gold answers are not known)")
    p.add_argument("--curves", help="solver curves JSON (a run folder's curves.json or SolverCurves.save output)")
    p.add_argument("--fit-curves", dest="fit_curves", help="fit the solver curves from this run folder's trajectories first")
    p.add_argument("--fit-policies", dest="fit_policies", help="comma list of policies whose rows --fit-curves uses (default all)")
    p.add_argument("--max-response-chars", dest="max_response_chars", type=int, help="truncate stored responses to this many characters")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bars")
    p.add_argument("--no-report", dest="report", action="store_false", help="do not write report.html")
    g = p.add_argument_group("LLM policies (llm_api: BASELINE_API_*, llm_local: BASELINE_LOCAL_*; flags win)")
    g.add_argument("--llm-base-url", dest="llm_base_url")
    g.add_argument("--llm-api-key", dest="llm_api_key")
    g.add_argument("--llm-model", dest="llm_model")
    g.add_argument("--llm-tokenizer", dest="llm_tokenizer", help="tokenizer the env counts with (default: the model name if it loads, else the config's)")
    g.add_argument("--llm-temperature", dest="llm_temperature", type=float)
    g.add_argument("--llm-max-tokens", dest="llm_max_tokens", type=int, help="extra cap on tokens per step (below step_token_cap)")
    g.add_argument("--llm-timeout", dest="llm_timeout", type=float, help="seconds per request")
    g.add_argument("--llm-retries", dest="llm_retries", type=int)
    g.add_argument("--hf-model", dest="hf_model", help="hf_local: local folder or Hub id (default BASELINE_LOCAL_MODEL)")
    g.add_argument("--hf-device", dest="hf_device")
    g.add_argument("--hf-dtype", dest="hf_dtype")
    return p


def _config_from_args(args: argparse.Namespace) -> EnvConfig:
    config = EnvConfig.from_yaml(args.config) if args.config else EnvConfig()
    changes: dict[str, Any] = {}
    if args.data_dir:
        changes["data_dir"] = args.data_dir
    if args.sources:
        changes["sources"] = [s.strip() for s in args.sources.split(",") if s.strip()]
    return config.replace(**changes) if changes else config


def _policies_from_args(args: argparse.Namespace, curves: SolverCurves) -> list[BasePolicy]:
    names = [n.strip() for n in str(args.policies or default_policy_names(args.server_url)).split(",") if n.strip()]
    if args.include_llm:
        for kind, prefix in (("llm_api", "BASELINE_API_"), ("llm_local", "BASELINE_LOCAL_")):
            if kind not in names and os.environ.get(prefix + "BASE_URL") and os.environ.get(prefix + "MODEL"):
                names.append(kind)
    unknown = [n for n in names if n not in POLICY_NAMES and n != "oracle"]
    if unknown:
        raise ValueError(f"unknown policies {unknown}; available: {', '.join(POLICY_NAMES)}")
    llm = {
        "base_url": args.llm_base_url,
        "api_key": args.llm_api_key,
        "model": args.llm_model,
        "tokenizer_name": args.llm_tokenizer,
        "temperature": args.llm_temperature,
        "max_tokens": args.llm_max_tokens,
        "timeout_s": args.llm_timeout,
        "retries": args.llm_retries,
        "seed": args.seed,
    }
    hf = {"model": args.hf_model, "tokenizer_name": args.llm_tokenizer, "temperature": args.llm_temperature, "max_tokens": args.llm_max_tokens, "device": args.hf_device, "dtype": args.hf_dtype, "seed": args.seed}
    return [make_policy(n, curves=curves, llm=llm, hf=hf, baseline_answer=_baseline_answer(args)) for n in names]


def default_policy_names(server_url: Optional[str]) -> str:
    """The ``--policies`` default: every in-process policy, or only the budget baselines against a
    server (the simulated solver and the oracle need gold answers, which a server never sends)."""
    return ",".join(BUDGET_BASELINES if server_url else DEFAULT_POLICIES)


def _baseline_answer(args: argparse.Namespace) -> str:
    """``--baseline-answer``, defaulting to ``solver`` in-process and ``placeholder`` against a server
    (the solver needs the gold answers, which a remote server never sends)."""
    chosen = getattr(args, "baseline_answer", None)
    if chosen:
        return chosen
    return "placeholder" if getattr(args, "server_url", None) else "solver"


def main(argv: Optional[list[str]] = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 a policy failed, 2 bad usage)."""
    from workbench import analysis

    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    warnings.filterwarnings("ignore", message=".*Timeout is disabled.*")
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    t0 = time.perf_counter()
    try:
        config = _config_from_args(args)
        curves = SolverCurves.load(args.curves) if args.curves else SolverCurves()
        if args.fit_curves:
            fit_pols = [s.strip() for s in args.fit_policies.split(",")] if args.fit_policies else None
            curves = fit_run(args.fit_curves, policies=fit_pols, base=curves)
        policies = _policies_from_args(args, curves)
    except (ConfigError, ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        result = evaluate(
            policies,
            config=config,
            n_episodes=args.n_episodes,
            seed=args.seed,
            out=args.out,
            budget_mode=args.budget,
            total_budget=args.total_budget,
            server_url=args.server_url,
            workers=args.workers,
            curves=curves,
            progress=args.progress,
            report=args.report,
            max_response_chars=args.max_response_chars,
            run_meta={"command": "python -m workbench.evaluate " + shlex.join(sys.argv[1:] if argv is None else list(argv))},
        )
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print()
    print(analysis.format_table(result.summary))
    print()
    print(result.meta["budget_note"])
    print(
        "acc: correct / questions (unanswered = wrong); exp_acc: expected under the solver curves "
        f"({result.meta['curves']}); tok/q: tokens per answered question; util: spent / budget; dry: share of "
        "episodes that ran out of budget; reward columns: mean per episode; regret: oracle allocation's expected "
        "correct answers minus the policy's, per episode."
    )
    for note in result.meta.get("notes") or []:
        print(f"note: {note}")
    print(f"run folder: {result.run_dir}  ({len(result.steps)} steps, {time.perf_counter() - t0:.1f} s)")
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Running policies over seeded episodes: the evaluation loop behind ``python -m workbench.evaluate``.

Every policy plays the same episodes: episode ``i`` of evaluation seed ``s`` is reset with seed
:func:`~workbench.evaluation.episodes.episode_seed` ``(s, i)``, so it gets the same questions and
(for the same tokenizer) the same budget, whatever the policy. Conditions repeat those episodes:

- several evaluation seeds (``seeds``): more episodes, pooled in the summary (with a per-seed
  table to show how much one seed's result moves);
- a budget sweep (``budget_ratios``): the same episodes at each ``budget_ratio`` (tokenizer-native
  or config budgets scale with it);
- a calibration sweep (``caps``): the same episodes with a per-question cap
  (``max_tokens_per_step``) and a budget of ``cap x num_questions``, so the cap is what limits
  each answer (:mod:`workbench.calibration`).

Each step and episode row carries the condition (``base_seed``, ``budget_ratio``, ``token_cap``)
and a unique ``episode`` index; the same index means the same seed for every policy (paired).
The run folder is written by :mod:`workbench.evaluation.writer`.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reasoning_env.config import EnvConfig
from reasoning_env.policies import (
    POLICY_NAMES,
    BasePolicy,
    OracleAllocationPolicy,
    OracleCache,
    PolicyError,
    SolverCurves,
)
from reasoning_env.remote import RemoteEnv, Replicas, parse_urls
from workbench.evaluation.episodes import EpisodeResult, episode_seed, run_episode
from workbench.evaluation.extras import BUDGET_MODES, budget_reset_kwargs
from workbench.evaluation.writer import EvalResult, write_run

__all__ = ["Condition", "EvalResult", "evaluate"]


@dataclass(frozen=True)
class Condition:
    """One setting the episodes are played under.

    Attributes:
        config: The environment config of the condition.
        columns: Constant columns of its rows (``budget_ratio``, ``token_cap``).
        total_budget: Fixed budget per episode (tokens), or ``None``.
    """

    config: EnvConfig
    columns: dict
    total_budget: int | None = None


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


def _number_list(values: Sequence[Any] | None, what: str, *, integer: bool) -> list | None:
    if values is None:
        return None
    out = []
    for v in values:
        if isinstance(v, bool):
            raise ValueError(f"{what} must be numbers, got {v!r}")
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"{what} must be numbers, got {v!r}") from None
        if not math.isfinite(x) or x <= 0 or (integer and x != int(x)):
            raise ValueError(f"{what} must be {'whole numbers' if integer else 'numbers'} > 0, got {v!r}")
        out.append(int(x) if integer else x)
    if not out:
        raise ValueError(f"{what}: give at least one value")
    if len(set(out)) != len(out):
        raise ValueError(f"{what} repeat a value: {out}")
    return out


def conditions_for(
    config: EnvConfig,
    *,
    budget_ratios: Sequence[float] | None = None,
    caps: Sequence[int] | None = None,
    total_budget: int | None = None,
) -> list[Condition]:
    """The conditions of a run (see the module docstring).

    Raises:
        ValueError: both a budget sweep and caps, a budget sweep with a fixed budget, or bad values
            (the config's validation message when a ratio or cap is out of range).
    """
    from reasoning_env.config import ConfigError

    ratios = _number_list(budget_ratios, "budget ratios", integer=False)
    cap_list = _number_list(caps, "caps", integer=True)
    if ratios and cap_list:
        raise ValueError("--budget-ratios and --caps are separate sweeps: run them one at a time")
    if ratios and total_budget is not None:
        raise ValueError(
            "--budget-ratios scales the budget formula; it cannot be combined with --total-budget (a fixed budget)"
        )
    try:
        if cap_list:
            return [
                Condition(
                    config.replace(max_tokens_per_step=c),
                    {"budget_ratio": math.nan, "token_cap": c},
                    total_budget if total_budget is not None else c * config.num_questions,
                )
                for c in cap_list
            ]
        if ratios:
            return [Condition(config.replace(budget_ratio=r), {"budget_ratio": r}) for r in ratios]
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return [
        Condition(
            config,
            {"budget_ratio": math.nan if total_budget is not None else float(config.budget_ratio)},
            total_budget,
        )
    ]


def connect_remote(url: str | Sequence[str] | Replicas) -> RemoteEnv:
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
            "cannot connect to the environment server at "
            f"{', '.join(url.urls if isinstance(url, Replicas) else parse_urls(url))} "
            f"({exc}); is it running? "
            "(start one with: python -m reasoning_env.server --port 8000)"
        ) from None
    return env


def _check_arguments(
    policies: Sequence[BasePolicy],
    *,
    n_episodes: int,
    budget_mode: str,
    workers: Any,
    seed: int,
    seeds: Sequence[int] | None,
    max_response_chars: int | None,
    server_url: Any,
    sweep: bool,
) -> list[int]:
    """Validate :func:`evaluate`'s arguments; returns the evaluation seeds.

    Raises:
        ValueError: see :func:`evaluate`.
    """
    if n_episodes < 1:
        raise ValueError(f"n_episodes must be >= 1, got {n_episodes}")
    if budget_mode not in BUDGET_MODES or budget_mode == "explicit":
        raise ValueError(
            "budget_mode must be one of ['tokenizer_native', 'config'] (a fixed budget: "
            f"total_budget), got {budget_mode!r}"
        )
    names = [p.name for p in policies]
    if not names:
        raise ValueError("no policies to evaluate; pass --policies with at least one of: " + ", ".join(POLICY_NAMES))
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1 (episodes played in parallel), got {workers!r}")
    if max_response_chars is not None and max_response_chars < 0:
        raise ValueError(
            f"max_response_chars must be >= 0 characters (or unset to keep whole responses), got {max_response_chars}"
        )
    if len(set(names)) != len(names):
        raise ValueError(f"policy names must be unique, got {names}")
    base_seeds = [int(s) for s in (seeds if seeds else [seed])]
    if len(set(base_seeds)) != len(base_seeds):
        raise ValueError(f"seeds repeat a value: {base_seeds}")
    if server_url:
        trusted = [p.name for p in policies if p.needs_trusted_context]
        if trusted:
            raise ValueError(
                f"policies {trusted} need the episode's gold answers (trusted context), which a remote server never "
                "sends; run them in-process (without --server-url)"
            )
        if sweep:
            raise ValueError(
                "budget and cap sweeps change the environment's config, which a remote server "
                "owns: run them in-process"
            )
    return base_seeds


def _play_condition(
    policy: BasePolicy,
    cond: Condition,
    *,
    first_index: int,
    plan: Sequence[tuple[int, int]],
    make_env: Callable[[], Any],
    workers: int,
    on_episode: Callable[[EpisodeResult], Any],
    run_id: str,
    tokenizer_name: str,
    budget_mode: str,
    curves: SolverCurves,
    oracle: OracleCache,
    max_response_chars: int | None,
    on_step: Callable[[], Any] | None = None,
) -> list[EpisodeResult]:
    """Every episode of ``plan`` (``(base seed, episode seed)``) for one policy under one condition,
    in order (``workers`` threads, each with its own environment and policy clone). ``on_episode`` is called
    with each episode's result as it ends (in order), ``on_step`` after every answered question.

    Raises:
        PolicyError: the policy failed.
    """
    mode = "explicit" if cond.total_budget is not None else budget_mode
    reset_kwargs, step_tok = budget_reset_kwargs(
        mode,
        tokenizer_name=tokenizer_name,
        config_tokenizer=cond.config.tokenizer_name,
        total_budget=cond.total_budget,
    )
    kwargs = dict(
        run_id=run_id,
        config=cond.config,
        reset_kwargs=reset_kwargs,
        curves=curves,
        oracle=oracle,
        step_tokenizer=step_tok,
        max_response_chars=max_response_chars,
        on_step=on_step,
    )
    jobs = [(first_index + j, base, ep_seed) for j, (base, ep_seed) in enumerate(plan)]

    def play(env: Any, pol: BasePolicy, job: tuple[int, int, int]) -> EpisodeResult:
        idx, base, ep_seed = job
        return run_episode(
            env, pol, index=idx, seed=ep_seed, extra_columns={"base_seed": base, **cond.columns}, **kwargs
        )

    if workers == 1:
        env = make_env()
        out = []
        try:
            for job in jobs:
                out.append(play(env, policy, job))
                on_episode(out[-1])
        finally:
            if hasattr(env, "close"):
                env.close()
        return out

    def task(job: tuple[int, int, int]) -> EpisodeResult:
        env_i = make_env()
        try:
            return play(env_i, policy.clone(), job)
        finally:
            if hasattr(env_i, "close"):
                env_i.close()

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(task, job) for job in jobs]
        out = []
        for fut in futures:
            out.append(fut.result())
            on_episode(out[-1])
    return out


def _progress_callbacks(bar: Any, per_question: bool) -> tuple[Callable[[], Any] | None, Callable[[Any], Any]]:
    """``(on_step, on_episode)`` moving ``bar`` by answered questions (an episode that ran dry adds its unasked
    questions when it ends), or by episodes."""
    if not per_question:
        return None, lambda result: bar.update(1)
    return (
        lambda: bar.update(1),
        lambda result: bar.update(max(0, result.episode.num_questions - len(result.steps))),
    )


def _progress_bar_class() -> Any:
    """tqdm's notebook bar where it can draw (ipywidgets installed), else its text bar: in a notebook
    without ipywidgets ``tqdm.auto`` warns "IProgress not found" on every bar."""
    import importlib.util

    if importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.auto import tqdm
    else:
        from tqdm.std import tqdm
    return tqdm


def evaluate(
    policies: Sequence[BasePolicy],
    *,
    config: EnvConfig | None = None,
    n_episodes: int = 20,
    seed: int = 42,
    seeds: Sequence[int] | None = None,
    budget_ratios: Sequence[float] | None = None,
    caps: Sequence[int] | None = None,
    out: str | Path | None = None,
    budget_mode: str = "tokenizer_native",
    total_budget: int | None = None,
    server_url: str | Sequence[str] | None = None,
    workers: int = 1,
    curves: SolverCurves | None = None,
    progress: bool = True,
    report: bool = True,
    max_response_chars: int | None = None,
    remote_factory: Callable[[str], Any] | None = None,
    notes: list[str] | None = None,
    run_meta: dict[str, Any] | None = None,
    pools: Any = None,
    n_resamples: int = 2000,
    overwrite: bool = False,
) -> EvalResult:
    """Run every policy on ``n_episodes`` seeded episodes (per seed and condition) and write the
    run folder.

    Args:
        policies: Policies with unique names.
        config: Environment config (default: :class:`EnvConfig` defaults).
        n_episodes: Episodes per policy, seed and condition (>= 1).
        seed: Base seed (episode seeds: :func:`~workbench.evaluation.episodes.episode_seed`).
        seeds: Several base seeds (overrides ``seed``): their episodes are pooled.
        budget_ratios: A budget sweep: the same episodes at each ratio (in-process only).
        caps: A calibration sweep: per-question caps (tokens), budget ``cap x num_questions``
            unless ``total_budget`` is given (in-process only).
        out: Run folder (default a new ``runs/eval-<YYYYmmdd-HHMMSS>[-N]``). A folder that
            already holds a run (``run.json``) is refused unless ``overwrite``.
        budget_mode: ``"tokenizer_native"`` (reset with the policy's tokenizer name) or
            ``"config"`` (config formula; the policy's tokenizer still counts, via step metadata).
        total_budget: Fixed budget per episode (tokens); overrides ``budget_mode``.
        server_url: Play against a remote OpenEnv server instead of in-process (a URL, or several
            replicas: episodes are spread over them and replayed from their seed when one dies).
        workers: Episodes played in parallel per policy (threads; useful for LLM endpoints).
        curves: Solver curves of the simulated policies, the oracle and the regret (default:
            the defaults).
        progress: Show a tqdm bar per policy (stderr). report: Write ``report.html``.
        max_response_chars: Truncate stored responses (``None``: keep all).
        remote_factory: ``url -> remote env`` (tests; default :func:`connect_remote`).
        notes: Extra notes for ``run.json``. run_meta: extra ``run.json`` fields.
        pools: Pre-loaded question pools (:class:`reasoning_env.sources.PoolSet`) instead of the
            config's sources (in-process only).
        n_resamples: Bootstrap resamples of the intervals (>= 100).
        overwrite: Replace the run already in ``out`` (its files are removed just before the new
            run is written, so none is left beside it).

    Returns:
        An :class:`EvalResult`. A policy that fails (:class:`PolicyError`) is reported in
        ``failed`` and left out; the others still run.

    Raises:
        ValueError: bad arguments (duplicate names, n_episodes < 1, unknown budget mode, a
            policy needing trusted context with ``server_url``, a sweep against a server,
            ``n_resamples`` < 100); :class:`~workbench.runs.RunFolderError` (a ``ValueError``):
            ``out`` already holds a run and ``overwrite`` is False, or cannot be created.
    """
    tqdm = _progress_bar_class()

    from reasoning_env.env import ReasoningEconomicsEnv
    from reasoning_env.grading import Grader
    from workbench.runs import claim_run_dir, clear_run_files, fresh_run_dir

    config = config or EnvConfig()
    curves = curves or SolverCurves()
    base_seeds = _check_arguments(
        policies,
        n_episodes=n_episodes,
        budget_mode=budget_mode,
        workers=workers,
        seed=seed,
        seeds=seeds,
        max_response_chars=max_response_chars,
        server_url=server_url,
        sweep=bool(budget_ratios or caps),
    )
    conds = conditions_for(config, budget_ratios=budget_ratios, caps=caps, total_budget=total_budget)
    notes = list(notes or [])
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 100:
        # checked before playing: the summary would otherwise hold no interval at all
        raise ValueError(f"n_resamples must be at least 100 (bootstrap resamples), got {n_resamples!r}")
    run_dir = fresh_run_dir("runs", "eval") if not out else out
    with claim_run_dir(run_dir, overwrite=overwrite) as run_dir:  # held until the run is written
        # episode index -> (base seed, episode seed); the same indices in every condition
        plan = [(s, episode_seed(s, i)) for s in base_seeds for i in range(n_episodes)]
        grader = Grader(timeout_s=config.grading_timeout_s)
        env_pools = (
            None
            if server_url
            else (pools if pools is not None else ReasoningEconomicsEnv(config, grader=grader).pools)
        )  # load once, share
        factory = remote_factory or connect_remote
        # One set of replicas for the whole run, so that its sessions spread over them.
        target = (server_url if remote_factory else Replicas(server_url)) if server_url else None

        def env_maker(cond: Condition) -> Callable[[], Any]:
            if server_url:
                return lambda: factory(target)
            return lambda: ReasoningEconomicsEnv(cond.config, pools=env_pools, grader=grader)

        # Warm up what every policy needs (tokenizer, grader imports) so per-policy wall_s is comparable.
        from reasoning_env.tokenization import TokenizerLoadError, get_tokenizer

        try:
            get_tokenizer(config.tokenizer_name)
        except TokenizerLoadError:  # reported by the env on reset
            pass
        grader.grade("\\boxed{1}", "2")
        # one oracle cache per condition, shared by every policy's regret and the oracle policy
        oracles = [
            OracleCache(curves, cap=c.config.max_tokens_per_step, min_tokens=c.config.min_tokens) for c in conds
        ]
        results_all: list[EpisodeResult] = []
        timing: dict[str, dict[str, float]] = {}
        failed: dict[str, str] = {}
        tokenizers_used: list[str] = []
        sources_used = None
        t_start = time.perf_counter()
        oracle_s = 0.0
        for policy in policies:
            try:
                tok_name = _resolve_tokenizer(policy, config, notes)
            except PolicyError as exc:
                failed[policy.name] = str(exc)
                print(f"[{policy.name}] skipped: {exc}", file=sys.stderr)
                continue
            if tok_name not in tokenizers_used:
                tokenizers_used.append(tok_name)
            mine: list[EpisodeResult] = []
            # A real model takes minutes an episode: its bar counts answered questions (an episode that ran dry
            # adds its unasked ones when it ends); the others count episodes.
            per_question = policy.kind == "llm"
            bar = tqdm(
                total=len(plan) * (sum(c.config.num_questions for c in conds) if per_question else len(conds)),
                desc=f"{policy.name:>18}",
                unit="q" if per_question else "ep",
                disable=not progress,
                file=sys.stderr,
                leave=True,
                dynamic_ncols=True,
            )
            on_step, on_episode = _progress_callbacks(bar, per_question)
            t0 = time.perf_counter()
            solved0 = sum(o.solve_s for o in oracles)
            try:
                for ci, cond in enumerate(conds):
                    if isinstance(policy, OracleAllocationPolicy) and policy.curves is curves:
                        policy.oracle_cache = oracles[ci]
                    mine.extend(
                        _play_condition(
                            policy,
                            cond,
                            first_index=ci * len(plan),
                            plan=plan,
                            make_env=env_maker(cond),
                            workers=workers,
                            on_episode=on_episode,
                            on_step=on_step,
                            run_id=run_dir.name,
                            tokenizer_name=tok_name,
                            budget_mode=budget_mode,
                            curves=curves,
                            oracle=oracles[ci],
                            max_response_chars=max_response_chars,
                        )
                    )
            except PolicyError as exc:
                failed[policy.name] = str(exc)
                print(f"[{policy.name}] failed: {exc}", file=sys.stderr)
                continue
            finally:
                bar.close()
            lat = [s.latency_s for r in mine for s in r.steps if s.latency_s is not None]
            # the oracle plans of the regret are solved by the first policy for every one after it: timed apart
            solved = sum(o.solve_s for o in oracles) - solved0
            oracle_s += solved
            timing[policy.name] = {
                "wall_s": round(time.perf_counter() - t0 - solved, 3),
                "latency_s_mean": round(sum(lat) / len(lat), 6) if lat else float("nan"),
            }
            results_all.extend(mine)
            if sources_used is None and env_pools is not None:
                sources_used = [dict(s) for s in env_pools.sources_used]
            policy.close()

        for name, err in failed.items():
            notes.append(f"policy {name} failed: {err}")
        meta = {
            "seed": base_seeds[0],
            "seeds": base_seeds,
            "n_episodes": n_episodes,
            "episode_seeds": [s for _b, s in plan],
            "policies": [p.describe() for p in policies if p.name not in failed],
            "failed_policies": failed,
            "budget_mode": "client" if total_budget is not None else budget_mode,
            "total_budget": total_budget,
            "budget_ratios": [float(c.columns["budget_ratio"]) for c in conds] if budget_ratios else None,
            "caps": [int(c.columns["token_cap"]) for c in conds] if caps else None,
            "tokenizer_name": tokenizers_used,
            "sources_used": sources_used,
            "curves": curves.source,
            "server_url": server_url,
            "workers": workers,
            "notes": notes,
            # seconds solving the regret's oracle plans (once per episode, shared): not in any policy's wall_s
            "oracle_s": round(oracle_s, 3),
            **(run_meta or {}),
        }
        if overwrite:
            clear_run_files(run_dir)  # only now: a run that fails before this point leaves the old one whole
        return write_run(
            run_dir,
            results_all,
            config=config,
            curves=curves,
            meta=meta,
            order=[p.name for p in policies],
            timing=timing,
            failed=failed,
            report=report,
            tokenizers=tokenizers_used or [config.tokenizer_name],
            t_start=t_start,
            n_resamples=n_resamples,
        )

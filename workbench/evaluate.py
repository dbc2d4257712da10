"""The main job's command line: evaluate policies on seeded episodes and write a run folder.

    python -m workbench.evaluate --n_episodes 20 --seed 42
    python -m workbench.evaluate --seeds 42,43,44                     # three evaluation seeds, pooled
    python -m workbench.evaluate --budget-ratios 1,2,4,8              # budget sweep and frontier
    python -m workbench.evaluate --data-dir ../shared/data --sources gsm8k,math500
    python -m workbench.evaluate --policies llm_local --caps 64,128,256,512,1024 --fit-out  # calibration
    python -m workbench.evaluate --policies llm_local,sim_greedy,oracle_allocation --n_episodes 2
    python -m workbench.evaluate --serve-model --adapter runs/grpo/final --policies llm_local  # base vs trained
    python -m workbench.evaluate --benchmark --data-dir ../shared/data               # the standard benchmark

The work is done by :mod:`workbench.evaluation`: :mod:`~workbench.evaluation.episodes` plays one
episode, :mod:`~workbench.evaluation.runner` runs every policy over the seeded episodes (and the
seeds, budget ratios or caps of a sweep), :mod:`~workbench.evaluation.writer` writes the run
folder (schema: :mod:`workbench.runs`): ``run.json``, ``config.yaml``, ``trajectories.parquet`` /
``.jsonl``, ``episodes.parquet``, ``summary.csv`` (with 95% intervals), ``comparisons.csv``,
``curves.json``, ``report.html``. This module holds the command line and the remote-server
adapter. Reruns with the same arguments give byte-identical ``summary.csv`` apart from the
timing columns.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from reasoning_env.config import EnvConfig
from reasoning_env.errors import ReasoningEconomicsError
from reasoning_env.lora_adapter import DEFAULT_ADAPTER_NAME, AdapterInfo, check_adapter, served_lora_rank
from reasoning_env.model_server import DEFAULT_MODEL as DEFAULT_SERVED_MODEL
from reasoning_env.model_server import ModelServer
from reasoning_env.policies import (
    BUDGET_BASELINES,
    DEFAULT_POLICIES,
    POLICIES,
    POLICY_NAMES,
    BasePolicy,
    SolverCurves,
    fit_run,
    make_policy,
)
from reasoning_env.policies import describe as describe_policies
from reasoning_env.policies.curves import load_curves
from reasoning_env.policies.llm import EPISODE_FORMAT_FILE, OpenAIChatPolicy, read_episode_format
from reasoning_env.policies.oracle import OracleCache
from reasoning_env.policies.turn_cap import TURN_CAP_RULES, TurnCap
from reasoning_env.remote import RemoteEnv
from workbench.evaluation.episodes import EpisodeResult, episode_seed, make_episode_info, run_episode
from workbench.evaluation.runner import EvalResult, connect_remote, evaluate

logger = logging.getLogger(__name__)

__all__ = [
    "EpisodeResult",
    "EvalResult",
    "OracleCache",
    "RemoteEnv",
    "connect_remote",
    "episode_seed",
    "evaluate",
    "main",
    "make_episode_info",
    "run_episode",
]

#: ``--budget`` choices (a fixed budget is ``--total-budget``).
BUDGET_CHOICES = ("tokenizer_native", "config")


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults after each option; the epilog (the policy list) as written."""


# ----------------------------------------------------------------------------- command line
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m workbench.evaluate",
        description="Evaluate policies on seeded episodes of the Reasoning Economics environment "
        "and write a run folder.",
        formatter_class=_HelpFormatter,
        epilog="policies:\n"
        + "\n".join(f"  {n:18s} {d['kind']}: {d['summary']}" for n, d in describe_policies().items()),
    )
    p.add_argument("--n_episodes", "--n-episodes", dest="n_episodes", type=int, default=20, help="episodes per policy")
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="base seed (episode i uses a seed derived from it and i; default: the --config file's seed, else 42)",
    )
    p.add_argument(
        "--seeds",
        help="comma list of base seeds: n_episodes per seed, pooled in the summary (with a per-seed table, seeds.csv)",
    )
    p.add_argument(
        "--policies",
        "--baselines",
        dest="policies",
        default=None,
        help=f"comma list of: {', '.join(POLICY_NAMES)} (default: {','.join(DEFAULT_POLICIES)}; with --server-url "
        f"the budget baselines {','.join(BUDGET_BASELINES)}, since the others need gold answers a server never sends)",
    )
    p.add_argument(
        "--include_llm",
        "--include-llm",
        dest="include_llm",
        action="store_true",
        help="also run llm_api / llm_local when their BASELINE_* variables are set (seed compatibility)",
    )
    p.add_argument("--config", help="EnvConfig YAML file (an env: top-level key is accepted)")
    p.add_argument(
        "--data-dir", "--data_dir", dest="data_dir", help="folder with local data files (e.g. ../shared/data)"
    )
    p.add_argument("--sources", help="comma list of question sources, e.g. gsm8k,math500 (overrides the config's)")
    p.add_argument(
        "--num-questions", dest="num_questions", type=int, help="questions per episode (overrides the config's)"
    )
    p.add_argument("--out", help="run folder (default runs/eval-<timestamp>); one that holds a run is refused")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run already in --out (its files are removed when the new run is written)",
    )
    p.add_argument(
        "--server-url",
        "--env_base_url",
        dest="server_url",
        nargs="+",
        default=None,
        help="play against remote OpenEnv server(s) instead of in-process; several replicas spread the episodes, "
        "and an episode whose replica dies is replayed from its seed on another",
    )
    p.add_argument("--workers", type=int, default=1, help="episodes in parallel per policy (threads)")
    p.add_argument(
        "--budget",
        choices=BUDGET_CHOICES,
        default="tokenizer_native",
        help="tokenizer_native: reset with the policy tokenizer; config: the config formula",
    )
    p.add_argument(
        "--total-budget", dest="total_budget", type=int, help="fixed budget per episode in tokens (overrides --budget)"
    )
    p.add_argument(
        "--budget-ratio",
        dest="budget_ratio",
        type=float,
        help="the budget formulas' ratio (overrides the config's budget_ratio, default 4)",
    )
    p.add_argument(
        "--budget-ratios",
        dest="budget_ratios",
        help="comma list of budget ratios: a budget sweep on the same episodes (accuracy vs budget, frontier)",
    )
    p.add_argument(
        "--caps",
        help="comma list of per-question caps (tokens): a calibration sweep (budget = cap x "
        "questions); the solver curves "
        "are then fitted to the run and saved as fitted_curves.json (see docs/evaluation.md, Calibration)",
    )
    p.add_argument(
        "--fit-by",
        dest="fit_by",
        choices=("type", "family"),
        default="type",
        help="with --caps: one curve per problem type (families as fallback) or per family",
    )
    p.add_argument(
        "--baseline-answer",
        dest="baseline_answer",
        choices=("solver", "placeholder"),
        default=None,
        help="budget baselines answer like the simulated solver at the length they spend "
        "(solver; the default in-process) "
        "or with \\boxed{0} (placeholder: the seed's smoke test; the default with "
        "--server-url, where gold answers are not known)",
    )
    p.add_argument(
        "--curves",
        help="solver curves: a shipped set (defaults, qwen2.5-coder-0.5b: fitted to the real model) or a JSON file; "
        "a comma list (e.g. defaults,qwen2.5-coder-0.5b) runs the simulated policies under each and reports whether "
        "their ranking survives (the first set is the run's)",
    )
    p.add_argument(
        "--fit-curves", dest="fit_curves", help="fit the solver curves from this run folder's trajectories first"
    )
    p.add_argument(
        "--fit-policies",
        dest="fit_policies",
        help="comma list of policies whose rows --fit-curves (or --caps) fits (default: "
        "all; with --caps the LLM policies when any)",
    )
    p.add_argument(
        "--benchmark",
        action="store_true",
        help="the standard benchmark (workbench.benchmark): ordered exams of 3 GSM8K/MATH-500 questions under hard "
        "budgets of 512, 1024 and 2048 tokens on the fixed dev and held-out exam seeds, beside the oracle and the "
        "even split; writes benchmark.json and benchmark.md (every measure with its 95%% interval)",
    )
    p.add_argument(
        "--benchmark-splits",
        dest="benchmark_splits",
        default="dev,held-out",
        help="with --benchmark: the splits to play",
    )
    p.add_argument(
        "--benchmark-exams",
        dest="benchmark_exams",
        type=int,
        default=None,
        help="with --benchmark: only the first N exams of each split (a partial benchmark, recorded as such)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="with --benchmark and --out: read back each (split, budget) run the folder already holds finished "
        "(same exams, policies and curves, none failed) instead of playing it again; play the rest",
    )
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples of the 95%% intervals")
    p.add_argument(
        "--max-response-chars",
        dest="max_response_chars",
        type=int,
        help="truncate stored responses to this many characters",
    )
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bars")
    p.add_argument("--no-report", dest="report", action="store_false", help="do not write report.html")
    g = p.add_argument_group("LLM policies (llm_api: BASELINE_API_*, llm_local: BASELINE_LOCAL_*; flags win)")
    g.add_argument("--llm-base-url", dest="llm_base_url")
    g.add_argument("--llm-api-key", dest="llm_api_key")
    g.add_argument("--llm-model", dest="llm_model")
    g.add_argument(
        "--llm-tokenizer",
        dest="llm_tokenizer",
        help="tokenizer the env counts with (default: the model name if it loads, else the config's)",
    )
    g.add_argument("--llm-temperature", dest="llm_temperature", type=float)
    g.add_argument(
        "--llm-max-tokens", dest="llm_max_tokens", type=int, help="extra cap on tokens per step (below step_token_cap)"
    )
    g.add_argument(
        "--llm-turn-cap",
        dest="llm_turn_cap",
        choices=list(TURN_CAP_RULES),
        help="per-answer cap of the LLM policies: share (default: --llm-turn-factor x the remaining budget per "
        "remaining question, at least 64, so one looping answer cannot spend the episode) or env (step_token_cap)",
    )
    g.add_argument(
        "--llm-turn-factor", dest="llm_turn_factor", type=float, help="the share rule's multiple (default 2)"
    )
    g.add_argument(
        "--serve-model",
        dest="serve_model",
        nargs="?",
        const=DEFAULT_SERVED_MODEL,
        help="start vLLM's CPU engine on this model for llm_local during the run and stop it after (default "
        f"{DEFAULT_SERVED_MODEL}; build it with bash scripts/real_model.sh); sets --llm-base-url and --llm-model",
    )
    g.add_argument(
        "--adapter",
        help="a LoRA adapter folder trained on the --serve-model model (a training run's final/): vLLM serves it "
        "beside the base model and the run adds the policy llm_local+NAME (the model with the adapter) beside "
        "llm_local (the base; --policies defaults to llm_local): base vs trained on the same episodes; needs "
        "--serve-model",
    )
    g.add_argument(
        "--adapter-name",
        dest="adapter_name",
        default=DEFAULT_ADAPTER_NAME,
        help="the model name the adapter is served under (its policy is llm_local+NAME)",
    )
    g.add_argument("--llm-timeout", dest="llm_timeout", type=float, help="seconds per request")
    g.add_argument("--llm-retries", dest="llm_retries", type=int)
    g.add_argument(
        "--llm-format",
        dest="llm_format",
        choices=["multi_turn", "single_turn"],
        help="episode format of the LLM policies: multi_turn (default: one conversation per episode, as GRPO "
        "training plays it; hf_local reads a trained folder's episode_format.json) or single_turn",
    )
    g.add_argument(
        "--history-thinking",
        dest="history_thinking",
        choices=["keep", "strip"],
        help="earlier <think> blocks in the multi-turn history: keep (default, as trained) or strip",
    )
    g.add_argument(
        "--hf-model", dest="hf_model", help="hf_local: local folder or Hub id (default BASELINE_LOCAL_MODEL)"
    )
    g.add_argument("--hf-device", dest="hf_device")
    g.add_argument("--hf-dtype", dest="hf_dtype")
    return p


def _numbers(text: str | None, what: str, cast=float) -> list | None:
    if text is None:
        return None
    items = [t.strip() for t in str(text).replace(";", ",").split(",") if t.strip()]
    try:
        return [cast(t) for t in items]
    except ValueError:
        raise ValueError(f"{what} must be a comma list of numbers, got {text!r}") from None


def _config_from_args(args: argparse.Namespace) -> EnvConfig:
    config = EnvConfig.from_yaml(args.config) if args.config else EnvConfig()
    changes: dict[str, Any] = {}
    if args.budget_ratio is not None:
        changes["budget_ratio"] = args.budget_ratio
    if args.data_dir:
        changes["data_dir"] = args.data_dir
    if args.sources:
        changes["sources"] = [s.strip() for s in args.sources.split(",") if s.strip()]
    if args.num_questions is not None:
        changes["num_questions"] = args.num_questions
    return config.replace(**changes) if changes else config


def _policies_from_args(args: argparse.Namespace, curves: SolverCurves) -> list[BasePolicy]:
    given = default_policy_names(args.server_url) if args.policies is None else args.policies
    names = [n.strip() for n in str(given).split(",") if n.strip()]
    if not names:  # an empty --policies "" (e.g. an unset shell variable) is a mistake, not "the defaults"
        raise ValueError(
            f"--policies {args.policies!r} names no policy; give a comma list of: {', '.join(POLICY_NAMES)} "
            "(or leave --policies out for the defaults)"
        )
    if args.include_llm:
        for kind, prefix in (("llm_api", "BASELINE_API_"), ("llm_local", "BASELINE_LOCAL_")):
            if kind not in names and os.environ.get(prefix + "BASE_URL") and os.environ.get(prefix + "MODEL"):
                names.append(kind)
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        raise ValueError(f"unknown policies {unknown}; available: {', '.join(POLICY_NAMES)}")
    turn_cap = _turn_cap(args)
    llm = _llm_settings(args)
    hf = {
        "turn_cap": turn_cap,
        "model": args.hf_model,
        "tokenizer_name": args.llm_tokenizer,
        "temperature": args.llm_temperature,
        "max_tokens": args.llm_max_tokens,
        "device": args.hf_device,
        "dtype": args.hf_dtype,
        "seed": args.seed,
        "format": args.llm_format,
        "history_thinking": args.history_thinking,
    }
    return [make_policy(n, curves=curves, llm=llm, hf=hf, baseline_answer=_baseline_answer(args)) for n in names]


def _turn_cap(args: argparse.Namespace) -> TurnCap | None:
    if args.llm_turn_cap is None and args.llm_turn_factor is None:
        return None
    return TurnCap(
        args.llm_turn_cap or "share",
        factor=args.llm_turn_factor if args.llm_turn_factor is not None else 2.0,
        max_tokens=args.llm_max_tokens,
    )


def _llm_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The ``llm_api`` / ``llm_local`` settings the flags give (``None``: the ``BASELINE_*`` variable or default)."""
    return {
        "turn_cap": _turn_cap(args),
        "base_url": args.llm_base_url,
        "api_key": args.llm_api_key,
        "model": args.llm_model,
        "tokenizer_name": args.llm_tokenizer,
        "temperature": args.llm_temperature,
        "max_tokens": args.llm_max_tokens,
        "timeout_s": args.llm_timeout,
        "retries": args.llm_retries,
        "format": args.llm_format,
        "history_thinking": args.history_thinking,
        "seed": args.seed,
        "system_prompt": getattr(args, "system_prompt", None),  # set from an adapter's episode_format.json only
    }


def _adapter_episode_format(args: argparse.Namespace, adapter: AdapterInfo) -> str | None:
    """Play both ``llm_local`` policies in the episode format the adapter was trained in: its folder's
    ``episode_format.json`` (training writes it) sets the format and history mode the flags leave unset, and the
    system prompt. Returns the line saying so, or ``None`` when the folder has none."""
    saved = read_episode_format(adapter.path)
    if not saved:
        return None
    if args.llm_format is None and saved.get("format"):
        args.llm_format = saved["format"]
    if args.history_thinking is None and saved.get("history_thinking"):
        args.history_thinking = saved["history_thinking"]
    if saved.get("system_prompt"):
        args.system_prompt = saved["system_prompt"]
    prompt = ", its system prompt" if saved.get("system_prompt") else ""
    return (
        "episode format of both llm_local policies as the adapter was trained "
        f"({adapter.path / EPISODE_FORMAT_FILE}): "
        f"{args.llm_format or 'multi_turn'}, history {args.history_thinking or 'keep'}{prompt}"
    )


def default_policy_names(server_url: str | None) -> str:
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


def _load_curves(path: str) -> SolverCurves:
    """One ``--curves`` item: a shipped curve set by name or a curves file, its error naming the flag.

    Raises:
        ValueError: neither a shipped set nor a readable solver curves JSON file.
    """
    try:
        return load_curves(path)
    except ValueError as exc:
        raise ValueError(f"--curves: {exc}") from None


def _curve_sets(text: str | None) -> list[tuple[str, SolverCurves]]:
    """``--curves A,B,...`` as ``(label, curves)`` pairs (``[("defaults", ...)]`` when not given)."""
    if not text:
        return [("defaults", SolverCurves())]
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise ValueError(f"--curves {text!r} names no curve set; give a name or a file")
    labels = [item if items.count(item) == 1 else f"{item} #{i + 1}" for i, item in enumerate(items)]
    return [(label, _load_curves(item)) for label, item in zip(labels, items)]


def _curve_set_folder(label: str) -> str:
    """The sub-run folder of a ``--curves`` item: ``curves-<set name>`` (a file's name without ``.json``; a shipped
    set's whole name, dots kept: ``qwen2.5-coder-0.5b`` is not a file with a suffix)."""
    name = Path(label).name
    name = name[: -len(".json")] if name.endswith(".json") else name
    return "curves-" + name.replace(" #", "-")


def _curve_sensitivity(args: argparse.Namespace, config: EnvConfig, result: EvalResult, sets: list) -> None:
    """Re-run the policies that follow the solver curves under every other ``--curves`` set (same episodes),
    print each ranking and whether it survives, and save ``curve_sensitivity.json`` in the run folder."""
    import json

    curve_kinds = ("simulated", "oracle", "budget_baseline")
    first_label = sets[0][0]
    names = [p["name"] for p in result.meta.get("policies") or [] if p.get("kind") in curve_kinds]
    if not names:
        print("curve sensitivity: no policy of this run follows the solver curves")
        return
    runs = {first_label: (result.summary, result.comparisons)}
    for label, curves in sets[1:]:
        pols = [make_policy(n, curves=curves, baseline_answer=_baseline_answer(args)) for n in names]
        other = evaluate(
            pols,
            config=config,
            n_episodes=args.n_episodes,
            seed=args.seed,
            total_budget=args.total_budget,
            budget_mode=args.budget,
            curves=curves,
            progress=False,
            report=args.report,
            n_resamples=args.resamples,
            out=str(result.run_dir / _curve_set_folder(label)),
            overwrite=True,
        )
        runs[label] = (other.summary, other.comparisons)
    from workbench import analysis
    from workbench.report import write_report

    out = analysis.curve_sensitivity(runs, names)
    (result.run_dir / "curve_sensitivity.json").write_text(json.dumps(out, indent=2), encoding="utf-8")
    print(analysis.format_curve_sensitivity(out))
    result.meta["curve_sensitivity"] = out  # the report shows what the console says
    run_json = result.run_dir / "run.json"
    run_json.write_text(
        json.dumps(json.loads(run_json.read_text(encoding="utf-8")) | {"curve_sensitivity": out}, indent=2),
        encoding="utf-8",
    )
    if args.report:
        write_report(
            result.run_dir,
            result.steps,
            result.episodes,
            result.summary,
            {"run_id": result.meta.get("run_id", result.run_dir.name), **result.meta},
            comparisons=result.comparisons,
        )


#: ``--llm-timeout`` for the engine ``--serve-model`` starts, when the flag is not given. That engine is this
#: run's own and local: a request slower than the 300 s default is still generating (2,048 tokens at 16 in
#: flight on a 2-core CPU: ~7 tokens/s a stream), and a retry only repeats the same greedy work from its start
#: (the real model's 2,048-token benchmark: 41 timeouts in 30 minutes, 7 requests on their fifth attempt).
SERVED_MODEL_TIMEOUT_S = 3600.0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 a policy failed, 2 bad usage)."""
    args = _parser().parse_args(argv)
    if args.resume and not (args.benchmark and args.out):
        print(
            "error: --resume continues a benchmark folder: give --benchmark and --out FOLDER (the folder of the run "
            "to continue), e.g. --benchmark --out runs/bench-20261206-141000 --resume",
            file=sys.stderr,
        )
        return 2
    adapter: AdapterInfo | None = None
    if args.adapter:
        if not args.serve_model:
            print(
                "error: --adapter needs --serve-model (the run starts vLLM with the adapter beside its base model), "
                "e.g. --serve-model --adapter runs/grpo/final --policies llm_local",
                file=sys.stderr,
            )
            return 2
        try:
            adapter = check_adapter(args.adapter, args.serve_model, name=args.adapter_name)
        except ReasoningEconomicsError as exc:
            print(f"error: --adapter: {exc}", file=sys.stderr)
            return 2
        note = _adapter_episode_format(args, adapter)
        if note:
            print(note, flush=True)
    if not args.serve_model:
        return _run(args, argv, None)
    server = (
        ModelServer(args.serve_model)
        if adapter is None
        else ModelServer(
            args.serve_model,
            enable_lora=True,
            max_lora_rank=served_lora_rank(adapter.rank),
            extra_args=adapter.server_args(),
        )
    )
    with_adapter = f" with the LoRA adapter {adapter.path} as {adapter.name!r}" if adapter else ""
    print(f"starting vLLM on {args.serve_model}{with_adapter} for llm_local (about a minute) ...", flush=True)
    try:
        server.start()
    except ReasoningEconomicsError as exc:
        print(f"error: --serve-model: {exc}", file=sys.stderr)
        return 2
    print(
        f"vLLM {server.engine_version} ({server.engine_dist[0]}) serving at {server.base_url} after "
        f"{server.startup_s:.0f} s; log {server.log_path}",
        flush=True,
    )
    args.llm_base_url, args.llm_model = server.base_url, server.served_name
    if args.llm_timeout is None:
        args.llm_timeout = SERVED_MODEL_TIMEOUT_S
    try:
        return _run(args, argv, server, adapter)
    finally:
        server.stop()


def _adapter_policy(args: argparse.Namespace, curves: SolverCurves, adapter: AdapterInfo) -> BasePolicy:
    """``llm_local+NAME``: the served model with the LoRA adapter (its requests name the adapter), its tokens
    counted with the base model's tokenizer, every other setting as ``llm_local``'s."""
    llm = {
        **_llm_settings(args),
        "name": f"llm_local+{adapter.name}",
        "model": adapter.name,
        "tokenizer_name": args.llm_tokenizer or adapter.served_base,
    }
    policy = make_policy("llm_local", curves=curves, llm=llm)
    policy.adapter = adapter.describe()
    return policy


def _run(
    args: argparse.Namespace, argv: list[str] | None, server: ModelServer | None, adapter: AdapterInfo | None = None
) -> int:
    from workbench import analysis

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    warnings.filterwarnings("ignore", message=".*Timeout is disabled.*")
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    t0 = time.perf_counter()
    try:
        config = _config_from_args(args)
        seeds = _numbers(args.seeds, "--seeds", int)
        if args.seed is None:
            args.seed = seeds[0] if seeds else (config.seed if config.seed is not None else 42)
        curve_sets = _curve_sets(args.curves)
        curves = curve_sets[0][1]
        if args.fit_curves:
            fit_pols = [s.strip() for s in args.fit_policies.split(",")] if args.fit_policies else None
            curves = fit_run(args.fit_curves, policies=fit_pols, base=curves)
        if adapter is not None and args.policies is None:
            args.policies = "llm_local"  # base vs trained: the base model beside the adapter
        policies = _policies_from_args(args, curves)
        if adapter is not None:
            policies.append(_adapter_policy(args, curves, adapter))
        if server is not None:
            served = {k: v for k, v in server.describe().items() if k not in ("model", "log", "base_url")}
            for pol in policies:
                if isinstance(pol, OpenAIChatPolicy) and pol.base_url == server.base_url:
                    pol.engine = served
        ratios = _numbers(args.budget_ratios, "--budget-ratios")
        caps = _numbers(args.caps, "--caps", int)
    except (ReasoningEconomicsError, ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.benchmark:
        return _benchmark(args, argv, policies, curves)
    try:
        result = evaluate(
            policies,
            config=config,
            n_episodes=args.n_episodes,
            seed=args.seed,
            seeds=seeds,
            budget_ratios=ratios,
            caps=caps,
            out=args.out,
            budget_mode=args.budget,
            total_budget=args.total_budget,
            server_url=args.server_url,
            workers=args.workers,
            curves=curves,
            progress=args.progress,
            report=args.report,
            max_response_chars=args.max_response_chars,
            n_resamples=args.resamples,
            overwrite=args.overwrite,
            run_meta={
                "command": "python -m workbench.evaluate " + shlex.join(sys.argv[1:] if argv is None else list(argv))
            },
        )
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print()
    for line in result.meta["provenance"]["warnings"]:
        print(f"PROVENANCE: {line}")
    print()
    print(analysis.format_table(result.summary))
    print()
    print(analysis.format_comparisons(result.comparisons, result.summary))
    print()
    print(result.meta["budget_note"])
    print(
        "acc: correct / questions (unanswered = wrong), 95% CI: bootstrap over "
        "episodes; exp_acc: expected under the solver curves "
        f"({result.meta['curves']}); unasked/ep: questions never asked because the budget ran dry, per episode "
        "(read tok/q and acc/1k beside it: a policy that answers less looks cheaper); tok/q: tokens per answered "
        "question; util: spent / budget; dry: share of episodes that ran out of budget; reward columns: mean per "
        "episode; regret: oracle allocation's expected correct answers minus the policy's, per episode. Paired "
        "comparisons: same episodes, sign-flip permutation p-values; told apart = Holm-adjusted p < 0.05 over the "
        "pairs; all in comparisons.csv."
    )
    if caps:
        _calibrate(result, args)
    if len(curve_sets) > 1:
        _curve_sensitivity(args, config, result, curve_sets)
    for note in result.meta.get("notes") or []:
        print(f"note: {note}")
    print(f"run folder: {result.run_dir}  ({len(result.steps)} steps, {time.perf_counter() - t0:.1f} s)")
    return 1 if result.failed else 0


def _benchmark(args: argparse.Namespace, argv: list[str] | None, policies: list[BasePolicy], curves: Any) -> int:
    """``--benchmark``: every split and budget of :mod:`workbench.benchmark`, a run folder each, then
    ``benchmark.json`` and ``benchmark.md`` beside them."""
    import datetime as _dt

    from workbench import benchmark as bench

    clash = [f for f in ("seeds", "budget_ratios", "caps", "total_budget", "server_url") if getattr(args, f)]
    splits = [s.strip() for s in str(args.benchmark_splits).split(",") if s.strip()]
    unknown = [s for s in splits if s not in bench.SPLITS]
    if clash or unknown or not splits or (args.benchmark_exams is not None and args.benchmark_exams < 1):
        print(
            "error: --benchmark fixes the exams, budgets and seeds"
            + (f" (drop --{', --'.join(c.replace('_', '-') for c in clash)})" if clash else "")
            + (f"; --benchmark-splits: choose from {', '.join(bench.SPLITS)}" if unknown or not splits else "")
            + ("; --benchmark-exams must be at least 1" if args.benchmark_exams is not None else ""),
            file=sys.stderr,
        )
        return 2
    config = EnvConfig.from_yaml(args.config or bench.benchmark_config_path())
    if args.data_dir:
        config = config.replace(data_dir=args.data_dir)
    names = [p.name for p in policies]
    for ref in bench.REFERENCES:
        if ref not in names:
            policies.append(make_policy(ref, curves=curves, baseline_answer="solver"))
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or f"runs/bench-{stamp}")
    command = "python -m workbench.evaluate " + shlex.join(sys.argv[1:] if argv is None else list(argv))
    against = None if curves.source == "defaults" else curves.provenance
    result: dict[str, Any] = {
        "protocol": bench.PROTOCOL,
        "command": command,
        "curves": curves.provenance,
        "against": against,
        "config": str(args.config or "examples/benchmark/exam3.yaml"),
        "budgets": list(bench.BUDGETS),
        "splits": {},
        "results": {},
        "partial": args.benchmark_exams is not None,
        "runs": {},
    }
    failed = False
    for name in splits:
        split = bench.SPLITS[name]
        n = min(split.n, args.benchmark_exams or split.n)
        result["splits"][name] = {"base_seed": split.base_seed, "exams": n, "of": split.n}
        result["results"][name] = {}
        for budget in bench.BUDGETS:
            sub = out / f"{name}-{budget}"
            done = (
                bench.finished_run(
                    sub, split=name, budget=budget, n=n, policies=[p.name for p in policies], curves=curves.source
                )
                if args.resume
                else None
            )
            if done is not None:
                episodes, meta = done
                print(
                    f"benchmark: {name} split, {n} exams, budget {budget}: read back from {sub} (--resume)", flush=True
                )
                kinds = {p["name"]: p.get("kind") for p in meta.get("policies") or []}
                modelled = [p for p, k in kinds.items() if k in bench.MODELLED_KINDS]
                result["results"][name][str(budget)] = bench.measures(
                    episodes, modelled=modelled, against=against, n_resamples=args.resamples
                )
                result["runs"][f"{name}-{budget}"] = str(sub)
                result["provenance"] = meta["provenance"]["warnings"]
                continue
            print(f"benchmark: {name} split, {n} exams, budget {budget} ...", flush=True)
            try:
                run = evaluate(
                    policies,
                    config=config,
                    n_episodes=n,
                    seed=split.base_seed,
                    out=out / f"{name}-{budget}",
                    total_budget=budget,
                    workers=args.workers,
                    curves=curves,
                    progress=args.progress,
                    report=args.report,
                    max_response_chars=args.max_response_chars,
                    n_resamples=args.resamples,
                    # resuming, a sub-run left unfinished (or from other settings) is played again in its place
                    overwrite=args.overwrite or (args.resume and sub.exists()),
                    run_meta={"command": command, "benchmark": {"split": name, "budget": budget}},
                )
            except (ValueError, RuntimeError) as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            failed = failed or bool(run.failed)
            kinds = {p["name"]: p.get("kind") for p in run.meta.get("policies") or []}
            modelled = [p for p, k in kinds.items() if k in bench.MODELLED_KINDS]
            result["results"][name][str(budget)] = bench.measures(
                run.episodes, modelled=modelled, against=against, n_resamples=args.resamples
            )
            result["runs"][f"{name}-{budget}"] = str(run.run_dir)
            result["provenance"] = run.meta["provenance"]["warnings"]
    bench.write(out, result)
    print()
    for line in result.get("provenance") or []:
        print(f"PROVENANCE: {line}")
    print()
    print(bench.to_markdown(result))
    print(
        "exam score: right answers per exam of 3; accuracy: right / questions (unreached = wrong); regret: the "
        "oracle's exam score minus the policy's on the same exams; gap closed: (policy - even split) / (oracle - "
        "even split). [95% bootstrap intervals over exams.] oracle_allocation and uniform answer with the simulated "
        f"solver under the curves ({curves.provenance})."
        + (" Partial: only the first exams of each split." if result["partial"] else "")
    )
    print(f"benchmark: {out / 'benchmark.json'}, {out / 'benchmark.md'}")
    return 1 if failed else 0


def _calibrate(result: EvalResult, args: argparse.Namespace) -> None:
    """After a cap sweep: fit the solver curves to the run and save ``fitted_curves.json``."""
    from workbench.calibration import CALIBRATION_FILE, calibrate, default_fit_policies

    pols = (
        [s.strip() for s in args.fit_policies.split(",")]
        if args.fit_policies
        else default_fit_policies(result.episodes)
    )
    try:
        fitted = calibrate(result.run_dir, policies=pols, per=args.fit_by)
    except (ReasoningEconomicsError, ValueError) as exc:
        print(f"calibration: no curves fitted ({exc})")
        return
    print(f"calibration: curves fitted to {', '.join(pols)} and saved as {result.run_dir / CALIBRATION_FILE}")
    for rep in fitted.fits.values():
        from workbench.calibration import fit_summary

        print(fit_summary(rep))


if __name__ == "__main__":
    sys.exit(main())

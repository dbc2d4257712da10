"""Command line of the reward lab.

python -m workbench.reward_lab bench --steps 10000          # re-scoring speed
python -m workbench.reward_lab induced --budgets 1000 2500 5000 --rewards economics budget_aware l1_max
python -m workbench.reward_lab induced --curves qwen2.5-coder-0.5b             # a shipped curve set
python -m workbench.reward_lab induced --curves runs/calib/fitted_curves.json   # a calibrated solver
python -m workbench.reward_lab rescore runs/my_run --reward reward.yaml
python -m workbench.reward_lab describe [name]               # registry metadata (JSON)
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import pandas as pd

from reasoning_env.errors import ReasoningEconomicsError
from reasoning_env.rewards import DEFAULT_REWARD, REFERENCE_REWARD

BENCH_SPECS = {
    "economics (default)": "economics",
    "reference (seed)": "reference",
    "budget_aware": "budget_aware",
    "l1_max": "l1_max",
    "cosine": "cosine",
    "combined accuracy+dapo+l1_exact": {"type": "combined", "rewards": ["accuracy", "dapo_overlong", "l1_exact"]},
    "kimi_length (group)": "kimi_length",
    "shorter_better (group)": "shorter_better",
}
TEXT_SPECS = {"format (boxed, text)": "format", "repetition (text)": "repetition"}


def _best_ms(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return 1000.0 * best


def bench(steps: int = 10_000, repeat: int = 5, text: bool = True, out=sys.stdout) -> pd.DataFrame:
    """Time re-scoring of a synthetic run of ``steps`` steps (GRPO groups of 4); print and return
    a table of best-of-``repeat`` milliseconds: preparing the arrays once, then each reward."""
    from workbench.reward_lab.rescore import Rescorer
    from workbench.reward_lab.synthetic import synthetic_steps

    t0 = time.perf_counter()
    frame = synthetic_steps(steps, group_size=4, with_text=text, seed=0)
    gen = time.perf_counter() - t0
    rows = [dict(what="prepare arrays (Rescorer)", ms=_best_ms(lambda: Rescorer(frame), repeat))]
    rs = Rescorer(frame)
    specs = dict(BENCH_SPECS)
    if text:
        specs.update(TEXT_SPECS)
    for label, spec in specs.items():
        rows.append(dict(what=f"rescore {label}", ms=_best_ms(lambda spec=spec: rs.rescore(spec), repeat)))
        if label in TEXT_SPECS:
            rows.append(
                dict(
                    what=f"rescore {label}, first call (texts scanned)",
                    ms=_best_ms(lambda spec=spec: Rescorer(frame).rescore(spec), 1) - rows[0]["ms"],
                )
            )
    rows.append(
        dict(
            what="prepare + rescore seed, end to end",
            ms=_best_ms(lambda: Rescorer(frame).rescore("economics"), repeat),
        )
    )
    table = pd.DataFrame(rows)
    print(
        f"re-scoring benchmark: {len(frame):,} steps, {frame['episode'].nunique():,} episodes "
        f"(synthetic run generated in {gen:.1f} s), best of {repeat}",
        file=out,
    )
    for r in rows:
        print(f"  {r['what']:<55s} {r['ms']:8.2f} ms", file=out)
    return table


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m workbench.reward_lab", description="Reward lab: re-scoring and induced behaviour."
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench", help="print re-scoring speed on a synthetic run")
    b.add_argument("--steps", type=int, default=10_000)
    b.add_argument("--repeat", type=int, default=5)
    b.add_argument("--no-text", action="store_true", help="skip the text rewards (format, repetition)")
    ind = sub.add_parser(
        "induced", help="optimal allocations of rewards vs the accuracy oracle (exact in tokens; solver curves)"
    )
    ind.add_argument(
        "--budgets", type=int, nargs="+", default=[1000, 2500, 5000], help="episode budgets (tokens) for 10 questions"
    )
    ind.add_argument(
        "--rewards",
        nargs="+",
        default=[DEFAULT_REWARD, REFERENCE_REWARD, "budget_aware", "l1_max", "l1_exact", "cosine"],
        help=f"registry names, or YAML/JSON spec files (default reward: {DEFAULT_REWARD}; "
        f"the seed's exact reward: {REFERENCE_REWARD})",
    )
    ind.add_argument("--orders", type=int, default=4)
    ind.add_argument("--soft", action="store_true", help="soft budget mode")
    ind.add_argument(
        "--curves",
        help="solver curves: a shipped curve set by name (e.g. qwen2.5-coder-0.5b, fitted to the real model) "
        "or a curves JSON file (a run folder's curves.json or fitted_curves.json); default: the hand-chosen "
        "defaults",
    )
    ind.add_argument(
        "--resolution",
        type=int,
        default=64,
        help="cells of the spent budget for rewards that read it (the reported bound covers them)",
    )
    ind.add_argument("--html", help="write the figures to this HTML file")
    r = sub.add_parser("rescore", help="re-score a run folder under a reward")
    r.add_argument("run")
    r.add_argument("--reward", help="registry name, YAML text or YAML file (default: the run's own reward)")
    r.add_argument(
        "--out",
        help="write rescored_steps.parquet and rescored_episodes.parquet into this folder "
        "(created; a run folder is refused)",
    )
    r.add_argument(
        "--by",
        default="policy",
        help="episode column the summary table groups by (e.g. policy, run_id, difficulty_mean)",
    )
    r.add_argument(
        "--group-by",
        dest="group_by",
        help="comma list of step columns whose equal values form a GRPO group for group rewards "
        "(default: run_id, policy, group, step)",
    )
    d = sub.add_parser("describe", help="print the registry metadata as JSON")
    d.add_argument("name", nargs="?")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except (ReasoningEconomicsError, ValueError, OSError) as exc:
        # RunFolderError, RescoreError and reward-spec errors say what to fix; a traceback would
        # only hide it.
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.cmd == "bench":
        if args.steps < 1 or args.repeat < 1:
            raise ValueError(f"--steps and --repeat must be >= 1, got {args.steps} and {args.repeat}")
        bench(args.steps, args.repeat, text=not args.no_text)
    elif args.cmd == "induced":
        from reasoning_env.policies import SolverCurves
        from reasoning_env.policies.curves import load_curves
        from workbench.reward_lab.induced import induced_behaviour, oracle_frontier

        if min(args.budgets) < 1 or args.orders < 1:
            raise ValueError(
                f"--budgets must be positive token counts and --orders >= 1, got {args.budgets} and {args.orders}"
            )
        if args.resolution < 1:
            raise ValueError(f"--resolution must be >= 1 cells, got {args.resolution}")
        curves = load_curves(args.curves) if args.curves else SolverCurves()
        t0 = time.perf_counter()
        res = induced_behaviour(
            {name: name for name in args.rewards},
            args.budgets,
            orders=args.orders,
            hard_cap_mode=not args.soft,
            curves=curves,
            resolution=args.resolution,
        )
        print(f"solver: {curves.provenance}")
        with pd.option_context("display.width", 220, "display.max_columns", 20):
            print(res.summary.drop(columns=["expected_reward"]).round(4).to_string(index=False))
            print()
            piv = res.by_difficulty.pivot_table(
                index=["budget", "reward"], columns="difficulty", values="tokens", sort=False
            )
            print("mean tokens by difficulty:")
            print(piv.round(0).to_string())
        worst = float(res.summary["bound"].max())
        print(
            "\noptimiser: exact in tokens (bound 0); rewards that read the spent budget "
            "are solved on cells of it with a certified "
            f"bound (largest above: {worst:.2g} reward units)"
        )
        for label, ns in res.notes.items():
            for n in ns:
                print(f"note: {label}: {n}")
        print(f"({time.perf_counter() - t0:.1f} s)")
        if args.html:
            from workbench.reward_lab.figures import induced_tokens_figure, pareto_figure, reward_curves_figure

            front = oracle_frontier(
                np.linspace(min(args.budgets) / 2, max(args.budgets) * 1.5, 12).astype(int), curves=curves
            )
            figs = [
                reward_curves_figure({n: n for n in args.rewards}),
                induced_tokens_figure(res),
                pareto_figure(res, front),
            ]
            with open(args.html, "w", encoding="utf-8") as f:
                for i, fig in enumerate(figs):
                    f.write(fig.to_html(full_html=i == 0, include_plotlyjs=True if i == 0 else False))
            print(f"figures written to {args.html}")
    elif args.cmd == "rescore":
        from workbench.reward_lab.rescore import rescore
        from workbench.runs import output_folder

        group_by = [c.strip() for c in args.group_by.split(",") if c.strip()] if args.group_by else None
        # checked before re-scoring: a bad --out fails at once and writes nothing into a run
        out = output_folder(args.out, "the re-scoring", "rescored_*.parquet") if args.out else None
        res = rescore(args.run, args.reward, group_by=group_by)
        with pd.option_context("display.width", 200, "display.max_columns", 30):
            print(res.summary(args.by).round(4).to_string(index=False))
        for n in res.notes:
            print(f"note: {n}")
        if out is not None:
            res.steps.to_parquet(out / "rescored_steps.parquet", index=False)
            res.episodes.to_parquet(out / "rescored_episodes.parquet", index=False)
            print(f"written to {out}")
    elif args.cmd == "describe":
        from reasoning_env.rewards import describe

        print(json.dumps(describe(args.name), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

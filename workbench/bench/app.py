"""The app's slow paths as ratios against the work itself: ``python -m workbench.bench app [options]``.

On a shared machine an absolute latency says more about the load than about the app, so each path
is timed next to the library call that does its real work, in the same process and the same
minute, and reported as ``ratio = handler / work`` (1.0: the handler adds nothing):

- ``lab_table``: a Reward-lab slider move until the re-scored table is ready
  (:meth:`~workbench.app.lab_tab.LabTab.update_table`, the page's first pass) against one re-score
  of the same rows (:meth:`~workbench.reward_lab.tuning.LabRun.rescore`); ``lab_view`` the whole
  update with its two figures (:meth:`~workbench.app.lab_tab.LabTab.update`, ``/lab_update``);
- ``lab_induced``: the induced allocation after a slider move (:meth:`LabTab.induced`, with the
  tab's allocation cache warm from the previous position, as in the page) against solving the
  tuned reward's plans alone (:func:`workbench.reward_lab.induced_allocation`, one per budget);
- ``runs_open``: opening the Runs tab (re-list, compare and the paired comparison of the newest 3
  runs: :meth:`~workbench.app.runs_tab.RunsTab.relist`, ``compare_if_any``, ``uncertainty_of``)
  against loading those run folders (:func:`workbench.compare.load_runs`);
- ``compare_6``: Compare of 6 runs (``compare`` + ``uncertainty_of``) against its analysis (loading,
  ``RunSet.summary`` and ``RunSet.comparisons``);
- ``play_run``: Play's *Run to the end* of a simulated policy (:meth:`PlayTab.run_stream`, every
  output built) against the same episode's steps alone (:meth:`workbench.play.PlaySession.run_iter`);
- ``startup``: ``create_app`` in a fresh interpreter (imports, questions, tokenizer, the page)
  against importing Gradio and building the OpenEnv server app in a fresh interpreter.

Run folders are made first in a temporary folder (two evaluations and four saved Play episodes).
Each pair is timed ``--repeats`` times, alternating handler and work; the JSON has the medians, the
ratio of the medians, and the load average before and after. ``--json FILE`` also writes it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

PATHS = ("lab", "runs", "compare", "play", "startup")
FORM = (["metamathqa", "numina_tir"], "tokenizer_native", 4, "", "Qwen/Qwen2.5-0.5B-Instruct", "7", True, 10, "")
#: Targets: the handler's time over the work's (see docs/app.md, "Speed").
TARGETS = {
    "lab_table": 2.0,
    "lab_view": 8.0,
    "lab_induced": 1.5,
    "runs_open": 10.0,
    "compare_6": 2.0,
    "play_run": 3.0,
    "startup": 2.5,
}


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _pair(handler: Callable[[], object], work: Callable[[], object], repeats: int, **extra: object) -> dict:
    """Median seconds of ``handler`` and of ``work`` (alternated), their ratio, and the target."""
    hs, ws = [], []
    for _ in range(repeats):
        hs.append(_timed(handler))
        ws.append(_timed(work))
    h, w = statistics.median(hs), statistics.median(ws)
    return {"handler_s": round(h, 4), "work_s": round(w, 4), "ratio": round(h / w, 2) if w > 0 else None, **extra}


def make_runs(root: Path, episodes: int) -> list[str]:
    """Two evaluation runs and four saved Play episodes under ``root``; newest last."""
    from workbench.app.common import AppContext
    from workbench.app.play_tab import PlayTab

    for seed in (42, 7):
        subprocess.run(
            [sys.executable, "-m", "workbench.evaluate", "--n_episodes", str(episodes), "--seed", str(seed)]
            + ["--out", str(root / f"eval-{seed}"), "--no-report", "--no-progress"],
            check=True,
            capture_output=True,
        )
    tab = PlayTab(AppContext(runs_root=str(root), environ={}))
    for i, policy in enumerate(["sim_greedy", "uniform", "sim_proportional", "greedy_max"]):
        form = list(FORM)
        form[5] = str(10 + i)
        session = tab.reset(None, *form)[0]
        for _ in session.run_iter(policy):
            pass
        session.save_run(str(root))
        time.sleep(1.05)  # distinct folder names (one per second)
    from workbench.compare import discover_runs

    return [str(e.path) for e in discover_runs(str(root))]


def bench_lab(run: str, repeats: int) -> dict:
    from workbench.app.common import AppContext
    from workbench.app.lab_tab import LabTab
    from workbench.reward_lab import default_questions, induced_allocation
    from workbench.reward_lab import tuning as rt

    tab = LabTab(AppContext(runs_root=str(Path(run).parent), environ={}))
    lab, _ = tab.load(run)
    keys = [c.key for c in tab.controls]
    values = [c.default for c in tab.controls]
    beta = keys.index("economics.beta")
    positions = iter([0.2 + 0.05 * i for i in range(4 * repeats + 4)])

    def moved() -> list:
        values[beta] = next(positions)
        return list(values)

    out = {
        "lab_table": _pair(
            lambda: tab.update_table(lab, ["economics"], *moved()),
            lambda: lab.rescore(rt.values_to_spec(["economics"], values)),
            repeats,
            rows=len(lab.rescorer.frame),
        ),
        "lab_view": _pair(
            lambda: tab.update(lab, ["economics"], *moved()),
            lambda: lab.rescore(rt.values_to_spec(["economics"], values)),
            repeats,
        ),
    }
    tab.induced(lab, ["economics"], "", *values)  # the page's state before a move: oracle and recorded solved
    budgets = rt.parse_budgets("")
    qs = default_questions(10)
    out["lab_induced"] = _pair(
        lambda: tab.induced(lab, ["economics"], "", *moved()),
        lambda: [
            induced_allocation(
                rt.values_to_spec(["economics"], values), qs, b, curves=tab.ctx.curves, hard_cap_mode=lab.hard_cap_mode
            )
            for b in budgets
        ],
        repeats,
        budgets=budgets,
    )
    return out


def bench_runs(runs: list[str], repeats: int) -> dict:
    from workbench import compare
    from workbench.app.common import AppContext
    from workbench.app.runs_tab import RunsTab

    root = str(Path(runs[0]).parent)
    tab = RunsTab(AppContext(runs_root=root, environ={}))
    newest = [str(e.path) for e in compare.discover_runs(root)][:3]

    def open_tab() -> None:
        picker, _status, _listed = tab.relist(root, newest, {})
        out = tab.compare_if_any(picker.value, "", 1, None)
        tab.uncertainty_of(out[8])

    return {"runs_open": _pair(open_tab, lambda: compare.load_runs(newest), repeats, runs=len(newest))}


def bench_compare(runs: list[str], repeats: int) -> dict:
    from workbench import compare
    from workbench.app.common import AppContext
    from workbench.app.runs_tab import RunsTab

    tab = RunsTab(AppContext(runs_root=str(Path(runs[0]).parent), environ={}))

    def handler() -> None:
        out = tab.compare(runs, "", 1, None)
        tab.uncertainty_of(out[8])

    def work() -> None:
        rs = compare.load_runs(runs)
        rs.summary()
        rs.comparisons()

    return {"compare_6": _pair(handler, work, repeats, runs=len(runs))}


def bench_play(repeats: int) -> dict:
    from workbench.app.common import AppContext
    from workbench.app.play_tab import PlayTab

    tab = PlayTab(AppContext(runs_root=tempfile.mkdtemp(prefix="bench-app-play-"), environ={}))
    tab.reset(None, *FORM)  # warm-up: pools, tokenizer, grader

    def handler() -> None:
        session = tab.reset(None, *FORM)[0]
        for _ in tab.run_stream(session, "sim_greedy"):
            pass

    def work() -> None:
        session = tab.reset(None, *FORM)[0]
        for _ in session.run_iter("sim_greedy"):
            pass

    return {"play_run": _pair(handler, work, repeats, steps=10)}


_STARTUP = """
import time; t0 = time.perf_counter()
{body}
print(time.perf_counter() - t0)
"""
_APP = "from workbench.app.server import create_app; create_app(runs_root={root!r}, environ={{}})"
_FLOOR = "import gradio; from reasoning_env.server.app import create_server_app; create_server_app(None)"


def bench_startup(root: str, repeats: int) -> dict:
    def fresh(body: str) -> float:
        out = subprocess.run(
            [sys.executable, "-c", _STARTUP.format(body=body)], capture_output=True, text=True, check=True
        )
        return float(out.stdout.strip().splitlines()[-1])

    hs, ws = [], []
    for _ in range(repeats):
        hs.append(fresh(_APP.format(root=root)))
        ws.append(fresh(_FLOOR))
    h, w = statistics.median(hs), statistics.median(ws)
    return {"startup": {"handler_s": round(h, 3), "work_s": round(w, 3), "ratio": round(h / w, 2)}}


def measure(paths: list[str], repeats: int, episodes: int) -> dict:
    """Time the chosen paths; returns the JSON-ready result."""
    result: dict = {"load_before": _load(), "repeats": repeats}
    with tempfile.TemporaryDirectory(prefix="bench-app-runs-") as tmp:
        runs = make_runs(Path(tmp), episodes) if {"lab", "runs", "compare"} & set(paths) else []
        evals = [r for r in runs if Path(r).name.startswith("eval-")]
        if "lab" in paths:
            result.update(bench_lab(evals[0], repeats))
        if "runs" in paths:
            result.update(bench_runs(runs, repeats))
        if "compare" in paths:
            result.update(bench_compare(runs, repeats))
        if "play" in paths:
            result.update(bench_play(repeats))
        if "startup" in paths:
            result.update(bench_startup(tmp, max(1, repeats // 2)))
    for name, target in TARGETS.items():
        if isinstance(result.get(name), dict) and result[name].get("ratio") is not None:
            result[name]["target"] = target
            result[name]["met"] = result[name]["ratio"] <= target
    result["load_after"] = _load()
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add this benchmark's options to ``parser`` (the :mod:`workbench.bench` protocol)."""
    parser.add_argument("--paths", default=",".join(PATHS), help=f"comma list of {', '.join(PATHS)} (default: all)")
    parser.add_argument("--repeats", type=int, default=3, help="timings per pair (default 3; start-up: half)")
    parser.add_argument("--episodes", type=int, default=20, help="episodes per policy of the evaluation runs")
    parser.add_argument("--json", dest="json_path", help="also write the figures to this JSON file")


def run(args: argparse.Namespace) -> int:
    """Measure (see :func:`add_arguments`) and print the JSON; returns the exit status (2: bad options)."""
    paths = [x.strip() for x in args.paths.split(",") if x.strip()]
    bad = sorted(set(paths) - set(PATHS))
    if bad or args.repeats < 1 or args.episodes < 2:
        print(
            f"error: --paths from {list(PATHS)}, --repeats >= 1, --episodes >= 2 (got {bad or paths})", file=sys.stderr
        )
        return 2
    result = measure(paths, args.repeats, args.episodes)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json_path:
        Path(args.json_path).write_text(text + "\n", encoding="utf-8")
    return 0

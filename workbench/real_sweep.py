"""A real model's budget sweep over configured question sources: the data solver curves are fitted to.

    python -m workbench.real_sweep --data-dir ../shared/data --n 48 --out runs/sweep-qwen-coder --cell-by entry
    python -m workbench.real_sweep --config examples/training/cpu_allocation.yaml --n 20 \\
        --temperatures 0.7 --samples 4 --n-sampled 8 --caps 64,128,256,320 \\
        --base-url http://127.0.0.1:8001/v1 --served-model qwen --out runs/sweep-curriculum --per type

Sources are named as an environment names them (:mod:`workbench.sweep_cells`): an environment config's
``sources:`` (``--config``), a JSON list of ``{name, options}`` (``--spec``), or bare names (``--sources``,
empty options). Each entry is loaded with its options (reasoning-gym generators, ``config``, ``difficulty``,
``label``; a jsonl file; GSM8K ...) and split into cells, one per (entry, problem type, difficulty)
(``--cell-by entry``: one per entry). ``--n`` questions are drawn per cell with ``--seed``.

Each question is asked as the first question of a one-question episode, in the project's prompt and chat
format, with the largest cap stated as its ``step_token_cap``, against vLLM's OpenAI-compatible
``/completions`` (``--base-url`` a running server, which gets ``--served-model`` as the model name; without
it a server of ``--model`` is started for the run). ``--model`` is the local model whose tokenizer builds the
prompt ids and decodes the answers. Greedy: one answer per question. At each of ``--temperatures``: the first
``--n-sampled`` questions of the cell ``--samples`` times each, one request per sample and no request seed
(vLLM seeds sample i of a seeded ``n > 1`` request with seed + i, the same stream for every question).
For each cap ``k`` an answer's first ``k`` tokens are graded (``reasoning_env.grading``, with the
question) and checked for ``\\boxed`` (:mod:`workbench.sweep_table`): one generation gives every cap, which
is what a hard cap does to an answer that runs past it (a model told a smaller cap might answer otherwise).

The run folder holds ``generations.jsonl`` (written as answers arrive: the token ids, text, finish
reason), ``rows.parquet`` (one row per answer and cap: ``question_id``, ``cell``, ``source``,
``problem_type``, ``difficulty``, ``mode``, ``temperature``, ``sample``, ``token_cap``, ``correct``,
``boxed``, ``tokens``, ``finished``, ``split``), ``table.md`` / ``table.json`` (per cell, mode and cap:
accuracy with its Wilson 95% interval and n, boxed and finished shares, median tokens),
``fitted_curves.json`` (fitted on the ``fit`` split of the ``--fit-mode`` rows, clustered by question),
``curve_set.json`` (those curves with the table and the sweep's provenance: a file for
``reasoning_env/policies/curve_sets/``) and
``sweep.json`` (provenance: model, engine, cells and their options, counts, date, load, command; and the
held-out check, below).

**How many questions.** ``--n`` is per cell; ``--precision H`` chooses it instead: the fewest questions whose
Wilson 95% interval of an accuracy ``--expected-accuracy`` (default 0.5, the widest) is at most ``H`` either side
(:func:`workbench.stats.questions_for_precision`: +-0.05 at 0.15 takes 196). The sweep prints, and ``sweep.json``
records, what its ``n`` buys.

**The held-out check** (``holdout_check``): the curve fitted on the ``fit`` split predicts every held-out question
at every cap; the test compares the right answers over all of them with the predicted sum, its null being the
simulated solver's model of nested verdicts (one uniform per question;
:func:`workbench.stats.nested_calibration_check`), and prints its power beside it: the smallest factor by which the
true accuracy could differ from the curve's and be caught 80% of the time (a check that cannot fail says so). The
per-cell accuracies with their Wilson intervals stay in ``holdout_cells`` as a description, not a test: at n = 10 a
cell any prediction from 0.06 to 0.28 lies inside every interval.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import random
import shlex
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from workbench.stats import nested_calibration_check, precision_of, questions_for_precision
from workbench.sweep_cells import build_cells, load_specs, select_questions
from workbench.sweep_table import grade_rows, mode_name, summarise, to_markdown, wilson

__all__ = ["main", "select_questions", "wilson"]


def _observation(q: Any, cap: int) -> dict:
    return {
        "question": q.text,
        "question_index": 0,
        "num_questions": 1,
        "problem_type": q.problem_type,
        "remaining_budget": cap,
        "total_budget": cap,
        "questions_remaining": 1,
        "budget_per_remaining_question": float(cap),
        "step_token_cap": cap,
        "accuracy_so_far": 0.0,
        "history": [],
    }


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m workbench.real_sweep", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="embedded:qwen2.5-coder-0.5b", help="local model: tokenizer, and the server")
    p.add_argument("--base-url", default=None, help="a running vLLM server (default: start one for the run)")
    p.add_argument("--served-model", default=None, help="model name sent to --base-url (default: --model)")
    p.add_argument("--data-dir", default=None, help="folder with the sources' local files (default: the config's)")
    src = p.add_argument_group("sources (one of)")
    src.add_argument("--config", default=None, help="environment config YAML: sweep its sources with their options")
    src.add_argument("--spec", default=None, help="JSON file or inline JSON: [{name, options}, ...]")
    src.add_argument("--sources", default=None, help="comma-separated source names, empty options")
    p.add_argument(
        "--cell-by", choices=["type", "entry"], default="type", help="cells per (type, difficulty) or entry"
    )
    p.add_argument("--n", type=int, default=48, help="questions per cell, greedy")
    p.add_argument(
        "--precision",
        type=float,
        default=None,
        help="choose --n instead: the fewest questions per cell whose Wilson 95%% interval of an accuracy "
        "--expected-accuracy is at most this either side (e.g. 0.05)",
    )
    p.add_argument(
        "--expected-accuracy",
        dest="expected_accuracy",
        type=float,
        default=0.5,
        help="the accuracy --precision is stated at (0.5: the widest interval)",
    )
    p.add_argument(
        "--no-greedy", action="store_true", help="only the sampled answers (the greedy ones of a sweep ran)"
    )
    p.add_argument("--temperatures", default="", help="sampling temperatures, e.g. 0.7,1.0 (default: none)")
    p.add_argument("--samples", type=int, default=4, help="samples per question at each temperature")
    p.add_argument("--n-sampled", type=int, default=8, help="questions per cell sampled at each temperature")
    p.add_argument("--caps", default="64,128,256,512,1024")
    p.add_argument("--holdout", type=float, default=0.25, help="share of each cell's questions kept out of the fit")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--in-flight", type=int, default=16, help="requests in flight")
    p.add_argument("--out", required=True, help="run folder to write (with --refit: the sweep folder to fit again)")
    p.add_argument(
        "--refit", action="store_true", help="fit the rows.parquet already in --out again, generate nothing"
    )
    p.add_argument(
        "--merge",
        default=None,
        help="sweep folders (comma-separated) whose answers --out gathers and grades at --caps, their records kept",
    )
    p.add_argument(
        "--regrade",
        action="store_true",
        help="grade the generations.jsonl in --out again at --caps (e.g. of a stopped sweep), then fit",
    )
    p.add_argument("--fit-mode", default="greedy", help="rows the curves are fitted to: greedy or T=<t>")
    p.add_argument(
        "--per",
        choices=["pooled", "family", "type"],
        default="pooled",
        help="one curve for every question (default: ~7 right answers per source at 40 questions cannot identify "
        "more), one per family, or one per problem type",
    )
    return p


def _jobs(cells: list, args: argparse.Namespace, temps: list[float]) -> list[dict]:
    """Every request of the sweep: greedy answers first, then the samples, interleaved across cells."""
    per_cell = []
    for cell in cells:
        qs = select_questions(cell.questions, args.n, args.seed)
        rng = random.Random(f"{args.seed}-{cell.name}")
        held = set(rng.sample(range(len(qs)), int(round(args.holdout * len(qs)))))
        base = [{"cell": cell, "q": q, "split": "holdout" if i in held else "fit"} for i, q in enumerate(qs)]
        todo = [] if args.no_greedy else [b | {"temperature": 0.0, "sample": 0} for b in base]
        for t in temps:
            todo += [b | {"temperature": t, "sample": s} for b in base[: args.n_sampled] for s in range(args.samples)]
        per_cell.append(todo)
    jobs: list[dict] = []
    for i in range(max((len(t) for t in per_cell), default=0)):
        jobs += [t[i] for t in per_cell if i < len(t)]
    return sorted(jobs, key=lambda j: j["temperature"] > 0)


def _engine_of(client: Any, base: str) -> dict:
    root = base[: -len("/v1")] if base.rstrip("/").endswith("/v1") else base
    info: dict[str, Any] = {"base_url": base}
    try:
        info["engine_version"] = client.get(root.rstrip("/") + "/version", timeout=10).json().get("version")
    except Exception as exc:  # noqa: BLE001 - provenance only: say what failed
        info["engine_version"] = f"unknown ({type(exc).__name__})"
    return info


def main(argv: list[str] | None = None) -> int:
    """Command line; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.precision is not None:
        try:
            args.n = questions_for_precision(args.precision, args.expected_accuracy)
        except ValueError as exc:
            print(f"error: --precision: {exc}", file=sys.stderr)
            return 2
    if args.refit:
        return _fit_and_report(Path(args.out), args, argv, None)
    if args.merge:
        _merge([Path(d) for d in args.merge.split(",") if d.strip()], Path(args.out))
        return _regrade(Path(args.out), args, argv)
    if args.regrade:
        return _regrade(Path(args.out), args, argv)
    from transformers import AutoTokenizer

    from reasoning_env.conversation import ChatFormat, EpisodeConversation
    from reasoning_env.errors import ReasoningEconomicsError
    from reasoning_env.grading import grade
    from reasoning_env.hub import hub_reachable
    from reasoning_env.offline_model import resolve_model
    from reasoning_env.sources.base import LoadContext

    caps = sorted({int(c) for c in args.caps.split(",") if c.strip()})
    temps = [float(t) for t in args.temperatures.split(",") if t.strip()]
    if not caps or caps[0] < 1 or any(t <= 0 for t in temps) or args.samples < 1:
        print("error: --caps must be positive, --temperatures above 0, --samples at least 1", file=sys.stderr)
        return 2
    if args.sources is None and args.config is None and args.spec is None:
        args.sources = "gsm8k,math500,builtin"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        specs, cfg_data_dir = load_specs(config=args.config, spec=args.spec, sources=args.sources)
        resolved = resolve_model(args.model)
        ctx = LoadContext(data_dir=args.data_dir or cfg_data_dir, hub=hub_reachable())
        cells = build_cells(specs, ctx, by=args.cell_by)
    except (ReasoningEconomicsError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    jobs = _jobs(cells, args, temps)
    print(_what_n_buys(args.n, args.expected_accuracy), flush=True)
    tok = AutoTokenizer.from_pretrained(resolved.ref)
    chat = ChatFormat(tok)
    eos = {tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")}
    server = None
    base, served = args.base_url, args.served_model or args.model
    if base is None:
        from reasoning_env.model_server import ModelServer

        server = ModelServer(args.model, served_name=args.served_model, log_path=out / "vllm.log").start()
        base, served = server.base_url, server.served_name
    import httpx

    client = httpx.Client(timeout=1800)
    engine = server.describe() if server else _engine_of(client, base)
    engine["served_name"] = served
    engine["in_flight"] = args.in_flight
    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    generation = _provenance(resolved.describe(), engine, cells, args, temps)
    generation["load_1min"] = [round(load_start, 2)]
    generation["precision"] = _what_n_buys(args.n, args.expected_accuracy)
    generation["command"] = "python -m workbench.real_sweep " + shlex.join(sys.argv[1:] if argv is None else argv)
    (out / "sweep.json").write_text(json.dumps(generation, indent=2, default=str), encoding="utf-8")
    lock = threading.Lock()
    gen_file = open(out / "generations.jsonl", "w", encoding="utf-8")  # closed below

    def one(job: dict) -> dict:
        q, cell = job["q"], job["cell"]
        conv = EpisodeConversation()
        conv.ask(_observation(q, caps[-1]))
        body = {
            "model": served,
            "prompt": chat.conversation_ids(conv),
            "max_tokens": caps[-1],
            "temperature": job["temperature"],
            "logprobs": 0,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
            "stop_token_ids": sorted(eos),
        }
        r = client.post(base + "/completions", json=body)
        r.raise_for_status()
        choice = r.json()["choices"][0]
        ids = [int(t.split(":", 1)[1]) for t in choice["logprobs"]["tokens"]]
        stopped = choice.get("finish_reason") == "stop" or bool(ids and ids[-1] in eos)
        while ids and ids[-1] in eos:
            ids.pop()
        rec = {
            "question_id": q.id,
            "cell": cell.name,
            "source": cell.source,
            "problem_type": q.problem_type,
            "difficulty": q.difficulty,
            "temperature": job["temperature"],
            "sample": job["sample"],
            "split": job["split"],
            "question": q.text,
            "gold": q.gold_answer,
            "stopped": stopped,
            "ids": ids,
            "text": tok.decode(ids),
            "elapsed_s": round(time.perf_counter() - started, 1),
        }
        with lock:
            gen_file.write(json.dumps(rec, ensure_ascii=False) + "\n")
            gen_file.flush()
        return rec

    try:
        with ThreadPoolExecutor(max_workers=args.in_flight) as pool:
            answers = list(pool.map(one, jobs))
    finally:
        gen_file.close()
        client.close()
        if server is not None:
            server.stop()
    gen_s = time.perf_counter() - t0
    rows = grade_rows(answers, caps, lambda ids: tok.decode(ids, skip_special_tokens=True), grade)
    import pandas as pd

    pd.DataFrame(rows).to_parquet(out / "rows.parquet", index=False)
    generation |= {
        "generation_s": round(gen_s, 1),
        "load_1min": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "generated_tokens": int(sum(len(a["ids"]) for a in answers)),
        "answers": {mode_name(t): sum(a["temperature"] == t for a in answers) for t in [0.0, *temps]},
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    return _fit_and_report(out, args, argv, generation)


def _what_n_buys(n: int, p: float) -> str:
    """One line: the Wilson 95% half-width of an accuracy measured on ``n`` questions of a cell."""
    return (
        f"{n} questions a cell: an accuracy near {p:g} is measured to +-{precision_of(n, p):.3f} (Wilson 95%), "
        f"near 0.15 to +-{precision_of(n, 0.15):.3f}"
    )


def _holdout_check(curves: Any, held: Any) -> tuple[list[dict], dict | None]:
    """Per-cell description (accuracy, Wilson interval, prediction) and the pooled test with its power
    (:func:`workbench.stats.nested_calibration_check`) of the curves on the held-out rows."""
    import numpy as np
    import pandas as pd

    def pred(cap: int, pt: str, d: Any) -> float:
        return float(curves.p(int(cap), pt, d if pd.notna(d) else None))

    cells = []
    for (cell, cap), grp in held.groupby(["cell", "token_cap"]):
        k, n = int(grp["correct"].sum()), len(grp)
        lo, hi = wilson(k, n)
        mean = sum(pred(cap, pt, d) for pt, d in zip(grp["problem_type"], grp["difficulty"])) / n
        cells.append(
            {
                "cell": cell,
                "token_cap": int(cap),
                "n": n,
                "accuracy": k / n,
                "ci95": [round(lo, 4), round(hi, 4)],
                "predicted": round(mean, 4),
            }
        )
    if held.empty:
        return cells, None
    caps = sorted(int(c) for c in held["token_cap"].unique())
    keys = ["question_id", "sample"] if "sample" in held else ["question_id"]
    obs, prd = [], []
    for _, grp in held.groupby(keys):
        by_cap = dict(zip(grp["token_cap"].astype(int), grp["correct"].astype(float)))
        if set(by_cap) != set(caps):
            continue
        first = grp.iloc[0]
        obs.append([by_cap[c] for c in caps])
        prd.append([pred(c, first["problem_type"], first["difficulty"]) for c in caps])
    if not obs:
        return cells, None
    return cells, nested_calibration_check(np.array(prd), np.array(obs))


def _format_check(check: dict) -> str:
    """The held-out test and its power, in words."""
    low, high = check["catches_low"], check["catches_high"]
    catches = []
    catches.append(
        f"a true accuracy below {low:.2g}x the curve's" if low == low else "no over-prediction, however large"
    )
    catches.append(f"above {high:.2g}x the curve's" if high == high else "no under-prediction up to 16x")
    return (
        f"held-out check: {check['observed']} right answers over {check['questions']} questions x every cap, the "
        f"curve predicted {check['expected']:.1f} (p = {check['p_value']:.3g}: "
        f"{'passes' if check['passes'] else 'FAILS'}); it catches, with {check['power']:.0%} power, "
        + " and ".join(catches)
    )


def _provenance(model: dict, engine: dict, cells: list, args: argparse.Namespace, temps: list[float]) -> dict:
    """What a sweep asked and of which model and engine (``sweep.json``, written before the first request)."""
    return {
        "model": model,
        "engine": {k: v for k, v in engine.items() if k not in ("log", "model")},
        "cells": [
            {
                "cell": c.name,
                "entry": c.entry,
                "source": c.source,
                "options": c.options,
                "problem_type": c.problem_type,
                "difficulty": c.difficulty,
                "pool": len(c.questions),
            }
            for c in cells
        ],
        "sampling": {"temperatures": temps, "samples": args.samples, "questions_per_cell": args.n_sampled},
        "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def _merge(parts: list[Path], out: Path) -> None:
    """Gather the answers of several sweeps into ``out/generations.jsonl``, and their ``sweep.json`` records into
    ``out/sweep.json`` (``parts``; model and engine of the first, date of the last)."""
    out.mkdir(parents=True, exist_ok=True)
    records = [json.loads((p / "sweep.json").read_text(encoding="utf-8")) for p in parts]
    with open(out / "generations.jsonl", "w", encoding="utf-8") as f:
        for p in parts:
            f.write((p / "generations.jsonl").read_text(encoding="utf-8"))
    meta = {
        "model": records[0].get("model"),
        "engine": records[0].get("engine"),
        "date": max(str(r.get("date", "")) for r in records),
        "generation_s_parts": [r.get("generation_s") for r in records],  # wall time of each (they may overlap)
        "generated_tokens": sum(int(r.get("generated_tokens") or 0) for r in records),
        "parts": [{"folder": p.name, **r} for p, r in zip(parts, records)],
    }
    (out / "sweep.json").write_text(json.dumps(meta, indent=2, default=str), encoding="utf-8")


def _regrade(out: Path, args: argparse.Namespace, argv: list[str] | None) -> int:
    """Grade ``out/generations.jsonl`` at ``--caps`` into ``rows.parquet``, then tabulate and fit."""
    import pandas as pd
    from transformers import AutoTokenizer

    from reasoning_env.grading import grade
    from reasoning_env.offline_model import resolve_model

    caps = sorted({int(c) for c in args.caps.split(",") if c.strip()})
    with open(out / "generations.jsonl", encoding="utf-8") as f:
        answers = [json.loads(line) for line in f if line.strip()]
    tok = AutoTokenizer.from_pretrained(resolve_model(args.model).ref)
    rows = grade_rows(answers, caps, lambda ids: tok.decode(ids, skip_special_tokens=True), grade)
    pd.DataFrame(rows).to_parquet(out / "rows.parquet", index=False)
    note: dict[str, Any] = {"regraded": f"{len(answers)} answers of generations.jsonl"}
    if not (out / "sweep.json").is_file():  # a sweep that stopped before writing it: what can be known again
        note["model"] = resolve_model(args.model).describe()
        if args.base_url:
            import httpx

            with httpx.Client() as client:
                note["engine"] = _engine_of(client, args.base_url) | {"served_name": args.served_model}
        if args.config or args.spec or args.sources:
            from reasoning_env.hub import hub_reachable
            from reasoning_env.sources.base import LoadContext

            specs, cfg_dir = load_specs(config=args.config, spec=args.spec, sources=args.sources)
            cells = build_cells(specs, LoadContext(data_dir=args.data_dir or cfg_dir, hub=hub_reachable()))
            note["cells"] = _provenance(note["model"], {}, cells, args, [])["cells"]
    if answers and "elapsed_s" in answers[0] and not args.merge:
        note["generation_s_last_answer"] = max(float(a["elapsed_s"]) for a in answers)
    note["generated_tokens"] = int(sum(len(a["ids"]) for a in answers))
    modes: dict[str, int] = {}
    for a in answers:
        modes[mode_name(float(a["temperature"]))] = modes.get(mode_name(float(a["temperature"])), 0) + 1
    note["answers"] = modes
    return _fit_and_report(out, args, argv, note)


def _ceiling_at_one(curves: Any, rows: Any) -> None:
    """Refit, with the ceiling held at 1, each problem type whose ceiling estimate sat at its bound 1.

    ``SolverCurves.fit`` then keeps the prior's ceiling (here: the pooled fit of every type, which another type's
    plateau can pull far below this one's measured accuracy); the likelihood's maximum on the allowed range is at 1,
    so 1 is the estimate to hold. Changes ``curves`` in place and says so in its fit report (``note``).
    """
    from reasoning_env.policies import SolverCurves

    for key, rep in list(curves.fits.items()):
        if not key.startswith("type:") or not any("at its bound 1" in u for u in rep.get("unidentified") or []):
            continue
        ptype = key[len("type:") :]
        sub = rows[rows["problem_type"] == ptype]
        one = SolverCurves.fit(
            sub, x="token_cap", cluster="question_id", min_rows=60, per="type", ceiling=1.0, base=curves
        )
        curves.types[ptype] = one.types[ptype]
        curves.fits[key] = one.fits[key] | {
            "note": "the free ceiling's estimate sat at its bound 1: refitted with the ceiling held at 1"
        }


def _fit_and_report(out: Path, args: argparse.Namespace, argv: list[str] | None, generation: dict | None) -> int:
    """Tabulate ``out/rows.parquet`` (``table.md``, ``table.json``), fit the curves to the ``fit`` split of its
    ``--fit-mode`` rows, check them on the held-out split, write ``fitted_curves.json`` and ``sweep.json``,
    print the table."""
    import pandas as pd

    from reasoning_env.policies import SolverCurves
    from reasoning_env.policies.curve_fit import CurveFitError

    df = pd.read_parquet(out / "rows.parquet")
    if "mode" not in df:  # a sweep of earlier versions: greedy, one cell per source
        df["mode"] = "greedy"
    if "cell" not in df:
        df["cell"] = df["source"]
    meta_path = out / "sweep.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    if generation is not None:
        meta.update(generation)
    table = summarise(df.to_dict("records"))
    (out / "table.json").write_text(json.dumps(table, indent=2, default=str), encoding="utf-8")
    (out / "table.md").write_text(to_markdown(table), encoding="utf-8")
    caps = sorted(int(c) for c in df["token_cap"].unique())
    rows = df[df["mode"] == args.fit_mode]
    fit_rows = rows[rows["split"] == "fit"]
    kw = {"per": "family", "per_family": False} if args.per == "pooled" else {"per": args.per}
    model = (meta.get("model") or {}).get("name", args.model)
    eng = meta.get("engine") or {}
    n_q = int(rows["question_id"].nunique())
    try:
        curves = SolverCurves.fit(fit_rows, x="token_cap", cluster="question_id", min_rows=60, **kw)
        if args.per == "type":
            _ceiling_at_one(curves, fit_rows)
    except CurveFitError as exc:
        curves = None
        meta["fit_error"] = f"{args.fit_mode} rows: {exc}"
    cells: list[dict] = []
    check = None
    if curves is not None:
        curves.source = (
            f"fitted to the real model {model} (vLLM {eng.get('engine_version', '?')} on {eng.get('device', 'cpu')}, "
            f"{args.fit_mode}) on {n_q} questions ({', '.join(sorted(rows['cell'].unique()))}) at caps "
            f"{', '.join(map(str, caps))}, {args.per} fit on {int(fit_rows['question_id'].nunique())} of them; "
            f"{meta.get('date', '')[:10]}; python -m workbench.real_sweep"
        )
        curves.save(out / "fitted_curves.json")
        cells, check = _holdout_check(curves, rows[rows["split"] == "holdout"])
    greedy = df[(df["mode"] == "greedy") & (df.token_cap == caps[0])]
    meta.update(
        {
            "method": "one greedy answer per question (and --samples sampled ones per question at each temperature) "
            "up to the largest cap (stated in the prompt), graded on its first k tokens for each cap k",
            "caps": caps,
            "questions": {str(c): int(n) for c, n in greedy.groupby("cell").size().items()},
            "fit": args.per,
            "fit_mode": args.fit_mode,
            "curves_source": curves.source if curves is not None else None,
            "holdout_check": check,
            "holdout_cells": cells,
            "precision": _what_n_buys(
                int(greedy.groupby("cell").size().min()) if not greedy.empty else 0, args.expected_accuracy
            ),
        }
    )
    meta.pop("holdout_within", None)  # an older sweep's per-cell count: a check that could not fail
    cmd = "python -m workbench.real_sweep " + shlex.join(sys.argv[1:] if argv is None else list(argv))
    if meta.setdefault("command", cmd) != cmd:
        meta["tabulated_by"] = cmd
    meta_path.write_text(json.dumps(meta, indent=2, default=str), encoding="utf-8")
    if curves is not None:
        shipped = curves.to_dict() | {
            "table": table,
            "sweep": {
                k: meta[k]
                for k in (
                    "model",
                    "engine",
                    "date",
                    "generation_s",
                    "generation_s_parts",
                    "load_1min",
                    "answers",
                    "command",
                    "holdout_check",
                    "precision",
                )
                if k in meta
            },
        }
        (out / "curve_set.json").write_text(json.dumps(shipped, indent=2, default=str), encoding="utf-8")
    print(to_markdown(table))
    if curves is not None:
        print(f"curves: {curves.source}")
        print(_format_check(check) if check else "held-out check: no held-out question answered at every cap")
        print(meta["precision"])
        print(f"records: {out}")
    else:
        print(f"no curves fitted ({meta['fit_error']}); table in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

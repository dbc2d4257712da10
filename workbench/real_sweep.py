"""A real model's budget sweep, one generation per question: the data the solver curves are fitted to.

    python -m workbench.real_sweep --data-dir ../shared/data --n 48 --out runs/sweep-qwen-coder
    python -m workbench.real_sweep --base-url http://127.0.0.1:8001/v1 ...   # a server already running

Each question is asked as the first question of a one-question episode, in the project's prompt and chat
format, with the largest cap stated as its ``step_token_cap``; the model (vLLM's OpenAI-compatible server,
the offline ``embedded:qwen2.5-coder-0.5b`` by default, started for the run) answers greedily once, up to
the largest cap. For each cap ``k`` the answer's first ``k`` tokens are graded (``reasoning_env.grading``,
with the question): greedy decoding makes them exactly what the model writes when cut at ``k`` tokens,
so one generation gives every cap. What this does not measure: a model told a smaller cap in its prompt
might answer more briefly; the sweep measures truncation, the same thing a hard-cap episode does to an
answer that runs past its budget.

Questions are drawn per source with a seed (MATH-500 spread over its five levels), and a ``--holdout``
share of them is kept out of the fit to check it: the run folder holds ``rows.parquet`` (one row per
question and cap: ``question_id``, ``source``, ``problem_type``, ``difficulty``, ``token_cap``,
``correct``, ``tokens``, ``finished``, ``split``), ``generations.jsonl``, ``fitted_curves.json`` (fitted
on the ``fit`` split, per problem type, clustered by question) and ``sweep.json`` (provenance: model,
engine, data, counts, date, command; and the held-out check: measured accuracy per problem type and cap
with its Wilson 95% interval beside the fitted curve's prediction).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import random
import shlex
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

__all__ = ["main", "select_questions", "wilson"]


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of ``k`` successes in ``n`` trials."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


def select_questions(questions: list, n: int, seed: int) -> list:
    """``n`` questions drawn with ``seed``; when they carry difficulties, spread evenly over the levels."""
    rng = random.Random(seed)
    levels: dict[Any, list] = {}
    for q in questions:
        levels.setdefault(q.difficulty, []).append(q)
    if len(levels) == 1:
        return rng.sample(questions, min(n, len(questions)))
    keys = sorted(levels, key=lambda d: (d is None, d))
    for k in keys:
        rng.shuffle(levels[k])
    out: list = []
    i = 0
    while len(out) < n and any(levels[k] for k in keys):
        k = keys[i % len(keys)]
        if levels[k]:
            out.append(levels[k].pop())
        i += 1
    return out


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


def main(argv: list[str] | None = None) -> int:
    """Command line; returns the exit status."""
    p = argparse.ArgumentParser(prog="python -m workbench.real_sweep", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="embedded:qwen2.5-coder-0.5b")
    p.add_argument("--base-url", default=None, help="a running vLLM server (default: start one for the run)")
    p.add_argument("--data-dir", default=None, help="folder with gsm8k_test.jsonl and math500_test.jsonl")
    p.add_argument("--sources", default="gsm8k,math500,builtin")
    p.add_argument("--n", type=int, default=48, help="questions per source")
    p.add_argument("--caps", default="64,128,256,512,1024")
    p.add_argument("--holdout", type=float, default=0.25, help="share of each source's questions kept out of the fit")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--in-flight", type=int, default=16, help="requests in flight")
    p.add_argument("--out", required=True, help="run folder to write (with --refit: the sweep folder to fit again)")
    p.add_argument(
        "--refit", action="store_true", help="fit the rows.parquet already in --out again, generate nothing"
    )
    p.add_argument(
        "--per",
        choices=["pooled", "family", "type"],
        default="pooled",
        help="one curve for every question (default: ~7 right answers per source at 40 questions cannot identify "
        "more), one per family, or one per problem type",
    )
    args = p.parse_args(argv)
    if args.refit:
        return _fit_and_report(Path(args.out), args, argv, None)

    from transformers import AutoTokenizer

    from reasoning_env.conversation import ChatFormat, EpisodeConversation
    from reasoning_env.errors import ReasoningEconomicsError
    from reasoning_env.grading import grade
    from reasoning_env.hub import hub_reachable
    from reasoning_env.offline_model import resolve_model
    from reasoning_env.sources import load_source
    from reasoning_env.sources.base import LoadContext

    caps = sorted({int(c) for c in args.caps.split(",") if c.strip()})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        resolved = resolve_model(args.model)
        ctx = LoadContext(data_dir=args.data_dir, hub=hub_reachable())
        chosen = []
        for name in [s.strip() for s in args.sources.split(",") if s.strip()]:
            qs = select_questions(load_source(name, {}, ctx), args.n, args.seed)
            rng = random.Random(f"{args.seed}-{name}")
            held = set(rng.sample(range(len(qs)), int(round(args.holdout * len(qs)))))
            chosen += [(q, name, "holdout" if i in held else "fit") for i, q in enumerate(qs)]
    except (ReasoningEconomicsError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tok = AutoTokenizer.from_pretrained(resolved.ref)
    chat = ChatFormat(tok)
    eos = {tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")}
    server = None
    base, served = args.base_url, args.model
    if base is None:
        from reasoning_env.model_server import ModelServer

        server = ModelServer(args.model, log_path=out / "vllm.log").start()
        base, served = server.base_url, server.served_name
    import httpx

    client = httpx.Client(timeout=1800)
    engine = server.describe() if server else {"base_url": base}

    def one(item: tuple) -> dict:
        q, source, split = item
        conv = EpisodeConversation()
        conv.ask(_observation(q, caps[-1]))
        body = {
            "model": served,
            "prompt": chat.conversation_ids(conv),
            "max_tokens": caps[-1],
            "temperature": 0.0,
            "logprobs": 0,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
            "stop_token_ids": sorted(eos),
        }
        r = client.post(base + "/completions", json=body)
        r.raise_for_status()
        tokens = r.json()["choices"][0]["logprobs"]["tokens"]
        ids = [int(t.split(":", 1)[1]) for t in tokens]
        while ids and ids[-1] in eos:
            ids.pop()
        return {"q": q, "source": source, "split": split, "ids": ids}

    try:
        with ThreadPoolExecutor(max_workers=args.in_flight) as pool:
            gens = list(pool.map(one, chosen))
    finally:
        client.close()
        if server is not None:
            server.stop()
    gen_s = time.perf_counter() - t0
    rows, logs = [], []
    for g in gens:
        q, ids = g["q"], g["ids"]
        for cap in caps:
            text = tok.decode(ids[:cap], skip_special_tokens=True)
            res = grade(text, q.gold_answer, question=q.text)
            rows.append(
                {
                    "question_id": q.id,
                    "source": g["source"],
                    "problem_type": q.problem_type,
                    "difficulty": q.difficulty,
                    "token_cap": cap,
                    "correct": bool(res.correct),
                    "tokens": min(len(ids), cap),
                    "finished": len(ids) <= cap,
                    "split": g["split"],
                }
            )
        logs.append({"question_id": q.id, "gold": q.gold_answer, "tokens": len(ids), "text": tok.decode(ids)})
    import pandas as pd

    pd.DataFrame(rows).to_parquet(out / "rows.parquet", index=False)
    with open(out / "generations.jsonl", "w", encoding="utf-8") as f:
        for rec in logs:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    generation = {
        "model": resolved.describe(),
        "engine": {k: v for k, v in engine.items() if k not in ("log", "model")},
        "generation_s": round(gen_s, 1),
        "generated_tokens": int(sum(len(g["ids"]) for g in gens)),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    return _fit_and_report(out, args, argv, generation)


def _fit_and_report(out: Path, args: argparse.Namespace, argv: list[str] | None, generation: dict | None) -> int:
    """Fit the curves to the ``fit`` split of ``out/rows.parquet``, check them on the held-out split, write
    ``fitted_curves.json`` and ``sweep.json``, print the table."""
    import pandas as pd

    from reasoning_env.policies import SolverCurves

    df = pd.read_parquet(out / "rows.parquet")
    meta_path = out / "sweep.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    if generation is not None:
        meta.update(generation)
    caps = sorted(int(c) for c in df["token_cap"].unique())
    fit_rows = df[df["split"] == "fit"]
    kw = {"per": "family", "per_family": False} if args.per == "pooled" else {"per": args.per}
    curves = SolverCurves.fit(fit_rows, x="token_cap", cluster="question_id", min_rows=60, **kw)
    n_q = int(df["question_id"].nunique())
    model = (meta.get("model") or {}).get("name", args.model)
    eng = meta.get("engine") or {}
    curves.source = (
        f"fitted to the real model {model} (vLLM {eng.get('engine_version', '?')} on {eng.get('device', '?')}, "
        f"greedy) on {n_q} questions ({', '.join(sorted(df['source'].unique()))}) at caps "
        f"{', '.join(map(str, caps))}, {args.per} fit on {int(fit_rows['question_id'].nunique())} of them; "
        f"{meta.get('date', '')[:10]}; python -m workbench.real_sweep"
    )
    curves.save(out / "fitted_curves.json")
    check = []
    hold = df[df["split"] == "holdout"]
    for (source, cap), grp in hold.groupby(["source", "token_cap"]):
        k, n = int(grp["correct"].sum()), len(grp)
        lo, hi = wilson(k, n)
        pred = (
            sum(
                float(curves.p(int(cap), pt, d if pd.notna(d) else None))
                for pt, d in zip(grp["problem_type"], grp["difficulty"])
            )
            / n
        )
        check.append(
            {
                "source": source,
                "token_cap": int(cap),
                "n": n,
                "accuracy": k / n,
                "ci95": [round(lo, 4), round(hi, 4)],
                "predicted": round(pred, 4),
                "within": bool(lo <= pred <= hi),
            }
        )
    meta.update(
        {
            "method": "one greedy answer per question up to the largest cap (stated in the prompt), graded on its "
            "first k tokens for each cap k",
            "caps": caps,
            "questions": {str(s): int(n) for s, n in df[df.token_cap == caps[0]].groupby("source").size().items()},
            "fit": args.per,
            "curves_source": curves.source,
            "holdout_check": check,
            "holdout_within": f"{sum(c['within'] for c in check)} of {len(check)} cells",
            "command": "python -m workbench.real_sweep " + shlex.join(sys.argv[1:] if argv is None else list(argv)),
        }
    )
    meta_path.write_text(json.dumps(meta, indent=2, default=str), encoding="utf-8")
    table = df.groupby(["source", "token_cap"])["correct"].agg(["mean", "count"]).unstack("token_cap")
    print(table.round(3).to_string())
    print(f"curves: {curves.source}")
    print(f"held-out check: {meta['holdout_within']} within their 95% interval; {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

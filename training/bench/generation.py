"""Benchmark: generation tokens/s of ``transformers`` vs vLLM's CPU server, same model, same prompts.

    python -m training.bench generation                         # embedded:qwen2.5-coder-0.5b, 1/4/8/16 in flight
    python -m training.bench generation --tokens 64 --concurrency 1,8
    python -m training.bench generation --base-url http://127.0.0.1:8001/v1   # a vLLM server already running

Both engines answer the same prompts: the first turn of seeded episodes (builtin questions), rendered
with the project's chat format (:class:`~reasoning_env.conversation.ChatFormat`), greedy. Every answer
is exactly ``--tokens`` long (``min_new_tokens`` in ``transformers``; ``min_tokens`` + ``ignore_eos`` in
vLLM), so the engines do the same work. At concurrency ``c``:

- ``transformers``: one ``generate`` call on a left-padded batch of ``c`` prompts (what the GRPO
  rollout's transformers backend does), in this process (float32 on CPU: bf16 was 2-3x slower here);
- ``vllm``: ``c`` requests in flight at once (threads) against the server, which batches them.

Printed JSON: per engine and concurrency ``seconds`` and ``tokens_per_s`` (generated tokens over wall
time, prefill included), ``vllm_over_transformers`` (the ratio of tokens/s at each concurrency), the
model, engine versions, ``torch_threads``, and the 1-minute ``load_average`` before and after each
engine. vLLM runs first, then its server is stopped and ``transformers`` runs, so neither competes
with the other; the machine is shared, so read the ratios of one run and repeat it for the spread.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this benchmark's options to ``p`` (the :mod:`training.bench` protocol)."""
    p.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    p.add_argument("--model", default="embedded:qwen2.5-coder-0.5b", help="model name or folder (both engines)")
    p.add_argument("--tokens", type=int, default=32, help="tokens generated per answer")
    p.add_argument("--concurrency", default="1,4,8,16", help="answers in flight (comma list)")
    p.add_argument("--base-url", default=None, help="a running vLLM server (default: start one for the run)")
    p.add_argument("--served-name", default=None, help="its model name (default --model)")
    p.add_argument("--engines", default="vllm,transformers", help="which engines to measure")
    p.add_argument("--dtype", default="float32", help="transformers dtype on CPU")


def _load1() -> float:
    return round(os.getloadavg()[0], 2)


def _prompts(model: str, n: int) -> tuple[list[list[int]], list[list[dict]]]:
    """The first-turn prompt (ids and chat messages) of ``n`` seeded episodes on builtin questions."""
    from transformers import AutoTokenizer

    from reasoning_env.config import EnvConfig
    from reasoning_env.conversation import ChatFormat, EpisodeConversation
    from reasoning_env.env import ReasoningEconomicsEnv
    from reasoning_env.offline_model import resolve_model
    from reasoning_env.policies.turn_cap import TurnCap, capped_observation

    resolved = resolve_model(model)
    tok = AutoTokenizer.from_pretrained(resolved.ref)
    chat = ChatFormat(tok)
    env = ReasoningEconomicsEnv(EnvConfig(sources=["builtin"]))
    ids, messages = [], []
    for seed in range(n):
        obs = env.reset(seed=seed, tokenizer_name=resolved.tokenizer_name)
        obs = capped_observation(obs, TurnCap()(obs))
        conv = EpisodeConversation()
        conv.ask(obs)
        ids.append(chat.conversation_ids(conv))
        messages.append(conv.messages())
    return ids, messages


def _vllm(args, levels: list[int], messages: list[list[dict]]) -> dict:
    import httpx

    from reasoning_env.model_server import ModelServer

    server = None
    base, name = args.base_url, args.served_name or args.model
    out: dict = {"load_average_before": _load1()}
    if base is None:
        server = ModelServer(args.model).start()
        base, name = server.base_url, server.served_name
        out["startup_s"] = round(server.startup_s or 0.0, 1)
    try:
        version = httpx.get(base.removesuffix("/v1") + "/version", timeout=10).json().get("version")
        out["engine_version"] = version
        client = httpx.Client(timeout=600)

        def one(msgs: list[dict]) -> int:
            body = {"model": name, "messages": msgs, "temperature": 0.0, "max_tokens": args.tokens}
            body.update({"min_tokens": args.tokens, "ignore_eos": True})
            r = client.post(base + "/chat/completions", json=body)
            r.raise_for_status()
            return int(r.json()["usage"]["completion_tokens"])

        one(messages[0])  # warm-up (first request compiles nothing with --enforce-eager, but fills caches)
        for c in levels:
            t0 = time.perf_counter()
            with ThreadPoolExecutor(max_workers=c) as pool:
                made = sum(pool.map(one, messages[:c]))
            dt = time.perf_counter() - t0
            out[str(c)] = {"seconds": round(dt, 2), "tokens": made, "tokens_per_s": round(made / dt, 2)}
        client.close()
    finally:
        if server is not None:
            server.stop()
    out["load_average_after"] = _load1()
    return out


def _transformers(args, levels: list[int], ids: list[list[int]]) -> dict:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    from reasoning_env.offline_model import resolve_model

    out: dict = {"load_average_before": _load1(), "engine_version": transformers.__version__}
    model = AutoModelForCausalLM.from_pretrained(resolve_model(args.model).ref, dtype=getattr(torch, args.dtype))
    model.eval()
    pad = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    out["torch_threads"] = torch.get_num_threads()
    out["dtype"] = args.dtype
    for c in levels:
        batch = ids[:c]
        width = max(len(x) for x in batch)
        input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in batch])
        attn = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in batch])
        t0 = time.perf_counter()
        with torch.no_grad():
            gen = model.generate(
                input_ids=input_ids,
                attention_mask=attn,
                max_new_tokens=args.tokens,
                min_new_tokens=args.tokens,
                do_sample=False,
                pad_token_id=pad,
            )
        dt = time.perf_counter() - t0
        made = int((gen.shape[1] - width) * c)
        out[str(c)] = {"seconds": round(dt, 2), "tokens": made, "tokens_per_s": round(made / dt, 2)}
    out["load_average_after"] = _load1()
    return out


def concurrency_levels(text: object) -> list[int] | None:
    """``--concurrency`` (a comma list such as ``"1,4,16"``: answers in flight) as sorted distinct integers, or
    ``None`` after printing an error to stderr when an item is not an integer (range checks are the caller's)."""
    try:
        return sorted({int(x) for x in str(text).split(",") if x.strip()})
    except ValueError:
        print(f"error: --concurrency must be a comma list of integers, got {text!r}", file=sys.stderr)
        return None


def run(args: argparse.Namespace) -> int:
    """Measure and print the JSON result; returns the exit status (2 for bad options)."""
    levels = concurrency_levels(args.concurrency)
    if levels is None:
        return 2
    engines = [e.strip() for e in str(args.engines).split(",") if e.strip()]
    if not levels or min(levels) < 1 or args.tokens < 1 or not set(engines) <= {"vllm", "transformers"}:
        print("error: --concurrency and --tokens must be >= 1; --engines is vllm and/or transformers", file=sys.stderr)
        return 2
    from reasoning_env.errors import ReasoningEconomicsError

    try:
        ids, messages = _prompts(args.model, max(levels))
        result: dict = {"model": args.model, "tokens_per_answer": args.tokens, "concurrency": levels}
        if "vllm" in engines:
            result["vllm"] = _vllm(args, levels, messages)
        if "transformers" in engines:
            result["transformers"] = _transformers(args, levels, ids)
    except ReasoningEconomicsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if "vllm" in result and "transformers" in result:
        result["vllm_over_transformers"] = {
            str(c): round(result["vllm"][str(c)]["tokens_per_s"] / result["transformers"][str(c)]["tokens_per_s"], 2)
            for c in levels
        }
    print(json.dumps(result, indent=2))
    return 0

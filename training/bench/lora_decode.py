"""Benchmark: what serving the training's LoRA adapter costs vLLM's CPU server, and whether merged weights avoid it.

    python -m training.bench lora_decode                         # embedded:qwen2.5-coder-0.5b, 1 and 4 in flight
    python -m training.bench lora_decode --tokens 64 --concurrency 1,4,8 --rounds 2

One server, started as training starts it (:func:`training.vllm_server_backend.serve_for_training`: run-time LoRA,
``--max-loras 1``, every core) plus ``VLLM_SERVER_DEV_MODE=1`` for vLLM's ``/collective_rpc`` and
``/reset_prefix_cache``. The adapter is the training's shape (:func:`training.models.lora_config`: rank 8 on all
seven linear layers, alpha 16) with trained-looking ``lora_B`` ~ N(0, 0.01), made with PEFT on the model's weights
in float32. The same prompts (the first turn of seeded builtin episodes, the project's chat format) are answered
greedily, every answer exactly ``--tokens`` long (``min_tokens`` + ``ignore_eos``), at each concurrency:

1. ``base`` (the model as served) and ``adapter`` (requests naming the loaded adapter), alternated ``--rounds``
   times in the same run so both see the same load;
2. ``merged``: the adapter merged into the weights (PEFT ``merge_and_unload``), saved, and reloaded in place into
   the running server (``/collective_rpc`` ``reload_weights`` with its folder, then ``/reset_prefix_cache``), timed
   (``merge_save_s``, ``reload_s``); then the base weights are reloaded the same way.

Exactness: the log-probs the server gives the same 48 answer tokens (as prompt log-probs) with the adapter and with
the merged weights, mean and max absolute difference (nats), against the difference between the adapter and the
base model (what a wrong weight hand-off would look like).

Printed JSON: per mode and concurrency ``tokens_per_s`` of each round and their mean, ``adapter_over_base`` and
``merged_over_adapter`` (ratios of the means), the timings, the exactness figures, the model, the server's dtype,
and the 1-minute load average before and after each part. The machine is shared: compare within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this benchmark's options to ``p`` (the :mod:`training.bench` protocol)."""
    p.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    p.add_argument("--model", default="embedded:qwen2.5-coder-0.5b", help="model name or folder")
    p.add_argument("--tokens", type=int, default=48, help="tokens generated per answer")
    p.add_argument("--concurrency", default="1,4", help="answers in flight (comma list)")
    p.add_argument("--rounds", type=int, default=2, help="base/adapter alternations per concurrency")
    p.add_argument("--no-merged", action="store_true", help="skip the merged-weights reload")


def _load1() -> float:
    return round(os.getloadavg()[0], 2)


def _adapter(model_ref: str, folder: Path):
    """A PEFT model with the training's LoRA shape and random ``lora_B`` (seeded), saved to ``folder``."""
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from training.models import lora_config

    base = AutoModelForCausalLM.from_pretrained(model_ref, dtype=torch.float32)
    model = get_peft_model(base, lora_config(8))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.01)
    model.save_pretrained(str(folder))
    return model


def run(args: argparse.Namespace) -> int:
    """Measure and print the JSON of the module docstring; returns the exit status."""
    from training.bench.generation import concurrency_levels

    levels = concurrency_levels(args.concurrency)
    if levels is None:
        return 2
    if not levels or min(levels) < 1 or args.tokens < 1 or args.rounds < 1:
        print("error: --concurrency, --tokens and --rounds must be >= 1", file=sys.stderr)
        return 2
    import httpx

    from reasoning_env.errors import ReasoningEconomicsError
    from reasoning_env.offline_model import resolve_model
    from training.bench.generation import _prompts
    from training.vllm_server_backend import serve_for_training

    tmp = tempfile.TemporaryDirectory(prefix="bench-lora-")
    work = Path(tmp.name)
    result: dict = {"benchmark": "lora_decode", "model": args.model, "tokens_per_answer": args.tokens}
    result["concurrency"] = levels
    try:
        ref = resolve_model(args.model).ref
        _, messages = _prompts(args.model, max(levels))
        model = _adapter(ref, work / "adapter")
        result["load_average_start"] = _load1()
        server = serve_for_training(
            args.model, max_lora_rank=8, log_path=work / "server.log", env={"VLLM_SERVER_DEV_MODE": "1"}
        )
    except ReasoningEconomicsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        tmp.cleanup()
        return 2
    client = httpx.Client(timeout=1800)
    root = server.root_url
    try:
        result["server"] = {k: server.describe()[k] for k in ("engine_version", "dtype", "startup_s")}
        r = client.post(
            root + "/v1/load_lora_adapter", json={"lora_name": "adapter", "lora_path": str(work / "adapter")}
        )
        r.raise_for_status()

        def answer(name: str, msgs: list[dict]) -> int:
            body = {"model": name, "messages": msgs, "temperature": 0.0, "max_tokens": args.tokens}
            body.update({"min_tokens": args.tokens, "ignore_eos": True})
            resp = client.post(server.base_url + "/chat/completions", json=body)
            resp.raise_for_status()
            return int(resp.json()["usage"]["completion_tokens"])

        def rate(name: str, c: int) -> float:
            t0 = time.perf_counter()
            with ThreadPoolExecutor(max_workers=c) as pool:
                made = sum(pool.map(lambda m: answer(name, m), messages[:c]))
            return round(made / (time.perf_counter() - t0), 3)

        answer(server.served_name, messages[0])  # warm-up
        answer("adapter", messages[0])
        modes: dict = {"base": {}, "adapter": {}}
        result["load_average_base_adapter"] = [_load1()]
        for c in levels:
            runs: dict = {"base": [], "adapter": []}
            for i in range(args.rounds):
                order = ("base", "adapter") if i % 2 == 0 else ("adapter", "base")
                for mode in order:
                    runs[mode].append(rate(server.served_name if mode == "base" else "adapter", c))
            for mode, values in runs.items():
                modes[mode][str(c)] = {"tokens_per_s": values, "mean": round(sum(values) / len(values), 3)}
            _progress(f"{c} in flight", modes, _load1())
        result["load_average_base_adapter"].append(_load1())
        result["adapter_over_base"] = {
            str(c): round(modes["adapter"][str(c)]["mean"] / modes["base"][str(c)]["mean"], 3) for c in levels
        }
        exact_ids = _answer_ids(client, server, "adapter", messages[0], 48)
        adapter_lp = _prompt_logprobs(client, server, "adapter", exact_ids)
        base_lp = _prompt_logprobs(client, server, server.served_name, exact_ids)
        n = len(adapter_lp)
        result["adapter_vs_base_logprob_diff"] = _diff(adapter_lp, base_lp)
        if not args.no_merged:
            t0 = time.perf_counter()
            merged = model.merge_and_unload()
            merged.save_pretrained(str(work / "merged"))
            result["merge_save_s"] = round(time.perf_counter() - t0, 2)
            t0 = time.perf_counter()
            _reload(client, root, str(work / "merged"))
            result["reload_s"] = round(time.perf_counter() - t0, 2)
            merged_lp = _prompt_logprobs(client, server, server.served_name, exact_ids)
            result["merged_vs_adapter_logprob_diff"] = _diff(merged_lp, adapter_lp)
            _progress("merged weights loaded", {k: result.get(k) for k in ("merge_save_s", "reload_s")}, _load1())
            _progress("exactness", result["merged_vs_adapter_logprob_diff"], result["adapter_vs_base_logprob_diff"])
            result["load_average_merged"] = [_load1()]
            modes["merged"] = {}
            for c in levels:
                values = [rate(server.served_name, c) for _ in range(args.rounds)]
                modes["merged"][str(c)] = {"tokens_per_s": values, "mean": round(sum(values) / len(values), 3)}
            result["load_average_merged"].append(_load1())
            result["merged_over_adapter"] = {
                str(c): round(modes["merged"][str(c)]["mean"] / modes["adapter"][str(c)]["mean"], 3) for c in levels
            }
            _reload(client, root, ref)  # the base weights again
            result["base_restored_logprob_diff"] = _diff(
                _prompt_logprobs(client, server, server.served_name, exact_ids), base_lp
            )
        result["exactness_tokens"] = n
        result["modes"] = modes
    finally:
        client.close()
        server.stop()
        tmp.cleanup()
    result["load_average_end"] = _load1()
    print(json.dumps(result, indent=2))
    return 0


def _progress(what: str, *figures: object) -> None:
    """Partial results on stderr as they come (a run cut short still says what it measured)."""
    print(f"lora_decode: {what}: " + " ".join(json.dumps(f) for f in figures), file=sys.stderr, flush=True)


def _reload(client, root: str, folder: str) -> None:
    """Reload the running server's weights in place from ``folder`` and drop the prefix cache built on the old."""
    r = client.post(root + "/collective_rpc", json={"method": "reload_weights", "kwargs": {"weights_path": folder}})
    r.raise_for_status()
    client.post(root + "/reset_prefix_cache").raise_for_status()


def _answer_ids(client, server, name: str, messages: list[dict], tokens: int) -> list[int]:
    """Prompt ids + the greedy answer's ids (the sequence whose log-probs are compared)."""
    from transformers import AutoTokenizer

    from reasoning_env.offline_model import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model(server.model).ref)
    prompt = list(
        tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
    )
    body = {"model": name, "prompt": prompt, "max_tokens": tokens, "temperature": 0.0, "logprobs": 0}
    body.update({"return_tokens_as_token_ids": True, "min_tokens": tokens, "ignore_eos": True})
    r = client.post(server.base_url + "/completions", json=body)
    r.raise_for_status()
    toks = r.json()["choices"][0]["logprobs"]["tokens"]
    return prompt + [int(t.split(":", 1)[1]) for t in toks]


def _prompt_logprobs(client, server, name: str, ids: list[int]) -> list[float]:
    """The server's log-prob of each of the last 48 tokens of ``ids`` given what precedes it."""
    body = {"model": name, "prompt": ids, "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 0}
    r = client.post(server.base_url + "/completions", json=body)
    r.raise_for_status()
    rows = r.json()["choices"][0]["prompt_logprobs"]
    out = []
    for tok, row in zip(ids[-48:], rows[-48:]):
        out.append(float(row[str(tok)]["logprob"]))
    return out


def _diff(a: list[float], b: list[float]) -> dict:
    d = [abs(x - y) for x, y in zip(a, b)]
    return {"mean": round(sum(d) / len(d), 5), "max": round(max(d), 5)}

"""Test support for the Atropos adapter (tests/test_atropos_env.py): a stub of the token-level model
servers the adapter talks to, the trajectory API started as its own process, and a replay of episodes
through the environment itself.

The stub is a real HTTP server on loopback (Starlette under uvicorn) but not a model: it decodes the prompt,
finds the open question (the last user message) among the environment's own questions, and answers in a
few words ending in ``\\boxed{}``: the gold answer with probability ``p_gold``, a wrong number otherwise,
so scores differ within a group. ``max_tokens`` is honoured (``finish_reason`` "length"); a finished answer
ends with ``<|im_end|>`` as a chat model's does. It speaks two protocols:

- Atropos's ``example_trainer/vllm_api_server.py`` (what ``atroposlib``'s ``VLLMServer`` calls,
  ``server_type: vllm``): ``GET /health``; ``POST /generate`` with ``{"prompt": {"prompt_token_ids": [...]},
  "logprobs": 0, "n", "max_tokens", ...}``, answered with ``{"text", "finish_reasons", "logprobs":
  [[[{id: logprob}], ...]], "token_ids"}``;
- the OpenAI completions API as vLLM's stock server speaks it (``server_type: openai``, the adapter's
  ``CompletionsTokenServer``): ``GET /v1/models``; ``POST /v1/completions`` with ``prompt`` a list of token
  ids, ``n``, ``max_tokens``, ``logprobs: 0``, ``return_tokens_as_token_ids``, ``stop_token_ids``, answered
  with vLLM's shape: ``choices[i] = {"index", "text", "finish_reason", "logprobs": {"tokens":
  ["token_id:<id>", ...], "token_logprobs": [...], ...}}`` and ``usage``. A text prompt, or a request
  without ``return_tokens_as_token_ids``, is answered with token strings instead of ids, as a server that
  does not know the option would (``text_tokens=True`` makes every reply so, for the refusal test).
"""

from __future__ import annotations

import os
import random
import subprocess
import threading
import time
from pathlib import Path

import httpx

from reasoning_env.client import make_action

FILLER = "First I read the question carefully, then I work through it step by step and check".split()


def stub_generate_app(
    tokenizer,
    golds: dict[str, str],
    *,
    p_gold: float = 0.5,
    seed: int = 0,
    text_tokens: bool = False,
    protocols: tuple[str, ...] = ("generate", "completions"),
):
    """The stub's ASGI app (Starlette). ``golds``: question text -> gold answer; ``protocols``: which of the two
    it serves (``"generate"``: ``/health`` + ``/generate``; ``"completions"``: ``/v1/models`` +
    ``/v1/completions``). Returns ``(app, calls)``, ``calls`` being one ``{"route", "prompt_ids", "body",
    "outputs": [ids of each completion]}`` per request."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    rng = random.Random(seed)
    lock = threading.Lock()
    calls: list[dict] = []
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def answer(prompt_ids: list[int]) -> str:
        text = tokenizer.decode(prompt_ids, skip_special_tokens=False)
        last_user = text.rsplit("<|im_start|>user\n", 1)[-1]
        gold = next((g for q, g in golds.items() if q in last_user), None)
        with lock:
            words = FILLER[: rng.randint(2, len(FILLER))]
            right = gold is not None and rng.random() < p_gold
            wrong = str(rng.randint(1000, 9999))
        return " ".join(words) + ". The answer is \\boxed{" + (gold if right else wrong) + "}."

    def sample(prompt_ids: list[int], max_tokens: int, stop_ids: set[int]) -> tuple[list[int], list[float], str]:
        ids = list(tokenizer(answer(prompt_ids), add_special_tokens=False)["input_ids"]) + [im_end]
        reason = "stop"
        for i, t in enumerate(ids):  # a stop id ends the completion (it is kept, as vLLM keeps an EOS)
            if t in stop_ids:
                ids = ids[: i + 1]
                break
        if len(ids) > max_tokens:
            ids, reason = ids[:max_tokens], "length"
        with lock:
            logprobs = [round(-rng.uniform(0.01, 2.0), 4) for _ in ids]
        return ids, logprobs, reason

    def record(route: str, prompt_ids: list[int], body: dict, outputs: list[list[int]]) -> None:
        with lock:
            calls.append({"route": route, "prompt_ids": list(prompt_ids), "body": body, "outputs": outputs})

    async def health(request):
        return Response(status_code=200)

    async def generate(request):
        body = await request.json()
        prompt_ids = list(body["prompt"]["prompt_token_ids"])
        max_tokens = int(body.get("max_tokens") or 16)
        texts, reasons, lps, ids_out = [], [], [], []
        for _ in range(int(body.get("n", 1))):
            ids, logprobs, reason = sample(prompt_ids, max_tokens, {im_end})
            texts.append(tokenizer.decode(ids, skip_special_tokens=True))
            reasons.append(reason)
            lps.append([[{str(t): lp}] for t, lp in zip(ids, logprobs)])
            ids_out.append(ids)
        record("/generate", prompt_ids, body, ids_out)
        return JSONResponse(
            {
                "text": texts,
                "finish_reasons": reasons,
                "logprobs": lps,
                "token_ids": ids_out,
                "prompt_token_ids": prompt_ids,
            }
        )

    async def models(request):
        return JSONResponse({"object": "list", "data": [{"id": "stub", "object": "model", "owned_by": "test"}]})

    async def completions(request):
        body = await request.json()
        if body.get("model") != "stub":
            return JSONResponse({"error": {"message": f"The model `{body.get('model')}` does not exist."}}, 404)
        prompt = body.get("prompt")
        as_ids = isinstance(prompt, list) and all(isinstance(t, int) for t in prompt)
        prompt_ids = list(prompt) if as_ids else list(tokenizer(str(prompt), add_special_tokens=False)["input_ids"])
        max_tokens = int(body.get("max_tokens") or 16)
        stop_ids = {int(t) for t in body.get("stop_token_ids") or []} | {im_end}
        ids_names = body.get("return_tokens_as_token_ids") is True and not text_tokens
        choices, ids_out = [], []
        for i in range(int(body.get("n", 1))):
            ids, logprobs, reason = sample(prompt_ids, max_tokens, stop_ids)
            names = [f"token_id:{t}" if ids_names else tokenizer.convert_ids_to_tokens(t) for t in ids]
            choice = {"index": i, "text": tokenizer.decode(ids, skip_special_tokens=True), "finish_reason": reason}
            if body.get("logprobs") is not None:
                choice["logprobs"] = {
                    "tokens": names,
                    "token_logprobs": logprobs,
                    "top_logprobs": [{n: lp} for n, lp in zip(names, logprobs)],
                    "text_offset": list(range(len(ids))),
                }
            choices.append(choice)
            ids_out.append(ids)
        record("/v1/completions", prompt_ids, body, ids_out)
        usage = {"prompt_tokens": len(prompt_ids), "completion_tokens": sum(len(x) for x in ids_out)}
        return JSONResponse({"id": "cmpl-stub", "object": "text_completion", "choices": choices, "usage": usage})

    routes = []
    if "generate" in protocols:
        routes += [Route("/health", health), Route("/generate", generate, methods=["POST"])]
    if "completions" in protocols:
        routes += [Route("/v1/models", models), Route("/v1/completions", completions, methods=["POST"])]
    return Starlette(routes=routes), calls


def start_process(cmd: list[str], log: Path, env: dict | None = None, cwd: Path | None = None) -> subprocess.Popen:
    """Start ``cmd`` at the test's own CPU priority, output to ``log``. (At nice 19, as it was, the stub-server
    ``serve`` test starved beside the real-model tests' vLLM workers in a full suite: no batch in 600 s.)"""
    fh = open(log, "wb")
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)
    proc._log_handle = fh  # type: ignore[attr-defined]
    return proc


def stop_process(proc: subprocess.Popen) -> None:
    """Terminate ``proc`` (and the processes it started), then close its log."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, 15)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=15)
    proc._log_handle.close()  # type: ignore[attr-defined]


def wait_http(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 120) -> None:
    """Wait until ``url`` answers, or fail with the process's log."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{url}: the process exited ({proc.returncode}):\n{log.read_text()[-4000:]}")
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.3)
    raise AssertionError(f"{url} did not answer in {timeout_s} s:\n{log.read_text()[-4000:]}")


def model_turns(tokens: list[int], masks: list[int]) -> list[list[int]]:
    """The runs of model-generated ids in one Atropos sequence (``masks`` != -100)."""
    turns: list[list[int]] = []
    prev = False
    for tok, m in zip(tokens, masks):
        trained = m != -100
        if trained:
            if not prev:
                turns.append([])
            turns[-1].append(tok)
        prev = trained
    return turns


def replay_reward(
    config, seed: int, turns: list[list[int]], tokenizer, tokenizer_name: str, eos_ids: set[int]
) -> float:
    """What the environment pays for these answers: a fresh :class:`ReasoningEconomicsEnv` reset with
    ``seed``, one step per model turn (decoded text, charged at least its generated ids), the
    questions left after the last turn answered empty; the sum of the step rewards."""
    from reasoning_env.env import ReasoningEconomicsEnv

    env = ReasoningEconomicsEnv(config)
    obs = env.reset(seed=seed, tokenizer_name=tokenizer_name)
    total = 0.0
    for ids in turns:
        assert not obs.done, "a model turn after the episode ended"
        text = tokenizer.decode(ids, skip_special_tokens=True)
        generated = len(ids) - (1 if ids and ids[-1] in eos_ids else 0)
        obs = env.step(make_action(text, None, num_generated_tokens=generated))
        total += float(obs.reward)
    while not obs.done:
        obs = env.step(make_action("", None))
        total += float(obs.reward)
    env.close()
    return total


def start_trajectory_api(atropos_python: Path, tmp: Path, batch_size: int, timeout_s: float = 600):
    """atroposlib's trajectory API (``run-api``) on a free loopback port, with a trainer registered as a trainer
    registers first (``batch_size`` sequences a batch) and no batch handed out yet. Returns ``(process, url)``;
    its log is ``tmp/api.log``. Raises AssertionError if a batch exists before any environment sent one."""
    from test_app_support import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    api = start_process(
        [str(atropos_python.parent / "run-api"), "--host", "127.0.0.1", "--port", str(port)], tmp / "api.log"
    )
    try:
        wait_http(f"{url}/status", api, tmp / "api.log", timeout_s=timeout_s)
        reg = {
            "wandb_group": "test",
            "wandb_project": "test",
            "batch_size": batch_size,
            "max_token_len": 4096,
            "checkpoint_dir": str(tmp / "ckpt"),
            "save_checkpoint_interval": -1,
            "starting_step": 0,
            "num_steps": 10,
        }
        httpx.post(f"{url}/register", json=reg, timeout=10).raise_for_status()
        assert httpx.get(f"{url}/batch", timeout=10).json()["batch"] is None
    except BaseException:
        stop_process(api)
        raise
    return api, url

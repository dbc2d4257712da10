"""Test support for the Atropos adapter (tests/test_atropos_env.py): a stub of the token-level model
server Atropos's ``VLLMServer`` calls, the trajectory API started as its own process, and a replay
of episodes through the environment itself.

The stub speaks what ``atroposlib``'s ``VLLMServer.tokens_and_logprobs_completion`` sends to
Atropos's ``example_trainer/vllm_api_server.py``: ``GET /health`` and ``POST /generate`` with
``{"prompt": {"prompt_token_ids": [...]}, "logprobs": 0, "n", "max_tokens", "temperature", ...}``,
answered with ``{"text", "finish_reasons", "logprobs": [[[{id: logprob}], ...]], "token_ids"}``. It
decodes the prompt, finds the open question (the last user message) among the environment's own
questions, and answers in a few words ending in ``\\boxed{}``: the gold answer with probability
``p_gold``, a wrong number otherwise, so scores differ within a group. ``max_tokens`` is honoured
(``finish_reason`` "length"); a finished answer ends with ``<|im_end|>`` as a chat model's does.
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


def stub_generate_app(tokenizer, golds: dict[str, str], *, p_gold: float = 0.5, seed: int = 0):
    """The stub's ASGI app (Starlette). ``golds``: question text -> gold answer. Returns ``(app, calls)``,
    ``calls`` being one ``{"body": request, "outputs": [ids of each completion]}`` per request (for the test)."""
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

    async def health(request):
        return Response(status_code=200)

    async def generate(request):
        body = await request.json()
        prompt_ids = list(body["prompt"]["prompt_token_ids"])
        max_tokens = int(body.get("max_tokens") or 16)
        texts, reasons, lps, ids_out = [], [], [], []
        for _ in range(int(body.get("n", 1))):
            ids = list(tokenizer(answer(prompt_ids), add_special_tokens=False)["input_ids"]) + [im_end]
            reason = "stop"
            if len(ids) > max_tokens:
                ids, reason = ids[:max_tokens], "length"
            with lock:
                logprobs = [round(-rng.uniform(0.01, 2.0), 4) for _ in ids]
            texts.append(tokenizer.decode(ids, skip_special_tokens=True))
            reasons.append(reason)
            lps.append([[{str(t): lp}] for t, lp in zip(ids, logprobs)])
            ids_out.append(ids)
        with lock:
            calls.append({"body": body, "outputs": ids_out})
        return JSONResponse(
            {
                "text": texts,
                "finish_reasons": reasons,
                "logprobs": lps,
                "token_ids": ids_out,
                "prompt_token_ids": prompt_ids,
            }
        )

    app = Starlette(routes=[Route("/health", health), Route("/generate", generate, methods=["POST"])])
    return app, calls


def start_process(cmd: list[str], log: Path, env: dict | None = None, cwd: Path | None = None) -> subprocess.Popen:
    """Start ``cmd`` at the lowest CPU priority, output to ``log``."""
    fh = open(log, "wb")
    proc = subprocess.Popen(
        ["nice", "-n", "19", *cmd], stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True
    )
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

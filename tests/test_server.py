"""The OpenEnv server, live on a loopback port (uvicorn in a thread, or ``python -m reasoning_env.server``
in a subprocess), driven by the real client and by raw WebSocket/HTTP requests. No mocks.

Questions come from GSM8K and MATH-500 in ``../shared/data`` when it is there, otherwise from
reasoning-gym (offline either way).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
import websockets.sync.client as ws_sync

from reasoning_env import EnvConfig, ReasoningEconomicsAction, ReasoningEconomicsEnv
from reasoning_env.client import ReasoningEconomicsClient, ServerError
from reasoning_env.server import create_server_app

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
QWEN25 = "Qwen/Qwen2.5-0.5B-Instruct"
QWEN3 = "Qwen/Qwen3-4B"

pytestmark = pytest.mark.timeout(180)


def _sources_env() -> dict[str, str]:
    if (SHARED_DATA / "gsm8k_test.jsonl").is_file():
        return {"REE_SOURCES": "gsm8k,math500", "REE_DATA_DIR": str(SHARED_DATA)}
    return {"REE_SOURCES": "reasoning_gym"}


def _config() -> EnvConfig:
    env = _sources_env()
    if "REE_DATA_DIR" in env:
        return EnvConfig(sources=["gsm8k", "math500"], data_dir=env["REE_DATA_DIR"])
    return EnvConfig(sources=[{"name": "reasoning_gym", "options": {"size": 60}}])


CONFIG = _config()


class LiveServer:
    """``uvicorn`` serving ``app`` on a free loopback port in a background thread."""

    def __init__(self, app: Any, environ: dict[str, str] | None = None) -> None:
        from reasoning_env.server.net import make_config

        self.app = app
        settings = app.state.reasoning_env.settings
        # The options `python -m reasoning_env.server` runs with (header timeout, per-address
        # connection cap, X-Forwarded-For only from FORWARDED_ALLOW_IPS in ``environ``).
        config = make_config(app, settings, environ or {}, host="127.0.0.1", port=0, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.ws_url = f"ws://127.0.0.1:{port}/ws"
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)

    def capacity(self) -> dict[str, Any]:
        return httpx.get(self.url + "/capacity", timeout=10).json()

    def wait_sessions(self, n: int, timeout_s: float = 15.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.capacity()["active_sessions"] != n:
            assert time.monotonic() < deadline, f"expected {n} active sessions, have {self.capacity()}"
            time.sleep(0.05)


@pytest.fixture(scope="module")
def live():
    with LiveServer(
        create_server_app(CONFIG, max_sessions=80, max_sessions_per_client=80, session_timeout_s=None)
    ) as srv:
        yield srv


@pytest.fixture(scope="module")
def gold(live) -> dict[str, str]:
    pools = live.app.state.reasoning_env.pools
    return {q.id: q.gold_answer for qs in pools.pools.values() for q in qs}


def _rpc(ws: Any, message: Any) -> dict[str, Any]:
    ws.send(message if isinstance(message, (str, bytes)) else json.dumps(message))
    return json.loads(ws.recv(timeout=60))


# ------------------------------------------------------------------------------ basics
def test_full_episode_over_the_sync_client(live, gold):
    with ReasoningEconomicsClient(base_url=live.url).sync() as env:
        result = env.reset(seed=11, tokenizer_name=QWEN25)
        obs = result.observation
        assert obs.metadata["budget_source"] == "tokenizer_native" and obs.total_budget > 0
        assert obs.question and obs.questions_remaining == obs.num_questions and not result.done
        steps = 0
        while not result.done:
            qid = result.observation.question_id
            answer = gold[qid] if steps % 2 == 0 else "not the answer"
            result = env.step(f"Let me think. So the answer is \\boxed{{{answer}}}.")
            steps += 1
            assert result.observation.last_step.question_id == qid
            assert result.observation.last_step.correct == (steps % 2 == 1)
        assert result.observation.done_reason == "all_answered" and steps == obs.num_questions
        assert len(result.observation.history) == steps
        assert env.state().done is True
        with pytest.raises(ServerError) as err:  # a step after done: a clear error, nothing changes
            env.step("\\boxed{1}")
        assert err.value.code == "EXECUTION_ERROR" and "episode is over" in err.value.message
        # The session goes on: a new episode on the same connection.
        again = env.reset(seed=11, total_budget=5000)
        assert again.observation.total_budget == 5000 and again.observation.metadata["budget_source"] == "client"
        assert again.observation.metadata["question_ids"] == obs.metadata["question_ids"]


def test_step_takes_grading_response_and_tokenizer(live, gold):
    with ReasoningEconomicsClient(base_url=live.url).sync() as env:
        r = env.reset(seed=3)
        qid = r.observation.question_id
        r = env.step(
            "<think>maybe \\boxed{0}</think> hmm", grading_response=f"\\boxed{{{gold[qid]}}}", tokenizer_name=QWEN3
        )
        assert r.observation.last_step.graded_text == "grading_response" and r.observation.last_step.correct
        assert r.observation.metadata["tokenizer_name"] == QWEN3
        qid = r.observation.question_id
        action = ReasoningEconomicsAction(response="hmm", metadata={"grading_response": f"\\boxed{{{gold[qid]}}}"})
        r = env.step(action, tokenizer_name=QWEN25)  # an action works too; the keyword adds to its metadata
        assert r.observation.last_step.correct and r.observation.metadata["tokenizer_name"] == QWEN25
        with pytest.raises(TypeError, match="it takes grading_response"):
            env.step("x", timeout_s=600)


def test_http_routes(live):
    assert httpx.get(live.url + "/health").json()["status"] == "healthy"
    schema = httpx.get(live.url + "/schema").json()
    assert "response" in schema["action"]["properties"] and "remaining_budget" in schema["observation"]["properties"]
    assert httpx.get(live.url + "/metadata").json()["name"] == "ReasoningEconomicsEnv"
    cap = live.capacity()
    assert cap["max_sessions"] == 80 and cap["max_response_bytes"] == 1_000_000
    r = httpx.post(live.url + "/reset", json={"seed": 5, "total_budget": 1234})
    assert r.status_code == 200 and r.json()["observation"]["total_budget"] == 1234


# ------------------------------------------------------------------------------ concurrency
def _response_for(seed: int, index: int, gold: str) -> dict[str, Any]:
    """A deterministic answer: right or wrong, short or long, sometimes with a grading response."""
    kind = (seed * 7 + index) % 5
    filler = "We compute carefully, step by step. " * (5 + 40 * (kind == 3))
    if kind == 0:
        return {"response": filler + "no final answer here"}
    if kind == 4:
        return {"response": "<think>" + filler + "\\boxed{0}</think>", "grading_response": f"\\boxed{{{gold}}}"}
    answer = gold if kind in (1, 3) else f"{gold}1"
    return {"response": f"{filler}The answer is \\boxed{{{answer}}}."}


SESSIONS = [
    # (seed, tokenizer_name, total_budget): every session its own tokenizer, budget and questions
    (1000 + k, (None, QWEN25, QWEN3)[k % 3], (None, None, 400, 30_000)[k % 4])
    for k in range(64)
]


def _outcome(reset_obs: Any, final_obs: Any, rewards: list[float]) -> dict[str, Any]:
    return {
        "question_ids": reset_obs.metadata["question_ids"],
        "total_budget": reset_obs.total_budget,
        "budget_source": reset_obs.metadata["budget_source"],
        "tokenizer": reset_obs.metadata["tokenizer_name"],
        "rewards": rewards,
        "tokens": [h.tokens for h in final_obs.history],
        "done_reason": final_obs.done_reason,
        "remaining": final_obs.remaining_budget,
    }


def _play_in_process(seed: int, tokenizer: str | None, budget: int | None, gold: dict[str, str]) -> dict:
    env = ReasoningEconomicsEnv(CONFIG)
    first = obs = env.reset(seed=seed, tokenizer_name=tokenizer, total_budget=budget)
    rewards = []
    while not obs.done:
        r = _response_for(seed, obs.question_index, gold[obs.question_id])
        md = {"grading_response": r["grading_response"]} if "grading_response" in r else {}
        obs = env.step({"response": r["response"], "metadata": md})
        rewards.append(obs.reward)
    return _outcome(first, obs, rewards)


async def _play_remote(url: str, seed: int, tokenizer: str | None, budget: int | None, gold: dict[str, str]) -> dict:
    async with ReasoningEconomicsClient(base_url=url) as env:
        first = result = await env.reset(seed=seed, tokenizer_name=tokenizer, total_budget=budget)
        rewards = []
        while not result.done:
            r = _response_for(seed, result.observation.question_index, gold[result.observation.question_id])
            result = await env.step(r["response"], grading_response=r.get("grading_response"))
            rewards.append(result.reward)
        return _outcome(first.observation, result.observation, rewards)


def test_64_concurrent_episodes_match_in_process_runs(live, gold):
    async def run_all():
        return await asyncio.gather(*(_play_remote(live.url, s, t, b, gold) for s, t, b in SESSIONS))

    remote = asyncio.run(run_all())
    local = [_play_in_process(s, t, b, gold) for s, t, b in SESSIONS]
    assert remote == local
    # The mix really is mixed: tokenizers, budget sources, right and wrong answers, runs dry.
    assert {o["tokenizer"] for o in remote} == {QWEN25, QWEN3}
    assert {o["budget_source"] for o in remote} == {"config", "tokenizer_native", "client"}
    assert {o["done_reason"] for o in remote} == {"all_answered", "budget_exhausted"}
    assert len({tuple(o["question_ids"]) for o in remote}) == 64
    live.wait_sessions(0)


def test_capacity_cap_answers_clearly_and_frees_on_close():
    with LiveServer(
        create_server_app(CONFIG, max_sessions=2, max_sessions_per_client=2, session_timeout_s=None)
    ) as srv:
        a = ReasoningEconomicsClient(base_url=srv.url).sync()
        b = ReasoningEconomicsClient(base_url=srv.url).sync()
        a.connect(), b.connect()
        a.reset(seed=1), b.reset(seed=2)
        c = ReasoningEconomicsClient(base_url=srv.url).sync()
        with pytest.raises(ServerError) as err:
            c.reset(seed=3)
        assert err.value.code == "CAPACITY_REACHED" and "2/2" in err.value.message
        c.close()
        a.close()
        srv.wait_sessions(1)
        with ReasoningEconomicsClient(base_url=srv.url).sync() as d:
            assert d.reset(seed=3).observation.question
        b.step("\\boxed{1}")  # the other session was never disturbed
        b.close()


# ------------------------------------------------------------------------------ hostile input
WS_BAD = [
    ("{not json", "INVALID_JSON", "Invalid JSON"),
    ("[1, 2, 3]", "VALIDATION_ERROR", "must be a JSON object"),
    ("[" * 100_000 + "]" * 100_000, "INVALID_JSON", "nested too deeply"),
    (b"\x00\x01binary", "INVALID_JSON", "binary frames are not accepted"),
    ({"type": "dance"}, "UNKNOWN_TYPE", "unknown message type 'dance'"),
    ({"type": "step"}, "VALIDATION_ERROR", "missing field 'data'"),
    ({"type": "step", "data": {"response": 42}}, "VALIDATION_ERROR", "response: Input should be a valid string"),
    ({"type": "step", "data": {"response": "x", "colour": "red"}}, "VALIDATION_ERROR", "unknown field 'colour'"),
    ({"type": "step", "data": {"response": "x"}, "extra": 1}, "VALIDATION_ERROR", "unknown field 'extra'"),
    (
        {"type": "step", "data": {"response": "x" * 3_000_000}},
        "VALIDATION_ERROR",
        "3,000,000 bytes of UTF-8; this server accepts at most 1,000,000",
    ),
    (
        {"type": "step", "data": {"response": "é" * 600_000}},
        "VALIDATION_ERROR",
        "1,200,000 bytes of UTF-8; this server accepts at most 1,000,000",
    ),
    (
        {"type": "step", "data": {"response": "x", "metadata": {"grading_response": "y" * 1_000_001}}},
        "VALIDATION_ERROR",
        "metadata.grading_response is 1,000,001 bytes",
    ),
    (
        {"type": "step", "data": {"response": "x", "metadata": {"grading_response": 7}}},
        "EXECUTION_ERROR",
        "grading_response must be a string",
    ),
    (
        {"type": "reset", "data": {"total_budget": -5}},
        "EXECUTION_ERROR",
        "total_budget must be between 1 and 100,000,000",
    ),
    (
        {"type": "reset", "data": {"total_budget": 10**12}},
        "EXECUTION_ERROR",
        "total_budget must be between 1 and 100,000,000",
    ),
    ({"type": "reset", "data": {"total_budget": "lots"}}, "EXECUTION_ERROR", "total_budget must be an integer"),
    ({"type": "reset", "data": {"seed": -1}}, "EXECUTION_ERROR", "seed must be a non-negative integer"),
    ({"type": "reset", "data": {"colour": "red"}}, "EXECUTION_ERROR", "unknown reset option(s) ['colour']"),
    (
        {"type": "reset", "data": {"tokenizer_name": "no-such-org/no-such-model"}},
        "EXECUTION_ERROR",
        "could not load tokenizer 'no-such-org/no-such-model'",
    ),
    ({"type": "reset", "data": {"tokenizer_name": "/etc"}}, "EXECUTION_ERROR", "does not load tokenizer folders"),
    ({"type": "reset", "data": "seed=1"}, "VALIDATION_ERROR", "invalid reset message"),
]


@pytest.mark.parametrize("message, code, text", WS_BAD, ids=[f"ws-{i}" for i in range(len(WS_BAD))])
def test_bad_websocket_input_gets_a_clear_error_and_the_session_survives(live, gold, message, code, text):
    with ws_sync.connect(live.ws_url, max_size=None) as ws:
        first = _rpc(ws, {"type": "reset", "data": {"seed": 21}})
        qid = first["data"]["observation"]["question_id"]
        err = _rpc(ws, message)
        assert err["type"] == "error" and err["data"]["code"] == code, err
        assert text in err["data"]["message"], err["data"]["message"]
        # Nothing was charged: the same question is still current and a good step works.
        ok = _rpc(ws, {"type": "step", "data": {"response": f"\\boxed{{{gold[qid]}}}"}})
        assert ok["type"] == "observation", ok
        assert ok["data"]["observation"]["last_step"]["question_id"] == qid
        assert ok["data"]["observation"]["last_step"]["correct"] is True


def test_a_frame_over_the_message_limit_is_refused_by_the_protocol_and_not_kept(live):
    """A frame over the message limit (4 x the response cap + 64 KiB) closes the connection with
    1009 naming the limit, before the server keeps it (a session pipelining 15 MiB frames held
    ~450 MiB)."""
    from websockets.exceptions import ConnectionClosed

    with ws_sync.connect(live.ws_url, max_size=None) as ws:
        _rpc(ws, {"type": "reset", "data": {"seed": 21}})
        ws.send(json.dumps({"type": "step", "data": {"response": "x" * 10_000_000}}))
        with pytest.raises(ConnectionClosed) as info:
            ws.recv(timeout=30)
    assert info.value.rcvd is not None and info.value.rcvd.code == 1009, info.value
    assert "4065536" in info.value.rcvd.reason, info.value.rcvd.reason


def test_step_without_episode_and_missing_session(live):
    with ws_sync.connect(live.ws_url) as ws:
        err = _rpc(ws, {"type": "step", "data": {"response": "\\boxed{1}"}})
        assert (
            err["data"]["code"] == "EXECUTION_ERROR"
            and "no episode to step: send a reset first" in err["data"]["message"]
        )
    with ws_sync.connect(live.ws_url + "?session_id=does-not-exist") as ws:
        err = json.loads(ws.recv(timeout=30))
        assert (
            err["data"]["code"] == "SESSION_ERROR" and "Unknown session_id: does-not-exist" in err["data"]["message"]
        )


HTTP_BAD = [
    ("/reset", {"content": b"{not json"}, 422, "JSON decode error"),
    ("/reset", {"json": {"seed": "abc"}}, 422, "valid integer"),
    ("/reset", {"json": {"total_budget": -5}}, 400, "total_budget must be between 1 and 100,000,000"),
    ("/reset", {"json": {"colour": "red"}}, 400, "unknown reset option(s) ['colour']"),
    ("/reset", {"json": {"tokenizer_name": "no-such-org/no-such-model"}}, 400, "could not load tokenizer"),
    ("/reset", {"json": {"tokenizer_name": "../../etc"}}, 403, "does not load tokenizer folders"),
    ("/step", {"json": {"action": {"response": 5}}}, 422, "valid string"),
    ("/step", {"json": {"action": {"response": "x", "colour": "red"}}}, 422, "Extra inputs are not permitted"),
    ("/step", {"json": {"action": {"response": "\\boxed{1}"}}}, 409, "HTTP POST /step builds a fresh environment"),
    (
        "/step",
        {"content": b'{"action": {"response": "' + b"x" * 10_000_000 + b'"}}'},
        413,
        "exceeds this server's limit",
    ),
]


@pytest.mark.parametrize("path, kwargs, status, text", HTTP_BAD, ids=[f"http-{i}" for i in range(len(HTTP_BAD))])
def test_bad_http_input_gets_a_clear_4xx(live, path, kwargs, status, text):
    headers = {"content-type": "application/json"}
    r = httpx.post(live.url + path, headers=headers, timeout=60, **kwargs)
    assert r.status_code == status, r.text[:500]
    assert text in r.text, r.text[:500]
    assert httpx.get(live.url + "/health").status_code == 200


def test_a_huge_response_does_not_stall_other_sessions(live):
    """Tokenizing and grading run off the event loop (and tokenizing releases the GIL): while one
    session's 1 MB response is processed, another session's steps keep flowing."""
    big = ("Let us add the numbers one at a time: 12 + 35 = 47, then 47 + 8 = 55. " * 14_000)[:999_000] + "\\boxed{55}"

    async def main():
        async with (
            ReasoningEconomicsClient(base_url=live.url) as slow,
            ReasoningEconomicsClient(base_url=live.url) as fast,
        ):
            await slow.reset(seed=1, total_budget=10_000_000)
            await fast.reset(seed=2, total_budget=10_000_000)
            t0 = time.perf_counter()
            task = asyncio.ensure_future(slow.step(big))
            gaps = []
            while not task.done():
                s = time.perf_counter()
                r = await fast.step("short \\boxed{1}")
                gaps.append(time.perf_counter() - s)
                if r.done:
                    await fast.reset(seed=3, total_budget=10_000_000)
            big_result = await task
            return time.perf_counter() - t0, gaps, big_result

    elapsed, gaps, big_result = asyncio.run(main())
    assert big_result.observation.last_step.raw_tokens > 200_000
    assert len(gaps) >= 3, f"only {len(gaps)} small steps ran during {elapsed:.2f} s"
    assert max(gaps) < 0.5 * elapsed, (max(gaps), elapsed)


# ------------------------------------------------------------------------------ dropped and idle sessions
KILLED_CLIENT = r"""
import json, sys
import websockets.sync.client as c
import time
with c.connect(sys.argv[1], max_size=None) as ws:
    ws.send(json.dumps({"type": "reset", "data": {"seed": 5, "total_budget": 10000000}}))
    ws.recv()
    ws.send(json.dumps({"type": "step", "data": {"response": "step one \\boxed{1}"}}))
    ws.recv()
    ws.send(json.dumps({"type": "step", "data": {"response": "12 + 35 = 47. " * 60000 + "\\boxed{47}"}}))
    print("sent", flush=True)
    time.sleep(60)
"""


def test_killed_client_frees_its_slot_even_mid_step(live):
    live.wait_sessions(0)
    proc = subprocess.Popen([sys.executable, "-c", KILLED_CLIENT, live.ws_url], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "sent"
        assert live.capacity()["active_sessions"] == 1
        proc.send_signal(signal.SIGKILL)  # dies while its big step is being processed
        proc.wait(timeout=10)
        live.wait_sessions(0, timeout_s=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    with ReasoningEconomicsClient(base_url=live.url).sync() as env:  # still serving
        assert env.reset(seed=1).observation.question


def test_idle_sessions_are_reaped_and_told_why():
    with LiveServer(create_server_app(CONFIG, max_sessions=4, session_timeout_s=1)) as srv:
        with ws_sync.connect(srv.ws_url) as idle, ws_sync.connect(srv.ws_url) as busy:
            _rpc(idle, {"type": "reset", "data": {"seed": 1}})
            _rpc(busy, {"type": "reset", "data": {"seed": 2}})
            assert srv.capacity()["active_sessions"] == 2
            deadline = time.monotonic() + 20
            while srv.capacity()["active_sessions"] != 1:  # OpenEnv checks every max(timeout/4, 5 s)
                assert time.monotonic() < deadline, "the idle session was not reaped"
                assert _rpc(busy, {"type": "state"})["type"] == "state"
                time.sleep(0.3)
            notice = json.loads(idle.recv(timeout=10))
            assert notice["data"]["code"] == "SESSION_ERROR" and "without a message" in notice["data"]["message"]
            with pytest.raises(Exception) as closed:
                idle.recv(timeout=10)
            assert getattr(getattr(closed.value, "rcvd", None), "code", None) == 4000
            assert _rpc(busy, {"type": "step", "data": {"response": "\\boxed{1}"}})["type"] == "observation"


# ------------------------------------------------------------------------------ the command line
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_python_m_server_reads_ree_variables_and_prints_its_config():
    port = _free_port()
    env = {
        **os.environ,
        **_sources_env(),
        "REE_HARD_CAP_MODE": "false",
        "REE_MAX_SESSIONS": "1",
        "REE_MAX_RESPONSE_BYTES": "1000",
        "REE_DEFAULT_TOKENIZER_NAME": QWEN3,
        "PYTHONPATH": str(REPO),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reasoning_env.server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "debug",  # the whole configuration on the start-up line (the short line otherwise)
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        summary = json.loads(line)
        assert summary["settings"]["max_sessions"] == 1 and summary["settings"]["max_response_bytes"] == 1000
        assert summary["config"]["hard_cap_mode"] is False and summary["config"]["tokenizer_name"] == QWEN3
        assert summary["env"]["REE_MAX_SESSIONS"] == "1"
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.2)
        with ReasoningEconomicsClient(base_url=url).sync() as env:
            obs = env.reset(seed=1).observation
            assert obs.metadata["hard_cap_mode"] is False and obs.metadata["tokenizer_name"] == QWEN3
            with pytest.raises(ServerError, match="at most 1,000 bytes"):
                env.step("x" * 1001)
            with pytest.raises(ServerError) as err:
                with ReasoningEconomicsClient(base_url=url).sync() as other:
                    other.reset()
            assert err.value.code == "CAPACITY_REACHED"
        proc.terminate()
        assert proc.wait(timeout=30) == 0  # SIGTERM is a normal stop: 0, as with --workers 2 (was -15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=20)


def test_main_refuses_a_bad_variable(monkeypatch, capsys):
    from reasoning_env.server import main

    monkeypatch.setenv("REE_MAX_SESSIONS", "many")
    assert main(["--port", "1"]) == 2
    assert "REE_MAX_SESSIONS='many' is not an integer" in capsys.readouterr().err


def test_token_count_is_exact_and_releases_the_gil():
    """What keeps a huge response from freezing the server: counting matches ``encode`` id for id
    and lets other threads run meanwhile."""
    from reasoning_env.tokenization import get_tokenizer

    tok = get_tokenizer(QWEN25)
    backend = tok.tokenizer.backend_tokenizer
    for text in [
        "",
        "héllo wörld 😀",
        "Let x = \\frac{1}{2}.\n\n\\boxed{42}",
        "<|im_start|>user\nhi<|im_end|>",
        "a" * 5000,
    ]:
        assert tok.count(text) == len(backend.encode(text, add_special_tokens=False).ids)
    big = "12 + 35 = 47, so the total is 47. " * 30_000
    gaps: list[float] = []
    done = threading.Event()

    def count() -> None:
        tok.count(big)
        done.set()

    worker = threading.Thread(target=count)
    last = time.perf_counter()
    t0 = last
    worker.start()
    while not done.is_set():
        time.sleep(0.002)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
    worker.join()
    elapsed = time.perf_counter() - t0
    assert max(gaps) < 0.5 * elapsed, (max(gaps), elapsed)

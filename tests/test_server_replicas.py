"""Scale-out: several real servers on loopback (one killed mid-run), the one remote adapter that
spreads episodes over them, ``--workers``, and the reference environment's clients."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, ConfigDict, Field
from test_server import CONFIG, LiveServer, _free_port, _sources_env

from reasoning_env import ReasoningEconomicsEnv
from reasoning_env.client import make_action
from reasoning_env.remote import EpisodeLostError, RemoteEnv, Replicas
from reasoning_env.server import create_server_app

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(300)


def _answers(env: Any, seed: int) -> list[tuple]:
    """Play episode ``seed`` with fixed answers; (question id, tokens, correct, reward) per step."""
    obs = env.reset(seed=seed, total_budget=50_000)
    out = []
    k = 0
    while not obs.done:
        obs = env.step(
            make_action(f"We add {k} and {k}: so the answer is \\boxed{{{2 * k}}}.", num_generated_tokens=20 + k)
        )
        s = obs.last_step
        out.append((s.question_id, s.tokens, s.correct, round(s.reward, 9)))
        k += 1
    return out


def test_sessions_spread_over_replicas_and_an_episode_survives_its_replica_dying():
    servers = [
        LiveServer(create_server_app(CONFIG, max_sessions=8, session_timeout_s=None)).__enter__() for _ in range(3)
    ]
    try:
        replicas = Replicas([s.url for s in servers])
        envs = [RemoteEnv(replicas) for _ in range(3)]
        for i, env in enumerate(envs):
            env.reset(seed=100 + i, total_budget=50_000)
        assert sorted(r["open"] for r in replicas.status()) == [1, 1, 1]  # one session on each replica
        victim = envs[0]
        obs = victim.step(make_action("first \\boxed{1}"))
        assert obs.last_step is not None
        dead = next(s for s in servers if s.url == victim.url)
        dead.server.should_exit = True  # the replica goes away mid-episode
        dead.server.force_exit = True
        dead.thread.join(timeout=30)
        rest = []
        while not obs.done:
            obs = victim.step(make_action("then \\boxed{2}"))
            rest.append(obs)
        assert victim.replayed == 1 and victim.url != dead.url
        # The replayed episode is the one that would have been played without the failure.
        local = ReasoningEconomicsEnv(CONFIG)
        lo = local.reset(seed=100, total_budget=50_000)
        lo = local.step(make_action("first \\boxed{1}"))
        for got in rest:
            lo = local.step(make_action("then \\boxed{2}"))
            assert (got.last_step.question_id, got.last_step.tokens, got.reward) == (
                lo.last_step.question_id,
                lo.last_step.tokens,
                lo.reward,
            )
        assert [s for s in replicas.status() if s["url"] == dead.url][0]["down"]
        fresh = RemoteEnv(replicas)  # new sessions avoid the dead replica
        fresh.reset(seed=7)
        assert fresh.url != dead.url
        for env in envs + [fresh]:
            env.close()
    finally:
        for s in servers:
            if s.thread.is_alive():
                s.__exit__(None, None, None)


def test_an_episode_fails_clearly_when_no_replica_is_left():
    srv = LiveServer(create_server_app(CONFIG, max_sessions=4, session_timeout_s=None)).__enter__()
    env = RemoteEnv([srv.url])
    env.reset(seed=3, total_budget=50_000)
    env.step(make_action("\\boxed{1}"))
    srv.server.should_exit = True
    srv.server.force_exit = True
    srv.thread.join(timeout=30)
    with pytest.raises(EpisodeLostError, match="seed 3"):
        for _ in range(20):
            env.step(make_action("\\boxed{1}"))
    env.close()


def test_the_remote_adapter_plays_the_in_process_episode():
    with LiveServer(create_server_app(CONFIG, max_sessions=4, session_timeout_s=None)) as srv:
        remote = RemoteEnv(srv.url)
        try:
            assert _answers(remote, 11) == _answers(ReasoningEconomicsEnv(CONFIG), 11)
        finally:
            remote.close()


def test_evaluate_spreads_episodes_over_replicas_with_server_url(tmp_path):
    from reasoning_env.policies import UniformPolicy
    from workbench.evaluate import evaluate

    with (
        LiveServer(create_server_app(CONFIG, max_sessions=8)) as a,
        LiveServer(create_server_app(CONFIG, max_sessions=8)) as b,
    ):
        res = evaluate(
            [UniformPolicy()],
            config=CONFIG,
            n_episodes=4,
            seed=1,
            out=tmp_path / "r",
            server_url=[a.url, b.url],
            workers=2,
            progress=False,
            report=False,
        )
        local = evaluate(
            [UniformPolicy()], config=CONFIG, n_episodes=4, seed=1, out=tmp_path / "l", progress=False, report=False
        )
    assert list(res.episodes["episode_reward"].round(9)) == list(local.episodes["episode_reward"].round(9))


# ------------------------------------------------------------------------------ --workers N
@pytest.mark.slow
def test_workers_flag_serves_one_port_from_several_processes():
    port = _free_port()
    env = {
        **os.environ,
        **_sources_env(),
        "PYTHONPATH": str(REPO),
        "REE_MAX_SESSIONS": "8",
        "REE_MAX_SESSIONS_PER_CLIENT": "8",
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
            "--workers",
            "2",
            "--log-level",
            "warning",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                cap = httpx.get(url + "/capacity", timeout=2).json()
                if cap["workers"] == 2:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (
                proc.stderr.read() if proc.poll() is not None else "slow"
            )
            time.sleep(0.5)
        assert cap["max_sessions"] == 16 and len(cap["per_worker"]) == 2  # limits are per worker
        envs = [RemoteEnv(url) for _ in range(6)]
        for i, e in enumerate(envs):
            e.reset(seed=i)
        cap = httpx.get(url + "/capacity", timeout=5).json()
        assert cap["active_sessions"] == 6 == sum(w["active_sessions"] for w in cap["per_worker"])
        for e in envs:
            e.close()
        proc.terminate()
        assert proc.wait(timeout=60) == 0  # SIGTERM is a normal stop (as with one worker)
        err = proc.stderr.read()
        assert "pool closed" not in err, err[-3000:]  # the parent starts no grading pool any more
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


# ------------------------------------------------------------------------------ the reference's clients
class ReferenceObservation(BaseModel):
    """The reference environment's (ReasonBudgetEnv v2) observation as its client reads it:
    these fields, with these types and bounds (its ``models.py``); others are ignored."""

    model_config = ConfigDict(extra="ignore")

    remaining_budget: float
    questions_remaining: int = Field(..., ge=0)
    step_idx: int = Field(..., ge=0)
    budget_per_remaining: float
    accuracy_so_far: float = Field(..., ge=0, le=1)
    question: str = ""
    history: list[dict[str, Any]] = []
    done: bool = False
    reward: float | None = None
    metadata: dict[str, Any] = {}


class ReferenceState(BaseModel):
    model_config = ConfigDict(extra="ignore")

    episode_id: str | None = None
    step_count: int = Field(0, ge=0)
    total_budget: int = Field(..., ge=0)
    spent_budget: int = Field(..., ge=0)
    questions_answered: int = Field(..., ge=0)
    total_correct: int = Field(..., ge=0)
    current_accuracy: float = Field(..., ge=0, le=1)
    budget_remaining_ratio: float = Field(..., ge=0, le=1)


def test_the_reference_clients_read_real_values_from_this_server():
    import json

    import websockets.sync.client as ws_sync

    with LiveServer(create_server_app(CONFIG, max_sessions=4)) as srv, ws_sync.connect(srv.ws_url) as ws:

        def rpc(msg):
            ws.send(json.dumps(msg))
            return json.loads(ws.recv(timeout=60))["data"]

        first = rpc({"type": "reset", "data": {"seed": 5, "total_budget": 3000}})
        data = first
        for k in range(4):
            data = rpc({"type": "step", "data": {"response": f"so \\boxed{{{k}}}"}})
            ref = ReferenceObservation.model_validate(
                {**data["observation"], "reward": data["reward"], "done": data["done"]}
            )
            ours = data["observation"]
            assert ref.step_idx == ours["question_index"] == k + 1
            assert (
                ref.budget_per_remaining == pytest.approx(ours["budget_per_remaining_question"])
                and ref.budget_per_remaining > 0
            )
            assert ref.remaining_budget == ours["remaining_budget"]
            last = ref.history[-1]
            assert last["tokens_used"] == last["tokens"] and last["was_correct"] == last["correct"]
            assert last["question_summary"] and ours["last_step"]["question"].startswith(last["question_summary"])
            for key in ("min_tokens", "max_tokens", "num_questions", "budget_ratio"):
                assert key in ref.metadata
        ReferenceState.model_validate(rpc({"type": "state"}))


# ------------------------------------------------------------------------------ a frozen replica
class _Freeze:
    """Stops a LiveServer's event loop (as SIGSTOP stops a process: connections stay open, nothing
    is answered) until released."""

    def __init__(self, srv: LiveServer) -> None:
        self.loop = srv.server.servers[0].get_loop()
        self.release = threading.Event()

    def __enter__(self) -> _Freeze:
        self.loop.call_soon_threadsafe(self.release.wait, 120)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release.set()


def _finish(env: RemoteEnv, obs: Any) -> int:
    steps = 0
    while not obs.done:
        obs = env.step(make_action("then \\boxed{2}"))
        steps += 1
    return steps


@pytest.fixture(scope="module")
def two_servers():
    servers = [
        LiveServer(create_server_app(CONFIG, max_sessions=16, session_timeout_s=None)).__enter__() for _ in range(2)
    ]
    yield servers
    for s in servers:
        s.__exit__(None, None, None)


@pytest.mark.parametrize("detect", ["ping", "message_timeout"])
def test_a_frozen_replica_is_treated_like_a_dead_one(two_servers, detect):
    """A replica whose process stops answering (SIGSTOP, a frozen host) loses no episode: its
    episodes are replayed elsewhere once the keepalive ping (or the message timeout) goes
    unanswered, within the documented bound, not after a bare TimeoutError."""
    urls = [s.url for s in two_servers]
    if detect == "ping":
        replicas = Replicas(urls, ping_interval_s=0.5, ping_timeout_s=1.5, message_timeout_s=60)
        bound = 0.5 + 1.5 + 2.0  # ping interval + ping timeout + close timeout
    else:
        replicas = Replicas(urls, ping_interval_s=None, message_timeout_s=2.0)
        bound = 2.0
    envs = [RemoteEnv(replicas) for _ in range(4)]
    for i, env in enumerate(envs):
        env.reset(seed=200 + i, total_budget=50_000)
    first = [env.step(make_action("first \\boxed{1}")) for env in envs]
    frozen = next(s for s in two_servers if s.url == envs[0].url)
    on_frozen = [env for env in envs if env.url == frozen.url]
    with _Freeze(frozen):
        t0 = time.monotonic()
        for env, obs in zip(envs, first, strict=True):
            _finish(env, obs)
        took = time.monotonic() - t0
    assert len(on_frozen) == 2 and all(env.replayed == 1 for env in on_frozen)
    assert all(env.url != frozen.url for env in envs)
    # Each episode on the frozen replica waited about the bound, then was replayed at once (the
    # dead socket is closed in the background); generous margin for a loaded machine.
    assert took < len(on_frozen) * bound * 3 + 10, took
    assert [s for s in replicas.status() if s["url"] == frozen.url][0]["down"]
    for env in envs:
        env.close()


def test_a_frozen_only_replica_fails_with_episode_lost_naming_it(two_servers):
    srv = two_servers[0]
    env = RemoteEnv(Replicas([srv.url], ping_interval_s=None, message_timeout_s=1.5, cooldown_s=0))
    env.reset(seed=3, total_budget=50_000)
    with _Freeze(srv), pytest.raises(EpisodeLostError) as info:
        env.step(make_action("\\boxed{1}"))
    assert srv.url in str(info.value) and "stopped answering" in str(info.value), info.value
    env.close()

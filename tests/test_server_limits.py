"""Every limit of the server, on a real server on loopback: one client cannot stall, lock out or
exhaust the others. Clients come from different loopback addresses (127.0.0.2, 127.0.0.3, ...)
where a test needs several clients."""

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
import websockets.sync.client as ws_sync
from test_server import CONFIG, LiveServer, _rpc

from reasoning_env.client import ReasoningEconomicsClient, ServerError, ServerGoneError
from reasoning_env.server import create_server_app

pytestmark = pytest.mark.timeout(240)

SLOW = r"\boxed{\log(\log(\log(10^{10^{100}})))}"  # the fast path cannot settle it; math-verify takes seconds


def _connect(url: str, source: str = "127.0.0.1", **kw: Any):
    """A WebSocket from ``source`` (any 127.x.y.z address is this machine)."""
    host, port = url.removeprefix("ws://").split("/")[0].split(":")
    sock = socket.create_connection((host, int(port)), source_address=(source, 0))
    return ws_sync.connect(url, sock=sock, max_size=None, **kw)


def _error(ws) -> dict:
    msg = json.loads(ws.recv(timeout=30))
    assert msg["type"] == "error", msg
    return msg["data"]


# ------------------------------------------------------------------------------ slow grades
@pytest.mark.slow
def test_slow_grades_from_one_client_do_not_stall_another_clients_fast_steps():
    """Four sessions of one client send answers that hold a grading worker for the whole
    timeout; a canary session of another client keeps stepping, never waiting on them."""
    config = CONFIG.replace(grading_timeout_s=1.5)
    app = create_server_app(config, max_sessions=16, worker_threads=2, grading_workers=2, session_timeout_s=None)
    with LiveServer(app) as srv:
        flooders = [_connect(srv.ws_url, "127.0.0.2") for _ in range(4)]
        canary = _connect(srv.ws_url, "127.0.1.3")
        try:
            for ws in flooders:
                _rpc(ws, {"type": "reset", "data": {"seed": 1, "total_budget": 1_000_000}})
            _rpc(canary, {"type": "reset", "data": {"seed": 2, "total_budget": 10_000_000}})
            results: list = []

            def flood(ws) -> None:
                ws.send(json.dumps({"type": "step", "data": {"response": SLOW}}))
                # the grades run one after another, each with its whole limit of CPU time: on a
                # loaded machine that is minutes of wall time
                results.append(json.loads(ws.recv(timeout=600)))

            threads = [threading.Thread(target=flood, args=(ws,)) for ws in flooders]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            time.sleep(0.3)
            fallback_peak = 0
            canary_steps, worst = 0, 0.0
            while any(t.is_alive() for t in threads):
                s = time.perf_counter()
                r = _rpc(canary, {"type": "step", "data": {"response": "short \\boxed{1}"}})
                worst = max(worst, time.perf_counter() - s)
                canary_steps += 1
                if r["data"]["done"]:
                    _rpc(canary, {"type": "reset", "data": {"seed": 3, "total_budget": 10_000_000}})
                fallback_peak = max(fallback_peak, srv.capacity()["grading_fallback"]["in_flight"])
            flood_s = time.perf_counter() - t0
            reasons = {m["data"]["observation"]["last_step"]["grade_reason"] for m in results}
            assert reasons <= {"timeout", "mismatch"} and len(results) == 4
            # The 4 slow grades ran one after another (one in flight for that client: 2 workers - 1;
            # the others waited for its turn, each then given its whole CPU limit), none of it in
            # front of the canary.
            assert flood_s > 3 * 0.9 * config.grading_timeout_s
            assert fallback_peak <= 1, "one client had more fallback grades in flight than its share"
            assert worst < config.grading_timeout_s, f"a fast step waited {worst:.2f} s behind slow grades"
            # it kept stepping through the flood (20+ on a quiet machine; 14 beside a whole test
            # suite at load ~4, so the floor is not a speed target)
            assert canary_steps >= 10
        finally:
            for ws in flooders + [canary]:
                ws.close()


def test_the_fallback_share_is_per_client_and_work_conserving():
    """One client over its share waits for its own turn; another client's grade goes first."""
    from reasoning_env.server.fallback import FairFallback, client_key

    class SlowPool:
        size = 2

        def __init__(self):
            self.running = []
            self.lock = threading.Lock()

        def verify(self, pred, gold, timeout_s):
            with self.lock:
                self.running.append(client_key.get())
            time.sleep(0.3)
            return ("ok", True)

    pool = SlowPool()
    fair = FairFallback(pool, per_client=1)
    order: list[str] = []

    def grade(key: str) -> None:
        client_key.set(key)
        fair.verify("x", "x", 5.0)
        order.append(key)

    threads = [threading.Thread(target=grade, args=("a",)) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    other = threading.Thread(target=grade, args=("b",))
    other.start()
    for t in threads + [other]:
        t.join()
    assert order.index("b") <= 1  # b did not queue behind a's three
    assert fair.in_flight() == {}
    assert FairFallback(pool, 1).verify.__doc__


# ------------------------------------------------------------------------------ slots
def test_one_client_address_cannot_take_every_slot():
    with LiveServer(
        create_server_app(CONFIG, max_sessions=4, max_sessions_per_client=2, session_timeout_s=None)
    ) as srv:
        a1, a2 = _connect(srv.ws_url, "127.0.0.2"), _connect(srv.ws_url, "127.0.0.2")
        try:
            for ws in (a1, a2):
                _rpc(ws, {"type": "reset", "data": {"seed": 1}})
            with _connect(srv.ws_url, "127.0.0.2") as a3:
                err = _error(a3)
                assert err["code"] == "CAPACITY_REACHED" and "REE_MAX_SESSIONS_PER_CLIENT" in err["message"]
                assert err["limit"] == "max_sessions_per_client" and err["client_sessions"] == 2
            b1, b2 = _connect(srv.ws_url, "127.0.0.3"), _connect(srv.ws_url, "127.0.0.3")
            for ws in (b1, b2):
                assert _rpc(ws, {"type": "reset", "data": {"seed": 2}})["type"] == "observation"
            with _connect(srv.ws_url, "127.0.0.4") as c:
                err = _error(c)
                assert (
                    err["code"] == "CAPACITY_REACHED"
                    and "4/4" in err["message"]
                    and "REE_MAX_SESSIONS" in err["message"]
                )
            cap = srv.capacity()
            assert cap["per_worker"][0]["refused"] == {"max_sessions": 1, "per_client": 1}
            b1.close(), b2.close()
        finally:
            a1.close(), a2.close()


def test_sessions_opened_and_never_used_expire_quickly():
    app = create_server_app(
        CONFIG, max_sessions=3, max_sessions_per_client=3, session_timeout_s=None, unused_session_timeout_s=1
    )
    with LiveServer(app) as srv:
        idle = [_connect(srv.ws_url) for _ in range(3)]
        try:
            assert srv.capacity()["active_sessions"] == 3
            for ws in idle:
                err = _error(ws)
                assert err["code"] == "SESSION_ERROR" and "REE_UNUSED_SESSION_TIMEOUT_S" in err["message"]
            srv.wait_sessions(0)
            with ReasoningEconomicsClient(base_url=srv.url).sync() as env:  # the slots are free again
                assert env.reset(seed=1).observation.question
        finally:
            for ws in idle:
                ws.close()


def test_mcp_is_read_only_and_takes_no_slot(live_server):
    """/mcp answers JSON-RPC as OpenEnv's validator expects (200, "jsonrpc": "2.0"), lists no tools and refuses
    every other method, session creation included; a large body is refused before it is parsed."""
    url = live_server.url + "/mcp"
    created = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}})
    assert created.status_code == 200 and created.json()["id"] == 1
    assert created.json()["error"]["code"] == -32601 and "no MCP tools" in created.json()["error"]["message"]
    call = httpx.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "step"}})
    assert call.json()["error"]["code"] == -32601
    listed = httpx.post(url, json={"jsonrpc": "2.0", "id": "a", "method": "tools/list"})
    assert listed.json() == {"jsonrpc": "2.0", "id": "a", "result": {"tools": []}}
    empty = httpx.post(url, json={})  # what `openenv validate --url` sends
    assert empty.status_code == 200 and empty.json()["jsonrpc"] == "2.0" and empty.json()["error"]["code"] == -32600
    assert httpx.post(url, content=b"{not json").json()["error"]["code"] == -32700
    assert httpx.post(url, json=[1, 2]).json()["error"]["code"] == -32600
    assert httpx.post(url, content=b"x" * 20_000).status_code == 413
    assert live_server.capacity()["active_sessions"] == 0


@pytest.fixture(scope="module")
def live_server():
    with LiveServer(create_server_app(CONFIG, max_sessions=8, session_timeout_s=None)) as srv:
        yield srv


# ------------------------------------------------------------------------------ access
def test_the_shared_token_is_required_everywhere_it_matters():
    token = "s3cret-token-for-tests"
    with LiveServer(create_server_app(CONFIG, max_sessions=4, api_token=token)) as srv:
        with ws_sync.connect(srv.ws_url) as ws:
            err = _error(ws)
            assert err["code"] == "UNAUTHORIZED" and "Authorization: Bearer" in err["message"]
        with ws_sync.connect(srv.ws_url, additional_headers={"Authorization": "Bearer wrong-token"}) as ws:
            assert "is not this server's" in _error(ws)["message"]
        with pytest.raises(ServerError) as refused:
            with ReasoningEconomicsClient(base_url=srv.url, api_token="").sync() as env:
                env.reset(seed=1)
        assert refused.value.code == "UNAUTHORIZED"
        with ReasoningEconomicsClient(base_url=srv.url, api_token=token).sync() as env:
            assert env.reset(seed=1).observation.question
        assert httpx.post(srv.url + "/reset", json={"seed": 1}).status_code == 401
        assert (
            httpx.post(srv.url + "/reset", json={"seed": 1}, headers={"Authorization": f"Bearer {token}"}).status_code
            == 200
        )
        assert httpx.get(srv.url + "/health").status_code == 200  # probes stay open
        assert srv.capacity()["auth"] is True


def test_a_relative_tokenizer_folder_under_the_servers_cwd_is_not_loaded(live_server, tmp_path, monkeypatch):
    import shutil

    from reasoning_env.tokenization import QWEN25, embedded_tokenizer_dir

    monkeypatch.chdir(tmp_path)
    shutil.copytree(embedded_tokenizer_dir(QWEN25), tmp_path / "evil" / "tok")
    (tmp_path / "evil" / "bad").mkdir()
    messages = []
    for name in ("evil/tok", "evil/bad", "evil/missing"):
        with ws_sync.connect(live_server.ws_url) as ws:
            err = _rpc(ws, {"type": "reset", "data": {"tokenizer_name": name}})
            assert err["type"] == "error" and err["data"]["code"] == "EXECUTION_ERROR", err
            messages.append(err["data"]["message"].replace(name, "NAME"))
    assert len(set(messages)) == 1, messages  # existing, broken and missing folders look alike
    assert str(tmp_path) not in messages[0] and "<path>" not in messages[0]


def test_tokenizer_aliases_share_one_loaded_copy():
    from reasoning_env.tokenization import cached_tokenizers, get_tokenizer

    names = [f"Qwen/Qwen2.5-{n}B-Instruct" for n in ("0.5", "1.05", "2.15", "33.3")]
    loaded = [get_tokenizer(n) for n in names]
    if loaded[0].origin != "embedded:qwen2.5":
        pytest.skip(f"these names resolve to {loaded[0].origin}, not the embedded build, on this machine")
    assert len({id(t.tokenizer) for t in loaded}) == 1
    assert set(names) <= set(cached_tokenizers()["embedded:qwen2.5"])


# ------------------------------------------------------------------------------ bad values
def test_a_lone_surrogate_episode_id_is_refused_and_the_session_goes_on(live_server):
    with ws_sync.connect(live_server.ws_url) as ws:
        err = _rpc(ws, '{"type": "reset", "data": {"seed": 1, "episode_id": "\\ud800"}}')
        assert err["data"]["code"] == "EXECUTION_ERROR" and "episode_id" in err["data"]["message"]
        ok = _rpc(ws, {"type": "reset", "data": {"seed": 1, "episode_id": "fine"}})
        assert ok["type"] == "observation" and _rpc(ws, {"type": "state"})["data"]["episode_id"] == "fine"
    r = httpx.post(
        live_server.url + "/reset", content=b'{"episode_id": "\\ud800"}', headers={"content-type": "application/json"}
    )
    assert r.status_code == 422 and "episode_id" in r.text and "unicode" in r.text  # refused, not a 500


@pytest.mark.parametrize(
    "field, frame",
    [
        ("data.seed", '{"type": "reset", "data": {"seed": ' + "9" * 5000 + "}}"),
        ("data.total_budget", '{"type": "reset", "data": {"total_budget": ' + "1" * 4400 + "}}"),
        (
            "data.metadata.num_generated_tokens",
            '{"type": "step", "data": {"response": "x", "metadata": {"num_generated_tokens": ' + "7" * 6000 + "}}}",
        ),
    ],
)
def test_an_integer_of_thousands_of_digits_is_a_validation_error_naming_the_field(live_server, field, frame):
    with ws_sync.connect(live_server.ws_url, max_size=None) as ws:
        err = _rpc(ws, frame)
        assert err["data"]["code"] == "VALIDATION_ERROR" and err["data"]["message"].startswith(field + ":"), err
        assert _rpc(ws, {"type": "reset", "data": {"seed": 4}})["type"] == "observation"  # the session goes on


# ------------------------------------------------------------------------------ abandoned work
KILLED = r"""
import json, sys, websockets.sync.client as c
conns = [c.connect(sys.argv[1], max_size=None) for _ in range(8)]
for ws in conns:
    ws.send(json.dumps({"type": "reset", "data": {"seed": 5, "total_budget": 10000000}}))
    ws.recv()
big = json.dumps({"type": "step", "data": {"response": "12 + 35 = 47. " * 70000 + "\\boxed{47}"}})
for ws in conns:
    for _ in range(3):
        ws.send(big)
print("sent", flush=True)
import time; time.sleep(60)
"""


def test_a_killed_client_frees_its_slots_at_once_and_its_queued_work_is_dropped():
    with LiveServer(create_server_app(CONFIG, max_sessions=16, worker_threads=1, session_timeout_s=None)) as srv:
        proc = subprocess.Popen([sys.executable, "-c", KILLED, srv.ws_url], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == "sent"
            time.sleep(0.5)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            t0 = time.monotonic()
            srv.wait_sessions(0, timeout_s=10)
            freed_s = time.monotonic() - t0
            deadline = time.monotonic() + 30
            while srv.capacity()["threads"]["queued"] or srv.capacity()["threads"]["computing"]:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        finally:
            if proc.poll() is None:
                proc.kill()
        # 8 sessions x one 1 MB step each on one thread take far longer than the slots took to free
        assert freed_s < 5
        with ReasoningEconomicsClient(base_url=srv.url).sync() as env:
            assert env.reset(seed=1).observation.question


# ------------------------------------------------------------------------------ the client's errors
def test_the_typed_client_raises_server_gone_error_when_the_server_dies():
    srv = LiveServer(create_server_app(CONFIG, max_sessions=4, session_timeout_s=None)).__enter__()

    async def main() -> Exception:
        async with ReasoningEconomicsClient(base_url=srv.url) as env:
            await env.reset(seed=1, total_budget=10_000_000)
            srv.server.should_exit = True
            srv.server.force_exit = True
            await asyncio.sleep(1.0)
            try:
                for _ in range(50):
                    await env.step("\\boxed{1}")
                    await asyncio.sleep(0.05)
            except Exception as exc:  # noqa: BLE001 - the type is the assertion
                return exc
        return AssertionError("no error")

    try:
        exc = asyncio.run(main())
    finally:
        srv.thread.join(timeout=30)
    assert isinstance(exc, (ServerGoneError, ConnectionError)), repr(exc)
    assert not type(exc).__module__.startswith("websockets")


# ------------------------------------------------------------------------------ grading workers and Ctrl-C
SIGINT_SCRIPT = r"""
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C works, as in a terminal, whatever was inherited
sys.path.insert(0, sys.argv[1])
from reasoning_env.grading.pool import WorkerPool
pool = WorkerPool(2)
assert pool.warm_up(120)
try:
    print(" ".join(map(str, pool.pids())), flush=True)
    time.sleep(60)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def _session_processes(sid: int) -> list[str]:
    """``pid command`` of the live processes in session ``sid`` (Linux ``/proc``)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] != "Z" and int(fields[3]) == sid:
                cmd = (d / "cmdline").read_bytes().replace(bytes(1), b" ").decode(errors="replace")
                out.append(f"{d.name} {cmd[:120]}")
        except (OSError, ValueError, IndexError):
            continue
    return out


def test_grading_workers_ignore_ctrl_c_and_shut_down_quietly(tmp_path):
    repo = str(Path(__file__).resolve().parents[1])
    # Output goes to files, not pipes: a pipe's end would wait for every process that inherited it
    # (forkserver, resource tracker), and the contract is about the program and its workers.
    out_path, err_path = tmp_path / "out.txt", tmp_path / "err.txt"
    with out_path.open("w") as out_f, err_path.open("w") as err_f:
        proc = subprocess.Popen(
            [sys.executable, "-c", SIGINT_SCRIPT, repo], stdout=out_f, stderr=err_f, text=True, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 150
        while not out_path.read_text().strip() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        pids = [int(p) for p in out_path.read_text().split()]
        assert len(pids) == 2, (out_path.read_text(), err_path.read_text())
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal or a notebook kernel interrupt does
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    out, err = out_path.read_text(), err_path.read_text()
    assert "interrupted" in out
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _session_processes(proc.pid):
        time.sleep(0.2)
    assert _session_processes(proc.pid) == [], "processes of the interrupted program still running"
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


# ------------------------------------------------------------------------------ /docs offline
def test_docs_page_works_offline(live_server):
    page = httpx.get(live_server.url + "/docs").text
    pytest.importorskip("swagger_ui_bundle")
    assert "/docs-assets/swagger-ui-bundle.js" in page and "cdn" not in page.lower()
    assert httpx.get(live_server.url + "/docs-assets/swagger-ui-bundle.js").status_code == 200


# ------------------------------------------------------------------------------ start-up warning
@pytest.mark.slow
def test_serving_the_network_without_a_token_warns_at_start():
    from test_server import _free_port, _sources_env

    port = _free_port()
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, **_sources_env(), "PYTHONPATH": str(repo)}
    env.pop("REE_API_TOKEN", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reasoning_env.server",
            "--host",
            "0.0.0.0",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        summary = json.loads(proc.stdout.readline())
        assert summary["auth"] is False
        line = proc.stderr.readline()
        assert "WARNING" in line and "without authentication" in line and "REE_API_TOKEN" in line
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_start_up_line_never_prints_the_token(monkeypatch, capsys):
    from test_server import _sources_env

    from reasoning_env.server.app import build_app_from_env

    environ = {**_sources_env(), "REE_API_TOKEN": "very-secret-token"}
    for announce in (True, "full"):
        build_app_from_env(environ, announce=announce)
        out = capsys.readouterr().out
        assert "very-secret-token" not in out and json.loads(out)["env"]["REE_API_TOKEN"] == "(set)"


def test_the_start_up_line_is_short_and_the_whole_configuration_is_asked_for(capsys):
    """A ~2 KB JSON blob was printed at every start; the short line names what is served and how
    to see the rest (--log-level debug)."""
    from test_server import _sources_env

    from reasoning_env.server.app import build_app_from_env

    build_app_from_env(_sources_env(), announce=True)
    short = capsys.readouterr().out
    build_app_from_env(_sources_env(), announce="full")
    full = capsys.readouterr().out
    assert short.count("\n") == 1 and len(short) < 600 < len(full)
    line = json.loads(short)
    assert line["questions"] > 0 and line["full_config"] == "--log-level debug"
    assert json.loads(full)["config"]["tokenizer_name"] == line["tokenizer_name"]

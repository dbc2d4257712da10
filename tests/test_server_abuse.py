"""Hostile and careless clients against a real server process on loopback (``python -m
reasoning_env.server``), from several source addresses (any 127.x.y.z is this machine):

- a slow-grade flood from 16 /24s does not turn another client's right answers into ``timeout``
  (a grade's limit is its own CPU time; waiting for a grading worker is admitted, not timed out);
- a client that sends and never reads does not grow the server's memory, does not stall the
  expiry of other sessions, is dropped once its send buffer stays full, and does not hold up a
  SIGTERM.

Floods are short and run at nice 19 (a remote client's CPU is not the server's to share)."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import websockets.sync.client as ws_sync
from test_server import CONFIG, _sources_env
from test_server_fairness import _ServerProcess

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore:connect\\(\\) must be used:DeprecationWarning"),
]

SLOW = r"so \boxed{\log(\log(\log(10^{10^{100}})))}"  # holds a grading worker for its whole limit
# One session on each of 127.0.{first}.3 ... 127.0.{first + n - 1}.3 (one per /24), stepping SLOW back to back.
FLOOD_24S = r"""
import asyncio, json, socket, sys, time
import websockets
url, port, n, first, seconds, slow = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), \
    float(sys.argv[5]), sys.argv[6]
count = 0
async def one(i):
    global count
    sock = socket.create_connection(("127.0.0.1", port), source_address=(f"127.0.{first + i}.3", 0))
    async with websockets.connect(url, sock=sock, max_size=None, open_timeout=60) as ws:
        end = time.monotonic() + seconds
        reset = json.dumps({"type": "reset", "data": {"seed": i, "total_budget": 10_000_000}})
        await ws.send(reset); await ws.recv()
        while time.monotonic() < end:
            await ws.send(json.dumps({"type": "step", "data": {"response": slow}}))
            msg = json.loads(await ws.recv())
            count += 1
            if msg["data"].get("done"):
                await ws.send(reset); await ws.recv()
async def main():
    await asyncio.gather(*(one(i) for i in range(n)))
asyncio.run(main())
print(count, flush=True)
"""


def _golds() -> dict[str, str]:
    from reasoning_env.sources import load_pools

    pools = load_pools(CONFIG.sources, data_dir=CONFIG.data_dir, offline_fallback=CONFIG.offline_fallback)
    return {q.id: q.gold_answer for qs in pools.pools.values() for q in qs}


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _ws_from(srv: _ServerProcess, source: str, **kw):
    sock = socket.create_connection(("127.0.0.1", srv.port), source_address=(source, 0))
    return ws_sync.connect(srv.ws_url, sock=sock, max_size=None, **kw)


@pytest.mark.slow
def test_right_answers_stay_right_during_a_slow_grade_flood_from_16_address_groups(tmp_path):
    """The review: during a slow-grade flood from 16 /24s, 24 of 30 right answers of another client
    (each one only math-verify settles) were graded wrong (``timeout``). Now each is graded right,
    however long it waits for its turn at a grading worker (one turn among 17 address groups: 10-16 s a
    step on a quiet machine, so 5 answers, all graded while the flood still runs)."""
    from reasoning_env.grading import Grader

    golds = _golds()
    grader = Grader()
    with _ServerProcess(tmp_path, **_sources_env()) as srv:
        flood = subprocess.Popen(
            # runs until killed: the canary waits its turn among 17 groups (10-16 s a step, quiet)
            [sys.executable, "-c", FLOOD_24S, srv.ws_url, str(srv.port), "16", "1", "3600", SLOW],
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: os.nice(19),
        )
        verdicts, waits, grading = [], [], []
        try:
            # the canary starts once the flood holds the grading workers (a niced flood under load takes
            # a while to start: in CI 4 s were not enough, and the canary played against no flood at all)
            deadline = time.monotonic() + 180
            while srv.capacity()["grading_fallback"]["in_flight"] < 1:
                assert flood.poll() is None, "the flood ended before it graded"
                assert time.monotonic() < deadline, f"the flood never reached a grading worker: {srv.capacity()}"
                time.sleep(0.2)
            with _ws_from(srv, "127.0.200.9") as canary:
                canary.send(json.dumps({"type": "reset", "data": {"seed": 11, "total_budget": 10_000_000}}))
                obs = json.loads(canary.recv(timeout=60))["data"]
                while len(verdicts) < 5:
                    assert flood.poll() is None, "the flood ended early"
                    gold = golds[obs["observation"]["question_id"]]
                    answer = rf"so \boxed{{\max({gold}, {gold})}}"
                    symbolic = grader.grade(answer, gold).reason == "symbolic"  # only math-verify settles it
                    if not symbolic:
                        answer = rf"so \boxed{{{gold}}}"
                    grading.append(srv.capacity()["grading_fallback"]["in_flight"])
                    t0 = time.monotonic()
                    canary.send(json.dumps({"type": "step", "data": {"response": answer}}))
                    obs = json.loads(canary.recv(timeout=120))["data"]
                    last = obs["observation"]["last_step"]
                    if symbolic:
                        verdicts.append((last["correct"], last["grade_reason"]))
                        waits.append(round(time.monotonic() - t0, 2))
                    if obs["done"]:
                        canary.send(json.dumps({"type": "reset", "data": {"total_budget": 10_000_000}}))
                        obs = json.loads(canary.recv(timeout=60))["data"]
        finally:
            flood.kill()
            flood.wait(timeout=10)
    print(f"verdicts {verdicts}; step seconds {waits}; flood grading {grading}; load {os.getloadavg()[0]:.1f}")
    assert sum(n >= 1 for n in grading) >= len(grading) // 2, grading  # the flood graded while the canary played
    assert all(correct for correct, _ in verdicts), verdicts


# ------------------------------------------------------------------------------ a client that never reads
def _handshake(port: int, source: str, rcvbuf: int = 4096) -> socket.socket:
    """A raw WebSocket (small receive buffer) after its handshake; the caller then never reads."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert b" 101 " in head.split(b"\r\n")[0], head
    return sock


def _frame(opcode: int, payload: bytes) -> bytes:
    assert len(payload) < 126
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return struct.pack("!BB", 0x80 | opcode, 0x80 | len(payload)) + mask + masked


def _push(sock: socket.socket, batch: bytes, seconds: float) -> tuple[int, float | None]:
    """Send ``batch`` again and again for ``seconds`` without reading; returns (bytes sent, seconds
    until the server dropped the connection, or None)."""
    sock.setblocking(False)
    sent, t0 = 0, time.monotonic()
    view = memoryview(batch)
    while time.monotonic() - t0 < seconds:
        try:
            sent += sock.send(view[sent % len(batch) :])
        except BlockingIOError:
            time.sleep(0.005)
        except (ConnectionResetError, BrokenPipeError):
            return sent, time.monotonic() - t0
    return sent, None


@pytest.mark.slow
def test_a_client_that_pings_and_never_reads_is_bounded_and_does_not_stall_expiry(tmp_path):
    """The review: a connection sending pings and never reading grew the server's memory by 81-221
    MiB (pongs queued 1:1) and stalled the expiry of every session (a 10 s unused timeout fired
    after 33-45 s). Now the server stops reading it while its answers are not read, drops it once
    its send buffer has been full for REE_SEND_STALL_TIMEOUT_S, and expires the others on time."""
    env = {**_sources_env(), "REE_UNUSED_SESSION_TIMEOUT_S": "2", "REE_SEND_STALL_TIMEOUT_S": "3"}
    with _ServerProcess(tmp_path, **env) as srv:
        base = _rss_mib(srv.proc.pid)
        pinger = _handshake(srv.port, "127.0.7.2")
        probe = _ws_from(srv, "127.0.8.2")  # opened, never used: closed after ~2 s
        told: dict = {}

        def watch() -> None:
            opened = time.monotonic()
            told["message"] = json.loads(probe.recv(timeout=30))["data"]
            told["after_s"] = time.monotonic() - opened

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        sent, dropped_after = _push(pinger, _frame(0x9, b"p" * 125) * 1000, seconds=12)
        peak = _rss_mib(srv.proc.pid)
        watcher.join(timeout=30)
        probe.close()
        pinger.close()
        with _ws_from(srv, "127.0.9.2") as ws:  # another client is served as usual
            ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            assert json.loads(ws.recv(timeout=30))["type"] == "observation"
    print(
        f"pings sent {sent / 1e6:.1f} MB; dropped after {dropped_after} s; RSS {base:.0f} -> {peak:.0f} MiB; "
        f"probe told {told}; load {os.getloadavg()[0]:.1f}"
    )
    assert dropped_after is not None and dropped_after < 3 + 6, dropped_after
    assert peak - base < 40, (base, peak)
    assert told["message"]["code"] == "SESSION_ERROR" and "REE_UNUSED_SESSION_TIMEOUT_S" in told["message"]["message"]
    assert told["after_s"] < 2 + 0.5 + 2, told  # the timeout, the check interval, and a loaded machine


@pytest.mark.slow
def test_sigterm_completes_within_10_s_while_a_client_never_reads(tmp_path):
    """The review: with one client that had stopped reading, SIGTERM did not finish within 60 s
    (uvicorn waits for every connection to close, and a transport with unsent data never does)."""
    env = {**_sources_env(), "REE_SEND_STALL_TIMEOUT_S": "120"}
    srv = _ServerProcess(tmp_path, **env).__enter__()
    try:
        stuck = _handshake(srv.port, "127.0.7.2")
        reset = _frame(0x1, json.dumps({"type": "reset", "data": {"seed": 1}}).encode())
        stuck.sendall(reset)
        state = _frame(0x1, b'{"type": "state"}')
        _push(stuck, state * 2000 + _frame(0x9, b"p" * 125) * 500, seconds=4)  # until every buffer is full
        with _ws_from(srv, "127.0.9.2") as ws:  # a session stepping normally meanwhile
            ws.send(json.dumps({"type": "reset", "data": {"seed": 2}}))
            ws.recv(timeout=30)
            t0 = time.monotonic()
            srv.proc.send_signal(signal.SIGTERM)
            status = srv.proc.wait(timeout=30)
            took = time.monotonic() - t0
        stuck.close()
    finally:
        if srv.proc.poll() is None:
            os.killpg(srv.proc.pid, signal.SIGKILL)
            srv.proc.wait(timeout=10)
    print(f"SIGTERM to exit: {took:.2f} s, status {status}; load {os.getloadavg()[0]:.1f}")
    assert status == 0, Path(srv.log).read_text()[-2000:]
    assert took < 10, took

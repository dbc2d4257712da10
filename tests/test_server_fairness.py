"""CPU fairness per client on a real server on loopback: one address with many sessions
resetting back to back cannot take the server from a canary session of another client."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest
import websockets.sync.client as ws_sync
from test_server import CONFIG, LiveServer

from reasoning_env.server import create_server_app
from reasoning_env.server.executor import ElasticExecutor, address_group

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.filterwarnings("ignore:connect\\(\\) must be used:DeprecationWarning"),
]

FLOOD = r"""
import asyncio, json, socket, sys, time
import websockets
url, port, n, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
count = 0
async def one(i):
    global count
    sock = socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0))
    async with websockets.connect(url, sock=sock, max_size=None) as ws:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await ws.send(json.dumps({"type": "reset", "data": {"seed": i}}))
            await ws.recv()
            count += 1
async def main():
    await asyncio.gather(*(one(i) for i in range(n)))
asyncio.run(main())
print(count / seconds)
"""


def _canary_rate(ws, seconds: float) -> float:
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        ws.send(json.dumps({"type": "step", "data": {"response": "so \\boxed{1}"}}))
        msg = json.loads(ws.recv(timeout=30))
        n += 1
        if msg["data"]["done"]:
            ws.send(json.dumps({"type": "reset", "data": {"seed": 5, "total_budget": 10_000_000}}))
            ws.recv(timeout=30)
    return n / seconds


def test_address_groups():
    assert address_group("127.0.0.2") == address_group("127.0.0.200") == "127.0.0.0/24"
    assert address_group("127.0.1.9") != address_group("127.0.0.9")
    assert address_group("2001:db8::1") == address_group("2001:db8::2")
    assert address_group("unknown") == "unknown"


def test_fair_order_is_round_robin_over_groups_then_clients():
    ex = ElasticExecutor(1, 1)
    import threading

    gate = threading.Event()
    order: list[str] = []
    ex.submit_for("g0", "c0", gate.wait, 10)  # holds the only thread while the others queue
    futures = [ex.submit_for("g1", "a", order.append, f"a{i}") for i in range(4)]
    futures += [ex.submit_for("g1", "b", order.append, "b0"), ex.submit_for("g2", "c", order.append, "c0")]
    gate.set()
    for f in futures:
        f.result(timeout=10)
    assert order == ["a0", "c0", "b0", "a1", "a2", "a3"], order
    ex.shutdown()


def _storm_vs_canary(srv: LiveServer, rounds: int = 5, window_s: float = 1.0) -> tuple[float, float, float]:
    """Canary steps/s with the flood paused and running, in alternating windows (the flood
    process is stopped and continued), so that drift in the machine's load hits both alike.
    Returns (alone, during, flood resets/s)."""
    import os
    import signal

    port = int(srv.url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), source_address=("127.0.1.9", 0))
    with ws_sync.connect(srv.ws_url, sock=sock, max_size=None) as canary:
        canary.send(json.dumps({"type": "reset", "data": {"seed": 5, "total_budget": 10_000_000}}))
        canary.recv(timeout=30)
        seconds = 2 + 2 * rounds * (window_s + 0.3)
        flood = subprocess.Popen(
            [sys.executable, "-c", FLOOD, srv.ws_url, str(port), "32", str(seconds)], stdout=subprocess.PIPE, text=True
        )
        alone, during = [], []
        try:
            time.sleep(1.5)  # the flood is up
            for _ in range(rounds):
                during.append(_canary_rate(canary, window_s))
                os.kill(flood.pid, signal.SIGSTOP)
                time.sleep(0.3)  # its calls in flight drain
                alone.append(_canary_rate(canary, window_s))
                os.kill(flood.pid, signal.SIGCONT)
                time.sleep(0.3)
            out, _ = flood.communicate(timeout=60)
        finally:
            if flood.poll() is None:
                os.kill(flood.pid, signal.SIGCONT)
                flood.kill()
    flood_rate = float(out.strip().splitlines()[-1]) * seconds / (rounds * (window_s + 0.3) + 1.5)
    return sum(alone) / rounds, sum(during) / rounds, flood_rate


@pytest.mark.slow
@pytest.mark.xfail(
    reason="not met yet: calls are taken round-robin per address group (0.22x -> 0.30-0.43x measured), but the "
    "storm's messages still cost the shared event loop and GIL their full price; see docs/server.md",
    strict=False,
)
def test_a_reset_storm_from_one_address_leaves_a_canary_within_2x():
    """32 sessions of one address resetting back to back (the review: ~3,000 resets/s cut a
    canary 18-28x); the canary of another address group should keep at least half its rate."""
    app = create_server_app(CONFIG, max_sessions=80, max_sessions_per_client=64, session_timeout_s=None)
    with LiveServer(app) as srv:
        alone, during, flood_rate = _storm_vs_canary(srv)
    print(
        f"canary alone {alone:.0f} steps/s, during the storm {during:.0f} ({during / alone:.2f}x); "
        f"storm {flood_rate:.0f}/s"
    )
    assert flood_rate > during, "the storm did not storm"
    assert during >= alone / 2, (alone, during, flood_rate)

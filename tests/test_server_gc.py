"""A server process hides its start-up heap from the cyclic garbage collector before it serves
(``freeze_start_up_heap``: a full collection walked ~340,000 objects, ~0.2 s each under load)."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import SHARED_DATA

# main() up to the point where uvicorn would serve: report the collector's state there and stop.
SERVE = """
import gc, os, uvicorn
from reasoning_env.server import app

def report(self, *args, **kwargs):
    print("frozen", gc.get_freeze_count(), "threshold", gc.get_threshold()[0], flush=True)
    os._exit(0)

uvicorn.Server.run = report
app.main(["--host", "127.0.0.1", "--port", "0", "--log-level", "warning"])
"""


def test_the_server_freezes_its_start_up_heap_before_serving():
    env = dict(os.environ, REE_SOURCES="gsm8k,math500", REE_DATA_DIR=str(SHARED_DATA))
    out = subprocess.run([sys.executable, "-c", SERVE], env=env, capture_output=True, text=True, timeout=300)
    line = [x for x in out.stdout.splitlines() if x.startswith("frozen")]
    assert line, out.stdout[-2000:] + out.stderr[-2000:]
    _, frozen, _, threshold = line[0].split()
    assert int(frozen) > 100_000  # modules, pools and tokenizers: out of the collector's sight
    assert int(threshold) == 10_000

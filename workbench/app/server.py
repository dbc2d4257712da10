"""One process serving both the workbench (Gradio, at ``/``) and the OpenEnv API.

:func:`create_app` builds the OpenEnv server's FastAPI app
(:func:`reasoning_env.server.app.create_server_app`, or :func:`~reasoning_env.server.app.build_app_from_env`
reading the ``REE_*`` variables) and mounts the workbench on it with ``gr.mount_gradio_app``: the
API routes (``/reset``, ``/step``, ``/state``, ``/ws``, ``/health``, ``/schema``, ``/metadata``,
``/docs``) are matched first, everything else goes to the page. The Play tab reuses the server's
question pools and grader (loaded once per process).

:func:`main` is ``python app.py [--host H] [--port P] [--runs-root DIR]``.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import socket
import sys
from collections.abc import Sequence

from fastapi import FastAPI

from reasoning_env.config import EnvConfig
from reasoning_env.errors import ReasoningEconomicsError

logger = logging.getLogger("workbench.app")

__all__ = ["DEFAULT_PORT", "create_app", "default_host", "default_port", "main"]

#: Port when neither ``--port`` nor ``PORT`` / ``GRADIO_SERVER_PORT`` say otherwise (Gradio's).
DEFAULT_PORT = 7860


def default_port(environ: dict | None = None) -> int:
    """``$PORT``, else ``$GRADIO_SERVER_PORT``, else :data:`DEFAULT_PORT`.

    Raises:
        ValueError: the variable is not a port number.
    """
    env = os.environ if environ is None else environ
    for var in ("PORT", "GRADIO_SERVER_PORT"):
        raw = (env.get(var) or "").strip()
        if raw:
            try:
                port = int(raw)
            except ValueError:
                raise ValueError(f"{var}={raw!r} is not a port number") from None
            if not 0 < port < 65536:
                raise ValueError(f"{var}={raw!r} is not a port number (1-65535)")
            return port
    return DEFAULT_PORT


def default_host(environ: dict | None = None) -> str:
    """``$GRADIO_SERVER_NAME``, else ``0.0.0.0`` on a Hugging Face Space (``$SPACE_ID`` set),
    else ``127.0.0.1`` (this machine only)."""
    env = os.environ if environ is None else environ
    return (env.get("GRADIO_SERVER_NAME") or "").strip() or ("0.0.0.0" if env.get("SPACE_ID") else "127.0.0.1")


def create_app(
    config: EnvConfig | None = None,
    *,
    runs_root: str | None = None,
    environ: dict | None = None,
    announce: bool | str = False,
    concurrency: int | None = None,
    curves: str | None = None,
) -> FastAPI:
    """The OpenEnv API app with the workbench mounted at ``/``.

    Args:
        config: Environment config of the API and of the Play tab's defaults. ``None``: the one
            the ``REE_*`` variables describe (``REE_CONFIG``, ``REE_SOURCES``, ...; project
            defaults when unset: builtin stand-in questions offline, embedded Qwen2.5 tokenizer).
        runs_root: Folder of run folders (default ``$WORKBENCH_RUNS_ROOT`` or ``runs``). The example runs
            shipped in ``examples/runs`` are listed after its own (``WORKBENCH_EXAMPLE_RUNS=0`` hides them).
        environ: Environment variables to read (default ``os.environ``).
        announce: Print the API's start-up line (one short JSON line) when built; ``"full"``: the
            whole effective configuration (``--log-level debug``).
        concurrency: Gradio events running at once per handler (default
            ``$WORKBENCH_CONCURRENCY`` or 16); each browser session still runs one at a time.
        curves: Solver curves of Play and the Reward lab: a shipped curve set's name or a file (default
            ``$WORKBENCH_CURVES``, else the hand-chosen defaults; e.g. a calibration's ``fitted_curves.json``).

    Returns:
        The FastAPI app (``app.state.workbench`` is the Blocks).

    Raises:
        ConfigError, ServerConfigError: invalid configuration. SourceUnavailable,
            TokenizerLoadError: the config's questions or tokenizer cannot be loaded.
    """
    import gradio as gr

    from reasoning_env.server.app import build_app_from_env, create_server_app
    from workbench.app import CSS, THEME, build_workbench
    from workbench.app.common import EXAMPLE_RUNS_ROOT, AppContext

    env = dict(os.environ if environ is None else environ)
    api = create_server_app(config) if config is not None else build_app_from_env(env, announce=announce)
    runtime = api.state.reasoning_env

    def tokenizer_policy(name: str) -> str | None:
        # the server's rule for client-chosen tokenizers (no folders of its own disk unless allowed)
        return runtime.settings.check_tokenizer_name(name, runtime.config.tokenizer_name)

    from reasoning_env.policies.curves import load_curves

    curves_file = curves or env.get("WORKBENCH_CURVES")
    ctx = AppContext(
        curves=load_curves(curves_file) if curves_file else None,
        base_config=runtime.config,
        runs_root=runs_root or env.get("WORKBENCH_RUNS_ROOT") or "runs",
        grader=runtime.grader,
        pools=runtime.pools,
        environ=env,
        tokenizer_policy=tokenizer_policy,
        example_runs_root=None if env.get("WORKBENCH_EXAMPLE_RUNS", "1").strip() == "0" else str(EXAMPLE_RUNS_ROOT),
    )
    demo = build_workbench(ctx)
    limit = concurrency or int(env.get("WORKBENCH_CONCURRENCY") or 16)
    demo.queue(default_concurrency_limit=limit)
    app = gr.mount_gradio_app(
        api,
        demo,
        path="/",
        theme=THEME,
        css=CSS,
        footer_links=["api", "gradio"],
        run_history=False,
        show_error=True,
        ssr_mode=False,
    )
    app.state.workbench = demo
    return app


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python app.py",
        description="Reasoning Economics Workbench: the Gradio workbench at / and the OpenEnv API "
        "(/reset, /step, /ws, /health) in one process.",
    )
    p.add_argument(
        "--host",
        default=None,
        help="interface to bind (default $GRADIO_SERVER_NAME; 0.0.0.0 on a Space, else 127.0.0.1)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"TCP port (default $PORT, else $GRADIO_SERVER_PORT, else {DEFAULT_PORT})",
    )
    p.add_argument(
        "--runs-root",
        "--runs_root",
        dest="runs_root",
        default=None,
        help="folder of run folders (default $WORKBENCH_RUNS_ROOT or runs)",
    )
    p.add_argument(
        "--curves",
        default=None,
        help="solver curves of Play and the Reward lab: a shipped curve set by name (e.g. qwen2.5-coder-0.5b) or a "
        "curves JSON file (default $WORKBENCH_CURVES, else the hand-chosen defaults)",
    )
    p.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    return p


def port_unavailable(host: str, port: int) -> str | None:
    """Why ``host``:``port`` cannot be listened on (e.g. another server holds it), else ``None``.

    A trial bind with ``SO_REUSEADDR``, as uvicorn binds: a port in TIME_WAIT counts as free."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return "the port is already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until stopped. Returns the exit status (2: bad flags or configuration)."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper()), format="%(levelname)s %(name)s: %(message)s")
    try:
        port = args.port if args.port is not None else default_port()
    except ValueError as exc:
        print(f"app.py: {exc}", file=sys.stderr)
        return 2
    host = args.host or default_host()
    busy = port_unavailable(host, port)
    if busy:  # checked before the questions and tokenizers load, and before the URL is announced
        print(
            f"app.py: cannot listen on {host} port {port}: {busy}. Pick another with --port N (or PORT=N)",
            file=sys.stderr,
        )
        return 2
    try:
        app = create_app(
            runs_root=args.runs_root, announce="full" if args.log_level == "debug" else True, curves=args.curves
        )
    except (ReasoningEconomicsError, ValueError, OSError) as exc:  # a bad setting, data or curves file
        print(f"app.py: cannot start: {exc}", file=sys.stderr)
        return 2
    import uvicorn

    shown = "localhost" if host in ("0.0.0.0", "127.0.0.1") else host
    print(
        f"Reasoning Economics Workbench on http://{shown}:{port}/  (OpenEnv API: /reset "
        "/step /ws /health, docs /docs)",
        flush=True,
    )
    settings = getattr(app.state.reasoning_env, "settings", None)
    max_msg = int(getattr(settings, "max_message_bytes", 0) or 0)
    uvicorn.run(app, host=host, port=port, log_level=args.log_level, ws_max_size=max(16 * 1024 * 1024, 2 * max_msg))
    return 0

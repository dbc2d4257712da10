"""The OpenEnv server of ReasoningEconomicsEnv: FastAPI app, app factory and command line.

Routes: WebSocket ``/ws`` (one session per connection: reset, step, state, close; our own
route, :mod:`reasoning_env.server.ws`), and OpenEnv's HTTP routes ``GET /health``, ``/schema``,
``/metadata``, ``/state``, ``POST /reset`` and ``/step`` (stateless: a fresh environment per
request, so HTTP ``/step`` always answers 409), plus ``GET /capacity`` (sessions in use and the
limits, per worker and in total) and ``/docs`` (Swagger UI served from this process).
OpenEnv's ``/mcp`` is served read-only (:func:`read_only_mcp`: ``tools/list`` is empty, every other method is
refused): this environment has no MCP tools, and OpenEnv's session creation over ``/mcp`` was an
unauthenticated way to fill every slot.

Run it::

    python -m reasoning_env.server --host 0.0.0.0 --port 8000 [--workers N]
    uvicorn reasoning_env.server.app:app --host 0.0.0.0 --port 8000   # same app, uvicorn's flags

Both read the ``REE_*`` environment variables (:mod:`reasoning_env.server.settings`) and print the
effective configuration once, as one JSON line, when the app is built. Tests and the Gradio
workbench build their own app with :func:`create_server_app`.

Why OpenEnv's :class:`HTTPEnvServer` for the HTTP routes and not ``create_app``: ``create_app``
builds the same routes but does not return the server object; we register its routes, drop its
``/ws`` and ``/mcp``, and put ours (the WebSocket sessions; the read-only ``/mcp``) in their place.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gc
import ipaddress
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.types import ConcurrencyConfig, ServerMode
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import WebSocketRoute as StarletteWebSocketRoute

from reasoning_env import __version__
from reasoning_env.config import EnvConfig
from reasoning_env.errors import ReasoningEconomicsError
from reasoning_env.grading import Grader
from reasoning_env.grading.pool import WorkerPool
from reasoning_env.models import ReasoningEconomicsAction, ReasoningEconomicsObservation, ReasoningEconomicsState
from reasoning_env.server.executor import ElasticExecutor
from reasoning_env.server.fallback import FairFallback
from reasoning_env.server.guard import ChargedThreadPool, MessageGuard, token_problem
from reasoning_env.server.protocol import bounded_errors, clip
from reasoning_env.server.served_env import EpisodeStateError, ServedReasoningEconomicsEnv, TokenizerNotAllowedError
from reasoning_env.server.sessions import SessionRegistry
from reasoning_env.server.settings import (
    ENV_VARS,
    ServerSettings,
    config_from_env,
    settings_from_env,
    unknown_env_vars,
)
from reasoning_env.server.share import ComputeShare
from reasoning_env.server.workers import BOARD_VAR, WorkerBoard, total
from reasoning_env.server.ws import WebSocketRoute
from reasoning_env.sources import PoolSet, load_pools
from reasoning_env.tokenization import get_tokenizer

ENV_NAME = "reasoning_economics_env"
#: CPU priority increment of the grading fallback's worker processes (the server itself wins the CPU).
FALLBACK_NICE = 5


@dataclass(frozen=True)
class ServerRuntime:
    """What an app serves, kept on ``app.state.reasoning_env``.

    Attributes:
        config: The EnvConfig every session's environment is built from.
        settings: Limits and policies.
        registry: This process's sessions (``registry.capacity()``, ``registry.active``).
        pools: The question pools all sessions share (loaded once, at build).
        grader: The grader all sessions share (its fallback is :attr:`fallback`).
        fallback: The grading fallback's fair front over this server's worker pool.
        executor: The threads that run resets and steps.
        share: Each address group's share of the compute (held back before its calls are queued).
        board: Counts of every worker process (``--workers``).
    """

    config: EnvConfig
    settings: ServerSettings
    registry: SessionRegistry
    pools: PoolSet
    grader: Grader
    fallback: FairFallback
    executor: ElasticExecutor
    share: ComputeShare
    board: WorkerBoard

    def summary(self) -> dict[str, Any]:
        """The effective configuration as a JSON-ready dict (the start-up line's content)."""
        return {
            "reasoning_env_server": __version__,
            "settings": self.settings.to_dict(),
            "config": self.config.to_dict(),
            "sources_used": [dict(s) for s in self.pools.sources_used],
            "questions": self.pools.size(),
        }

    def capacity(self) -> dict[str, Any]:
        """The ``/capacity`` answer: totals over the workers at the top, then each worker."""
        workers = self.board.entries()
        out = {
            **total(workers),
            "max_response_bytes": self.settings.max_response_bytes,
            "max_message_bytes": self.settings.max_message_bytes,
            "max_sessions_per_client": self.settings.session_cap_per_client,
            "session_timeout_s": self.settings.session_timeout_s,
            "unused_session_timeout_s": self.settings.unused_session_timeout_s,
            "auth": bool(self.settings.api_token),
        }
        out["worker"] = self.board.worker_id
        out["per_worker"] = workers
        out["threads"] = self.executor.stats()
        out["compute_share"] = self.share.stats()
        out["grading_fallback"] = {
            "workers": self.fallback.size,
            "per_client": self.fallback.per_client,
            "in_flight": sum(self.fallback.in_flight().values()),
        }
        return out


#: Bytes of a ``POST /mcp`` body read at most (a JSON-RPC request of this read-only endpoint is a few dozen).
MCP_MAX_BODY_BYTES = 16 * 1024
#: Why every MCP method but the read-only ones is refused.
MCP_REFUSAL = (
    "this environment exposes no MCP tools and its /mcp is read-only (tools/list, ping): it creates no sessions "
    "and runs nothing; play episodes over the WebSocket /ws (reasoning_env.client.ReasoningEconomicsClient)"
)


async def read_only_mcp(request: Request) -> JSONResponse:
    """``POST /mcp``: OpenEnv's MCP JSON-RPC endpoint, read-only. ``tools/list`` answers an empty tool list and
    ``ping`` an empty result; every other method (``tools/call``, ``openenv/session/create``, ...) is a
    JSON-RPC "method not found" saying why, so no session or slot is ever taken over plain HTTP. Errors are
    JSON-RPC error objects with HTTP 200 (parse error, invalid request), as OpenEnv's own endpoint answers; a
    body over :data:`MCP_MAX_BODY_BYTES` is refused with 413 before it is parsed."""
    from openenv.core.env_server.mcp_types import JsonRpcErrorCode, JsonRpcRequest, JsonRpcResponse
    from pydantic import ValidationError

    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MCP_MAX_BODY_BYTES:
            return JSONResponse(
                status_code=413, content={"detail": f"an /mcp request may be at most {MCP_MAX_BODY_BYTES:,} bytes"}
            )
    try:
        raw = json.loads(body)
    except ValueError:
        return JSONResponse(JsonRpcResponse.error_response(JsonRpcErrorCode.PARSE_ERROR).model_dump())
    try:
        if not isinstance(raw, dict):
            raise TypeError("a JSON-RPC request is an object")
        call = JsonRpcRequest(**raw)
    except (ValidationError, TypeError) as exc:
        why = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        invalid = JsonRpcResponse.error_response(JsonRpcErrorCode.INVALID_REQUEST, f"Invalid request: {why}")
        return JSONResponse(invalid.model_dump())
    if call.method == "tools/list":
        return JSONResponse(JsonRpcResponse.success({"tools": []}, request_id=call.id).model_dump())
    if call.method == "ping":
        return JSONResponse(JsonRpcResponse.success({}, request_id=call.id).model_dump())
    refused = JsonRpcResponse.error_response(
        JsonRpcErrorCode.METHOD_NOT_FOUND, f"{call.method}: {MCP_REFUSAL}", request_id=call.id
    )
    return JSONResponse(refused.model_dump())


def create_server_app(
    config: EnvConfig | dict | None = None,
    *,
    settings: ServerSettings | None = None,
    mode: ServerMode | str | None = None,
    prepare: bool = True,
    **limits: Any,
) -> FastAPI:
    """Build a server app for ``config``.

    Loads the question pools and the config's tokenizer now (seconds, once per process), so a
    broken config fails here rather than at the first reset.

    Args:
        config: An :class:`EnvConfig`, a dict of its fields, or ``None`` for the project defaults.
        settings: Base :class:`ServerSettings` (default: the defaults, not the environment).
        mode: OpenEnv server mode (``"simulation"``: all routes; ``"production"``: no HTTP
            ``/reset``, ``/step``, ``/state``). Default: ``$OPENENV_MODE`` or simulation.
        **limits: Overrides of ``settings`` fields, e.g. ``max_sessions`` (sessions),
            ``max_sessions_per_client``, ``session_timeout_s`` / ``unused_session_timeout_s``
            (seconds, ``None`` = never), ``max_response_bytes`` (bytes of UTF-8),
            ``allowed_tokenizers`` (patterns), ``allow_local_tokenizers`` (bool),
            ``worker_threads`` (threads), ``api_token``, ``grading_workers`` (processes),
            ``fallback_per_client``.
        prepare: Prepare the golds and start the grading workers now (in the background). Off
            for an app built only to check the configuration (the parent of ``--workers N``,
            whose pool was shut down while its workers started: "pool closed" warnings).

    Returns:
        The FastAPI app; ``app.state.reasoning_env`` is its :class:`ServerRuntime`.

    Raises:
        ConfigError: the config is invalid.
        ServerConfigError: a limit is invalid.
        TypeError: an unknown keyword.
        SourceUnavailable, SourceError: the config's questions cannot be loaded.
        TokenizerLoadError: the config's tokenizer cannot be loaded.
    """
    config = EnvConfig.coerce(config)
    settings = dataclasses.replace(settings or ServerSettings(), **limits)
    if mode is None:
        mode = os.environ.get("OPENENV_MODE", ServerMode.SIMULATION.value)

    pools = load_pools(config.sources, data_dir=config.data_dir, offline_fallback=config.offline_fallback)
    get_tokenizer(config.tokenizer_name)
    fallback = FairFallback(WorkerPool(settings.grading_workers, nice=FALLBACK_NICE), settings.fallback_cap_per_client)
    # The grading limit counts the grade's own CPU time (the thread's, then the worker's), so
    # no verdict depends on what other clients make the machine do (FairFallback).
    grader = Grader(timeout_s=config.grading_timeout_s, pool=fallback, clock=time.thread_time)
    factory = functools.partial(ServedReasoningEconomicsEnv, config, pools=pools, grader=grader, settings=settings)
    if prepare:
        _ = factory().pools  # prepares the golds and starts the fallback's workers in the background

    app = FastAPI(
        title="Reasoning Economics Workbench: OpenEnv server",
        version=__version__,
        description=(
            "Mixed math questions under one shared token budget. Play episodes over the WebSocket `/ws` "
            "(reasoning_env.client.ReasoningEconomicsClient); see `/schema` for the action and observation."
        ),
        docs_url=None,
        redoc_url=None,
    )
    openenv_server = HTTPEnvServer(
        factory,
        ReasoningEconomicsAction,
        ReasoningEconomicsObservation,
        concurrency_config=ConcurrencyConfig(max_concurrent_envs=settings.max_sessions, session_timeout=None),
        env_name=ENV_NAME,
        state_cls=ReasoningEconomicsState,
    )
    # OpenEnv's routes run env.reset / env.step on this pool; its calls' CPU is charged to the request's group.
    plain_pool = openenv_server._executor
    openenv_server._executor = ChargedThreadPool(max_workers=plain_pool._max_workers, thread_name_prefix="ree-http")
    plain_pool.shutdown(wait=False)
    before = set(map(id, app.router.routes))
    openenv_server.register_routes(app, mode=mode)
    # OpenEnv's /ws and /mcp go; ours takes /ws (see the module docstring).
    app.router.routes[:] = [
        r for r in app.router.routes if id(r) in before or getattr(r, "path", None) not in ("/ws", "/mcp")
    ]
    openenv_routes = [r for r in app.router.routes if id(r) not in before]

    executor = ElasticExecutor(settings.worker_threads, settings.worker_threads + settings.max_sessions + 8)
    board_holder: list[WorkerBoard] = []
    registry = SessionRegistry(settings, on_change=lambda: board_holder[0].publish() if board_holder else None)
    board = WorkerBoard(os.environ.get(BOARD_VAR), registry.capacity)
    board_holder.append(board)
    registry.name = board.worker_id
    share = ComputeShare()
    ws_route = WebSocketRoute(
        settings, registry, executor, factory, auth=lambda scope: token_problem(scope, settings.api_token), share=share
    )
    app.router.routes.insert(0, StarletteWebSocketRoute("/ws", ws_route, name="ws"))
    app.add_middleware(MessageGuard, settings=settings, http_routes=openenv_routes, share=share)
    _add_error_handlers(app)

    runtime = ServerRuntime(
        config=config,
        settings=settings,
        registry=registry,
        pools=pools,
        grader=grader,
        fallback=fallback,
        executor=executor,
        share=share,
        board=board,
    )
    app.state.reasoning_env = runtime

    async def start() -> None:
        registry.start()
        board.publish()

    async def stop() -> None:
        registry.stop()
        board.withdraw()
        executor.shutdown(wait=False, cancel_futures=True)
        fallback.shutdown()

    app.router.on_startup.append(start)
    app.router.on_shutdown.append(stop)

    @app.get("/capacity", tags=["Health"], summary="Sessions in use and the server's limits (per worker and in total)")
    async def capacity() -> dict[str, Any]:
        return runtime.capacity()

    @app.post("/mcp", include_in_schema=False)
    async def mcp_read_only(request: Request) -> JSONResponse:
        return await read_only_mcp(request)

    # OpenEnv's task-set routes (/{env_name}/splits, /tasks, /num_tasks, /task, /task_range) answer
    # 501 here (this environment has no task splits) and 405 to GET: keep them (OpenEnv clients
    # probe them), but out of the schema and /docs.
    for route in app.router.routes:
        if getattr(route, "path", "").startswith("/{env_name}/"):
            route.include_in_schema = False
    _add_docs(app)
    return app


def openapi_3_0(doc: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI 3.1 document FastAPI builds, rewritten as 3.0 for the vendored Swagger UI 4.15
    (which refuses 3.1: "The provided definition does not specify a valid version field"):
    ``anyOf`` with ``{"type": "null"}`` becomes ``nullable``, numeric ``exclusiveMinimum`` /
    ``exclusiveMaximum`` become the 3.0 boolean form, and ``examples`` lists become ``example``.
    ``/openapi.json`` itself stays 3.1."""

    def fix(node: Any) -> Any:
        if isinstance(node, list):
            return [fix(x) for x in node]
        if not isinstance(node, dict):
            return node
        out = {k: fix(v) for k, v in node.items()}
        for key in ("anyOf", "oneOf"):
            options = out.get(key)
            if isinstance(options, list) and {"type": "null"} in options:
                rest = [o for o in options if o != {"type": "null"}]
                out["nullable"] = True
                if len(rest) == 1 and isinstance(rest[0], dict):
                    del out[key]
                    out = {**rest[0], **out}
                else:
                    out[key] = rest
        for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if isinstance(out.get(key), (int, float)) and not isinstance(out.get(key), bool):
                out[bound] = out[key]
                out[key] = True
        if isinstance(out.get("examples"), list) and "example" not in out:
            examples = out.pop("examples")
            if examples:
                out["example"] = examples[0]
        if out.get("type") == "null":
            out.pop("type")
            out["nullable"] = True
        return out

    converted = fix(doc)
    converted["openapi"] = "3.0.3"
    return converted


def _add_docs(app: FastAPI) -> None:
    """``/docs``: Swagger UI from the ``swagger-ui-bundle`` package's files, so the page works
    offline (FastAPI's default loads its scripts from a CDN: a blank page without network). Without
    that package, a plain page lists the routes and links ``/openapi.json``."""
    from fastapi.openapi.docs import get_swagger_ui_html
    from starlette.staticfiles import StaticFiles

    try:
        from swagger_ui_bundle import swagger_ui_path
    except ImportError:
        swagger_ui_path = None
    title = f"{app.title}: API"
    if swagger_ui_path is not None:
        app.mount("/docs-assets", StaticFiles(directory=swagger_ui_path), name="docs-assets")
        converted: list[dict] = []

        @app.get("/docs/openapi-3.0.json", include_in_schema=False)
        async def docs_schema() -> JSONResponse:
            if not converted:
                converted.append(openapi_3_0(app.openapi()))
            return JSONResponse(converted[0])

        @app.get("/docs", include_in_schema=False)
        async def docs() -> HTMLResponse:
            return get_swagger_ui_html(
                openapi_url="/docs/openapi-3.0.json",
                title=title,
                swagger_js_url="/docs-assets/swagger-ui-bundle.js",
                swagger_css_url="/docs-assets/swagger-ui.css",
                swagger_favicon_url="/docs-assets/favicon-32x32.png",
            )

        return

    @app.get("/docs", include_in_schema=False)
    async def docs_plain() -> HTMLResponse:
        rows = "".join(
            f"<li><code>{', '.join(sorted(getattr(r, 'methods', None) or ['WS']))} {r.path}</code></li>"
            for r in app.router.routes
            if getattr(r, "include_in_schema", True) and hasattr(r, "path")
        )
        return HTMLResponse(
            f"<!doctype html><title>{title}</title><h1>{title}</h1><ul>{rows}</ul>"
            f"<p>Schema: <a href='{app.openapi_url}'>{app.openapi_url}</a>. "
            "Install <code>swagger-ui-bundle</code> for the interactive page.</p>"
        )


def _json_answer(status: int, content: dict, headers: dict | None = None) -> Response:
    """A JSON answer in ASCII-safe JSON (a lone surrogate is written ``\\ud800``, never a 500)."""
    return Response(json.dumps(content), status_code=status, media_type="application/json", headers=headers)


def _add_error_handlers(app: FastAPI) -> None:
    """HTTP answers for the environment's errors (OpenEnv's routes would answer 500), every one
    bounded (:func:`~reasoning_env.server.protocol.bounded_errors`, :func:`~reasoning_env.server.protocol.clip`)."""

    def answer(status: int):
        async def handler(request: Request, exc: Exception) -> Response:
            return _json_answer(status, {"detail": clip(str(exc)), "error": type(exc).__name__})

        return handler

    async def invalid_request(request: Request, exc: Exception) -> Response:
        # FastAPI's own answer echoes the input back and fails (500) when it holds a lone
        # surrogate; this one names each problem (the first few), without the input.
        return _json_answer(422, {"detail": bounded_errors(exc.errors())})

    async def http_error(request: Request, exc: Exception) -> Response:
        # OpenEnv's HTTP /step raises HTTPException(422, detail=pydantic's errors()), which
        # echo the input (30 MB for 200,000 unknown fields; a 500 on a lone surrogate).
        detail = getattr(exc, "detail", None)
        if isinstance(detail, list):
            detail = bounded_errors(detail)
        elif not isinstance(detail, (dict, type(None))):
            detail = clip(str(detail))
        elif isinstance(detail, dict):
            detail = clip(json.dumps(detail))
        return _json_answer(getattr(exc, "status_code", 500), {"detail": detail}, getattr(exc, "headers", None))

    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(EpisodeStateError, answer(409))
    app.add_exception_handler(TokenizerNotAllowedError, answer(403))
    # Any other refusal (a bad argument, a tokenizer that cannot load, a sampling problem): 400.
    app.add_exception_handler(ReasoningEconomicsError, answer(400))


# ------------------------------------------------------------------------------ from the environment
def build_app_from_env(
    environ: dict[str, str] | None = None,
    *,
    announce: bool | str | None = None,
    prepare: bool = True,
) -> FastAPI:
    """The app the ``REE_*`` variables describe; prints the start-up line (one short JSON line).

    Args:
        environ: Variables to read (default ``os.environ``).
        announce: Print the start-up line (default: yes, except in the worker processes of
            ``--workers``, whose parent printed it); ``"full"``: the whole effective configuration
            (:func:`announcement` with ``full=True``, ~2 KB; ``--log-level debug`` prints it).

    Raises:
        ServerConfigError: a variable is invalid. Otherwise as :func:`create_server_app`.
    """
    environ = dict(os.environ if environ is None else environ)
    app = create_server_app(config_from_env(environ), settings=settings_from_env(environ), prepare=prepare)
    if announce is None:
        announce = not environ.get(BOARD_VAR)
    if announce:
        print(json.dumps(announcement(app, environ, full=announce == "full"), sort_keys=False), flush=True)
    return app


def announcement(app: FastAPI, environ: dict[str, str], *, full: bool = False) -> dict[str, Any]:
    """The start-up line: what is served (version, questions and where they came from, tokenizer,
    budget mode, session cap, whether a token is required) and the ``REE_*`` variables that were
    set (the token masked); ``full``: the runtime's whole summary (every setting and config field)
    instead of the short form."""
    runtime = app.state.reasoning_env
    summary = runtime.summary()
    env = {k: ("(set)" if k == "REE_API_TOKEN" else environ[k]) for k in ENV_VARS if environ.get(k)}
    if full:
        return {**summary, "env": env}
    return {
        "reasoning_env_server": summary["reasoning_env_server"],
        "questions": summary["questions"],
        "sources": [f"{s.get('source')}->{s.get('used')}" for s in summary["sources_used"]],
        "tokenizer_name": runtime.config.tokenizer_name,
        "hard_cap_mode": runtime.config.hard_cap_mode,
        "max_sessions": runtime.settings.max_sessions,
        "auth": bool(runtime.settings.api_token),
        "env": env,
        "full_config": "--log-level debug",
    }


#: The cyclic garbage collector's youngest-generation threshold in a server process (Python's
#: default 700): most objects a step allocates die by reference count before a collection.
SERVER_GC_THRESHOLD0 = 10_000


def freeze_start_up_heap() -> None:
    """Hide what a server process built at start-up (modules, question pools, tokenizers: ~340,000
    objects that live as long as the process) from the cyclic garbage collector (``gc.freeze``),
    and collect the young generation every :data:`SERVER_GC_THRESHOLD0` allocations.

    A full collection walks every tracked object, those it can never free included, and the young
    collections (~800 at Python's default threshold of 700) walked a step's objects that were
    about to die anyway: over the server benchmark's warm-up and throughput phase (~5,750 steps,
    64 sessions, 2 loaded cores) the collector used 0.92-1.04 s of CPU, four full collections of
    ~0.2 s each among it (~0.17 ms a step), and 0.06-0.08 s with this (~50 young collections, no
    full one; docs/server.md). Called once per server process, after its app is built and before
    it serves; the objects made later are collected as before, only less often.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(SERVER_GC_THRESHOLD0, *gc.get_threshold()[1:])


@functools.lru_cache(maxsize=1)
def _default_app() -> FastAPI:
    app = build_app_from_env()
    freeze_start_up_heap()  # each process of --workers N (and `uvicorn reasoning_env.server.app:app`)
    return app


def __getattr__(name: str) -> Any:
    # ``app`` is built on first access (``uvicorn reasoning_env.server.app:app``), not at import:
    # importing this module for create_server_app() must not load the default config's data.
    if name == "app":
        return _default_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an interface to bind) is reachable only from this machine."""
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m reasoning_env.server [--host H] [--port P] [--workers N] [--log-level L]``: serve until stopped.

    Configuration comes from the ``REE_*`` environment variables. Returns the exit status
    (2 when the configuration is invalid).
    """
    defaults = {}
    for var, fallback in (("PORT", 8000), ("REE_WORKERS", 1)):
        raw = (os.environ.get(var) or "").strip()
        try:
            defaults[var] = int(raw) if raw else fallback
        except ValueError:
            print(
                f"reasoning_env.server: {var}={raw!r} is not an integer; set it to a whole number or unset it",
                file=sys.stderr,
            )
            return 2
    parser = argparse.ArgumentParser(prog="python -m reasoning_env.server", description=main.__doc__.splitlines()[0])
    parser.add_argument("--host", default="0.0.0.0", help="interface to bind (default 0.0.0.0: all)")
    parser.add_argument("--port", type=int, default=defaults["PORT"], help="TCP port (default $PORT or 8000)")
    parser.add_argument(
        "--workers",
        type=int,
        default=defaults["REE_WORKERS"],
        help="server processes on this port (default $REE_WORKERS or 1); each WebSocket session stays on "
        "the process that accepted it, and each process has its own limits",
    )
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    parser.add_argument(
        "--ws-compression",
        action="store_true",
        help="offer permessage-deflate on WebSockets: less bandwidth, ~20%% more server CPU per step",
    )
    args = parser.parse_args(argv)
    if args.workers < 1:
        print(f"reasoning_env.server: --workers must be >= 1, got {args.workers}", file=sys.stderr)
        return 2

    import uvicorn

    try:
        # With --workers N this process only checks the configuration (each worker builds its own
        # app): no golds prepared, no grading workers started.
        app = build_app_from_env(prepare=args.workers == 1, announce="full" if args.log_level == "debug" else None)
    except ReasoningEconomicsError as exc:  # a bad setting, unreachable questions, a tokenizer that cannot load
        print(f"reasoning_env.server: cannot start: {exc}", file=sys.stderr)
        return 2
    for note in unknown_env_vars():
        print(f"reasoning_env.server: WARNING: {note}", file=sys.stderr, flush=True)
    settings: ServerSettings = app.state.reasoning_env.settings
    if not settings.api_token and not is_loopback(args.host):
        print(
            f"reasoning_env.server: WARNING: serving {args.host}:{args.port} to the network without authentication; "
            "anyone who can reach it can play (and fill its slots). Set REE_API_TOKEN to require a token, or bind "
            "--host 127.0.0.1.",
            file=sys.stderr,
            flush=True,
        )
    from reasoning_env.server.net import uvicorn_options

    try:
        net = uvicorn_options(settings)
    except ReasoningEconomicsError as exc:  # FORWARDED_ALLOW_IPS=* or a malformed entry
        print(f"reasoning_env.server: cannot start: {exc}", file=sys.stderr)
        return 2
    guard = net.pop("ree_guard")
    options = dict(
        **net,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        # Off by default: on 2 cores deflate cost ~0.25 ms of server CPU per step (observations
        # are a few KB of JSON); turn it on for slow links.
        ws_per_message_deflate=args.ws_compression,
    )
    # SIGTERM is a normal stop: exit 0 in both modes (uvicorn re-raises the signal after a
    # graceful shutdown of one process, which made the status -15 with 1 worker and 0 with 2).
    signal.signal(signal.SIGTERM, lambda *_: None)
    if args.workers == 1:
        config = uvicorn.Config(app, **options)
        config.ree_guard = guard
        freeze_start_up_heap()
        uvicorn.Server(config).run()
        return 0
    # N processes: uvicorn imports the app in each (reasoning_env.server.app:app); they publish
    # their session counts to a shared folder for /capacity.
    app.state.reasoning_env.fallback.shutdown()
    del app
    from uvicorn.supervisors import Multiprocess

    with tempfile.TemporaryDirectory(prefix="ree-workers-") as board:
        os.environ[BOARD_VAR] = board
        # uvicorn pings each worker every 0.5 s and kills one that does not answer within
        # timeout_worker_healthcheck (5 s by default); a worker loading its questions and tokenizer on
        # a busy machine missed it, was killed and started again ("Child process died"; healthy after
        # 58-84 s, once > 120 s). A hung worker is still replaced, after 60 s.
        config = uvicorn.Config(
            "reasoning_env.server.app:app", workers=args.workers, timeout_worker_healthcheck=60, **options
        )
        config.ree_guard = guard  # each worker gets the limits with its own counts
        sock = config.bind_socket()
        Multiprocess(config, sockets=[sock]).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())

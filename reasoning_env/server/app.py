"""The OpenEnv server of ReasoningEconomicsEnv: FastAPI app, app factory and command line.

Routes (OpenEnv's): WebSocket ``/ws`` (one session per connection: reset, step, state, close),
``GET /health``, ``/schema``, ``/metadata``, ``/state``, ``POST /reset`` and ``/step`` (stateless:
a fresh environment per request, so HTTP ``/step`` always answers 409), plus ``GET /capacity``
(sessions in use and the limits).

Run it::

    python -m reasoning_env.server --host 0.0.0.0 --port 8000
    uvicorn reasoning_env.server.app:app --host 0.0.0.0 --port 8000   # same app, uvicorn's flags

Both read the ``REE_*`` environment variables (:mod:`reasoning_env.server.settings`) and print the
effective configuration once, as one JSON line, when the app is built. Tests and the Gradio
workbench build their own app with :func:`create_server_app`.

Why :class:`HTTPEnvServer` and ``register_routes`` rather than ``create_app``: ``create_app`` builds
the same thing but does not return its :class:`HTTPEnvServer`, whose session registry we extend
(:class:`~reasoning_env.server.sessions.SessionServer`) and report (``/capacity``). OpenEnv's
generic Gradio page (``ENABLE_WEB_INTERFACE``) is not mounted; the project's workbench mounts
its own UI on this app.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from openenv.core.env_server.types import ConcurrencyConfig, ServerMode

from reasoning_env import __version__
from reasoning_env.config import EnvConfig
from reasoning_env.env import EpisodeError
from reasoning_env.grading import Grader
from reasoning_env.models import ReasonBudgetAction, ReasonBudgetObservation, ReasonBudgetState
from reasoning_env.server.guard import MessageGuard
from reasoning_env.server.served_env import EpisodeStateError, ServedReasoningEconomicsEnv, TokenizerNotAllowedError
from reasoning_env.server.sessions import SessionServer
from reasoning_env.server.settings import ENV_VARS, ServerConfigError, ServerSettings, config_from_env, settings_from_env
from reasoning_env.sources import PoolSet, load_pools
from reasoning_env.tokenization import TokenizerLoadError, get_tokenizer

ENV_NAME = "reasoning_economics_env"


@dataclass(frozen=True)
class ServerRuntime:
    """What an app serves, kept on ``app.state.reasoning_env``.

    Attributes:
        config: The EnvConfig every session's environment is built from.
        settings: Limits and policies.
        server: OpenEnv's session registry (extended): ``server.capacity()``, ``server.active_sessions``.
        pools: The question pools all sessions share (loaded once, at build).
        grader: The grader all sessions share.
    """

    config: EnvConfig
    settings: ServerSettings
    server: SessionServer
    pools: PoolSet
    grader: Grader

    def summary(self) -> dict[str, Any]:
        """The effective configuration as a JSON-ready dict (the start-up line's content)."""
        return {
            "reasoning_env_server": __version__,
            "settings": self.settings.to_dict(),
            "config": self.config.to_dict(),
            "sources_used": [dict(s) for s in self.pools.sources_used],
            "questions": self.pools.size(),
        }


def create_server_app(
    config: Union[EnvConfig, dict, None] = None,
    *,
    settings: Optional[ServerSettings] = None,
    mode: Union[ServerMode, str, None] = None,
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
        **limits: Overrides of ``settings`` fields: ``max_sessions`` (sessions),
            ``session_timeout_s`` (seconds, ``None`` = never), ``max_response_bytes`` (bytes of
            UTF-8), ``allowed_tokenizers`` (patterns), ``allow_local_tokenizers`` (bool),
            ``worker_threads`` (threads).

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
    grader = Grader(timeout_s=config.grading_timeout_s)
    factory = functools.partial(ServedReasoningEconomicsEnv, config, pools=pools, grader=grader, settings=settings)

    app = FastAPI(
        title="Reasoning Economics Workbench: OpenEnv server",
        version=__version__,
        description=(
            "Mixed math questions under one shared token budget. Play episodes over the WebSocket `/ws` "
            "(reasoning_env.client.ReasoningEconomicsClient); see `/schema` for the action and observation."
        ),
    )
    server = SessionServer(
        factory,
        ReasonBudgetAction,
        ReasonBudgetObservation,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=settings.max_sessions, session_timeout=settings.session_timeout_s
        ),
        env_name=ENV_NAME,
        state_cls=ReasonBudgetState,
        worker_threads=settings.worker_threads,
    )
    app.router.on_shutdown.append(server.shutdown_workers)
    before = set(map(id, app.router.routes))
    server.register_routes(app, mode=mode)
    openenv_routes = [r for r in app.router.routes if id(r) not in before]
    app.add_middleware(MessageGuard, settings=settings, action_cls=ReasonBudgetAction, http_routes=openenv_routes)
    _add_error_handlers(app)

    runtime = ServerRuntime(config=config, settings=settings, server=server, pools=pools, grader=grader)
    app.state.reasoning_env = runtime

    @app.get("/capacity", tags=["Health"], summary="Sessions in use and the server's limits")
    async def capacity() -> dict[str, Any]:
        return {**server.capacity(), "max_response_bytes": settings.max_response_bytes,
                "max_message_bytes": settings.max_message_bytes}

    return app


def _add_error_handlers(app: FastAPI) -> None:
    """HTTP answers for the environment's errors (OpenEnv's routes would answer 500)."""

    def answer(status: int):
        async def handler(request: Request, exc: Exception) -> JSONResponse:
            return JSONResponse(status_code=status, content={"detail": str(exc), "error": type(exc).__name__})
        return handler

    app.add_exception_handler(EpisodeStateError, answer(409))
    app.add_exception_handler(TokenizerNotAllowedError, answer(403))
    app.add_exception_handler(EpisodeError, answer(400))
    app.add_exception_handler(TokenizerLoadError, answer(400))


# ------------------------------------------------------------------------------ from the environment
def build_app_from_env(environ: Optional[dict[str, str]] = None, *, announce: bool = True) -> FastAPI:
    """The app the ``REE_*`` variables describe; prints the effective configuration (one JSON line).

    Raises:
        ServerConfigError: a variable is invalid. Otherwise as :func:`create_server_app`.
    """
    environ = dict(os.environ if environ is None else environ)
    app = create_server_app(config_from_env(environ), settings=settings_from_env(environ))
    if announce:
        summary = app.state.reasoning_env.summary()
        summary["env"] = {k: environ[k] for k in ENV_VARS if environ.get(k)}
        print(json.dumps(summary, sort_keys=False), flush=True)
    return app


@functools.lru_cache(maxsize=1)
def _default_app() -> FastAPI:
    return build_app_from_env()


def __getattr__(name: str) -> Any:
    # ``app`` is built on first access (``uvicorn reasoning_env.server.app:app``), not at import:
    # importing this module for create_server_app() must not load the default config's data.
    if name == "app":
        return _default_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m reasoning_env.server [--host H] [--port P] [--log-level L]``: serve until stopped.

    Configuration comes from the ``REE_*`` environment variables. Returns the exit status
    (2 when the configuration is invalid).
    """
    parser = argparse.ArgumentParser(prog="python -m reasoning_env.server", description=main.__doc__.splitlines()[0])
    parser.add_argument("--host", default="0.0.0.0", help="interface to bind (default 0.0.0.0: all)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")),
                        help="TCP port (default $PORT or 8000)")
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    parser.add_argument("--ws-compression", action="store_true",
                        help="offer permessage-deflate on WebSockets: less bandwidth, ~20%% more server CPU per step")
    args = parser.parse_args(argv)

    import uvicorn

    try:
        app = build_app_from_env()
    except (ServerConfigError, ValueError, RuntimeError) as exc:
        print(f"reasoning_env.server: cannot start: {exc}", file=sys.stderr)
        return 2
    settings: ServerSettings = app.state.reasoning_env.settings
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        # Frames up to the guard's limit must reach the guard (which answers with a clear error);
        # far larger ones are cut by uvicorn (close code 1009).
        ws_max_size=max(16 * 1024 * 1024, 2 * settings.max_message_bytes),
        # Off by default: on 2 cores deflate cost ~0.25 ms of server CPU per step (observations
        # are a few KB of JSON); turn it on for slow links.
        ws_per_message_deflate=args.ws_compression,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

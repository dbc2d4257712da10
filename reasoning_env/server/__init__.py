"""OpenEnv server of ReasoningEconomicsEnv (see :mod:`reasoning_env.server.app`).

``create_server_app(config, max_sessions=..., session_timeout_s=..., max_response_bytes=...)``
builds an app; ``reasoning_env.server.app:app`` is the default one, configured by the ``REE_*``
environment variables; ``python -m reasoning_env.server`` serves it.
"""

from reasoning_env.server.app import ServerRuntime, build_app_from_env, create_server_app, main
from reasoning_env.server.served_env import EpisodeStateError, ServedReasoningEconomicsEnv, TokenizerNotAllowedError
from reasoning_env.server.settings import ServerConfigError, ServerSettings, config_from_env, settings_from_env

__all__ = [
    "EpisodeStateError",
    "ServedReasoningEconomicsEnv",
    "ServerConfigError",
    "ServerRuntime",
    "ServerSettings",
    "TokenizerNotAllowedError",
    "build_app_from_env",
    "config_from_env",
    "create_server_app",
    "main",
    "settings_from_env",
]

"""Server settings and the REE_* environment variables (no server started)."""

from __future__ import annotations

import pytest

from reasoning_env.config import EnvConfig
from reasoning_env.server.settings import (
    DEFAULT_MAX_RESPONSE_BYTES,
    ServerConfigError,
    ServerSettings,
    config_from_env,
    settings_from_env,
)


def test_defaults_without_variables():
    s = settings_from_env({})
    assert s == ServerSettings()
    assert s.max_response_bytes == DEFAULT_MAX_RESPONSE_BYTES == 1_000_000
    assert s.max_sessions >= 64 and s.session_timeout_s > 0
    assert config_from_env({}) == EnvConfig()


def test_variables_override_config_fields(tmp_path):
    path = tmp_path / "env.yaml"
    EnvConfig(num_questions=5, budget_ratio=3.0).to_yaml(path)
    cfg = config_from_env(
        {
            "REE_CONFIG": str(path),
            "REE_DEFAULT_TOKENIZER_NAME": "Qwen/Qwen3-4B",
            "REE_HARD_CAP_MODE": "false",
            "REE_SOURCES": "gsm8k, math500",
            "REE_DATA_DIR": "somewhere",
        }
    )
    assert cfg.num_questions == 5 and cfg.budget_ratio == 3.0  # from the file
    assert cfg.tokenizer_name == "Qwen/Qwen3-4B"
    assert cfg.hard_cap_mode is False
    assert [s.name for s in cfg.sources] == ["gsm8k", "math500"]
    assert cfg.data_dir == "somewhere"


def test_server_variables():
    s = settings_from_env(
        {
            "REE_MAX_SESSIONS": "128",
            "REE_SESSION_TIMEOUT_S": "30.5",
            "REE_MAX_RESPONSE_BYTES": "2_000_000",
            "REE_ALLOWED_TOKENIZERS": "Qwen/*, meta-llama/*",
            "REE_ALLOW_LOCAL_TOKENIZERS": "yes",
            "REE_WORKER_THREADS": "3",
        }
    )
    assert s.worker_threads == 3
    assert (s.max_sessions, s.session_timeout_s, s.max_response_bytes) == (128, 30.5, 2_000_000)
    assert s.allowed_tokenizers == ("Qwen/*", "meta-llama/*")
    assert s.allow_local_tokenizers is True
    assert settings_from_env({"REE_SESSION_TIMEOUT_S": "none"}).session_timeout_s is None
    assert s.max_message_bytes > 2 * s.max_response_bytes


@pytest.mark.parametrize(
    "env, names",
    [
        ({"REE_MAX_SESSIONS": "lots"}, "REE_MAX_SESSIONS"),
        ({"REE_MAX_SESSIONS": "0"}, "REE_MAX_SESSIONS"),
        ({"REE_SESSION_TIMEOUT_S": "soon"}, "REE_SESSION_TIMEOUT_S"),
        ({"REE_SESSION_TIMEOUT_S": "-3"}, "REE_SESSION_TIMEOUT_S"),
        ({"REE_MAX_RESPONSE_BYTES": "-1"}, "REE_MAX_RESPONSE_BYTES"),
        ({"REE_ALLOW_LOCAL_TOKENIZERS": "maybe"}, "REE_ALLOW_LOCAL_TOKENIZERS"),
        ({"REE_WORKER_THREADS": "0"}, "REE_WORKER_THREADS"),
    ],
)
def test_bad_server_variables_name_the_variable(env, names):
    with pytest.raises(ServerConfigError, match=names):
        settings_from_env(env)


@pytest.mark.parametrize(
    "env, names",
    [
        ({"REE_HARD_CAP_MODE": "sometimes"}, "REE_HARD_CAP_MODE"),
        ({"REE_SOURCES": "no_such_source"}, "REE_SOURCES"),
        ({"REE_SOURCES": " , "}, "REE_SOURCES"),
        ({"REE_CONFIG": "does/not/exist.yaml"}, "REE_CONFIG"),
    ],
)
def test_bad_config_variables_name_the_variable(env, names):
    with pytest.raises(ServerConfigError, match=names):
        config_from_env(env)


def test_tokenizer_policy():
    s = ServerSettings()
    default = "Qwen/Qwen2.5-0.5B-Instruct"
    assert s.check_tokenizer_name("Qwen/Qwen3-4B", default) is None
    assert s.check_tokenizer_name("embedded:qwen3", default) is None
    assert s.check_tokenizer_name("gpt2", default) is None
    for path in ("/etc", "../secret", "~/.cache/x", "a/b/c", "C:\\tok"):
        assert "REE_ALLOW_LOCAL_TOKENIZERS" in s.check_tokenizer_name(path, default)
    assert "at most" in s.check_tokenizer_name("x" * 500, default)
    assert ServerSettings(allow_local_tokenizers=True).check_tokenizer_name("/some/folder", default) is None
    only_qwen = ServerSettings(allowed_tokenizers=("Qwen/*",))
    assert only_qwen.check_tokenizer_name("Qwen/Qwen3-4B", default) is None
    assert "REE_ALLOWED_TOKENIZERS" in only_qwen.check_tokenizer_name("meta-llama/Llama-3.2-1B", default)
    assert ServerSettings(allowed_tokenizers=("x/*",)).check_tokenizer_name(default, default) is None


def test_settings_validate_values():
    for bad in (
        {"max_sessions": 0},
        {"session_timeout_s": 0},
        {"max_response_bytes": 0},
        {"allowed_tokenizers": "Qwen/*"},
        {"worker_threads": 0},
    ):
        with pytest.raises(ServerConfigError):
            ServerSettings(**bad)

"""A malformed numeric ``REE_*`` variable read by library code (``REE_HUB_CONNECT_TIMEOUT_S``,
``REE_MAX_TOKENIZERS``) falls back to its default with a one-line warning naming the variable,
never silently."""

from __future__ import annotations

import logging
import socket

import pytest

from reasoning_env import hub, tokenization


def _closed_port() -> int:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("raw", ["soon", "-3", "nan"])
def test_a_malformed_hub_timeout_warns_naming_the_variable(raw, monkeypatch, caplog) -> None:
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("REE_HUB_CONNECT_TIMEOUT_S", raw)
    hub._probe.cache_clear()
    with caplog.at_level(logging.WARNING):
        assert hub.hub_reachable() is False
    (record,) = [r for r in caplog.records if "REE_HUB_CONNECT_TIMEOUT_S" in r.getMessage()]
    message = record.getMessage()
    assert record.levelno == logging.WARNING and repr(raw) in message and "default 1.5" in message
    assert "\n" not in message


@pytest.mark.parametrize("raw", ["many", "2.5", "0"])
def test_a_malformed_tokenizer_count_warns_and_keeps_the_default(raw, monkeypatch, caplog) -> None:
    monkeypatch.setenv("REE_MAX_TOKENIZERS", raw)
    with caplog.at_level(logging.WARNING):
        assert tokenization._max_tokenizers() == tokenization.DEFAULT_MAX_TOKENIZERS
    (record,) = [r for r in caplog.records if "REE_MAX_TOKENIZERS" in r.getMessage()]
    assert repr(raw) in record.getMessage() and "whole number >= 1" in record.getMessage()


def test_a_good_tokenizer_count_is_used_without_a_warning(monkeypatch, caplog) -> None:
    monkeypatch.setenv("REE_MAX_TOKENIZERS", "3")
    with caplog.at_level(logging.WARNING):
        assert tokenization._max_tokenizers() == 3
    assert not [r for r in caplog.records if "REE_MAX_TOKENIZERS" in r.getMessage()]

"""Is the Hugging Face Hub reachable? Answered at once and remembered for the process.

Offline is detected without hanging: ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` /
``HF_DATASETS_OFFLINE`` set to a true value, or a TCP connect to the Hub endpoint that fails
within ``REE_HUB_CONNECT_TIMEOUT_S`` seconds (default 1.5 s).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from functools import lru_cache
from urllib.parse import urlparse

from reasoning_env.env_vars import positive_number

logger = logging.getLogger(__name__)

_TRUE = {"1", "true", "yes", "on"}
_lock = threading.Lock()


def offline_by_env() -> bool:
    """True when an HF offline environment variable is set to a true value."""
    return any(
        os.environ.get(var, "").strip().lower() in _TRUE
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
    )


@lru_cache(maxsize=1)
def _probe(endpoint: str, timeout_s: float) -> bool:
    parsed = urlparse(endpoint)
    host = parsed.hostname or "huggingface.co"
    port = parsed.port or (443 if parsed.scheme != "http" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError as exc:
        logger.info("Hugging Face Hub unreachable (%s:%s: %s); working offline", host, port, exc)
        return False


def hub_reachable() -> bool:
    """Whether Hub downloads can be attempted. Never blocks longer than the connect timeout."""
    if offline_by_env():
        return False
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    timeout = positive_number("REE_HUB_CONNECT_TIMEOUT_S", 1.5)  # malformed: 1.5 s, with a warning
    with _lock:
        return _probe(endpoint, timeout)

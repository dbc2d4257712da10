"""Numeric environment variables read by library code (not only the server): a malformed value
falls back to the default with a one-line warning naming the variable, instead of silently.

The server's start-up settings (:mod:`reasoning_env.server.settings`) refuse malformed values
instead; these variables are read on import or deep inside a call (``REE_MAX_TOKENIZERS`` when
:mod:`reasoning_env.tokenization` is imported, ``REE_HUB_CONNECT_TIMEOUT_S`` when the Hub is
probed), where an error would break every user of the library for a tuning knob.
"""

from __future__ import annotations

import logging
import math
import os
from functools import lru_cache

logger = logging.getLogger(__name__)


def positive_number(var: str, default: float, *, integer: bool = False) -> float:
    """The value of ``$var`` as a finite number > 0 (a whole number when ``integer``), or
    ``default`` when it is unset or blank. A malformed value (not a number, not whole, <= 0, NaN)
    gives ``default`` and one warning (once per value) naming the variable, the value and the default.
    """
    return _parse(var, os.environ.get(var, "").strip(), default, integer)


@lru_cache(maxsize=64)
def _parse(var: str, raw: str, default: float, integer: bool) -> float:
    if not raw:
        return default
    try:
        value = int(raw.replace("_", "")) if integer else float(raw)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or value <= 0:
        what = "a whole number >= 1" if integer else "a number of seconds > 0"
        logger.warning("%s=%r is not %s; using the default %s", var, raw, what, default)
        return default
    return value

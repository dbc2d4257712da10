"""Reasoning Economics Workbench core: an OpenEnv environment that serves mixed math questions
under one shared token budget, counts tokens with the policy's tokenizer, grades answers, and
pays rewards for correctness and economy.

No torch and no UI here: ``workbench/`` and ``training/`` build on this package. Its public classes
share one prefix: ``ReasoningEconomicsEnv`` (the environment), ``ReasoningEconomicsAction`` /
``ReasoningEconomicsObservation`` / ``ReasoningEconomicsState`` (its OpenEnv models; the
reference environment's ``ReasonBudget*`` names are aliases), ``ReasoningEconomicsClient`` (the
typed client) and ``ReasoningEconomicsError`` (the base of every error, :mod:`reasoning_env.errors`). The public names
below are imported lazily (PEP 562), so ``import reasoning_env.grading`` (e.g. in a grading worker
process) does not pay for OpenEnv's import (~5 s, it pulls its web UI stack).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "ConfigError": "reasoning_env.config",
    "EnvConfig": "reasoning_env.config",
    "SourceSpec": "reasoning_env.config",
    "Question": "reasoning_env.questions",
    "HistoryEntry": "reasoning_env.models",
    "ReasoningEconomicsAction": "reasoning_env.models",
    "ReasoningEconomicsObservation": "reasoning_env.models",
    "ReasoningEconomicsState": "reasoning_env.models",
    "StepRecord": "reasoning_env.models",
    # the reference environment's names of the three models (its clients import these)
    "ReasonBudgetAction": "reasoning_env.models",
    "ReasonBudgetObservation": "reasoning_env.models",
    "ReasonBudgetState": "reasoning_env.models",
    "ReasoningEconomicsClient": "reasoning_env.client",
    "EpisodeError": "reasoning_env.env",
    "ReasoningEconomicsError": "reasoning_env.errors",
    "ReasoningEconomicsEnv": "reasoning_env.env",
    "TokenizerLoadError": "reasoning_env.tokenization",
    "get_tokenizer": "reasoning_env.tokenization",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'reasoning_env' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))

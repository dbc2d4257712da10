"""Reasoning Economics Workbench core: an OpenEnv environment that serves mixed math questions
under one shared token budget, counts tokens with the policy's tokenizer, grades answers, and
pays rewards for correctness and economy.

No torch and no UI here: ``workbench/`` and ``training/`` build on this package.
"""

__version__ = "0.1.0"

from reasoning_env.config import ConfigError, EnvConfig, SourceSpec  # noqa: E402
from reasoning_env.questions import Question  # noqa: E402
from reasoning_env.models import (  # noqa: E402
    HistoryEntry,
    ReasonBudgetAction,
    ReasonBudgetObservation,
    ReasonBudgetState,
    StepRecord,
)
from reasoning_env.env import EpisodeError, ReasoningEconomicsEnv  # noqa: E402
from reasoning_env.tokenization import TokenizerLoadError, get_tokenizer  # noqa: E402

__all__ = [
    "ConfigError",
    "EnvConfig",
    "EpisodeError",
    "HistoryEntry",
    "Question",
    "ReasonBudgetAction",
    "ReasonBudgetObservation",
    "ReasonBudgetState",
    "ReasoningEconomicsEnv",
    "SourceSpec",
    "StepRecord",
    "TokenizerLoadError",
    "get_tokenizer",
    "__version__",
]

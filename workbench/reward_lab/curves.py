"""Accuracy curves: the probability a policy answers a question correctly given the tokens it spends.

The reward lab needs them to ask what a reward *teaches*: a reward-maximising policy facing a
curve per question chooses how many tokens to spend on each. Any callable
``p(tokens: np.ndarray, difficulty: int | None, problem_type: str) -> np.ndarray`` (values in
[0, 1], one per token count) is an :data:`AccuracyCurve`, so a fitted curve or another
engineer's simulated solver can be plugged in.

The default, :class:`LogisticCurve`, is logistic in log-tokens (FIELD_NOTES section 1)::

    p(t) = sigmoid(k (ln t - ln t50(d)))  =  1 / (1 + (t50(d) / t)^k),   p(0) = 0
    t50(d) = t50_level1 * growth^(d - 1)        (tokens; d = MATH difficulty level 1..5)

with k = 2, growth = 2 (t50 doubles per level), t50_level1 = 40 tokens (t50 = 40, 80, 160, 320,
640 tokens for levels 1..5), optional ceiling ``p_max`` (default 1), and unknown difficulty
treated as level ``unknown_difficulty`` (default 2, GSM8K-like), unless ``type_difficulty`` maps
the problem type to a level.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class AccuracyCurve(Protocol):
    """``p(tokens, difficulty, problem_type) -> probabilities`` (same shape as ``tokens``)."""

    def __call__(self, tokens: np.ndarray, difficulty: Optional[int], problem_type: str) -> np.ndarray: ...


@dataclass(frozen=True)
class LogisticCurve:
    """Logistic-in-log-tokens accuracy curve (see module docstring for the formula and defaults).

    Attributes:
        k: Slope in log-tokens (2 = accuracy rises from 20% to 80% over a 4x token range).
        t50_level1: Tokens at which a level-1 question is answered correctly half the time.
        growth: Factor by which t50 grows per difficulty level.
        p_max: Ceiling (the accuracy with unlimited tokens).
        unknown_difficulty: Level used when a question has no difficulty.
        type_difficulty: Optional ``{problem_type: level}`` used when the difficulty is unknown.
    """

    k: float = 2.0
    t50_level1: float = 40.0
    growth: float = 2.0
    p_max: float = 1.0
    unknown_difficulty: float = 2.0
    type_difficulty: Mapping[str, float] = field(default_factory=dict)

    def t50(self, difficulty: Optional[float], problem_type: str = "") -> float:
        """Tokens for 50% of ``p_max`` at this difficulty (tokens)."""
        if difficulty is None or (isinstance(difficulty, float) and np.isnan(difficulty)):
            difficulty = self.type_difficulty.get(problem_type, self.unknown_difficulty)
        return float(self.t50_level1 * self.growth ** (float(difficulty) - 1.0))

    def __call__(self, tokens: np.ndarray, difficulty: Optional[int], problem_type: str = "") -> np.ndarray:
        """``p_max / (1 + (t50/t)^k)`` for each token count; 0 at 0 tokens."""
        t = np.asarray(tokens, dtype=np.float64)
        t50 = self.t50(difficulty, problem_type)
        with np.errstate(divide="ignore", over="ignore"):
            p = self.p_max / (1.0 + np.power(t50 / np.maximum(t, 0.0), self.k))
        return np.where(t > 0, p, 0.0)


DEFAULT_CURVE = LogisticCurve()

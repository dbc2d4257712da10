"""Group reward shapes: they compare the rollouts of one GRPO group (registered at import).

A *group* is the set of rollouts that answered the same question of the same episode: in a run
folder, the rows with the same ``group`` and ``step`` (members of a GRPO group replay the same
seeded episode); in TRL, the completions of the same prompt. They cannot be computed inside one
environment step: use them through :func:`reasoning_env.rewards.trl_reward_function` in training
or in the reward lab's re-scoring. Lengths are generated tokens (``raw_tokens``).

=================  ==============================================================================
kimi_length        lam = 0.5 - (n - min_n)/(max_n - min_n) (0 if all equal); correct: lam,
                   wrong: min(0, lam)                                  (Kimi Team 2025, k1.5)
shorter_better     alpha 1[correct] - beta |n - SOL|, SOL = shortest correct length in the group
                   (mean length if none is correct)                     (Yi et al. 2025)
arora_zanette      1[correct] (1 - alpha sigmoid((n - mean_c)/std_c)), mean/std over the group's
                   correct rollouts (z = 0 when std_c = 0)             (Arora & Zanette 2025)
=================  ==============================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reasoning_env.rewards.batch import GroupRewardError, RewardShape, StepBatch
from reasoning_env.rewards.registry import Param, register


def group_codes(batch: StepBatch, name: str) -> tuple[np.ndarray, int]:
    """Dense group codes ``0..G-1`` of a batch (rows with code -1 become groups of one).

    Raises:
        GroupRewardError: the batch carries no groups.
    """
    if batch.group is None:
        raise GroupRewardError(
            f"reward {name!r} is a group reward and this batch has no groups: pass group ids "
            "(re-scoring: a run with group/member columns or group_by=...; TRL: completions of the same prompt)"
        )
    g = np.asarray(batch.group, dtype=np.int64).copy()
    lone = g < 0
    if lone.any():
        base = (g.max() + 1) if (~lone).any() else 0
        g[lone] = base + np.arange(int(lone.sum()))
    _, dense = np.unique(g, return_inverse=True)
    dense = dense.reshape(-1)
    return dense, int(dense.max()) + 1 if len(dense) else 0


def group_min(codes: np.ndarray, n_groups: int, values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per-row minimum of ``values[mask]`` over the row's group (``inf`` where the group has none)."""
    out = np.full(n_groups, np.inf)
    np.minimum.at(out, codes[mask], values[mask])
    return out[codes]


def group_max(codes: np.ndarray, n_groups: int, values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per-row maximum of ``values[mask]`` over the row's group (``-inf`` where the group has none)."""
    out = np.full(n_groups, -np.inf)
    np.maximum.at(out, codes[mask], values[mask])
    return out[codes]


def group_mean_std(
    codes: np.ndarray, n_groups: int, values: np.ndarray, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row (count, mean, population std) of ``values[mask]`` over the row's group."""
    w = mask.astype(np.float64)
    cnt = np.bincount(codes, weights=w, minlength=n_groups)
    s1 = np.bincount(codes, weights=w * values, minlength=n_groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(cnt > 0, s1 / cnt, np.nan)
        dev = np.where(mask, values - mean[codes], 0.0)
        var = np.where(cnt > 0, np.bincount(codes, weights=dev * dev, minlength=n_groups) / cnt, np.nan)
    return cnt[codes], mean[codes], np.sqrt(var)[codes]


@register(
    "kimi_length",
    summary="Kimi k1.5 group length penalty: within a group, shorter than average earns up "
    "to +0.5, longer down to -0.5; wrong answers only get the negative part.",
    formula="lam = 0.5 - (n - min_n)/(max_n - min_n) over the group (0 if max_n = min_n); "
    "correct: lam; wrong: min(0, lam)",
    source="Kimi Team 2025, 'Kimi k1.5: Scaling Reinforcement Learning with LLMs' (length penalty, section 2.3.3)",
    scope="group",
    components=("kimi_length",),
    params=(),
    length="raw_tokens",
)
@dataclass(frozen=True)
class KimiLengthReward(RewardShape):
    """Kimi k1.5 length penalty (component ``kimi_length``); add it to an accuracy reward."""

    def step_batch(self, batch: StepBatch) -> dict[str, np.ndarray]:
        """``{"kimi_length": lam}`` per row (shape ``(len(batch),)``): +0.5 for the group's shortest,
        -0.5 for its longest; wrong answers keep only the negative part.

        Raises:
            GroupRewardError: the batch has no GRPO groups.
        """
        codes, ng = group_codes(batch, self.info.name)
        n = batch.raw_tokens
        allrows = np.ones(len(batch), dtype=bool)
        lo = group_min(codes, ng, n, allrows)
        hi = group_max(codes, ng, n, allrows)
        span = hi - lo
        with np.errstate(divide="ignore", invalid="ignore"):
            lam = np.where(span > 0, 0.5 - (n - lo) / span, 0.0)
        return {"kimi_length": np.where(batch.correct, lam, np.minimum(0.0, lam))}


@register(
    "shorter_better",
    summary="ShorterBetter: correctness plus a penalty on the distance to the group's shortest correct length (SOL).",
    formula="correctness = alpha 1[correct]; length_penalty = -beta |n - SOL|, SOL = min "
    "length of the group's correct rollouts, or the group's mean length if none is "
    "correct",
    source="Yi, Wang & Li 2025, 'ShorterBetter: Guiding Reasoning Models to Find Optimal "
    "Inference Length for Efficient Reasoning' (alpha 2.0, beta 0.001)",
    scope="group",
    components=("correctness", "length_penalty"),
    params=(
        Param("alpha", 2.0, "Reward of a correct answer.", min=0.0, max=5.0, step=0.1, unit="reward"),
        Param(
            "beta",
            0.001,
            "Penalty per token of distance to the sample-optimal length.",
            min=0.0,
            max=0.01,
            step=0.0001,
            unit="reward/token",
            hard_min=0.0,
        ),
    ),
    length="raw_tokens",
)
@dataclass(frozen=True)
class ShorterBetterReward(RewardShape):
    """ShorterBetter (see registered formula)."""

    alpha: float = 2.0
    beta: float = 0.001

    def sol(self, batch: StepBatch) -> np.ndarray:
        """Per-row sample-optimal length of the row's group (tokens)."""
        codes, ng = group_codes(batch, self.info.name)
        n = batch.raw_tokens
        shortest = group_min(codes, ng, n, batch.correct)
        _, mean_all, _ = group_mean_std(codes, ng, n, np.ones(len(batch), dtype=bool))
        return np.where(np.isfinite(shortest), shortest, mean_all)

    def step_batch(self, batch: StepBatch) -> dict[str, np.ndarray]:
        """``{"correctness": alpha 1[correct], "length_penalty": -beta |n - SOL|}`` per row, SOL from :meth:`sol`.

        Raises:
            GroupRewardError: the batch has no GRPO groups.
        """
        sol = self.sol(batch)
        return {
            "correctness": np.where(batch.correct, self.alpha, 0.0),
            "length_penalty": -self.beta * np.abs(batch.raw_tokens - sol),
        }


@register(
    "arora_zanette",
    summary="Efficiency-penalised correctness: a correct answer loses up to alpha as its "
    "length z-score among the group's correct answers grows.",
    formula="1[correct] * (1 - alpha * sigmoid((n - mean_c)/std_c)), mean_c/std_c over the "
    "group's correct rollouts (z = 0 if std_c = 0)",
    source="Arora & Zanette 2025, 'Training Language Models to Reason Efficiently'",
    scope="group",
    components=("arora_zanette",),
    params=(
        Param(
            "alpha",
            0.1,
            "Largest share of the correctness reward a long correct answer can lose.",
            min=0.0,
            max=1.0,
            step=0.05,
            hard_min=0.0,
            hard_max=1.0,
        ),
    ),
    length="raw_tokens",
)
@dataclass(frozen=True)
class AroraZanetteReward(RewardShape):
    """Arora & Zanette length-normalised correctness (component ``arora_zanette``)."""

    alpha: float = 0.1

    def step_batch(self, batch: StepBatch) -> dict[str, np.ndarray]:
        """``{"arora_zanette": 1[correct] (1 - alpha sigmoid(z))}`` per row, ``z`` the length
        z-score among the group's correct rows.

        Raises:
            GroupRewardError: the batch has no GRPO groups.
        """
        codes, ng = group_codes(batch, self.info.name)
        n = batch.raw_tokens
        _, mean_c, std_c = group_mean_std(codes, ng, n, batch.correct)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(batch.correct & (std_c > 0), (n - mean_c) / std_c, 0.0)
        sig = 1.0 / (1.0 + np.exp(-z))
        return {"arora_zanette": np.where(batch.correct, 1.0 - self.alpha * sig, 0.0)}

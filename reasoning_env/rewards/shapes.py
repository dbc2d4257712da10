"""Per-step reward shapes from the literature (registered at import).

All lengths are in policy-tokenizer tokens. Length shapes read ``raw_tokens`` (the generated
length, before any hard-cap clipping), as the papers measure the response; the economics family
reads ``tokens`` (what was charged to the budget).

=================  ==============================================================================
name               formula (source)
=================  ==============================================================================
accuracy           correct ? correct_reward : wrong_reward
format             boxed final answer present ? present_reward : missing_reward
repetition         max_penalty * (1 - distinct n-grams / n-grams)   (Open-R1's scalar penalty)
l1_exact           1[correct] - alpha |n_target - n|                (Aggarwal & Welleck 2025, LCPO)
l1_max             1[correct] * clip(alpha (n_target - n) + delta, 0, 1)  (idem; alpha of the official code)
dapo_overlong      0 to L_max - L_cache, linear to -1 at L_max, -1 beyond  (Yu et al. 2025, DAPO)
cosine             cosine from r_0 to r_L over [0, L_max], r_exceed at L >= L_max  (Yeo et al. 2025)
thinkprune         1[correct and n <= L]: over the token limit the answer is discarded  (Hou et al. 2025)
=================  ==============================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reasoning_env.errors import RewardSpecError
from reasoning_env.rewards.batch import RewardShape, StepBatch
from reasoning_env.rewards.registry import Param, register

TARGET_CHOICES = ("fair_share", "remaining_share", "fixed")


def length_target(b: StepBatch, target: str, n_target: float) -> np.ndarray:
    """Per-row target length (tokens): the fair share ``B/N``, the remaining budget per
    remaining question ``max(0, B - spent_before)/(N - i)``, or the fixed ``n_target``."""
    if target == "fair_share":
        return b.fair_share
    if target == "remaining_share":
        return np.maximum(0.0, b.remaining_before) / b.questions_left
    return np.full(len(b), float(n_target))


_TARGET_PARAMS = (
    Param(
        "target",
        "fair_share",
        "Target length per question: the episode's fair share B/N, the remaining "
        "budget per remaining question, or the fixed n_target (LCPO puts it in the "
        "prompt).",
        kind="choice",
        choices=TARGET_CHOICES,
    ),
    Param(
        "n_target",
        512.0,
        "Target length when target='fixed'.",
        min=16.0,
        max=8192.0,
        step=16.0,
        unit="tokens",
        hard_min=0.0,
    ),
)


@register(
    "accuracy",
    summary="Pays correctness only.",
    formula="correct ? correct_reward : wrong_reward",
    source="Outcome reward of RLVR (e.g. DeepSeek-R1, Guo et al. 2025; Atropos/TRL accuracy reward)",
    scope="step",
    components=("accuracy",),
    params=(
        Param("correct_reward", 1.0, "Reward of a correct answer.", min=0.0, max=2.0, step=0.05, unit="reward"),
        Param(
            "wrong_reward", 0.0, "Reward of a wrong or missing answer.", min=-1.0, max=1.0, step=0.05, unit="reward"
        ),
    ),
)
@dataclass(frozen=True)
class AccuracyReward(RewardShape):
    """``correct ? correct_reward : wrong_reward`` (component ``accuracy``)."""

    correct_reward: float = 1.0
    wrong_reward: float = 0.0

    def step_batch(self, batch: StepBatch) -> dict[str, np.ndarray]:
        """``{"accuracy": correct_reward or wrong_reward}`` per step, an array of shape ``(len(batch),)``."""
        return {"accuracy": np.where(batch.correct, self.correct_reward, self.wrong_reward).astype(np.float64)}


def has_boxed(text: str) -> float:
    """1.0 if ``text`` (after removing ``<think>`` spans) ends its answer in a complete ``\\boxed{}``."""
    from reasoning_env.grading.extract import last_boxed, strip_think

    return 1.0 if last_boxed(strip_think(text)) is not None else 0.0


@register(
    "format",
    summary="Pays for a final answer in \\boxed{} (or, with check='answer', for any extracted final answer).",
    formula="present ? present_reward : missing_reward; present = a complete \\boxed{...} "
    "outside <think> (check='boxed') or the grader extracted an answer "
    "(check='answer')",
    source="Format reward of RLVR recipes (DeepSeek-R1, Guo et al. 2025; Open-R1 format reward)",
    scope="step",
    components=("format",),
    params=(
        Param(
            "present_reward",
            1.0,
            "Reward when the answer format is present.",
            min=0.0,
            max=1.0,
            step=0.05,
            unit="reward",
        ),
        Param("missing_reward", 0.0, "Reward when it is missing.", min=-1.0, max=0.0, step=0.05, unit="reward"),
        Param(
            "check",
            "boxed",
            "'boxed': look for a complete \\boxed{} in the response text; 'answer': use "
            "the grader's has_answer verdict (no text needed).",
            kind="choice",
            choices=("boxed", "answer"),
        ),
    ),
    needs_text=True,
)
@dataclass(frozen=True)
class FormatReward(RewardShape):
    """Format reward (component ``format``). Without response texts (``batch.response is None``)
    the grader's ``has_answer`` verdict stands in for the boxed check."""

    present_reward: float = 1.0
    missing_reward: float = 0.0
    check: str = "boxed"

    def step_batch(self, batch: StepBatch) -> dict[str, np.ndarray]:
        """``{"format": present_reward or missing_reward}`` per step (shape ``(len(batch),)``), by the ``check``."""
        if self.check == "boxed" and batch.response is not None:
            present = batch.text_feature("has_boxed", has_boxed) > 0
        else:
            present = batch.has_answer
        return {"format": np.where(present, self.present_reward, self.missing_reward).astype(np.float64)}


def ngram_repetition(text: str, ngram_size: int) -> float:
    """Fraction of repeated word n-grams: ``1 - distinct / total`` over lower-cased whitespace
    words; 0.0 when the text has fewer than ``ngram_size`` words."""
    words = text.lower().split()
    total = len(words) - ngram_size + 1
    if total <= 0:
        return 0.0
    distinct = len(set(zip(*(words[i:] for i in range(ngram_size)))))
    return 1.0 - distinct / total


@register(
    "repetition",
    summary="Penalises repeated word n-grams in the response.",
    formula="max_penalty * (1 - distinct n-grams / total n-grams), word n-grams of size "
    "ngram_size (0 for texts shorter than one n-gram)",
    source=(
        "Open-R1's repetition penalty (get_repetition_penalty_reward: one scalar per "
        "response from the share of repeated "
        "lower-cased word n-grams), which cites Yeo et al. 2025, 'Demystifying Long "
        "Chain-of-Thought Reasoning in LLMs', "
        "App. C.2. Not the penalty of Yeo et al.'s experiments, which is dense and token-level (-0.05 per token of a "
        "repeated 40-gram, on the tokens that repeat)"
    ),
    scope="step",
    components=("repetition",),
    params=(
        Param("ngram_size", 3, "Words per n-gram.", kind="int", min=1, max=10, step=1, hard_min=1),
        Param(
            "max_penalty",
            -1.0,
            "Penalty when every n-gram repeats (<= 0).",
            min=-2.0,
            max=0.0,
            step=0.05,
            unit="reward",
            hard_max=0.0,
        ),
    ),
    needs_text=True,
)
@dataclass(frozen=True)
class RepetitionReward(RewardShape):
    """N-gram repetition penalty (component ``repetition``); 0 when texts are unavailable."""

    ngram_size: int = 3
    max_penalty: float = -1.0

    def step_batch(self, batch: StepBatch) -> dict[str, np.ndarray]:
        """``{"repetition": max_penalty * repeated n-gram share}`` per step, shape ``(len(batch),)``
        (0 without texts)."""
        if batch.response is None:
            return {"repetition": np.zeros(len(batch))}
        n = self.ngram_size
        frac = batch.text_feature(f"ngram_repetition_{n}", lambda t: ngram_repetition(t, n))
        return {"repetition": self.max_penalty * frac}


@register(
    "l1_exact",
    summary="LCPO L1-Exact: correctness minus a penalty on the distance to a target length.",
    formula="correctness = 1[correct]; length_penalty = -alpha * |n_target - n|, n = generated tokens (raw_tokens)",
    source="Aggarwal & Welleck 2025, 'L1: Controlling How Long A Reasoning Model Thinks "
    "With Reinforcement Learning' (LCPO-Exact, alpha = 0.0003)",
    scope="step",
    components=("correctness", "length_penalty"),
    params=(
        Param(
            "alpha",
            0.0003,
            "Penalty per token of distance to the target.",
            min=0.0,
            max=0.005,
            step=0.0001,
            unit="reward/token",
            hard_min=0.0,
        ),
    )
    + _TARGET_PARAMS,
    length="raw_tokens",
)
@dataclass(frozen=True)
class L1ExactReward(RewardShape):
    """L1-Exact (see registered formula)."""

    alpha: float = 0.0003
    target: str = "fair_share"
    n_target: float = 512.0

    def step_batch(self, batch: StepBatch) -> dict[str, np.ndarray]:
        """``{"correctness": 1[correct], "length_penalty": -alpha |n_target - n|}`` per step, ``n``
        the generated tokens."""
        tgt = length_target(batch, self.target, self.n_target)
        return {
            "correctness": batch.correct.astype(np.float64),
            "length_penalty": -self.alpha * np.abs(tgt - batch.raw_tokens),
        }


@register(
    "l1_max",
    summary="LCPO L1-Max: correctness scaled down as the length exceeds a budget (soft cap).",
    formula="1[correct] * clip(alpha * (n_target - n) + delta, 0, 1), n = generated tokens (raw_tokens)",
    source=(
        "Aggarwal & Welleck 2025, 'L1: Controlling How Long A Reasoning Model Thinks With Reinforcement Learning' "
        "(LCPO-Max; the formula of the paper). alpha = 0.001, delta = 0.5 are the official code's: its Max reward is "
        "(clip(a (n_target - n), -1, 1) + 1) / 2 with a = 0.002, i.e. slope a / 2 = 0.001 per token around 0.5 "
        "(the paper's alpha = 0.0003 is L1-Exact's)"
    ),
    scope="step",
    components=("l1_max",),
    params=(
        Param(
            "alpha",
            0.001,
            "Slope per token of slack below the target.",
            min=0.0,
            max=0.005,
            step=0.0001,
            unit="reward/token",
            hard_min=0.0,
        ),
        Param(
            "delta",
            0.5,
            "Value of a correct answer exactly at the target.",
            min=0.0,
            max=1.0,
            step=0.05,
            unit="reward",
        ),
    )
    + _TARGET_PARAMS,
    length="raw_tokens",
)
@dataclass(frozen=True)
class L1MaxReward(RewardShape):
    """L1-Max (see registered formula)."""

    alpha: float = 0.001
    delta: float = 0.5
    target: str = "fair_share"
    n_target: float = 512.0

    def step_batch(self, batch: StepBatch) -> dict[str, np.ndarray]:
        """``{"l1_max": 1[correct] * clip(alpha (n_target - n) + delta, 0, 1)}`` per step, ``n`` the
        generated tokens."""
        tgt = length_target(batch, self.target, self.n_target)
        scale = np.clip(self.alpha * (tgt - batch.raw_tokens) + self.delta, 0.0, 1.0)
        return {"l1_max": np.where(batch.correct, scale, 0.0)}


@register(
    "dapo_overlong",
    summary="DAPO soft overlong punishment: zero up to L_max - L_cache, then linear down to -1 at L_max, -1 beyond.",
    formula="0 if n <= L_max - L_cache; ((L_max - L_cache) - n) / L_cache if L_max - "
    "L_cache < n <= L_max; -1 if n > L_max (n = raw_tokens)",
    source="Yu et al. 2025, 'DAPO: An Open-Source LLM Reinforcement Learning System at "
    "Scale' (soft overlong punishment; L_max 20480, L_cache 4096 there)",
    scope="step",
    components=("dapo_overlong",),
    params=(
        Param(
            "l_max",
            2048.0,
            "Length at which the penalty reaches -1 (the generation cap).",
            min=128.0,
            max=32768.0,
            step=64.0,
            unit="tokens",
            hard_min=1.0,
        ),
        Param(
            "l_cache",
            512.0,
            "Width of the linear ramp before l_max (0 = a hard step).",
            min=0.0,
            max=8192.0,
            step=64.0,
            unit="tokens",
            hard_min=0.0,
        ),
    ),
    length="raw_tokens",
)
@dataclass(frozen=True)
class DapoOverlongReward(RewardShape):
    """DAPO soft overlong punishment (see registered formula). Requires ``l_cache <= l_max``."""

    l_max: float = 2048.0
    l_cache: float = 512.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.l_cache > self.l_max:
            raise RewardSpecError(
                f"reward 'dapo_overlong': l_cache ({self.l_cache}) must not exceed l_max ({self.l_max})"
            )

    def step_batch(self, batch: StepBatch) -> dict[str, np.ndarray]:
        """``{"dapo_overlong": 0, a linear ramp to -1, or -1}`` per step by the generated length (see the formula)."""
        n = batch.raw_tokens
        start = self.l_max - self.l_cache
        if self.l_cache > 0:
            ramp = (start - n) / self.l_cache
        else:
            ramp = np.zeros(len(batch))
        out = np.where(n <= start, 0.0, np.where(n <= self.l_max, ramp, -1.0))
        return {"dapo_overlong": out}


@register(
    "cosine",
    summary="Cosine length scaling: short correct answers earn most, short wrong answers "
    "are punished most (so wrong answers are pushed to think longer); hitting the "
    "limit earns r_exceed.",
    formula=(
        "n >= l_max: r_exceed; else r = r_L + (r_0 - r_L) (1 + cos(pi n / l_max)) / 2 with "
        "(r_0, r_L) = (r_correct_0, r_correct_L) if correct else (r_wrong_0, r_wrong_L); n = raw_tokens"
    ),
    source="Yeo et al. 2025, 'Demystifying Long Chain-of-Thought Reasoning in LLMs' "
    "(cosine reward: correct +2 -> +1, wrong -10 -> 0, exceed -10)",
    scope="step",
    components=("cosine",),
    params=(
        Param(
            "l_max",
            2048.0,
            "Length scale of the cosine and the limit (the generation cap).",
            min=128.0,
            max=32768.0,
            step=64.0,
            unit="tokens",
            hard_min=1.0,
        ),
        Param("r_correct_0", 2.0, "Correct answer at length 0.", min=0.0, max=5.0, step=0.1, unit="reward"),
        Param("r_correct_L", 1.0, "Correct answer at length l_max.", min=0.0, max=5.0, step=0.1, unit="reward"),
        Param("r_wrong_0", -10.0, "Wrong answer at length 0.", min=-20.0, max=0.0, step=0.5, unit="reward"),
        Param("r_wrong_L", 0.0, "Wrong answer at length l_max.", min=-20.0, max=5.0, step=0.5, unit="reward"),
        Param(
            "r_exceed", -10.0, "Response that reaches l_max (truncated).", min=-20.0, max=0.0, step=0.5, unit="reward"
        ),
    ),
    length="raw_tokens",
)
@dataclass(frozen=True)
class CosineReward(RewardShape):
    """Cosine length-scaled reward (see registered formula)."""

    l_max: float = 2048.0
    r_correct_0: float = 2.0
    r_correct_L: float = 1.0
    r_wrong_0: float = -10.0
    r_wrong_L: float = 0.0
    r_exceed: float = -10.0

    def step_batch(self, batch: StepBatch) -> dict[str, np.ndarray]:
        """``{"cosine": the cosine-scaled reward, or r_exceed at l_max}`` per step, ``n`` the generated tokens."""
        n = batch.raw_tokens
        r0 = np.where(batch.correct, self.r_correct_0, self.r_wrong_0)
        rl = np.where(batch.correct, self.r_correct_L, self.r_wrong_L)
        cos = (1.0 + np.cos(np.pi * np.minimum(n, self.l_max) / self.l_max)) / 2.0
        value = rl + (r0 - rl) * cos
        return {"cosine": np.where(n >= self.l_max, self.r_exceed, value)}


LIMIT_CHOICES = ("fixed", "fair_share", "remaining_share", "remaining")


def length_limit(b: StepBatch, limit: str, n_limit: float, scale: float) -> np.ndarray:
    """Per-row token limit (tokens): ``n_limit`` (``"fixed"``), or ``scale`` times the fair share
    ``B/N``, the remaining budget per remaining question, or the whole remaining budget."""
    if limit == "fixed":
        return np.full(len(b), float(n_limit))
    if limit == "remaining":
        return scale * np.maximum(0.0, b.remaining_before)
    return scale * length_target(b, limit, n_limit)


@register(
    "thinkprune",
    summary="ThinkPrune's length-limit reward: the outcome reward, but a response longer "
    "than the token limit is discarded and earns 0. The limit can follow the "
    "episode budget (fair share, remaining share or remaining budget).",
    formula=(
        "n <= L: (correct ? correct_reward : wrong_reward); n > L: 0 (unfinished thoughts and answers discarded); "
        "L = n_limit (limit='fixed') or scale x [B/N | remaining/(N - i) | remaining] "
        "(limit='fair_share' | 'remaining_share' | 'remaining'); "
        "n = generated tokens (raw_tokens)"
    ),
    source=(
        "Hou et al. 2025, 'ThinkPrune: Pruning Long Chain-of-Thought of LLMs via "
        "Reinforcement Learning' (arXiv 2504.01296): "
        "RL with a token limit 'beyond which any unfinished thoughts and answers will "
        "be discarded, resulting in a zero "
        "reward', tightened over several rounds (iterative pruning). The budget-following limits are this project's "
        "adaptation to a shared episode budget"
    ),
    scope="step",
    components=("thinkprune",),
    params=(
        Param(
            "limit",
            "remaining_share",
            "What the token limit is: fixed (n_limit), or scale x the fair share, the "
            "remaining budget per remaining question, or the whole remaining budget.",
            kind="choice",
            choices=LIMIT_CHOICES,
        ),
        Param(
            "n_limit",
            2048.0,
            "The limit when limit='fixed' (ThinkPrune's rounds tighten it, e.g. 4k -> 3k -> 2k).",
            min=16.0,
            max=16384.0,
            step=16.0,
            unit="tokens",
            hard_min=1.0,
        ),
        Param(
            "scale",
            1.0,
            "Multiplier of a budget-following limit (below 1 tightens it, as a later pruning round would).",
            min=0.1,
            max=4.0,
            step=0.05,
            unit="shares",
            hard_min=1e-6,
        ),
        Param(
            "correct_reward",
            1.0,
            "Reward of a correct answer within the limit.",
            min=0.0,
            max=2.0,
            step=0.05,
            unit="reward",
        ),
        Param(
            "wrong_reward",
            0.0,
            "Reward of a wrong answer within the limit.",
            min=-1.0,
            max=1.0,
            step=0.05,
            unit="reward",
        ),
    ),
    length="raw_tokens",
)
@dataclass(frozen=True)
class ThinkPruneReward(RewardShape):
    """ThinkPrune length-limit reward (see registered formula)."""

    limit: str = "remaining_share"
    n_limit: float = 2048.0
    scale: float = 1.0
    correct_reward: float = 1.0
    wrong_reward: float = 0.0

    def step_batch(self, batch: StepBatch) -> dict[str, np.ndarray]:
        """``{"thinkprune": the outcome reward within the limit, else 0}`` per step (shape ``(len(batch),)``)."""
        within = batch.raw_tokens <= length_limit(batch, self.limit, self.n_limit, self.scale)
        outcome = np.where(batch.correct, self.correct_reward, self.wrong_reward)
        return {"thinkprune": np.where(within, outcome, 0.0).astype(np.float64)}

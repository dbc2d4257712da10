"""The default reward (``economics``), the reference environment's seed reward (``reference``), and
the budget-aware variant.

Per step (``fair_share = total_budget / num_questions``, ``r = tokens / fair_share``, tokens =
tokens charged to the budget):

- ``correctness``: ``correct_reward`` (+1) if correct else ``wrong_reward`` (-0.1);
- ``efficiency_bonus``: ``gamma * (1 - r)`` if correct else 0 (negative when ``r > 1``, as in the seed);
- ``cost_penalty``: ``-beta * max(0, r - 1)``;
- ``overspend_penalty`` (soft mode only): ``-soft_overspend_penalty * overspend / fair_share`` where
  ``overspend = max(0, spent_after_step - total_budget)`` is the *cumulative* overspend (seed semantics:
  once over budget, every further step pays for the whole overspend so far).

On the final step, ``episode_bonus``: ``lambda_ep * accuracy * max(0, 1 - |spent/budget - target_utilisation|)``
with ``accuracy = num_correct / num_questions``; and ``forfeit``: ``unasked_reward`` per question never
asked (a hard-cap episode ran dry before it), present only when ``unasked_reward`` is non-zero.

The two registered presets of this one formula differ in two defaults:

- ``economics`` (the default everywhere): ``unasked_reward = -0.1`` (= ``wrong_reward``), so a question
  left unasked costs what a wrong answer costs and running dry never pays more than answering; and
  ``beta = 0``: no cost penalty, because that term is paid whether or not the answer is right, so for a
  weak model (a few percent right) it outweighs the expected gain of giving a question the tokens it
  needs, and the reward-optimal plan spreads tokens evenly where the accuracy-optimal plan concentrates
  them. The efficiency bonus (paid only on right answers) stays. Under the shipped
  qwen2.5-coder-0.5b curve set its reward-optimal allocation is within 0.02% of the accuracy oracle
  at budgets 1,000-5,000 (docs/rewards.md has the table and the command).
- ``reference``: the ReasoningEconomicsEnv v2 seed reward exactly (``beta = 0.05``, ``unasked_reward =
  0``: a question never asked pays nothing, more than a wrong answer's -0.1, so a reward-maximising plan
  may prefer to run dry). Its parameters are its own: the EnvConfig's flat weights do not fill them.

Source: the ReasoningEconomicsEnv v2 contract (README "Environment contract").

:class:`BudgetAwareReward` keeps every term (and the defaults of ``economics``) but measures each step
against its own share instead of the uniform fair share: the remaining budget per remaining question, a
difficulty-weighted fair share, or both, so that spending more on a harder question is not charged as waste.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from reasoning_env.renamed import accept_renamed_keywords
from reasoning_env.rewards.base import EpisodeContext, StepContext
from reasoning_env.rewards.batch import EpisodeBatch, RewardShape, StepBatch
from reasoning_env.rewards.registry import Param, register

STEP_COMPONENTS = ("correctness", "efficiency_bonus", "cost_penalty", "overspend_penalty")
EPISODE_COMPONENTS = ("episode_bonus",)
COMPONENTS = STEP_COMPONENTS + EPISODE_COMPONENTS

SEED_SOURCE = "ReasoningEconomicsEnv v2 contract (seed reward; README 'Environment contract')"
DEFAULT_SOURCE = (
    SEED_SOURCE + "; defaults beta 0 and unasked_reward -0.1: this project (docs/rewards.md, "
    "'The default reward': the seed's optimum ran dry under a weak model's curves)"
)

ECONOMICS_PARAMS = (
    Param("correct_reward", 1.0, "Correctness term for a correct answer.", min=0.0, max=2.0, step=0.05, unit="reward"),
    Param(
        "wrong_reward",
        -0.1,
        "Correctness term for a wrong or missing answer.",
        min=-1.0,
        max=0.5,
        step=0.05,
        unit="reward",
    ),
    Param(
        "beta",
        0.0,
        "Cost penalty weight: -beta * max(0, tokens/share - 1) (paid right or wrong; 0 by default, the "
        "seed's 0.05 in 'reference').",
        min=0.0,
        max=1.0,
        step=0.01,
        hard_min=0.0,
    ),
    Param(
        "gamma",
        0.1,
        "Efficiency bonus weight for correct answers: gamma * (1 - tokens/share).",
        min=0.0,
        max=1.0,
        step=0.01,
        hard_min=0.0,
    ),
    Param(
        "soft_overspend_penalty",
        0.25,
        "Soft mode: penalty per fair share of cumulative overspend.",
        min=0.0,
        max=2.0,
        step=0.05,
        hard_min=0.0,
    ),
    Param("lambda_ep", 0.5, "Episode bonus weight (final step).", min=0.0, max=2.0, step=0.05, hard_min=0.0),
    Param(
        "unasked_reward",
        -0.1,
        "Reward per question never asked because the budget ran dry (paid on the final step as 'forfeit'; "
        "default -0.1 = wrong_reward's default, a forfeit costs what a wrong answer costs; 0 = the seed, "
        "which pays running dry more than answering wrong).",
        min=-1.0,
        max=0.5,
        step=0.05,
        unit="reward",
    ),
    Param(
        "target_utilisation",
        0.9,
        "Budget utilisation (spent/budget) the episode bonus peaks at.",
        min=0.1,
        max=1.5,
        step=0.05,
        unit="fraction",
        hard_min=1e-9,
        hard_max=2.0,
    ),
)


def _economics_step(rw, b: StepBatch, share: np.ndarray) -> dict[str, np.ndarray]:
    """The seed's step terms measured against ``share`` (tokens, per row); vectorised."""
    fair = b.fair_share
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(share > 0, b.tokens / share, 0.0)
        ov = b.overspend_tokens
        overspend = np.where((~b.hard_cap_mode) & (fair > 0) & (ov > 0), -rw.soft_overspend_penalty * ov / fair, 0.0)
    return {
        "correctness": np.where(b.correct, rw.correct_reward, rw.wrong_reward).astype(np.float64),
        "efficiency_bonus": np.where(b.correct & (share > 0), rw.gamma * (1.0 - ratio), 0.0),
        "cost_penalty": -rw.beta * np.maximum(0.0, ratio - 1.0),
        "overspend_penalty": overspend,
    }


def _economics_episode(rw, e: EpisodeBatch) -> dict[str, np.ndarray]:
    ok = (e.num_questions > 0) & (e.total_budget > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        accuracy = e.num_correct / e.num_questions
        util = np.maximum(0.0, 1.0 - np.abs(e.total_spent / e.total_budget - rw.target_utilisation))
        bonus = rw.lambda_ep * accuracy * util
    out = {"episode_bonus": np.where(ok, bonus, 0.0)}
    unasked_reward = float(getattr(rw, "unasked_reward", 0.0))
    if unasked_reward != 0.0:  # the seed pays nothing for a forfeit: no column unless asked for
        out["forfeit"] = unasked_reward * np.maximum(0.0, e.num_questions - e.num_answered)
    return out


ECONOMICS_FORMULA = (
    "step: (correct ? correct_reward : wrong_reward) + [correct] gamma (1 - t/F) - beta max(0, t/F - 1) "
    "- [soft] soft_overspend_penalty * max(0, spent_after - B)/F,  F = B/N, t = charged tokens; "
    "final step: + lambda_ep * (correct/N) * max(0, 1 - |spent/B - target_utilisation|) "
    "+ unasked_reward * (N - asked)"
)

#: The seed's defaults where they differ from the default reward's (the ``reference`` preset), with their descriptions.
SEED_DEFAULTS = {
    "beta": (0.05, "Cost penalty weight: -beta * max(0, tokens/share - 1) (paid right or wrong)."),
    "unasked_reward": (
        0.0,
        "Reward per question never asked because the budget ran dry (paid on the final step as 'forfeit'; "
        "the seed's 0 pays running dry more than a wrong answer).",
    ),
}

REFERENCE_PARAMS = tuple(
    replace(p, default=SEED_DEFAULTS[p.name][0], description=SEED_DEFAULTS[p.name][1])
    if p.name in SEED_DEFAULTS
    else p
    for p in ECONOMICS_PARAMS
)


@register(
    "economics",
    summary="The default reward: correctness, efficiency vs the fair share (right answers), a question "
    "never asked charged like a wrong answer, soft-mode overspend penalty, episode bonus (the seed's "
    "formula; the seed's exact defaults are 'reference').",
    formula=ECONOMICS_FORMULA,
    source=DEFAULT_SOURCE,
    scope="step+episode",
    components=COMPONENTS,
    params=ECONOMICS_PARAMS,
    length="tokens",
)
@accept_renamed_keywords
@dataclass(frozen=True)
class EconomicsReward(RewardShape):
    """The default reward: the seed's formula with ``beta = 0`` and ``unasked_reward = -0.1`` (see the
    module docstring)."""

    correct_reward: float = 1.0
    wrong_reward: float = -0.1
    beta: float = 0.0
    gamma: float = 0.1
    soft_overspend_penalty: float = 0.25
    lambda_ep: float = 0.5
    target_utilisation: float = 0.9
    unasked_reward: float = -0.1

    def step_components(self, ctx: StepContext) -> dict[str, float]:
        """Signed per-step components (sum = step reward before any episode bonus)."""
        fair = ctx.fair_share
        ratio = ctx.tokens / fair if fair > 0 else 0.0
        overspend = 0.0
        if not ctx.hard_cap_mode and fair > 0 and ctx.overspend_tokens > 0:
            overspend = -self.soft_overspend_penalty * ctx.overspend_tokens / fair
        return {
            "correctness": self.correct_reward if ctx.correct else self.wrong_reward,
            "efficiency_bonus": self.gamma * (1.0 - ratio) if (ctx.correct and fair > 0) else 0.0,
            "cost_penalty": -self.beta * max(0.0, ratio - 1.0),
            "overspend_penalty": overspend,
        }

    def episode_components(self, ctx: EpisodeContext) -> dict[str, float]:
        """``{"episode_bonus": ...}`` paid on the final step (and ``"forfeit"`` when
        ``unasked_reward`` is non-zero)."""
        out: dict[str, float] = {"episode_bonus": 0.0}
        if ctx.num_questions > 0 and ctx.total_budget > 0:
            accuracy = ctx.num_correct / ctx.num_questions
            utilisation_score = max(0.0, 1.0 - abs(ctx.total_spent / ctx.total_budget - self.target_utilisation))
            out["episode_bonus"] = self.lambda_ep * accuracy * utilisation_score
        if self.unasked_reward != 0.0:
            out["forfeit"] = self.unasked_reward * max(0, ctx.num_questions - ctx.num_answered)
        return out

    def step_batch(self, batch: StepBatch) -> dict[str, np.ndarray]:
        """Vectorised :meth:`step_components` (same formula, same operation order)."""
        return _economics_step(self, batch, batch.fair_share)

    def episode_batch(self, batch: EpisodeBatch) -> dict[str, np.ndarray]:
        """Vectorised :meth:`episode_components`."""
        return _economics_episode(self, batch)


@register(
    "reference",
    summary="The reference environment's seed reward, exactly (ReasoningEconomicsEnv v2): economics with "
    "beta 0.05 and nothing paid for a question never asked.",
    formula=ECONOMICS_FORMULA,
    source=SEED_SOURCE,
    scope="step+episode",
    components=COMPONENTS,
    params=REFERENCE_PARAMS,
    length="tokens",
)
@accept_renamed_keywords
@dataclass(frozen=True)
class ReferenceReward(EconomicsReward):
    """The seed reward of the v2 contract: :class:`EconomicsReward`'s formulas with the seed's defaults."""

    beta: float = 0.05
    unasked_reward: float = 0.0


#: Difficulty levels the difficulty weights are normalised over (the MATH scale).
DIFFICULTY_LEVELS = (1, 2, 3, 4, 5)


def difficulty_weight(difficulty: np.ndarray, growth: float) -> np.ndarray:
    """Relative share of a question of ``difficulty``: ``growth**(d - 3) / mean_{l=1..5} growth**(l - 3)``.

    The weights of levels 1..5 average to 1, so an even mix of levels shares the budget out in
    full; unknown difficulty (``NaN``) gets weight 1 (the plain fair share).
    """
    d = np.asarray(difficulty, dtype=np.float64)
    mean_w = float(np.mean([growth ** (lvl - 3) for lvl in DIFFICULTY_LEVELS]))
    with np.errstate(invalid="ignore"):
        w = np.power(growth, d - 3.0) / mean_w
    return np.where(np.isnan(d), 1.0, w)


@register(
    "budget_aware",
    summary="The default reward (economics) measured against each question's own share (remaining budget "
    "per remaining question and/or difficulty-weighted), so harder questions may "
    "spend more.",
    formula=(
        "as economics with F replaced by the step's share s in the efficiency and cost terms: "
        "share='remaining': s = max(min_share*F, (B - spent_before)/(N - i)); "
        "share='difficulty': s = F * w(d), w(d) = growth^(d-3) / mean_{l=1..5} growth^(l-3) (unknown d: w = 1); "
        "share='both': s = max(min_share*F, (B - spent_before)/(N - i)) * w(d). "
        "Overspend penalty and episode bonus as economics."
    ),
    source=SEED_SOURCE + "; difficulty-weighted share: this project (a level-d question is given "
    "growth^(d-3) fair shares, 2 by default: the tokens a logistic solver needs "
    "for even odds double per MATH level, as the default curves of "
    "reasoning_env.policies.curves assume)",
    scope="step+episode",
    components=COMPONENTS,
    params=ECONOMICS_PARAMS
    + (
        Param(
            "share",
            "remaining",
            "What each step is measured against: the remaining budget per remaining "
            "question, a difficulty-weighted fair share, or both.",
            kind="choice",
            choices=("remaining", "difficulty", "both"),
        ),
        Param(
            "growth",
            2.0,
            "Share ratio between consecutive difficulty levels (2 = doubling per level).",
            min=1.0,
            max=4.0,
            step=0.1,
            hard_min=1e-6,
        ),
        Param(
            "min_share",
            0.1,
            "Floor of the remaining-budget share, in fair shares (when the budget is nearly gone).",
            min=0.01,
            max=1.0,
            step=0.01,
            unit="fair shares",
            hard_min=1e-6,
        ),
    ),
    length="tokens",
)
@accept_renamed_keywords
@dataclass(frozen=True)
class BudgetAwareReward(RewardShape):
    """Economics reward with a per-question share (see the registered formula)."""

    correct_reward: float = 1.0
    wrong_reward: float = -0.1
    beta: float = 0.0
    gamma: float = 0.1
    soft_overspend_penalty: float = 0.25
    lambda_ep: float = 0.5
    target_utilisation: float = 0.9
    unasked_reward: float = -0.1
    share: str = "remaining"
    growth: float = 2.0
    min_share: float = 0.1

    def shares(self, b: StepBatch) -> np.ndarray:
        """Each step's share (tokens)."""
        fair = b.fair_share
        if self.share in ("remaining", "both"):
            base = np.maximum(self.min_share * fair, b.remaining_before / b.questions_left)
        else:
            base = fair
        if self.share in ("difficulty", "both"):
            base = base * difficulty_weight(b.difficulty, self.growth)
        return base

    def step_batch(self, batch: StepBatch) -> dict[str, np.ndarray]:
        """Economics step terms against :meth:`shares`."""
        return _economics_step(self, batch, self.shares(batch))

    def episode_batch(self, batch: EpisodeBatch) -> dict[str, np.ndarray]:
        """The seed's episode bonus."""
        return _economics_episode(self, batch)

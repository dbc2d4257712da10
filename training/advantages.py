"""Per-question advantages and the group-signal test of dynamic sampling (pure functions, no torch).

**Per-question credit.** By default GRPO gives one advantage per episode, broadcast over every model
turn, so question 1's tokens are credited with question 2's outcome. With ``--advantage question`` each
answer (model turn ``k`` of episode ``e``) is credited with

    credit[e][k] = own[e][k] + episode_terms[e]

- ``own[e][k]``: the environment's step reward of the question that turn answered, without the
  episode-level components the environment adds on the final step (``episode_bonus``, ``forfeit`` for
  questions left unasked, ...: :func:`episode_component_names`);
- ``episode_terms[e]``: everything else the episode was paid: its reward minus the sum of ``own``
  (the episode-level components, and the step rewards of questions forfeited because the context was
  full, which no model turn answered). It is **added** to every turn: running dry or finishing well
  is a consequence of every answer's spending.

So ``sum_k own[e][k] + episode_terms[e]`` is the episode reward exactly.

**Normalisation per question index within the group** (:func:`question_advantages`): the members of
a GRPO group play the same seeded episode, so turn ``k`` of every member answers the same question;
``A[e][k] = (credit[e][k] - mean_k) / scale`` with ``mean_k`` the mean over the group's members that
answered question ``k`` (a member that ran dry before it has no turn there). ``scale``: the standard
deviation (``ddof=1``, as TRL's ``nanstd``) of the ``(group, k)`` credits plus 1e-4 (``group``), of every
credit of the batch plus 1e-4 (``batch``, as TRL's ``scale_rewards="batch"`` on rewards), or 1 (``none``).
:func:`token_advantages` spreads them over each turn's tokens: a ``(B, T)`` array TRL 1.16's loss takes
in place of its ``(B,)`` advantages (environment tokens and padding get 0; they are masked anyway).

**Signal** (:func:`group_has_signal`): a group teaches nothing when every member would get advantage
0: its episode rewards are equal (``episode``), or every question index's credits are equal among the
members that answered it (``question``); "equal" means within :data:`TIE_TOLERANCE`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "ADVANTAGE_MODES",
    "SCALE_MODES",
    "TIE_TOLERANCE",
    "episode_component_names",
    "group_has_signal",
    "question_advantages",
    "token_advantages",
    "turn_credits",
]

#: ``--advantage``: one advantage per episode (TRL's) or one per answered question.
ADVANTAGE_MODES = ("episode", "question")
#: TRL's ``scale_rewards`` values.
SCALE_MODES = ("group", "batch", "none")
#: Rewards closer than this are a tie (a one-token cost gap at a 1,000-token share is 5e-5).
TIE_TOLERANCE = 1e-6
#: TRL's epsilon in ``(r - mean) / (std + eps)``.
STD_EPS = 1e-4


def episode_component_names(reward: object, hard_cap_mode: bool = True) -> tuple[str, ...]:
    """The component names ``reward`` adds on an episode's final step only (its episode-level terms).

    Read off one probe episode, as :mod:`reasoning_env.rewards.rubric` does: names returned by
    ``episode_components`` that ``step_components`` does not return. ``reward`` is the environment's
    reward object (``reasoning_env.rewards.build_reward(config)``); rewards are pure, so probing has no effect.
    """
    from reasoning_env.rewards.rubric import _component_keys

    return tuple(_component_keys(reward, hard_cap_mode)[1])


def turn_credits(
    step_rewards: Sequence[float],
    step_components: Sequence[dict],
    num_answered: int,
    episode_reward: float,
    episode_names: Sequence[str],
) -> list[float]:
    """One episode's per-turn credits (module docstring).

    Args:
        step_rewards: The environment's reward of every step, in order (answered questions first,
            then forfeits).
        step_components: Each step's signed components (same length).
        num_answered: Steps answered by a model turn (the first ``num_answered``); the rest are forfeits.
        episode_reward: The episode's reward (the sum of ``step_rewards``).
        episode_names: Episode-level component names (:func:`episode_component_names`).
    Returns:
        ``num_answered`` credits; ``sum(own) + episode_terms == episode_reward``.
    Raises:
        ValueError: lengths disagree or ``num_answered`` is out of range.
    """
    if len(step_rewards) != len(step_components):
        raise ValueError(f"{len(step_rewards)} step rewards but {len(step_components)} component dicts")
    if not 0 <= num_answered <= len(step_rewards):
        raise ValueError(f"num_answered={num_answered} is outside 0..{len(step_rewards)}")
    names = set(episode_names)
    own = [
        float(step_rewards[k]) - sum(float(v) for n, v in (step_components[k] or {}).items() if n in names)
        for k in range(num_answered)
    ]
    terms = float(episode_reward) - sum(own)
    return [o + terms for o in own]


def _scale(values: np.ndarray, mode: str) -> float:
    if mode == "none":
        return 1.0
    std = float(np.std(values, ddof=1)) if values.size > 1 else 0.0
    return std + STD_EPS


def question_advantages(credits: Sequence[Sequence[float]], groups: Sequence, scale: str) -> list[list[float]]:
    """Per-turn advantages normalised per question index within each GRPO group.

    Args:
        credits: Per episode, its turns' credits (:func:`turn_credits`); episodes may have different
            numbers of turns.
        groups: Each episode's GRPO group id (members of a group played the same seed).
        scale: ``"group"``, ``"batch"`` or ``"none"`` (module docstring).
    Returns:
        Same shape as ``credits``.
    Raises:
        ValueError: unknown ``scale`` or lengths disagree.
    """
    if scale not in SCALE_MODES:
        raise ValueError(f"scale must be one of {SCALE_MODES}, got {scale!r}")
    if len(credits) != len(groups):
        raise ValueError(f"{len(credits)} episodes but {len(groups)} group ids")
    cells: dict[tuple, list[tuple[int, int]]] = {}
    for e, (cs, g) in enumerate(zip(credits, groups)):
        for k in range(len(cs)):
            cells.setdefault((g, k), []).append((e, k))
    everything = np.array([float(c) for cs in credits for c in cs], dtype=np.float64)
    batch_scale = _scale(everything, scale) if scale == "batch" else None
    out = [[0.0] * len(cs) for cs in credits]
    for members in cells.values():
        vals = np.array([float(credits[e][k]) for e, k in members], dtype=np.float64)
        centred = vals - vals.mean()
        div = batch_scale if batch_scale is not None else _scale(vals, scale)
        for (e, k), a in zip(members, centred / div):
            out[e][k] = float(a)
    return out


def token_advantages(
    turn_advantages: Sequence[Sequence[float]], spans: Sequence[Sequence[tuple[int, int]]], length: int
) -> np.ndarray:
    """A ``(B, length)`` float32 array: each turn's advantage on its tokens, 0 elsewhere.

    Args:
        turn_advantages: Per episode, one advantage per model turn.
        spans: Per episode, each model turn's ``(start, end)`` in the completion (end exclusive).
        length: ``T``, the padded completion length.
    Raises:
        ValueError: a span ends past ``length`` or the counts disagree.
    """
    if len(turn_advantages) != len(spans):
        raise ValueError(f"{len(turn_advantages)} episodes of advantages but {len(spans)} of spans")
    out = np.zeros((len(spans), int(length)), dtype=np.float32)
    for e, (adv, sp) in enumerate(zip(turn_advantages, spans)):
        if len(adv) != len(sp):
            raise ValueError(f"episode {e}: {len(adv)} turn advantages but {len(sp)} turn spans")
        for a, (start, end) in zip(adv, sp):
            if not 0 <= start <= end <= length:
                raise ValueError(f"episode {e}: turn span {start}..{end} is outside the completion of {length}")
            out[e, start:end] = a
    return out


def group_has_signal(rewards: Sequence[float], credits: Sequence[Sequence[float]] | None = None) -> bool:
    """Whether a GRPO group gives any member a non-zero advantage (module docstring).

    Args:
        rewards: The members' episode rewards.
        credits: ``None`` (episode advantages), or the members' per-turn credits (question advantages).
    """
    if credits is None:
        vals = [float(r) for r in rewards]
        return bool(vals) and max(vals) - min(vals) > TIE_TOLERANCE
    by_question: dict[int, list[float]] = {}
    for cs in credits:
        for k, c in enumerate(cs):
            by_question.setdefault(k, []).append(float(c))
    return any(len(v) > 1 and max(v) - min(v) > TIE_TOLERANCE for v in by_question.values())

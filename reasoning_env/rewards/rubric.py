"""The configured reward as an OpenEnv rubric tree (:mod:`openenv.core.rubrics`): where a step's reward is computed.

``ReasoningEconomicsEnv.rubric`` is a :class:`RewardRubric`, and the environment pays what it returns:
``step()`` hands it the step's :class:`~reasoning_env.rewards.base.StepContext` (and, on the final step,
the :class:`~reasoning_env.rewards.base.EpisodeContext`) through :meth:`RewardRubric.pay`, which calls the
reward object's formulas (:func:`components_of`, the one call site) and returns the named components and
their sum; ``step()`` then records them and calls :meth:`RewardRubric.settle` with the step's
``(action, observation)``, so that every node's ``last_score`` and forward hooks show what was paid,
without computing it again. Called on its own with a recorded step's ``(action, observation)``, the tree
rebuilds the contexts from the observation's ``last_step`` record and gives the same numbers.
Each named child returns one component:

- a single reward (the default ``economics``): one child per component, ``correctness``,
  ``efficiency_bonus``, ``cost_penalty``, ``overspend_penalty``, ``episode_bonus`` (``forfeit`` too when
  its ``unasked_reward`` is non-zero);
- a ``combined`` reward: a one-component member is a child named by its label; a multi-component
  member is a node named by its label whose children are its components, so the dotted path
  (``env.rubric.get_rubric("econ.correctness")``, :meth:`~openenv.core.rubrics.Rubric.named_rubrics`)
  is the component's name in ``last_step.reward_components``.

Step components are plain :class:`~openenv.core.rubrics.Rubric` leaves; episode components (paid on
the final step) are :class:`~openenv.core.rubrics.TrajectoryRubric` leaves that return 0 until the
episode is done, and whose ``compute_step_rewards()`` puts all their credit on the final step, as the
environment pays it. Containers sum their children; components are already weighted (a ``combined``
member's weight multiplies its components), so no :class:`~openenv.core.rubrics.WeightedSum` (whose
weights must add up to 1) is needed. The root's score is the sum of the component dict in the
environment's order (step components, then episode ones), so it equals the paid reward bit for bit.

A step that paid nothing (no episode, or the episode already over: ``last_step`` is ``None``) scores
0 everywhere. The environment has its rubric pay and settle every ``step()`` (``last_score`` of every node then
shows the last step's numbers, and forward hooks fire) and resets it in ``reset()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openenv.core.rubrics import Rubric, TrajectoryRubric

from reasoning_env.rewards.base import EpisodeContext, StepContext

__all__ = [
    "ComponentRubric",
    "EpisodeComponentRubric",
    "RewardRubric",
    "SumRubric",
    "components_of",
    "episode_context",
    "paid_components",
    "step_context",
]

#: Names a child cannot take as an attribute (it would hide the Rubric API); such a child is still
#: registered, reachable by ``get_rubric(name)`` and ``named_rubrics()``.
_RESERVED = frozenset(n for n in dir(TrajectoryRubric) if not n.startswith("__")) | {
    "component_names",
    "components",
    "hard_cap_mode",
    "intermediate_reward",
    "name",
    "reward",
}


def _action_texts(action: Any) -> tuple[str, Mapping[str, Any]]:
    """``(response, metadata)`` of an action (a ``ReasoningEconomicsAction``, its dict, or a bare string)."""
    if isinstance(action, str):
        return action, {}
    if isinstance(action, Mapping):
        return action.get("response") or "", action.get("metadata") or {}
    return getattr(action, "response", "") or "", getattr(action, "metadata", None) or {}


def step_context(action: Any, observation: Any, *, hard_cap_mode: bool) -> StepContext | None:
    """The :class:`StepContext` the environment gave its reward for the step that produced ``observation``
    (``None`` when that step paid nothing: ``observation.last_step`` is ``None``).

    The text a text reward reads is the one the environment graded (``last_step.graded_text``): the
    response, ``metadata["grading_response"]``, or the paid prefix of the response (hard cap).
    """
    rec = getattr(observation, "last_step", None)
    if rec is None:
        return None
    response, metadata = _action_texts(action)
    if rec.graded_text == "grading_response":
        text = metadata.get("grading_response") or ""
    elif rec.graded_text == "paid_prefix":
        text = response[: rec.paid_chars or 0]
    else:
        text = response
    return StepContext(
        correct=rec.correct,
        has_answer=rec.extracted_answer is not None,
        tokens=rec.tokens,
        raw_tokens=rec.raw_tokens,
        total_budget=observation.total_budget,
        num_questions=observation.num_questions,
        spent_before=rec.spent_before,
        question_index=rec.index,
        hard_cap_mode=hard_cap_mode,
        problem_type=rec.problem_type,
        difficulty=rec.difficulty,
        response=text,
    )


def episode_context(observation: Any) -> EpisodeContext | None:
    """The :class:`EpisodeContext` of the episode that ``observation``'s step finished (``None`` if
    the step did not finish it). Counts come from the observation's full ``history``."""
    rec = getattr(observation, "last_step", None)
    if rec is None or not observation.done:
        return None
    history = observation.history
    return EpisodeContext(
        num_correct=sum(1 for h in history if h.correct),
        num_answered=len(history),
        num_questions=observation.num_questions,
        total_spent=rec.spent_before + rec.tokens,
        total_budget=observation.total_budget,
        ran_dry=observation.done_reason == "budget_exhausted",
    )


def components_of(reward: Any, step: StepContext, episode: EpisodeContext | None = None) -> dict[str, float]:
    """The named components ``reward`` pays for a step: its step components, then (on the final step,
    ``episode`` given) its episode components. The one place the reward's formulas are called for a step."""
    out = {k: float(v) for k, v in reward.step_components(step).items()}
    if episode is not None:
        out.update({k: float(v) for k, v in reward.episode_components(episode).items()})
    return out


def paid_components(reward: Any, action: Any, observation: Any, *, hard_cap_mode: bool) -> dict[str, float]:
    """The named components ``reward`` pays for the step that produced ``observation`` (its contexts
    rebuilt from the observation); ``{}`` for a step that paid nothing."""
    ctx = step_context(action, observation, hard_cap_mode=hard_cap_mode)
    if ctx is None:
        return {}
    return components_of(reward, ctx, episode_context(observation))


class _Scorer:
    """``paid_components`` with a one-entry memo, so that the root and all its leaves, called with the
    same ``(action, observation)`` objects, compute the reward once."""

    def __init__(self, reward: Any, hard_cap_mode: bool) -> None:
        self.reward = reward
        self.hard_cap_mode = hard_cap_mode
        self._key: tuple[Any, Any] | None = None  # the objects themselves: their ids stay theirs while held
        self._value: dict[str, float] = {}

    def hold(self, action: Any, observation: Any, value: dict[str, float]) -> None:
        """Remember ``value`` as what ``(action, observation)`` was paid (computed by the caller)."""
        self._key, self._value = (action, observation), value

    def __call__(self, action: Any, observation: Any) -> dict[str, float]:
        key = self._key
        if key is None or key[0] is not action or key[1] is not observation:
            self._value = paid_components(self.reward, action, observation, hard_cap_mode=self.hard_cap_mode)
            self._key = (action, observation)
        return self._value


def _add_child(parent: Rubric, name: str, child: Rubric) -> None:
    if name.isidentifier() and name not in _RESERVED:
        setattr(parent, name, child)  # Rubric.__setattr__ registers it
    else:
        parent._rubric_children[name] = child


class ComponentRubric(Rubric):
    """One step component of the reward (``name`` as in ``last_step.reward_components``)."""

    def __init__(self, name: str, scorer: _Scorer) -> None:
        super().__init__()
        self.name = name
        self._scorer = scorer

    def forward(self, action: Any, observation: Any) -> float:
        return self._scorer(action, observation).get(self.name, 0.0)


class EpisodeComponentRubric(TrajectoryRubric):
    """One episode component: 0 on every step but the final one, which pays it (as the environment does)."""

    def __init__(self, name: str, scorer: _Scorer) -> None:
        super().__init__(intermediate_reward=0.0)
        self.name = name
        self._scorer = scorer
        self._final = 0.0

    def forward(self, action: Any, observation: Any) -> float:
        if getattr(observation, "last_step", None) is None:
            return 0.0  # nothing was played: not a step of the trajectory
        return super().forward(action, observation)

    def score_trajectory(self, trajectory: list[tuple[Any, Any]]) -> float:
        action, observation = trajectory[-1]
        return self._scorer(action, observation).get(self.name, 0.0)

    def compute_step_rewards(self) -> list[float]:
        """All the credit on the final step (where the environment pays it), 0 elsewhere."""
        if not self._trajectory:
            return []
        steps = [0.0] * len(self._trajectory)
        if getattr(self._trajectory[-1][1], "done", False):
            steps[-1] = self.score_trajectory(self._trajectory)
        return steps


class SumRubric(Rubric):
    """A node of named children whose score is the sum of theirs (a multi-component member of a
    ``combined`` reward)."""

    def forward(self, action: Any, observation: Any) -> float:
        total = 0.0
        for child in self.children():
            total += child(action, observation)
        return total


def _component_keys(reward: Any, hard_cap_mode: bool) -> tuple[list[str], list[str]]:
    """The names ``reward`` returns per step and on the final step, read off one probe step (the
    reward is pure, so calling it has no effect) and completed with its declared ``component_names``."""
    probe = StepContext(
        correct=True,
        has_answer=True,
        tokens=1,
        raw_tokens=1,
        total_budget=100,
        num_questions=2,
        spent_before=0,
        question_index=0,
        hard_cap_mode=hard_cap_mode,
        response="\\boxed{1}",
    )
    ep = EpisodeContext(num_correct=1, num_answered=2, num_questions=2, total_spent=1, total_budget=100)
    step_keys = list(reward.step_components(probe))
    episode_keys = [k for k in reward.episode_components(ep) if k not in step_keys]
    for k in getattr(reward, "component_names", ()):
        if k not in step_keys and k not in episode_keys:
            step_keys.append(k)
    return step_keys, episode_keys


class RewardRubric(Rubric):
    """The environment's reward as a rubric tree (see the module docstring).

    Args:
        reward: The environment's reward object (``env.reward_fn``: anything with
            ``step_components`` and ``episode_components``).
        hard_cap_mode: The environment's budget mode (``config.hard_cap_mode``), which the step
            context carries and the observation does not.

    Attributes:
        component_names: The components, in the environment's order (step ones, then episode ones).
    """

    def __init__(self, reward: Any, *, hard_cap_mode: bool = True) -> None:
        super().__init__()
        self.reward = reward
        self.hard_cap_mode = bool(hard_cap_mode)
        self._scorer = _Scorer(reward, self.hard_cap_mode)
        self._paid: dict[str, float] | None = None
        step_keys, episode_keys = _component_keys(reward, self.hard_cap_mode)
        self.component_names = tuple(step_keys + episode_keys)
        nodes: dict[str, Rubric] = {}
        for key in self.component_names:
            leaf_cls = EpisodeComponentRubric if key in episode_keys else ComponentRubric
            leaf = leaf_cls(key, self._scorer)
            if "." in key:  # "<label>.<component>" of a combined reward: under the member's node
                label, comp = key.split(".", 1)
                if label not in nodes:
                    nodes[label] = SumRubric()
                    _add_child(self, label, nodes[label])
                _add_child(nodes[label], comp, leaf)
            else:
                _add_child(self, key, leaf)

    def pay(self, step: StepContext, episode: EpisodeContext | None = None) -> tuple[dict[str, float], float]:
        """What a step pays: ``(components, reward)``, the named components (step ones, then, when
        ``episode`` is given, the final step's episode ones) and their sum, which the environment pays.
        Call :meth:`settle` with the step's ``(action, observation)`` next."""
        components = components_of(self.reward, step, episode)
        self._paid = components
        return dict(components), float(sum(components.values()))

    def settle(self, action: Any, observation: Any) -> float:
        """Run the tree on the step :meth:`pay` just paid (every node's ``last_score``, forward hooks, the
        episode leaves' trajectories) with the paid components, not computed again; returns the reward."""
        paid, self._paid = self._paid, None
        if paid is None:
            raise RuntimeError("settle() follows pay(): no step was paid")
        self._scorer.hold(action, observation, paid)
        return self(action, observation)

    def components(self, action: Any, observation: Any) -> dict[str, float]:
        """The named components paid for the step that produced ``observation`` (``{}`` if none)."""
        return dict(self._scorer(action, observation))

    def forward(self, action: Any, observation: Any) -> float:
        # Every child runs (their last_score and hooks); the total is the environment's own sum.
        for child in self.children():
            child(action, observation)
        return float(sum(self._scorer(action, observation).values()))

    def reset(self) -> None:
        """Clear the episode leaves' trajectories (the environment calls this in ``reset()``)."""
        for r in self.rubrics():
            r.reset()

    def state_dict(self) -> dict[str, Any]:
        """The reward's spec (where it has one) and the budget mode."""
        to_spec = getattr(self.reward, "to_spec", None)
        return {"reward": to_spec() if to_spec else None, "hard_cap_mode": self.hard_cap_mode}

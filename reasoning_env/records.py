"""Plain records of what happened: one `StepRow` per step, one `EpisodeRow` per episode.

These are the rows of a run folder's ``trajectories.parquet`` and ``episodes.parquet`` (see
``workbench.runs``), written by evaluation and by training alike, and read by the analysis, the
reward lab (counterfactual re-scoring) and the workbench UI. Token counts are in tokens of the
episode's tokenizer; rewards are signed components that sum to ``reward``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from reasoning_env.rewards.economics import COMPONENTS

#: Reward component columns always present (``reward_<name>``), in this order.
REWARD_COMPONENT_COLUMNS = tuple(f"reward_{c}" for c in COMPONENTS)


def _flatten(row: Any) -> dict[str, Any]:
    """``asdict(row)`` with ``components`` spread into ``reward_<name>`` columns; the seed's five
    component columns are always present (0.0 when the reward did not pay them)."""
    d = asdict(row)
    comps = d.pop("components") or {}
    for col in REWARD_COMPONENT_COLUMNS:
        d[col] = float(comps.get(col[len("reward_") :], 0.0))
    for name, value in comps.items():
        d.setdefault(f"reward_{name}", float(value))
    return d


@dataclass
class StepRow:
    """One step of one episode (a row of ``trajectories.parquet``).

    Attributes:
        run_id, policy: Which run and which policy produced it.
        episode: 0-based episode index within the run (same index = same seed for every policy).
        episode_id, seed: The environment's episode id and seed.
        group: GRPO group index (training) or ``None``; ``member``: index inside the group.
        step: 0-based question index. question_id, problem_type, difficulty, subject: the question.
        raw_tokens / tokens: counted / charged tokens. spent_before: tokens charged before this step.
        remaining_budget_after, total_budget, num_questions, budget_source, hard_cap_mode, tokenizer_name.
        correct, has_answer, extracted_answer, gold_answer, grade_reason: the verdict.
        reward: total step reward; components: name -> signed value (flattened to ``reward_<name>``).
        done, done_reason: episode status after the step.
        response: the response text (may be truncated by writers that cap storage; see ``response_chars``).
        graded_response: the text that was graded and that text rewards (format, repetition) saw,
            when it is not ``response``: the ``grading_response`` sent, or the paid prefix of a
            hard-capped response; ``None`` when it was the response itself.
        response_chars: length of the full response in characters.
        latency_s: policy generation time for this step (seconds), when measured.
    """

    run_id: str
    policy: str
    episode: int
    episode_id: str
    seed: int
    step: int
    question_id: str
    problem_type: str
    difficulty: int | None
    raw_tokens: int
    tokens: int
    spent_before: int
    remaining_budget_after: int
    total_budget: int
    num_questions: int
    budget_source: str
    hard_cap_mode: bool
    tokenizer_name: str
    correct: bool
    has_answer: bool
    extracted_answer: str | None
    gold_answer: str
    grade_reason: str
    reward: float
    done: bool
    done_reason: str | None
    components: dict[str, float] = field(default_factory=dict)
    subject: str | None = None
    group: int | None = None
    member: int | None = None
    response: str = ""
    response_chars: int = 0
    latency_s: float | None = None
    graded_response: str | None = None

    def to_flat(self) -> dict[str, Any]:
        """Flat dict with one ``reward_<name>`` column per component (missing ones = 0.0)."""
        return _flatten(self)


@dataclass
class EpisodeRow:
    """One episode (a row of ``episodes.parquet``); sums over its steps.

    Attributes:
        num_correct, num_answered, num_questions: counts. total_spent, total_budget: tokens.
        utilisation: ``total_spent / total_budget``. ran_dry: ended with questions unanswered.
        episode_reward: sum of step rewards (episode bonus included); components: summed by name.
    """

    run_id: str
    policy: str
    episode: int
    episode_id: str
    seed: int
    num_correct: int
    num_answered: int
    num_questions: int
    total_spent: int
    total_budget: int
    utilisation: float
    ran_dry: bool
    episode_reward: float
    budget_source: str
    tokenizer_name: str
    components: dict[str, float] = field(default_factory=dict)
    group: int | None = None
    member: int | None = None

    def to_flat(self) -> dict[str, Any]:
        """Flat dict with one ``reward_<name>`` column per component (summed over the episode)."""
        return _flatten(self)


def step_row_from_observation(
    obs: Any,
    *,
    run_id: str,
    policy: str,
    episode: int,
    reset_metadata: dict[str, Any],
    hard_cap_mode: bool,
    response: str = "",
    grading_response: str | None = None,
    max_response_chars: int | None = None,
    group: int | None = None,
    member: int | None = None,
    latency_s: float | None = None,
    subject: str | None = None,
) -> StepRow:
    """Build the `StepRow` of a step from the observation it returned (``obs.last_step`` must be set).

    Args:
        obs: The step's :class:`~reasoning_env.models.ReasoningEconomicsObservation` (or its dict).
        reset_metadata: The reset observation's metadata (budget source, seed, tokenizer...).
        response: The action's response text; grading_response: the action's
            ``metadata["grading_response"]`` if any (recorded as ``graded_response`` when graded).
        max_response_chars: Keep at most this many characters of ``response`` (``None`` = all).
    Raises:
        ValueError: ``obs`` has no ``last_step`` (it is a reset or an after-done observation).
    """
    o = obs if isinstance(obs, dict) else obs.model_dump()
    ls = o.get("last_step")
    if not ls:
        raise ValueError(
            "observation has no last_step: pass the observation returned by a step that answered a question"
        )
    kept = response if max_response_chars is None else response[:max_response_chars]
    graded_kind = ls.get("graded_text", "response")
    if graded_kind == "paid_prefix" and ls.get("paid_chars") is not None:
        graded: str | None = response[: int(ls["paid_chars"])]
    elif graded_kind == "grading_response":
        graded = grading_response
    else:
        graded = None
    md = o.get("metadata") or {}
    return StepRow(
        run_id=run_id,
        policy=policy,
        episode=episode,
        episode_id=str(reset_metadata.get("episode_id", md.get("episode_id", ""))),
        seed=int(reset_metadata.get("seed", -1)),
        step=int(ls["index"]),
        question_id=ls["question_id"],
        problem_type=ls["problem_type"],
        difficulty=ls.get("difficulty"),
        subject=subject,
        raw_tokens=int(ls["raw_tokens"]),
        tokens=int(ls["tokens"]),
        spent_before=int(ls["spent_before"])
        if "spent_before" in ls
        else int(o["total_budget"]) - int(ls["remaining_budget_after"]) - int(ls["tokens"]),
        remaining_budget_after=int(ls["remaining_budget_after"]),
        total_budget=int(o["total_budget"]),
        num_questions=int(o["num_questions"]),
        budget_source=str(reset_metadata.get("budget_source", "")),
        hard_cap_mode=bool(hard_cap_mode),
        tokenizer_name=str(md.get("tokenizer_name") or reset_metadata.get("tokenizer_name", "")),
        correct=bool(ls["correct"]),
        has_answer=ls.get("extracted_answer") is not None,
        extracted_answer=ls.get("extracted_answer"),
        gold_answer=ls["gold_answer"],
        grade_reason=ls["grade_reason"],
        reward=float(ls["reward"]),
        done=bool(o["done"]),
        done_reason=o.get("done_reason"),
        components=dict(ls.get("reward_components") or {}),
        group=group,
        member=member,
        response=kept,
        response_chars=len(response),
        graded_response=graded,
        latency_s=latency_s,
    )


def episode_row_from_steps(steps: list[StepRow], *, num_questions: int | None = None) -> EpisodeRow:
    """Summarise one episode's steps (at least one) into an `EpisodeRow`.

    Raises:
        ValueError: ``steps`` is empty or mixes episodes.
    """
    if not steps:
        raise ValueError("an episode row needs at least one step")
    first, last = steps[0], steps[-1]
    if len({(s.policy, s.episode, s.episode_id) for s in steps}) != 1:
        raise ValueError("steps of several episodes passed to episode_row_from_steps")
    comps: dict[str, float] = {}
    for s in steps:
        for k, v in s.components.items():
            comps[k] = comps.get(k, 0.0) + float(v)
    n = num_questions if num_questions is not None else first.num_questions
    spent = last.spent_before + last.tokens
    return EpisodeRow(
        run_id=first.run_id,
        policy=first.policy,
        episode=first.episode,
        episode_id=first.episode_id,
        seed=first.seed,
        num_correct=sum(int(s.correct) for s in steps),
        num_answered=len(steps),
        num_questions=n,
        total_spent=spent,
        total_budget=first.total_budget,
        utilisation=spent / first.total_budget if first.total_budget else 0.0,
        ran_dry=last.done_reason == "budget_exhausted",
        episode_reward=sum(s.reward for s in steps),
        budget_source=first.budget_source,
        tokenizer_name=first.tokenizer_name,
        components=comps,
        group=first.group,
        member=first.member,
    )


STEP_COLUMNS = tuple(f.name for f in fields(StepRow) if f.name != "components") + REWARD_COMPONENT_COLUMNS
EPISODE_COLUMNS = tuple(f.name for f in fields(EpisodeRow) if f.name != "components") + REWARD_COMPONENT_COLUMNS

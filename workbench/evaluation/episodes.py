"""Playing one episode of a policy: seeds, the policy's episode info, the step loop and its rows.

Used by the evaluation runner (:mod:`workbench.evaluation.runner`) for every episode, and by Play
(:mod:`workbench.play`) to reset a policy that takes over an episode.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from reasoning_env.client import make_action
from reasoning_env.config import EnvConfig
from reasoning_env.policies import BasePolicy, EpisodeInfo, OracleCache, SolverCurves
from reasoning_env.records import EpisodeRow, StepRow, episode_row_from_steps, step_row_from_observation
from reasoning_env.remote import as_observation
from workbench.evaluation.extras import episode_extras, scalar, step_expected_correct

__all__ = ["EpisodeResult", "episode_seed", "make_episode_info", "run_episode"]


def episode_seed(base_seed: int, index: int) -> int:
    """Seed of episode ``index`` of a run seeded ``base_seed``:
    ``int(sha256("reasoning-economics/<base>/<index>")[:8], 16) % 2**31`` (stable in any process)."""
    h = hashlib.sha256(f"reasoning-economics/{int(base_seed)}/{int(index)}".encode()).hexdigest()
    return int(h[:8], 16) % (2**31)


def make_episode_info(
    reset_obs: Any,
    config: EnvConfig,
    *,
    policy: BasePolicy | None = None,
    questions: Sequence[Any] | None = None,
    episode: int = 0,
    seed: int | None = None,
) -> EpisodeInfo:
    """The :class:`~reasoning_env.policies.EpisodeInfo` a policy is reset with, from the reset
    observation of an episode (its ``metadata`` holds budget, seed and tokenizer).

    Args:
        reset_obs: The observation ``env.reset(...)`` returned (or its dict).
        config: The environment's config (budget mode and token limits).
        policy: The policy to be reset; the episode's ``questions`` (gold answers included) are
            passed only when it declares ``needs_trusted_context``. ``None``: never passed.
        questions: ``env.questions`` of an in-process environment (trusted context), or ``None``.
        episode: Episode index in the run. seed: Fallback seed when the metadata has none.

    Returns:
        The info; ``tokenizer`` is ``None`` when the episode's tokenizer cannot be loaded here.
    """
    from reasoning_env.tokenization import TokenizerLoadError, get_tokenizer

    md = dict(
        (reset_obs.get("metadata") if isinstance(reset_obs, dict) else getattr(reset_obs, "metadata", None)) or {}
    )

    def field_of(name: str) -> Any:
        return reset_obs.get(name) if isinstance(reset_obs, dict) else getattr(reset_obs, name, None)

    try:
        tokenizer = get_tokenizer(md.get("tokenizer_name") or config.tokenizer_name)
    except (TokenizerLoadError, TypeError):
        tokenizer = None
    trusted = policy is not None and policy.needs_trusted_context
    return EpisodeInfo(
        episode=int(episode),
        seed=int(md.get("seed", seed if seed is not None else 0)),
        total_budget=int(md.get("total_budget", field_of("total_budget") or 0)),
        num_questions=int(md.get("num_questions", field_of("num_questions") or 0)),
        tokenizer_name=str(md.get("tokenizer_name") or config.tokenizer_name),
        tokenizer=tokenizer,
        min_tokens=config.min_tokens,
        max_tokens=config.max_tokens,
        max_tokens_per_step=config.max_tokens_per_step,
        hard_cap_mode=config.hard_cap_mode,
        reset_metadata=md,
        questions=list(questions) if (questions is not None and trusted) else None,
    )


@dataclass
class EpisodeResult:
    """What one episode produced: step rows with their extra columns, the episode row and its extras."""

    steps: list[StepRow]
    step_extras: list[dict]
    episode: EpisodeRow
    episode_extras: dict


def run_episode(
    env: Any,
    policy: BasePolicy,
    *,
    index: int,
    seed: int,
    run_id: str,
    config: EnvConfig,
    reset_kwargs: dict[str, Any],
    curves: SolverCurves,
    oracle: OracleCache | None,
    step_tokenizer: str | None = None,
    max_response_chars: int | None = None,
    extra_columns: dict[str, Any] | None = None,
    on_step: Callable[[], Any] | None = None,
) -> EpisodeResult:
    """Play one episode of ``policy`` on ``env`` (an in-process env or a remote adapter).

    Args:
        index: Episode index in the run; seed: the episode seed.
        reset_kwargs: Extra reset arguments (``tokenizer_name``, ``total_budget``).
        curves, oracle: The solver curves and the shared oracle cache of the regret columns.
        step_tokenizer: Sent as ``metadata.tokenizer_name`` with every step (count with the
            policy's tokenizer when the reset did not set it).
        max_response_chars: Keep at most this many characters of each response in the rows.
        extra_columns: Constant columns added to every step and to the episode row (e.g. the
            ``base_seed`` and ``budget_ratio`` of a sweep).
        on_step: Called after every answered question (the CLI's per-question progress for LLM policies).

    Raises:
        PolicyError: the policy failed (e.g. an endpoint down after its retries).
    """
    from reasoning_env.policies.text import minimal_tokens

    obs = as_observation(env.reset(seed=seed, episode_id=f"{policy.name}-{index:04d}", **reset_kwargs))
    md = dict(getattr(obs, "metadata", None) or {})
    questions = getattr(env, "questions", None)
    info = make_episode_info(obs, config, policy=policy, questions=questions, episode=index, seed=seed)
    tokenizer = info.tokenizer
    policy.reset(info)
    const = dict(extra_columns or {})
    rows: list[StepRow] = []
    extras: list[dict] = []
    while not obs.done:
        t0 = time.perf_counter()
        out = policy.act(obs)
        latency = time.perf_counter() - t0
        action = make_action(out.response, out.grading_response, step_tokenizer, out.num_generated_tokens)
        action_md = action.metadata
        obs = as_observation(env.step(action))
        if on_step is not None:
            on_step()
        ls = obs.last_step
        subject = None
        if questions is not None and ls is not None and ls.index < len(questions):
            subject = questions[ls.index].subject
        row = step_row_from_observation(
            obs,
            run_id=run_id,
            policy=policy.name,
            episode=index,
            reset_metadata=md,
            hard_cap_mode=config.hard_cap_mode,
            response=out.response,
            grading_response=action_md.get("grading_response"),
            max_response_chars=max_response_chars,
            latency_s=latency,
            subject=subject,
        )
        ex: dict[str, Any] = {
            "kind": policy.kind,
            "graded_text": ls.graded_text,
            "expected_correct": step_expected_correct(curves, ls),
            **const,
        }
        for k, v in (out.meta or {}).items():
            ex[f"policy_{k}"] = v if scalar(v) else str(v)
        rows.append(row)
        extras.append(ex)
    n_q = int(md.get("num_questions", obs.num_questions))
    if rows:
        ep = episode_row_from_steps(rows, num_questions=n_q)
    else:  # the budget was below min_tokens at reset: nothing answered
        ep = EpisodeRow(
            run_id=run_id,
            policy=policy.name,
            episode=index,
            episode_id=str(md.get("episode_id", "")),
            seed=int(md.get("seed", seed)),
            num_correct=0,
            num_answered=0,
            num_questions=n_q,
            total_spent=0,
            total_budget=int(md.get("total_budget", 0)),
            utilisation=0.0,
            ran_dry=True,
            episode_reward=0.0,
            budget_source=str(md.get("budget_source", "")),
            tokenizer_name=str(md.get("tokenizer_name", "")),
        )
    qinfo: list[tuple] | None = None
    golds: list[str] = []
    if questions is not None:
        qinfo = [(q.problem_type, q.difficulty) for q in questions]
        golds = [q.gold_answer for q in questions]
    elif rows and len(rows) == n_q:
        qinfo = [(r.problem_type, r.difficulty) for r in rows]
        golds = [r.gold_answer for r in rows]
    lows = [minimal_tokens(tokenizer, g) for g in golds] if (tokenizer is not None and qinfo is not None) else None
    ep_extras = episode_extras(
        kind=policy.kind,
        curves=curves,
        num_questions=n_q,
        total_budget=ep.total_budget,
        steps=[(r.problem_type, r.difficulty, r.tokens) for r in rows],
        questions=qinfo,
        lows=lows,
        oracle=oracle,
    )
    ep_extras.update(const)
    # oracle-informed: the policy reads the difficulty label (summary and tables mark it)
    ep_extras["oracle_informed"] = bool(getattr(policy, "reads_difficulty", False))
    return EpisodeResult(rows, extras, ep, ep_extras)

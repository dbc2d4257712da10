"""`ReasoningEconomicsEnv`: math questions under one shared token budget (OpenEnv ``Environment``).

Contract (ReasoningEconomicsEnv v2; README "Environment contract"):

- ``reset(seed, episode_id, tokenizer_name, total_budget)`` samples ``num_questions`` questions (an
  even mix across problem types) and resolves the budget: an explicit ``total_budget`` (source
  ``"client"``) > ``tokenizer_name`` given -> ``int(budget_ratio * tokens of the question texts)``
  (``"tokenizer_native"``; if that tokenizer fails to load and the config allows it, the config
  formula with a warning) > the config formula (``"config"``).
- ``step(ReasoningEconomicsAction(response, metadata))`` counts the response's tokens with the session
  tokenizer, grades its final answer (or ``metadata["grading_response"]``), charges the budget
  (clipped to what remains in hard-cap mode) and pays the configured reward, broken into named
  components; the final step adds the episode bonus.
- Hard-cap mode ends when every question is answered or the remaining budget is below
  ``min_tokens``; soft mode ends only when every question is answered.

One instance per session; instances share nothing mutable (pools, tokenizers and parsed gold
answers are immutable process-level caches).
"""

from __future__ import annotations

import logging
import random
import secrets
import uuid
from typing import Any, NamedTuple

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from reasoning_env.config import MAX_TOTAL_BUDGET, ConfigError, EnvConfig
from reasoning_env.errors import EpisodeError
from reasoning_env.grading import GoldReport, Grader, log_gold_issues
from reasoning_env.models import (
    HistoryEntry,
    ReasoningEconomicsAction,
    ReasoningEconomicsObservation,
    ReasoningEconomicsState,
    StepRecord,
)
from reasoning_env.questions import Question
from reasoning_env.rewards import DEFAULT_REWARD, EpisodeContext, StepContext
from reasoning_env.rewards import build as build_reward
from reasoning_env.rewards.rubric import RewardRubric
from reasoning_env.sampler import sample_episode
from reasoning_env.sources import PoolSet, load_pools
from reasoning_env.tokenization import LoadedTokenizer, TokenizerLoadError, get_tokenizer

logger = logging.getLogger(__name__)


def _is_utf8(text: str) -> bool:
    """False when ``text`` holds a lone surrogate (from a JSON ``\\ud800`` escape), which no
    tokenizer can encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _StepOptions(NamedTuple):
    """The step options an action's metadata carries, checked."""

    grading_response: str | None
    tokenizer_name: str | None
    num_generated_tokens: int | None


class _Charge(NamedTuple):
    """What a step charged and how it was graded (step part 2), before it is paid and recorded."""

    question: Question
    raw: int  # tokens of the response (or generated), before any clipping
    charged: int
    graded_text: str  # "response", "grading_response" or "paid_prefix"
    text: str  # the text graded (and read by text rewards)
    result: Any  # the grader's GradeResult


RESET_OPTIONS = ("seed", "episode_id", "tokenizer_name", "total_budget")
#: Characters of a question kept in a history entry's ``question_summary`` (the reference's field).
SUMMARY_CHARS = 60


class ReasoningEconomicsEnv(
    Environment[ReasoningEconomicsAction, ReasoningEconomicsObservation, ReasoningEconomicsState]
):
    """Mixed math questions under a shared token budget. See the module docstring for the contract.

    Args:
        config: An :class:`EnvConfig`, a dict of its fields, or ``None`` for the defaults.
        pools: Pre-loaded question pools (tests, custom data); default: loaded from ``config.sources``.
        grader: A :class:`~reasoning_env.grading.Grader` to share; default: a new one.

    Raises:
        ConfigError: the config is invalid.
    """

    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(
        self,
        config: EnvConfig | dict | None = None,
        *,
        pools: PoolSet | None = None,
        grader: Grader | None = None,
    ) -> None:
        super().__init__()
        config = EnvConfig.coerce(config)
        self.config: EnvConfig = config
        self.reward_fn = build_reward(config)
        # The reward as an OpenEnv rubric tree: step() has it pay every step (the one place a step's
        # reward is computed), and its named children show each component.
        self.rubric = RewardRubric(self.reward_fn, hard_cap_mode=config.hard_cap_mode)
        self._pools = pools
        self._golds_prepared = False
        self._grader = grader or Grader(timeout_s=config.grading_timeout_s)
        self._seed_stream = random.Random(config.seed) if config.seed is not None else None
        self._clear_episode()

    # ------------------------------------------------------------------ properties
    @property
    def pools(self) -> PoolSet:
        """The question pools (loaded on first use, cached for the process). On first access
        every gold answer is prepared for grading (parsed once, cached per process; golds the
        fast grader cannot read are logged once) and the grading worker starts in the
        background."""
        if self._pools is None:
            self._pools = load_pools(
                self.config.sources, data_dir=self.config.data_dir, offline_fallback=self.config.offline_fallback
            )
        if not self._golds_prepared:
            self._golds_prepared = True
            prepare = getattr(self._grader, "prepare_golds", None)  # custom graders may lack it
            if prepare is not None:
                report = prepare(q.gold_answer for qs in self._pools.pools.values() for q in qs)
                if isinstance(report, GoldReport):
                    log_gold_issues(report)
            warm_up = getattr(self._grader, "warm_up", None)
            if warm_up is not None:
                warm_up()
        return self._pools

    @property
    def questions(self) -> list[Question]:
        """The current episode's questions, gold answers included (for trusted code: logs,
        evaluation, simulated policies). Never sent to the policy by the server."""
        return list(self._questions)

    @property
    def state(self) -> ReasoningEconomicsState:
        """The episode's internal state (no gold answers)."""
        spent = self._spent
        return ReasoningEconomicsState(
            episode_id=self._episode_id,
            step_count=self._index,
            total_budget=self._total_budget,
            spent_budget=spent,
            remaining_budget=self._remaining,
            questions_answered=self._index,
            num_questions=len(self._questions),
            total_correct=self._correct,
            current_accuracy=self._correct / self._index if self._index else 0.0,
            budget_remaining_ratio=min(1.0, max(0.0, self._remaining / self._total_budget))
            if self._total_budget > 0
            else 0.0,
            budget_source=self._budget_source,
            tokenizer_name=self._tokenizer.name if self._tokenizer else None,
            seed=self._seed,
            done=self._done,
            done_reason=self._done_reason,
            question_ids=[q.id for q in self._questions],
            problem_types=[q.problem_type for q in self._questions],
            episode_reward=self._episode_reward,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        """OpenEnv metadata (name, description, version)."""
        from reasoning_env import __version__

        return EnvironmentMetadata(
            name="ReasoningEconomicsEnv",
            description=(
                "Mixed math questions under one shared token budget: the policy answers each with a "
                "reasoning trace ending in \\boxed{}; rewards pay correctness and token economy."
            ),
            version=__version__,
        )

    # ------------------------------------------------------------------ reset
    def _clear_episode(self) -> None:
        self._episode_id: str | None = None
        self._seed: int | None = None
        self._questions: list[Question] = []
        self._index = 0
        self._correct = 0
        self._total_budget = 0
        self._remaining = 0
        self._spent = 0  # tokens charged so far (differs from budget - remaining when soft mode floors at 0)
        self._budget_source: str | None = None
        self._tokenizer: LoadedTokenizer | None = None
        self._history: list[HistoryEntry] = []
        self._done = True
        self._done_reason: str | None = "no_episode"
        self._episode_reward = 0.0

    def _draw_seed(self) -> int:
        if self._seed_stream is not None:
            return self._seed_stream.randrange(2**31)
        return secrets.randbelow(2**31)

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        tokenizer_name: str | None = None,
        total_budget: int | None = None,
        **kwargs: Any,
    ) -> ReasoningEconomicsObservation:
        """Start an episode.

        Args:
            seed: Episode seed (int >= 0); same config and seed give the same questions, order and
                budget in any process. ``None`` draws a fresh seed (reported in the metadata).
            episode_id: Identifier to use (default: a new UUID).
            tokenizer_name: Policy tokenizer for counting and the tokenizer-native budget.
            total_budget: Explicit budget in tokens (1..100,000,000); overrides everything.

        Returns:
            The first observation; its ``metadata`` holds ``total_budget``, ``budget_source``,
            ``tokenizer_name``, ``tokenizer_origin``, ``episode_id``, ``seed``, ``problem_types``,
            ``sources_used`` and the budget settings.

        Raises:
            EpisodeError: bad arguments, or a tokenizer-native budget above ``MAX_TOTAL_BUDGET``
                (nothing is changed).
            ConfigError: the config's ``mix`` names a problem type the sources do not provide.
            TokenizerLoadError: ``tokenizer_name`` cannot be loaded and the config does not allow
                the config-budget fallback.
        """
        if kwargs:
            raise EpisodeError(f"unknown reset option(s) {_some_names(kwargs)}; reset accepts {list(RESET_OPTIONS)}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise EpisodeError(f"seed must be a non-negative integer or null, got {seed!r}")
        if episode_id is not None and (not isinstance(episode_id, str) or not episode_id or len(episode_id) > 255):
            raise EpisodeError(f"episode_id must be a non-empty string of at most 255 characters, got {episode_id!r}")
        if episode_id is not None and not _is_utf8(episode_id):
            raise EpisodeError(
                "episode_id is not valid Unicode text (it holds a lone surrogate code point); send UTF-8 text"
            )
        if total_budget is not None:
            if isinstance(total_budget, bool) or not isinstance(total_budget, int):
                raise EpisodeError(f"total_budget must be an integer number of tokens, got {total_budget!r}")
            if not 1 <= total_budget <= MAX_TOTAL_BUDGET:
                raise EpisodeError(
                    f"total_budget must be between 1 and {MAX_TOTAL_BUDGET:,} tokens, got {total_budget}"
                )
        if tokenizer_name is not None and (not isinstance(tokenizer_name, str)):
            raise EpisodeError(f"tokenizer_name must be a string (a Hub id or local folder), got {tokenizer_name!r}")
        if tokenizer_name is not None and not _is_utf8(tokenizer_name):
            raise EpisodeError("tokenizer_name is not valid Unicode text (it holds a lone surrogate code point)")
        tokenizer_name = (tokenizer_name or "").strip() or None

        pools = self.pools
        unknown = sorted(set(self.config.mix) - set(pools.pools))
        if unknown:
            # A typo in a mix key would otherwise silently leave the mix even.
            raise ConfigError(
                f"mix names problem type(s) {unknown} that the configured sources do not provide; "
                f"their types are {sorted(pools.pools)}"
            )
        ep_seed = seed if seed is not None else self._draw_seed()
        questions = sample_episode(pools.pools, self.config.num_questions, ep_seed, self.config.mix)

        warning = None
        tokenizer: LoadedTokenizer | None = None
        if tokenizer_name is not None:
            try:
                tokenizer = self._tokenizer_for(tokenizer_name)
            except TokenizerLoadError as exc:
                if not self.config.allow_config_budget_fallback:
                    raise
                warning = (
                    f"tokenizer {tokenizer_name!r} failed to load ({exc}); budget falls back to the config "
                    f"formula and tokens are counted with the config tokenizer {self.config.tokenizer_name!r}"
                )
                logger.warning(warning)
        if tokenizer is None:
            tokenizer = self._tokenizer_for(self.config.tokenizer_name)

        if total_budget is not None:
            budget, source = int(total_budget), "client"
        elif tokenizer_name is not None and warning is None:
            question_tokens = sum(tokenizer.count_many([q.text for q in questions]))  # remembered per tokenizer
            budget, source = max(1, int(self.config.budget_ratio * question_tokens)), "tokenizer_native"
            if budget > MAX_TOTAL_BUDGET:
                raise EpisodeError(
                    f"the tokenizer-native budget is {budget:,} tokens "
                    f"({self.config.budget_ratio:g} x {question_tokens:,} "
                    f"question tokens), above the maximum of {MAX_TOTAL_BUDGET:,}; lower "
                    "budget_ratio or num_questions, "
                    "or pass total_budget"
                )
        else:
            budget, source = self.config.config_budget(), "config"

        # Commit the new episode only now: a failed reset leaves the previous one untouched.
        self._clear_episode()
        self._reset_rubric()
        self._episode_id = episode_id or str(uuid.uuid4())
        self._seed = ep_seed
        self._questions = questions
        self._total_budget = budget
        self._remaining = budget
        self._budget_source = source
        self._tokenizer = tokenizer
        self._done = False
        self._done_reason = None
        if self.config.hard_cap_mode and budget < self.config.min_tokens:
            self._done, self._done_reason = True, "budget_exhausted"

        obs = self._observation(reward=0.0)
        obs.metadata.update(
            {
                "total_budget": budget,
                "budget_source": source,
                "tokenizer_name": tokenizer.name,
                "tokenizer_origin": tokenizer.origin,
                "episode_id": self._episode_id,
                "seed": ep_seed,
                "problem_types": [q.problem_type for q in questions],
                "question_ids": [q.id for q in questions],
                "sources_used": [dict(s) for s in pools.sources_used],
                "num_questions": len(questions),
                "budget_ratio": self.config.budget_ratio,
                "min_tokens": self.config.min_tokens,
                "max_tokens": self.config.max_tokens,
                "max_tokens_per_step": self.config.max_tokens_per_step,
                "hard_cap_mode": self.config.hard_cap_mode,
                "reward": self.config.reward or {"type": DEFAULT_REWARD},
            }
        )
        if warning:
            obs.metadata["budget_warning"] = warning
        return obs

    # ------------------------------------------------------------------ step
    def step(
        self,
        action: ReasoningEconomicsAction | dict | str,
        timeout_s: float | None = None,
        **kwargs: Any,
    ) -> ReasoningEconomicsObservation:
        """Answer the current question, in three parts: check the action (:meth:`_checked_action`),
        charge its tokens and grade it (:meth:`_charge_and_grade`), then have the rubric tree pay the
        step and record it (:meth:`_pay_and_record`).

        Args:
            action: A :class:`ReasoningEconomicsAction` (a dict of its fields or a bare response string
                are accepted too).
            timeout_s: Grading time limit for this step (seconds; default the config's).

        Returns:
            The next observation; ``last_step`` holds what this step did (tokens, extracted answer,
            verdict, reward components, and the gold answer). After the episode is over, a done
            observation with ``done_reason="episode_already_done"`` and reward 0 (nothing changes).

        Raises:
            EpisodeError: the action is malformed (not a string response, bad metadata); nothing
                is charged.
            TokenizerLoadError: ``metadata["tokenizer_name"]`` cannot be loaded; nothing is charged.
        """
        action, options = self._checked_action(action)
        if self._done:
            return self._step_after_end(action)
        charge = self._charge_and_grade(action, options, timeout_s)
        return self._pay_and_record(action, charge)

    def _checked_action(self, action: Any) -> tuple[ReasoningEconomicsAction, _StepOptions]:
        """Step part 1: the action and its metadata, checked; raises ``EpisodeError`` before anything changes."""
        action = self._coerce_action(action)
        md = action.metadata or {}
        grading_response = md.get("grading_response")
        if grading_response is not None and not isinstance(grading_response, str):
            raise EpisodeError(f"metadata.grading_response must be a string, got {type(grading_response).__name__}")
        step_tok = md.get("tokenizer_name")
        if step_tok is not None and not isinstance(step_tok, str):
            raise EpisodeError(f"metadata.tokenizer_name must be a string, got {type(step_tok).__name__}")
        for name, text in (("response", action.response), ("metadata.grading_response", grading_response)):
            if text is not None and not _is_utf8(text):
                raise EpisodeError(
                    f"{name} is not valid Unicode text (it holds a lone surrogate code point); send UTF-8 text"
                )
        generated = md.get("num_generated_tokens")
        if generated is not None and (isinstance(generated, bool) or not isinstance(generated, int) or generated < 0):
            raise EpisodeError(
                "metadata.num_generated_tokens must be a non-negative integer (token ids the "
                f"policy generated), got {generated!r}"
            )
        return action, _StepOptions(grading_response, step_tok, generated)

    def _step_after_end(self, action: ReasoningEconomicsAction) -> ReasoningEconomicsObservation:
        """A step with no episode, or after it ended: a done observation paying 0; nothing changes."""
        reason = self._done_reason or "episode_already_done"
        obs = self._observation(reward=0.0)
        obs.done_reason = "no_episode" if reason == "no_episode" else "episode_already_done"
        obs.metadata["error"] = (
            "no episode: call reset() first"
            if reason == "no_episode"
            else f"the episode is over ({reason}); call reset() to start a new one"
        )
        obs.metadata["episode_id"] = self._episode_id
        self._apply_rubric(action, obs)  # pays nothing: every node's last_score is 0
        return obs

    def _charge_and_grade(
        self, action: ReasoningEconomicsAction, options: _StepOptions, timeout_s: float | None
    ) -> _Charge:
        """Step part 2: the tokens counted and charged (clipped to the remaining budget in hard-cap mode)
        and the text graded (the paid prefix of an over-long response). Changes no episode state but the
        session tokenizer (``metadata.tokenizer_name``), which it switches before anything is charged."""
        step_tok = options.tokenizer_name
        if step_tok and step_tok.strip() and step_tok.strip() != self._tokenizer.name:
            self._tokenizer = self._tokenizer_for(step_tok.strip())  # raises before anything is charged

        q = self._questions[self._index]
        raw = self._tokenizer.count(action.response)
        if options.num_generated_tokens is not None:
            # Decoding and re-encoding can merge tokens (e.g. runs of whitespace): the policy is
            # charged for what it generated when that is more than the text re-encodes to.
            raw = max(raw, options.num_generated_tokens)
        if self.config.hard_cap_mode:
            charged = min(raw, max(0, self._remaining))
        else:
            charged = raw
        grading_response = options.grading_response
        graded_text = "grading_response" if (grading_response and grading_response.strip()) else "response"
        text = grading_response if graded_text == "grading_response" else action.response
        if charged < raw and not self.config.grade_beyond_budget:
            # Hard cap: tokens past the remaining budget were never paid for, so they are not read.
            # (grading_response is ignored then: the visible answer may lie in the unpaid part.)
            graded_text, text = "paid_prefix", self._tokenizer.prefix(action.response, charged)
        # Our grader also reads the question: a copy of one of its expressions is not an answer
        # (docs/grading.md, "Restating the question"); custom graders get the old signature.
        extra = {"question": q.text} if isinstance(self._grader, Grader) else {}
        result = self._grader.grade(text, q.gold_answer, timeout_s=timeout_s or self.config.grading_timeout_s, **extra)
        return _Charge(q, raw, charged, graded_text, text, result)

    def _pay_and_record(self, action: ReasoningEconomicsAction, charge: _Charge) -> ReasoningEconomicsObservation:
        """Step part 3: the rubric tree pays the step (``self.rubric.pay``, the one place a step's reward is
        computed), then the budget, counts and history move on and the observation records it."""
        q, result, charged = charge.question, charge.result, charge.charged
        spent_before = self._spent
        ctx = StepContext(
            correct=result.correct,
            has_answer=result.extracted is not None,
            tokens=charged,
            raw_tokens=charge.raw,
            total_budget=self._total_budget,
            num_questions=len(self._questions),
            spent_before=spent_before,
            question_index=self._index,
            hard_cap_mode=self.config.hard_cap_mode,
            problem_type=q.problem_type,
            difficulty=q.difficulty,
            response=charge.text,
        )

        # The episode after this step, paid before anything is committed: a reward that raises changes nothing.
        remaining, spent = self._remaining - charged, spent_before + charged
        if not self.config.hard_cap_mode and not self.config.soft_allow_negative_budget:
            remaining = max(0, remaining)
        answered, num_correct = self._index + 1, self._correct + int(result.correct)
        done_reason = None
        if answered >= len(self._questions):
            done_reason = "all_answered"
        elif self.config.hard_cap_mode and remaining < self.config.min_tokens:
            done_reason = "budget_exhausted"
        episode = None
        if done_reason is not None:
            episode = EpisodeContext(
                num_correct=num_correct,
                num_answered=answered,
                num_questions=len(self._questions),
                total_spent=spent,
                total_budget=self._total_budget,
                ran_dry=done_reason == "budget_exhausted",
            )
        components, reward = self.rubric.pay(ctx, episode)

        self._remaining, self._spent, self._index, self._correct = remaining, spent, answered, num_correct
        if done_reason is not None:
            self._done, self._done_reason = True, done_reason
        self._episode_reward += reward

        entry = dict(
            index=self._index - 1,
            question_id=q.id,
            problem_type=q.problem_type,
            difficulty=q.difficulty,
            raw_tokens=charge.raw,
            tokens=charged,
            extracted_answer=result.extracted,
            correct=result.correct,
            grade_reason=result.reason,
            reward=reward,
            reward_components=components,
            tokens_used=charged,
            was_correct=result.correct,
            question_summary=q.text[:SUMMARY_CHARS],
        )
        self._history.append(HistoryEntry(**entry))
        record = StepRecord(
            **entry,
            gold_answer=q.gold_answer,
            question=q.text,
            graded_text=charge.graded_text,
            grade_time_s=result.time_s,
            paid_chars=len(charge.text) if charge.graded_text == "paid_prefix" else None,
            spent_before=spent_before,
            remaining_budget_after=self._remaining,
        )
        obs = self._observation(
            reward=reward, last_step=record
        )  # in the constructor: validate_assignment would re-check it
        obs.metadata.update(
            {
                "tokenizer_name": self._tokenizer.name,
                "episode_id": self._episode_id,
                "step": self._index,
                "episode_reward": self._episode_reward,
                # the reference environment's per-step keys
                "min_tokens": self.config.min_tokens,
                "max_tokens": self.config.max_tokens,
                "num_questions": len(self._questions),
                "budget_ratio": self.config.budget_ratio,
            }
        )
        self.rubric.settle(action, obs)  # the tree's last_score and hooks show what it just paid
        return obs

    def close(self) -> None:
        """Release the episode (OpenEnv calls this when a session ends)."""
        self._clear_episode()

    # ------------------------------------------------------------------ helpers
    def _tokenizer_for(self, name: str) -> LoadedTokenizer:
        """The tokenizer ``name`` resolves to (a server restricts what its clients may name).

        Raises:
            TokenizerLoadError: it cannot be loaded.
        """
        return get_tokenizer(name)

    @staticmethod
    def _coerce_action(action: Any) -> ReasoningEconomicsAction:
        if isinstance(action, ReasoningEconomicsAction):
            return action
        if isinstance(action, str):
            return ReasoningEconomicsAction(response=action)
        if isinstance(action, dict):
            from pydantic import ValidationError

            try:
                return ReasoningEconomicsAction(**action)
            except ValidationError as exc:
                raise EpisodeError(
                    f"invalid action: {exc.errors()[0].get('msg')} at {exc.errors()[0].get('loc')}"
                ) from None
        raise EpisodeError(
            f"step() takes a ReasoningEconomicsAction (or its dict, or a response string), got {type(action).__name__}"
        )

    def _observation(self, reward: float | None, last_step: StepRecord | None = None) -> ReasoningEconomicsObservation:
        n = len(self._questions)
        left = 0 if self._done else n - self._index
        current = self._questions[self._index] if (not self._done and self._index < n) else None
        cap = self.config.max_tokens_per_step
        if self.config.hard_cap_mode:
            cap = max(0, min(cap, self._remaining))
        return ReasoningEconomicsObservation(
            question=current.text if current else "",
            question_id=current.id if current else None,
            problem_type=current.problem_type if current else None,
            difficulty=current.difficulty if current else None,
            question_index=self._index,
            num_questions=n,
            total_budget=self._total_budget,
            remaining_budget=self._remaining,
            questions_remaining=left,
            budget_per_remaining_question=(self._remaining / left) if left else 0.0,
            step_idx=self._index,
            budget_per_remaining=(self._remaining / left) if left else 0.0,
            accuracy_so_far=self._correct / self._index if self._index else 0.0,
            step_token_cap=cap if not self._done else 0,
            history=list(self._history),
            last_step=last_step,
            done=self._done,
            reward=reward,
            done_reason=self._done_reason if self._done else None,
            metadata={"problem_type": current.problem_type if current else None},
        )


def _some_names(names: Any, limit: int = 5, chars: int = 40) -> str:
    """The first ``limit`` of ``names`` (sorted), each cut to ``chars`` characters and written in
    ASCII (lone surrogates as escapes), then how many more: an error that lists 200,000 unknown
    keys was a 2 MB message."""
    names = sorted(str(n) for n in names)
    shown = []
    for n in names[:limit]:
        cut = n if len(n) <= chars else n[:chars] + "..."
        shown.append(ascii(cut))
    more = f" and {len(names) - limit:,} more" if len(names) > limit else ""
    return "[" + ", ".join(shown) + "]" + more

"""Playing whole episodes with a model: lockstep batches, one token sequence per episode.

:class:`EpisodeRunner` plays a list of :class:`EpisodeSpec` (seed, GRPO group, member):

- **Lockstep** (:meth:`EpisodeRunner.play_lockstep`): every turn, all live episodes are advanced
  by ONE batched generate call; an episode that finishes drops out of the batch. A generation
  batch of ``B`` episodes of ``Q`` questions costs ``Q`` calls instead of ``B x Q``.
- **Sequential** (:meth:`EpisodeRunner.play_sequential`): one episode at a time, one call per
  turn (the baseline that ``training.bench.rollout`` compares against).

Each episode is kept as token ids (shapes: ``prompt_ids [P]``, ``completion_ids [C]``,
``env_mask [C]``, ``logprobs [C]``):

- ``prompt_ids``: system + first user message + assistant header (:class:`~reasoning_env.conversation.ChatFormat`).
- the completion alternates model turns (the sampled ids exactly, ``env_mask = 1``, their
  sampling log-probs) and environment turns (end of the assistant message, next user message,
  next assistant header; ``env_mask = 0``, log-prob ``0.0``). Turns are appended, never
  re-rendered, so the trainer scores exactly the tokens that were sampled.

Each turn's generation is capped by the turn cap rule (:class:`~reasoning_env.policies.turn_cap.TurnCap`,
the evaluation's LLM policies' default: twice the remaining budget per remaining question, keeping a floor
for every later question, at most the
environment's ``obs.step_token_cap`` = min of the config's ``max_tokens_per_step`` and, in hard-cap mode,
the remaining budget; the prompt states the cap applied) and by the room left under ``max_episode_tokens``.
When the next environment turn plus ``min_turn_tokens`` no longer fits, the remaining questions are
forfeited: answered with an empty response (0 tokens, graded wrong) so that the episode still ends in the
environment and its reward stays the environment's.

The reward of an episode is the sum of the environment's step rewards (episode bonus included);
its components are summed by name.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from reasoning_env.conversation import ChatFormat, EpisodeTokens
from reasoning_env.policies.turn_cap import TurnCap, capped_observation
from reasoning_env.records import EpisodeRow, StepRow, episode_row_from_steps, step_row_from_observation
from training.generation import Generation, GenerationBackend


@dataclass(frozen=True)
class EpisodeSpec:
    """Which episode to play.

    Attributes:
        seed: Environment seed; equal seeds give identical episodes (questions, order, budget).
        group: GRPO group index (members of a group share the seed), or ``None``.
        member: Index inside the group, or ``None``.
        episode: Run-level episode index written to the step rows (training uses the group index,
            so "same index = same seed" holds as in evaluation runs).
        resample_round: 0 for an episode of the dataset; ``n`` for the group dynamic sampling played in
            its ``n``-th round in place of a group without reward variance (a fresh seed, same group index).
    """

    seed: int
    group: int | None = None
    member: int | None = None
    episode: int = 0
    resample_round: int = 0


@dataclass
class RolloutLimits:
    """Limits of one episode.

    Attributes:
        max_episode_tokens: Prompt + completion tokens an episode may reach (the model's context
            for training); must leave room for the first prompt and one turn.
        min_turn_tokens: The least generation room worth a turn; below it the remaining
            questions are forfeited.
        tokenizer_name: Sent to ``reset`` (the environment counts tokens and sets the
            tokenizer-native budget with it).
        total_budget: Explicit budget (tokens) for every episode, or ``None``.
        max_response_chars: Keep at most this many characters of each response in the step rows.
        turn_cap: The per-answer cap rule, the evaluation's LLM policies' default
            (:class:`~reasoning_env.policies.turn_cap.TurnCap`: 2 x the remaining budget per remaining
            question, never above ``step_token_cap``); the prompt states the cap applied, as in evaluation.
    """

    max_episode_tokens: int = 8192
    min_turn_tokens: int = 8
    tokenizer_name: str | None = None
    total_budget: int | None = None
    max_response_chars: int | None = 4000
    turn_cap: TurnCap = field(default_factory=TurnCap)

    def __post_init__(self) -> None:
        if self.max_episode_tokens < 16:
            raise ValueError(f"max_episode_tokens must be >= 16, got {self.max_episode_tokens}")
        if self.min_turn_tokens < 1:
            raise ValueError(f"min_turn_tokens must be >= 1, got {self.min_turn_tokens}")


@dataclass
class TurnInfo:
    """One model turn: where its ids sit in the completion (``start``/``end``), its cap
    (tokens), whether it ended with EOS, and the wall time of the generate call (seconds)."""

    start: int
    end: int
    cap: int
    finished: bool
    latency_s: float


@dataclass
class EpisodeTrace:
    """A played episode: token ids, masks, log-probs, the environment's step rows and reward.

    Attributes:
        prompt_ids: ``[P]`` first prompt ids.
        completion_ids: ``[C]`` model and environment turns.
        env_mask: ``[C]`` 1 for model tokens (trained), 0 for environment tokens.
        logprobs: ``[C]`` sampling log-probs of model tokens; 0.0 for environment tokens.
        steps: One :class:`~reasoning_env.records.StepRow` per environment step.
        turns: One :class:`TurnInfo` per model turn.
        reward: Episode reward = sum of step rewards (the environment's).
        env_episode_reward: The environment's own running total at the end (``metadata``), if sent.
        components: Reward components summed by name.
        forfeited: Questions answered with an empty response because the context was full.
        reset_metadata: The reset observation's metadata (budget, source, tokenizer...).
    """

    spec: EpisodeSpec
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    steps: list[StepRow] = field(default_factory=list)
    turns: list[TurnInfo] = field(default_factory=list)
    reward: float = 0.0
    env_episode_reward: float | None = None
    components: dict[str, float] = field(default_factory=dict)
    forfeited: int = 0
    done_reason: str | None = None
    reset_metadata: dict = field(default_factory=dict)
    num_questions: int = 0
    #: ``(problem_type, difficulty, gold_answer)`` of every question of the episode, answered or not,
    #: when the environment runs in this process (trusted context for the oracle's regret; never
    #: shown to the policy); ``None`` for a remote environment.
    questions: list[tuple] | None = None

    @property
    def num_steps(self) -> int:
        """Environment steps: answered questions plus forfeits."""
        return len(self.steps)

    @property
    def num_answered(self) -> int:
        """Questions the model answered (forfeits, counted in :attr:`forfeited`, excluded)."""
        return len(self.steps) - self.forfeited

    @property
    def answered_steps(self) -> list[StepRow]:
        """The step rows of answered questions (forfeits are always the last steps)."""
        return self.steps[: self.num_answered]

    @property
    def cap_hits(self) -> int:
        """Model turns cut by their per-turn cap before the stop token (the answer was cut off)."""
        return sum(1 for t in self.turns if not t.finished and t.end - t.start >= t.cap)

    @property
    def num_correct(self) -> int:
        return sum(int(s.correct) for s in self.steps)

    @property
    def accuracy(self) -> float:
        """Correct / questions in the episode (unanswered count as wrong)."""
        return self.num_correct / self.num_questions if self.num_questions else 0.0

    @property
    def tokens_spent(self) -> int:
        """Tokens charged by the environment over the episode."""
        return sum(s.tokens for s in self.steps)

    @property
    def answered_tokens(self) -> int:
        """Tokens charged for the answered questions (forfeits are charged 0)."""
        return sum(s.tokens for s in self.answered_steps)

    @property
    def tokens_per_question(self) -> float:
        """Charged tokens per answered question (forfeits are neither in the numerator nor the
        denominator; questions never reached because the budget ran dry are not answered)."""
        return self.answered_tokens / self.num_answered if self.num_answered else 0.0

    @property
    def model_tokens(self) -> int:
        """Generated ids in the completion (``sum(env_mask)``)."""
        return sum(self.env_mask)

    @property
    def ran_dry(self) -> bool:
        return self.done_reason == "budget_exhausted"

    def check(self) -> None:
        """Raise ``AssertionError`` unless ids, mask and log-probs line up."""
        n = len(self.completion_ids)
        assert len(self.env_mask) == n and len(self.logprobs) == n, (n, len(self.env_mask), len(self.logprobs))
        assert n >= 1, "an episode completion needs at least one token"
        for t in self.turns:
            assert all(self.env_mask[i] == 1 for i in range(t.start, t.end))
        assert sum(t.end - t.start for t in self.turns) == sum(self.env_mask)

    def episode_row(self) -> EpisodeRow | None:
        """The :class:`~reasoning_env.records.EpisodeRow` (``None`` if no step was taken)."""
        if not self.steps:
            return None
        return episode_row_from_steps(self.steps, num_questions=self.num_questions or None)

    def summary(self) -> dict:
        """A JSON-ready summary (for the per-episode log)."""
        return {
            "seed": self.spec.seed,
            "group": self.spec.group,
            "member": self.spec.member,
            "episode": self.spec.episode,
            "resample_round": self.spec.resample_round,
            "reward": self.reward,
            "env_episode_reward": self.env_episode_reward,
            "components": dict(self.components),
            "accuracy": self.accuracy,
            "num_correct": self.num_correct,
            "num_answered": self.num_answered,
            "num_questions": self.num_questions,
            "tokens_spent": self.tokens_spent,
            "tokens_per_question": self.tokens_per_question,
            "total_budget": self.reset_metadata.get("total_budget"),
            "budget_source": self.reset_metadata.get("budget_source"),
            "done_reason": self.done_reason,
            "ran_dry": self.ran_dry,
            "forfeited": self.forfeited,
            "num_turns": len(self.turns),
            "cap_hits": self.cap_hits,
            "prompt_tokens": len(self.prompt_ids),
            "completion_tokens": len(self.completion_ids),
            "model_tokens": self.model_tokens,
            "turn_caps": [t.cap for t in self.turns],
            "turn_tokens": [t.end - t.start for t in self.turns],
            "steps": [
                {
                    "step": s.step,
                    "question_id": s.question_id,
                    "problem_type": s.problem_type,
                    "difficulty": s.difficulty,
                    "forfeit": i >= self.num_answered,
                    "raw_tokens": s.raw_tokens,
                    "tokens": s.tokens,
                    "correct": s.correct,
                    "extracted_answer": s.extracted_answer,
                    "gold_answer": s.gold_answer,
                    "reward": s.reward,
                    "components": s.components,
                }
                for i, s in enumerate(self.steps)
            ],
        }


class _LiveEpisode:
    """State of an episode being played (internal)."""

    def __init__(self, runner: EpisodeRunner, spec: EpisodeSpec) -> None:
        self.r = runner
        self.trace = EpisodeTrace(spec=spec)
        self.session = runner.env_factory.new_session()
        self.done = False
        self.obs = None
        self._pending_cap = 0
        self.tokens = EpisodeTokens(runner.chat)

    # -------------------------------------------------------------- lifecycle
    def start(self) -> None:
        lim = self.r.limits
        obs = self.session.reset(
            seed=self.trace.spec.seed, tokenizer_name=lim.tokenizer_name, total_budget=lim.total_budget
        )
        self.obs = obs
        self.trace.reset_metadata = dict(obs.metadata or {})
        self.trace.num_questions = int(obs.num_questions)
        env_questions = getattr(getattr(self.session, "env", None), "questions", None)
        if env_questions is not None:
            self.trace.questions = [(q.problem_type, q.difficulty, q.gold_answer) for q in env_questions]
        self.trace.prompt_ids = self.tokens.start(self._shown(obs))
        if obs.done:
            self._finish(obs)
        elif len(self.trace.prompt_ids) + lim.min_turn_tokens > lim.max_episode_tokens:
            self._forfeit_rest()

    def context(self) -> list[int]:
        return self.tokens.context()

    def _shown(self, obs: Any) -> Any:
        """``obs`` as the model is prompted with it: ``step_token_cap`` set to the turn cap applied."""
        return capped_observation(obs, self.r.limits.turn_cap(obs)) if obs.step_token_cap else obs

    def cap(self) -> int:
        room = self.r.limits.max_episode_tokens - len(self.trace.prompt_ids) - len(self.trace.completion_ids)
        step_cap = self.r.limits.turn_cap(self.obs) if self.obs.step_token_cap else 0
        if step_cap <= 0:  # soft mode with no cap set, or a server that does not send it
            step_cap = room
        self._pending_cap = max(1, min(step_cap, room))
        return self._pending_cap

    def apply(self, gen: Generation, latency_s: float) -> None:
        """Append a model turn, step the environment, append the next environment turn."""
        tr = self.trace
        start, end = self.tokens.add_model_turn(gen.ids, gen.logprobs)
        self._sync()
        tr.turns.append(TurnInfo(start, end, self._pending_cap, gen.finished, latency_s))
        text = self.r.tokenizer.decode(gen.ids, skip_special_tokens=True)
        grading = self.r.chat.grading_response(text)
        # Charged at least the ids the model generated for the text (the stop token that ends
        # the turn is not part of the response): decode + re-encode can merge tokens.
        generated = len(gen.ids) - (1 if gen.ids and gen.ids[-1] in self.r.backend.eos_ids else 0)
        obs = self.session.step(text, grading, generated)
        self._record(obs, text, latency_s, grading)
        if obs.done:
            self._finish(obs)
            return
        env_ids = self.tokens.next_question_ids(self._shown(obs))
        if len(self.context()) + len(env_ids) + self.r.limits.min_turn_tokens > self.r.limits.max_episode_tokens:
            self._forfeit_rest()
            return
        self.tokens.add_env_turn(env_ids)
        self._sync()

    def _sync(self) -> None:
        tr, tk = self.trace, self.tokens
        tr.completion_ids, tr.env_mask, tr.logprobs = tk.completion_ids, tk.env_mask, tk.logprobs

    def _record(self, obs: Any, response: str, latency_s: float | None, grading_response: str | None = None) -> None:
        self.obs = obs
        tr = self.trace
        row = step_row_from_observation(
            obs,
            run_id=self.r.run_id,
            policy=self.r.policy,
            episode=tr.spec.episode,
            reset_metadata=tr.reset_metadata,
            hard_cap_mode=bool(tr.reset_metadata.get("hard_cap_mode", True)),
            response=response,
            grading_response=grading_response,
            max_response_chars=self.r.limits.max_response_chars,
            group=tr.spec.group,
            member=tr.spec.member,
            latency_s=latency_s,
        )
        tr.steps.append(row)
        tr.reward += float(row.reward)
        for k, v in row.components.items():
            tr.components[k] = tr.components.get(k, 0.0) + float(v)
        env_total = (obs.metadata or {}).get("episode_reward")
        if env_total is not None:
            tr.env_episode_reward = float(env_total)

    def _forfeit_rest(self) -> None:
        while not self.obs.done:
            obs = self.session.step("", None)
            self.trace.forfeited += 1
            self._record(obs, "", None)
        self._finish(self.obs)

    def _finish(self, obs: Any) -> None:
        tr = self.trace
        tr.done_reason = obs.done_reason
        if not tr.completion_ids:  # TRL needs a non-empty completion; nothing here is trained
            tr.completion_ids = [self.r.backend.eos_ids[0]]
            tr.env_mask = [0]
            tr.logprobs = [0.0]
        self.done = True
        try:
            self.session.close()
        except Exception:  # noqa: BLE001 - a dropped remote session must not lose the episode
            pass


class EpisodeRunner:
    """Plays episodes with a generation backend and an environment factory.

    Args:
        backend: A :class:`~training.generation.GenerationBackend`.
        env_factory: :class:`~training.envs.InProcessEnvFactory` or
            :class:`~training.envs.RemoteEnvFactory`.
        chat: The :class:`~reasoning_env.conversation.ChatFormat` of the policy's tokenizer.
        limits: :class:`RolloutLimits`.
        run_id, policy: Written to the step rows.
        env_workers: Threads stepping remote environments in parallel (in-process: 1).
    """

    def __init__(
        self,
        backend: GenerationBackend,
        env_factory: Any,
        chat: ChatFormat,
        *,
        limits: RolloutLimits | None = None,
        run_id: str = "run",
        policy: str = "grpo",
        env_workers: int = 8,
    ) -> None:
        self.backend = backend
        self.env_factory = env_factory
        self.chat = chat
        self.tokenizer = chat.tokenizer
        self.limits = limits or RolloutLimits()
        self.run_id = run_id
        self.policy = policy
        self.env_workers = env_workers if getattr(env_factory, "remote", False) else 1

    def _start_all(self, specs: list[EpisodeSpec]) -> list[_LiveEpisode]:
        eps = [_LiveEpisode(self, s) for s in specs]
        self._map(lambda e: e.start(), eps)
        return eps

    def _map(self, fn, items: list) -> None:
        if self.env_workers > 1 and len(items) > 1:
            with ThreadPoolExecutor(max_workers=min(self.env_workers, len(items))) as pool:
                list(pool.map(fn, items))
        else:
            for it in items:
                fn(it)

    def play_lockstep(self, specs: list[EpisodeSpec]) -> list[EpisodeTrace]:
        """Play all ``specs`` together: one generate call per turn for every live episode.

        Returns:
            One :class:`EpisodeTrace` per spec, in order.
        """
        eps = self._start_all(specs)
        while True:
            live = [e for e in eps if not e.done]
            contexts = [e.context() for e in live]
            caps = [e.cap() for e in live]
            if self.backend.collective:
                n_max, cap_max = self.backend.sync_max([len(live), max(caps) if caps else 1])
                if n_max == 0:
                    break
                pad = n_max - len(live)
                contexts += [list(self.backend.pad_context)] * pad
                caps += [1] * pad
                call_max = cap_max  # every process asks vLLM for the same max_tokens
            elif not live:
                break
            else:
                call_max = None
            t0 = time.perf_counter()
            gens = self.backend.generate(contexts, caps, call_max_tokens=call_max)
            latency = time.perf_counter() - t0
            pairs = list(zip(live, gens[: len(live)]))
            self._map(lambda p, latency=latency: p[0].apply(p[1], latency), pairs)
        return [e.trace for e in eps]

    def play_sequential(self, specs: list[EpisodeSpec]) -> list[EpisodeTrace]:
        """Play ``specs`` one after another, one generate call (batch of 1) per turn."""
        traces = []
        for spec in specs:
            ep = _LiveEpisode(self, spec)
            ep.start()
            while not ep.done:
                t0 = time.perf_counter()
                gen = self.backend.generate([ep.context()], [ep.cap()])[0]
                ep.apply(gen, time.perf_counter() - t0)
            traces.append(ep.trace)
        return traces

"""Generation backends for rollouts: one batched call per turn, a per-sequence token cap.

A backend turns a batch of token-id contexts into one model turn each:

    backend.generate(contexts: list[list[int]], caps: list[int]) -> list[Generation]

where ``caps[i]`` is the most tokens sequence ``i`` may generate this turn (the environment's
``step_token_cap``, further limited by the context room). Each :class:`Generation` holds the
sampled ids (cut at the cap and after the first EOS, which is kept) and the log-probability of
each sampled id under the sampling distribution (after temperature / top-k / top-p), aligned one
to one.

Backends:

- :class:`TransformersBackend`: ``model.generate`` with left padding; the last logits processor
  draws each token (inverse-CDF sampling after temperature / top-k / top-p) and records its
  log-prob (memory ``batch x vocab``, not ``steps x batch x vocab``).
- :class:`TrlVLLMBackend`: the trainer's ``vllm_generation`` (TRL ``VLLMGeneration``: colocate or
  server mode; with Unsloth ``fast_inference`` it is Unsloth's shared-weight engine with the
  LoRA adapter injected by Unsloth's patch). vLLM takes one ``max_tokens`` per call, so the
  call uses the largest cap and each sequence is cut to its own cap afterwards: a sample cut
  after ``k`` tokens has exactly the distribution of a sample with ``max_tokens=k``.

Truncating samples is exact because autoregressive sampling draws token ``t`` from
``p(. | prefix)`` whatever the later limit is.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class Generation:
    """One generated turn.

    Attributes:
        ids: Sampled token ids (``[n]``, ``n <= cap``); ends with an EOS id when ``finished``.
        logprobs: ``[n]`` log-probabilities (natural log) of ``ids`` under the sampling
            distribution; same length as ``ids``.
        finished: The turn ended with an EOS token (else it hit its cap).
    """

    ids: list[int]
    logprobs: list[float]
    finished: bool


@dataclass
class SamplingConfig:
    """Sampling settings shared by every backend (TRL's ``GRPOConfig`` names)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    repetition_penalty: float = 1.0

    @classmethod
    def from_trl(cls, args: Any) -> SamplingConfig:
        """Copy ``temperature``, ``top_p``, ``top_k``, ``repetition_penalty`` from a ``GRPOConfig``."""
        top_k = getattr(args, "top_k", None)
        return cls(
            temperature=float(getattr(args, "temperature", 1.0)),
            top_p=float(getattr(args, "top_p", 1.0)),
            top_k=int(top_k) if top_k else None,
            repetition_penalty=float(getattr(args, "repetition_penalty", 1.0) or 1.0),
        )


@dataclass
class BackendStats:
    """Counters of a backend: ``calls`` (generate calls), ``sequences`` (contexts generated for),
    ``tokens`` (ids returned after cutting), ``seconds`` (wall time inside generate)."""

    calls: int = 0
    sequences: int = 0
    tokens: int = 0
    seconds: float = 0.0
    #: Sequence-steps decoded: per call, batch size x steps the call ran (the longest sequence).
    #: ``1 - tokens / decode_slots`` is the share spent on sequences that had already stopped.
    decode_slots: int = 0

    def as_dict(self) -> dict:
        return {
            "calls": self.calls,
            "sequences": self.sequences,
            "tokens": self.tokens,
            "seconds": self.seconds,
            "decode_slots": self.decode_slots,
        }


def cut_generation(ids: Sequence[int], logprobs: Sequence[float], cap: int, eos_ids: Iterable[int]) -> Generation:
    """Cut a sampled sequence at ``cap`` tokens and just after its first EOS.

    Args:
        ids: Sampled ids (possibly padded after EOS, possibly longer than ``cap``).
        logprobs: Their log-probs (same length as ``ids``, or longer).
        cap: Most tokens to keep (>= 0).
        eos_ids: Ids that end a turn.
    Returns:
        The :class:`Generation`.
    """
    eos = set(int(e) for e in eos_ids)
    out_ids: list[int] = []
    out_lp: list[float] = []
    finished = False
    for i, tok in enumerate(ids):
        if len(out_ids) >= cap:
            break
        out_ids.append(int(tok))
        out_lp.append(float(logprobs[i]))
        if int(tok) in eos:
            finished = True
            break
    return Generation(out_ids, out_lp, finished)


class GenerationBackend:
    """Base class: subclasses implement :meth:`_generate`. ``stats`` counts calls.

    Attributes:
        eos_ids: Token ids that end a turn.
        collective: ``True`` when every process must call :meth:`generate` the same number of
            times with the same batch size (vLLM server mode or tensor parallelism across
            processes); the rollout loop then pads with dummy contexts.
    """

    collective: bool = False

    def __init__(self, eos_ids: Iterable[int]) -> None:
        self.eos_ids = [int(e) for e in dict.fromkeys(int(e) for e in eos_ids)]
        if not self.eos_ids:
            raise ValueError("a generation backend needs at least one EOS token id")
        self.stats = BackendStats()

    @property
    def pad_context(self) -> list[int]:
        """A one-token context used to pad collective calls."""
        return [self.eos_ids[0]]

    def sync_max(self, values: list[int]) -> list[int]:
        """Element-wise maximum of ``values`` over all processes (identity in one process)."""
        return list(values)

    def generate(
        self, contexts: list[list[int]], caps: list[int], call_max_tokens: int | None = None
    ) -> list[Generation]:
        """Generate one turn for each context.

        Args:
            contexts: ``B`` token-id lists (each non-empty).
            caps: ``B`` caps (tokens, >= 1).
            call_max_tokens: ``max_tokens`` of the underlying call when it must be the same on
                every process (collective calls); default ``max(caps)``.
        Returns:
            ``B`` :class:`Generation` objects, in order.
        Raises:
            ValueError: lengths differ, an empty context, or a cap < 1.
        """
        if len(contexts) != len(caps):
            raise ValueError(f"{len(contexts)} contexts but {len(caps)} caps")
        if not contexts:
            return []
        if any(len(c) == 0 for c in contexts):
            raise ValueError("every context needs at least one token")
        if any(int(c) < 1 for c in caps):
            raise ValueError(f"caps must be >= 1 token, got {caps}")
        t0 = time.perf_counter()
        call_max = int(call_max_tokens) if call_max_tokens else max(int(c) for c in caps)
        out = self._generate([list(map(int, c)) for c in contexts], [int(c) for c in caps], call_max)
        self.stats.seconds += time.perf_counter() - t0
        self.stats.calls += 1
        self.stats.sequences += len(contexts)
        self.stats.tokens += sum(len(g.ids) for g in out)
        self.stats.decode_slots += len(out) * max((len(g.ids) for g in out), default=0)
        return out

    def _generate(
        self, contexts: list[list[int]], caps: list[int], call_max: int
    ) -> list[Generation]:  # pragma: no cover
        raise NotImplementedError

    @contextlib.contextmanager
    def temperature(self, value: float):
        """Generate at ``value`` (0 = greedy) inside the block (held-out evaluation), then restore: replaces
        the temperature of a backend's :class:`SamplingConfig` (``self.sampling``).

        Raises:
            NotImplementedError: the backend keeps no ``sampling`` of its own (it overrides this instead).
        """
        old = getattr(self, "sampling", None)
        if old is None:
            raise NotImplementedError(f"{type(self).__name__} cannot change its temperature")
        self.sampling = dataclasses.replace(old, temperature=float(value))
        try:
            yield self
        finally:
            self.sampling = old


# ---------------------------------------------------------------------- transformers
def _sampler_class():
    import torch
    from transformers import LogitsProcessor

    class InverseCdfSampler(LogitsProcessor):
        """Last logits processor: samples the next token itself and records its log-prob.

        With ``m = max(scores)`` and ``c = cumsum(exp(scores - m))`` (unnormalised CDF), the token
        is the first index where ``c > u * c[-1]`` for a uniform ``u`` (inverse-CDF sampling:
        exact, and far cheaper on CPU than ``torch.multinomial`` over a 150k vocabulary); its
        log-prob is ``scores[tok] - m - log(c[-1])``. The scores returned are the input with
        ``+inf`` at the drawn token, so ``generate``'s greedy step (``do_sample=False``) picks
        exactly it. ``logprobs`` collects one ``[B]`` tensor per step.
        """

        def __init__(self, greedy: bool = False) -> None:
            self.logprobs: list = []
            self.greedy = greedy

        def __call__(self, input_ids, scores):
            s = scores.float()
            if self.greedy:  # argmax, with its log-prob under the unscaled distribution
                tok = s.argmax(dim=-1, keepdim=True)
                self.logprobs.append((s.gather(1, tok) - s.logsumexp(dim=-1, keepdim=True)).squeeze(1))
                return scores.scatter_(1, tok, float("inf"))
            m = s.max(dim=-1, keepdim=True).values
            cdf = (s - m).exp_().cumsum_(dim=-1)
            total = cdf[:, -1:]
            u = torch.rand((s.size(0), 1), device=s.device) * total
            tok = torch.searchsorted(cdf, u, right=True).clamp_(max=s.size(-1) - 1)
            self.logprobs.append((s.gather(1, tok) - m - total.log()).squeeze(1))
            return scores.scatter_(1, tok, float("inf"))  # in place: the scores are not used again

        def stacked(self, batch: int):
            if not self.logprobs:
                return torch.zeros((batch, 0))
            return torch.stack(self.logprobs, dim=1)

    return InverseCdfSampler


class TransformersBackend(GenerationBackend):
    """Batched ``model.generate`` (left padding, KV cache) with sampled-token log-probs.

    Args:
        model_context: A callable returning a context manager that yields the model to generate
            with (e.g. TRL's ``unwrap_model_for_generation``); or pass ``model=`` for a plain model.
        model: A ``transformers`` causal LM (used when ``model_context`` is ``None``).
        pad_token_id: Padding id for the batch.
        eos_ids: Ids that end a turn.
        sampling: :class:`SamplingConfig`.
        device: Where inputs go (default: the model's device).
        extra_processors: ``f(contexts, caps, width) -> [LogitsProcessor]`` applied before sampling
            each call (``width`` = padded context length); the benchmark's stop rule uses it.

    The log-probs are those of the sampling distribution: temperature, top-k and top-p are
    applied by this backend's own processors, then its sampler draws the token (inverse CDF)
    and records ``log p`` of it; ``generate`` then runs greedy, which picks the drawn token.
    """

    def __init__(
        self,
        *,
        model: Any = None,
        model_context: Callable[[], Any] | None = None,
        pad_token_id: int,
        eos_ids: Iterable[int],
        sampling: SamplingConfig | None = None,
        device: Any = None,
        extra_processors: Callable[[list[list[int]], list[int], int], list] | None = None,
    ) -> None:
        super().__init__(eos_ids)
        self.extra_processors = extra_processors
        if model is None and model_context is None:
            raise ValueError("TransformersBackend needs model= or model_context=")
        self.model = model
        self.model_context = model_context
        self.pad_token_id = int(pad_token_id)
        self.sampling = sampling or SamplingConfig()
        self.device = device

    def _context(self):
        if self.model_context is not None:
            return self.model_context()
        return contextlib.nullcontext(self.model)

    def _generate(self, contexts: list[list[int]], caps: list[int], call_max: int) -> list[Generation]:
        import torch
        from transformers import GenerationConfig, LogitsProcessorList
        from transformers.generation.logits_process import (
            RepetitionPenaltyLogitsProcessor,
            TemperatureLogitsWarper,
            TopKLogitsWarper,
            TopPLogitsWarper,
        )

        s = self.sampling
        greedy = s.temperature == 0
        processors = LogitsProcessorList()
        if s.repetition_penalty and s.repetition_penalty != 1.0:
            processors.append(RepetitionPenaltyLogitsProcessor(s.repetition_penalty))
        if not greedy:
            if s.temperature != 1.0:
                processors.append(TemperatureLogitsWarper(s.temperature))
            if s.top_k:
                processors.append(TopKLogitsWarper(top_k=s.top_k))
            if s.top_p < 1.0:
                processors.append(TopPLogitsWarper(top_p=s.top_p))
        width = max(len(c) for c in contexts)
        if self.extra_processors is not None:
            processors.extend(self.extra_processors(contexts, caps, width))
        sampler = _sampler_class()(greedy=greedy)
        processors.append(sampler)
        # Greedy over the sampler's output (+inf at the drawn token): our processors run in a known
        # order and no built-in warper or multinomial runs after them.
        gen_config = GenerationConfig(
            do_sample=False,
            max_new_tokens=call_max,
            pad_token_id=self.pad_token_id,
            eos_token_id=list(self.eos_ids),
            bos_token_id=None,
            return_dict_in_generate=True,
        )
        input_ids = torch.full((len(contexts), width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(contexts), width), dtype=torch.long)
        for i, c in enumerate(contexts):
            input_ids[i, width - len(c) :] = torch.tensor(c, dtype=torch.long)
            attention[i, width - len(c) :] = 1
        with self._context() as model:
            device = self.device if self.device is not None else next(model.parameters()).device
            was_training = model.training
            model.eval()
            try:
                with torch.no_grad():
                    out = model.generate(
                        input_ids=input_ids.to(device),
                        attention_mask=attention.to(device),
                        generation_config=gen_config,
                        logits_processor=processors,
                    )
            finally:
                if was_training:
                    model.train()
        sequences = out.sequences if hasattr(out, "sequences") else out
        new = sequences[:, width:].cpu()
        logps = sampler.stacked(len(contexts)).cpu()
        result = []
        for i, cap in enumerate(caps):
            result.append(cut_generation(new[i].tolist(), logps[i].tolist(), cap, self.eos_ids))
        return result


# ---------------------------------------------------------------------- vLLM through TRL
class TrlVLLMBackend(GenerationBackend):
    """Generation through a TRL ``GRPOTrainer``'s ``vllm_generation`` (``VLLMGeneration``).

    Calls ``trainer.vllm_generation.generate(prompts=contexts, images=None, num_generations=1)``
    (TRL 1.15/1.16 signature; returns ``prompt_ids, completion_ids, logprobs,
    logprob_token_ids``) with ``max_completion_length`` set for that call, then cuts each sequence
    to its own cap. vLLM takes one ``max_tokens`` per call, and no sequence may be asked past its
    context room (``max_model_len`` minus its context, ``max_model_len`` being the trainer's
    ``vllm_max_model_length``, i.e. ``--max_episode_tokens``): a call asks for the largest cap of the
    sequences it serves, and a sequence whose room is below that (a late episode next to a fresh one)
    waits for a later call of the same turn with a smaller ``max_tokens``. Usually one call per turn;
    ``engine_calls`` counts them. In collective mode every process makes the same calls with the same
    ``max_tokens`` and batch size (synced). Weights are synced by the trainer before ``rollout_func``
    runs (TRL ``_generate``). Not run in this repository's CI (needs a GPU).

    Args:
        trainer: The ``GRPOTrainer`` (``use_vllm=True``).
        eos_ids: Ids that end a turn.
    """

    def __init__(self, trainer: Any, eos_ids: Iterable[int]) -> None:
        super().__init__(eos_ids)
        if getattr(trainer, "vllm_generation", None) is None:
            raise RuntimeError("TrlVLLMBackend needs a GRPOTrainer built with use_vllm=True")
        self.trainer = trainer
        self.vg = trainer.vllm_generation
        mode = getattr(self.vg, "mode", "colocate")
        tp = int(getattr(self.vg, "tensor_parallel_size", 1) or 1)
        self.collective = trainer.accelerator.num_processes > 1 and (mode == "server" or tp > 1)
        limit = getattr(getattr(trainer, "args", None), "vllm_max_model_length", None)
        if limit is None:
            limit = getattr(self.vg, "max_model_length", None)
        #: The engine's context length (prompt + generated tokens), or ``None`` when unknown.
        self.max_model_len: int | None = int(limit) if limit else None
        #: Calls made to the engine (one per turn unless a sequence's room forced a second).
        self.engine_calls = 0

    def sync_max(self, values: list[int]) -> list[int]:
        if self.trainer.accelerator.num_processes == 1:
            return list(values)
        import torch

        local = torch.tensor([int(v) for v in values], device=self.trainer.accelerator.device)
        gathered = self.trainer.accelerator.gather(local.unsqueeze(0))
        return [int(v) for v in gathered.view(-1, len(values)).max(dim=0).values.tolist()]

    @contextlib.contextmanager
    def temperature(self, value: float):
        """Sets ``VLLMGeneration.temperature`` (read at each ``generate`` call in TRL 1.15/1.16) for
        the block; with Unsloth's engine the same attribute is read (not run here: no GPU)."""
        old = self.vg.temperature
        self.vg.temperature = float(value)
        try:
            yield self
        finally:
            self.vg.temperature = old

    def _room(self, context: list[int]) -> int | None:
        if self.max_model_len is None:
            return None
        room = self.max_model_len - len(context)
        if room < 1:
            raise ValueError(
                f"a context of {len(context)} tokens leaves no room under the engine's max_model_len "
                f"{self.max_model_len}"
            )
        return room

    def _generate(self, contexts: list[list[int]], caps: list[int], call_max: int) -> list[Generation]:
        rooms = [self._room(c) for c in contexts]
        for i, (room, cap) in enumerate(zip(rooms, caps)):
            if room is not None and cap > room:
                raise ValueError(f"sequence {i} asks for {cap} tokens with {room} left under max_model_len")
        result: list[tuple[list[int], list[float]] | None] = [None] * len(contexts)
        pending = list(range(len(contexts)))
        while True:
            want = max((caps[i] for i in pending), default=0)
            if self.collective:
                want = self.sync_max([want])[0]
            if want == 0:
                break
            # the sequence holding the largest cap always fits (cap <= room), so each round serves one
            take = [i for i in pending if rooms[i] is None or rooms[i] >= want]
            batch = [contexts[i] for i in take]
            if self.collective:  # every process sends the same number of prompts
                n = self.sync_max([len(take)])[0]
                batch += [list(self.pad_context)] * (n - len(take))
            served = self._call(batch, want) if batch else []
            for j, i in enumerate(take):
                result[i] = served[j]
            taken = set(take)
            pending = [i for i in pending if i not in taken]
        return [cut_generation(r[0], r[1], cap, self.eos_ids) for r, cap in zip(result, caps)]  # type: ignore[index]

    def _call(self, prompts: list[list[int]], max_tokens: int) -> list[tuple[list[int], list[float]]]:
        old = self.vg.max_completion_length
        self.vg.max_completion_length = int(max_tokens)
        try:
            _, completion_ids, logprobs, logprob_token_ids = self.vg.generate(
                prompts=prompts, images=None, num_generations=1
            )
        finally:
            self.vg.max_completion_length = old
        self.engine_calls += 1
        out = []
        for i in range(len(prompts)):
            ids = list(completion_ids[i])
            lps = sampled_logprobs(
                ids,
                logprobs[i] if logprobs is not None else None,
                logprob_token_ids[i] if logprob_token_ids is not None else None,
            )
            out.append((ids, lps))
        return out


def sampled_logprobs(ids: list[int], logprobs: list | None, token_ids: list | None) -> list[float]:
    """The log-prob of each sampled id from vLLM's per-position top-k lists.

    Args:
        ids: ``[n]`` sampled ids.
        logprobs: ``[n][k]`` log-probs sorted by rank (TRL ``extract_logprobs``), entries may be
            ``None`` (NaN); or ``None`` when vLLM returned none.
        token_ids: ``[n][k]`` the matching token ids, or ``None``.
    Returns:
        ``[n]`` floats; the sampled token's entry when found in ``token_ids`` (vLLM always
        includes it), else the rank-0 entry (what TRL itself uses); ``nan`` when missing.
    """
    if logprobs is None:
        return [float("nan")] * len(ids)
    out = []
    for t, tok in enumerate(ids):
        row = logprobs[t] if t < len(logprobs) else []
        value = None
        if token_ids is not None and t < len(token_ids):
            for j, cand in enumerate(token_ids[t]):
                if cand == tok and j < len(row):
                    value = row[j]
                    break
        if value is None and row:
            value = row[0]
        out.append(float("nan") if value is None else float(value))
    return out

"""LLM policies: any OpenAI-compatible chat endpoint, or a local ``transformers`` model.

Both render the episode with :mod:`reasoning_env.conversation`, the format GRPO training plays:
by default ``format="multi_turn"`` (one growing conversation: system, question 1, answer 1,
question 2, ...) with earlier reasoning kept (``history_thinking="keep"``); ``"single_turn"``
(each question alone, the seed's baselines) and ``history_thinking="strip"`` (Qwen3's inference
template rule) are explicit options. The local ``transformers`` policy builds its prompt token ids
exactly as the training rollout does (:class:`~reasoning_env.conversation.EpisodeTokens`), so a
trained checkpoint is evaluated on the token sequence it was trained on; a model folder written by
``training`` carries ``episode_format.json``, which sets the format unless one is passed. Through an
OpenAI-compatible endpoint the server applies the model's chat template to the messages (a Qwen3
server drops earlier ``<think>`` blocks unless it is started with a prefix-preserving template such
as TRL's ``qwen3_training.jinja``).

Answers given by someone else in the same episode (Play: a person types one) must be passed to
:meth:`record_answer` so the conversation stays whole. Generation is capped per answer by a
:class:`~reasoning_env.policies.turn_cap.TurnCap`: by default twice the remaining budget per
remaining question (at least 64 tokens), never above the observation's ``step_token_cap``, so one
looping answer cannot spend the whole episode; ``turn_cap="env"`` applies ``step_token_cap`` alone,
and ``max_tokens`` lowers either. The prompt states the cap applied.

Token accounting: the environment counts the returned text with the episode's tokenizer (choose
the model's own with ``tokenizer_name``); the policy also records what the generator reported
(``policy_tokens``: the endpoint's ``usage.completion_tokens`` or the number of generated ids;
``policy_prompt_tokens``), so a mismatch between the two is visible in the trajectories.

Qwen3-style thinking: if the text holds ``<think>...</think>``, the visible part after the last
``</think>`` is passed as ``grading_response`` (the whole text is still charged). Endpoints that
return the reasoning separately (vLLM/SGLang ``reasoning_content``, some APIs ``reasoning``) get
it re-joined as ``<think>\\n{reasoning}\\n</think>\\n\\n{content}`` so its tokens are charged too.

Environment variables (the seed's names) configure :func:`openai_policy_from_env`:
``BASELINE_API_BASE_URL``, ``BASELINE_API_KEY``, ``BASELINE_API_MODEL`` (``kind="api"``) and
``BASELINE_LOCAL_BASE_URL``, ``BASELINE_LOCAL_API_KEY``, ``BASELINE_LOCAL_MODEL``
(``kind="local"``).
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

from reasoning_env.conversation import (
    REASONING_MODES,
    ChatFormat,
    ChatFormatError,
    EpisodeConversation,
    EpisodeTokens,
    check_format,
)
from reasoning_env.offline_model import ResolvedModel, model_spec_for, resolve_model
from reasoning_env.policies.base import BasePolicy, EpisodeInfo, PolicyError, PolicyOutput, obs_get
from reasoning_env.policies.turn_cap import TurnCap, capped_observation
from reasoning_env.prompting import SYSTEM_PROMPT

#: File a training run writes next to its weights: the episode format the model was trained in.
EPISODE_FORMAT_FILE = "episode_format.json"

logger = logging.getLogger(__name__)

__all__ = ["OpenAIChatPolicy", "TransformersPolicy", "model_line", "openai_policy_from_env", "split_thinking"]

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


def split_thinking(text: str) -> tuple[str, str | None]:
    """Split a Qwen3-style response.

    Returns:
        ``(response, grading_response)``: the text unchanged, and the visible part after the last
        ``</think>`` (``None`` when there is no ``</think>``; ``""`` when nothing follows it).
    """
    close = text.rfind("</think>")
    if close == -1:
        return text, None
    return text, text[close + len("</think>") :].strip()


def _joined(content: str, reasoning: str) -> str:
    """The answer as charged: reasoning the server returned separately re-joined in ``<think>`` tags."""
    if reasoning and "</think>" not in content:
        return f"<think>\n{reasoning}\n</think>\n\n{content}"
    return content


def model_line(desc: dict[str, Any]) -> str:
    """Where an LLM policy's answers come from, in one phrase, from its ``describe()`` (as saved in
    ``run.json``): ``"real model: embedded:qwen2.5-coder-0.5b (Qwen/Qwen2.5-Coder-0.5B-Instruct,
    GGUF Q4_K_M via PyPI), vLLM 0.32.0 on CPU"``."""
    info = desc.get("model_info") or {}
    name = info.get("name") or desc.get("model") or "?"
    upstream = info.get("upstream")
    what = f"{name} ({upstream}, GGUF Q4_K_M via PyPI)" if upstream and upstream != name else str(name)
    eng = desc.get("engine") or {}
    engine = {"vllm": "vLLM", "transformers": "transformers"}.get(eng.get("engine"), eng.get("engine") or "")
    if eng.get("engine_version"):
        engine += f" {eng['engine_version']}"
    where = eng.get("device")
    if where:
        engine += f" on {str(where).upper() if str(where) in ('cpu', 'gpu') else where}"
    if eng.get("dtype") and eng.get("engine") == "transformers":
        engine += f" ({eng['dtype']})"
    return f"real model: {what}" + (f", {engine}" if engine else "")


def read_episode_format(model_dir: Any) -> dict[str, Any]:
    """The ``episode_format.json`` of a model folder (``{}`` when absent or unreadable): keys
    ``format``, ``history_thinking``, ``reasoning_mode``, ``system_prompt``, ``history_len``."""
    import json
    from pathlib import Path

    try:
        path = Path(os.path.expanduser(str(model_dir))) / EPISODE_FORMAT_FILE
        return dict(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else {}
    except (OSError, ValueError, TypeError):
        return {}


class _ConversationPolicy(BasePolicy):
    """Shared episode bookkeeping of the LLM policies: one :class:`EpisodeConversation` per episode."""

    format: str = "multi_turn"
    history_thinking: str = "keep"
    system_prompt: str | None = SYSTEM_PROMPT

    def _init_format(self, format: str, history_thinking: str) -> None:
        check_format(format, history_thinking)
        self.format = format
        self.history_thinking = history_thinking
        self._conv: EpisodeConversation | None = None

    def reset(self, info: EpisodeInfo) -> None:
        """Start an episode: a fresh conversation."""
        super().reset(info)
        self._conv = None

    def clone(self) -> _ConversationPolicy:
        """A copy for a parallel worker, with its own conversation."""
        twin = super().clone()
        twin._conv = None
        return twin

    def _new_episode(self) -> None:
        """Hook: a new episode's conversation starts (subclasses reset their token state)."""

    def _ask(self, obs: Any) -> EpisodeConversation:
        """The conversation with ``obs``'s question asked (a new one at question 1).

        Raises:
            PolicyError: multi-turn, and answers to earlier questions are missing (given by
                another actor without :meth:`record_answer`).
        """
        idx = int(obs_get(obs, "question_index", 0) or 0)
        conv = self._conv
        if conv is None or idx == 0 or idx < conv.answered:
            conv = self._conv = EpisodeConversation(
                format=self.format, history_thinking=self.history_thinking, system_prompt=self.system_prompt
            )
            self._new_episode()
        if conv.turns and conv.turns[-1][1] is None:  # asked before without an answer (a retry)
            conv.turns.pop()
            self._drop_open_question()
        if self.format == "multi_turn" and conv.answered != idx:
            raise PolicyError(
                f"{self.name}: the conversation holds {conv.answered} answers but the "
                f"observation is question {idx + 1}; "
                "answers given by someone else must be passed to record_answer(obs, response)"
            )
        conv.ask(obs)
        return conv

    def _drop_open_question(self) -> None:
        """Hook: the open question is asked again (subclasses undo its tokens)."""

    def record_answer(self, obs: Any, response: str) -> None:
        """Add an answer this policy did not write (Play: a person typed it) to the conversation,
        so that the next question is asked with the whole episode in context.

        Args:
            obs: The observation the answer replied to (before the step).
            response: The text sent to the environment.
        """
        self._ask(obs)
        self._answered(response, None)

    def _answered(self, text: str, ids: list[int] | None) -> None:
        assert self._conv is not None
        self._conv.answer(text)


def _turn_cap(turn_cap: TurnCap | str | None, max_tokens: int | None) -> TurnCap:
    if isinstance(turn_cap, TurnCap):
        if max_tokens is not None and turn_cap.max_tokens is None:
            return TurnCap(turn_cap.rule, turn_cap.factor, turn_cap.floor, int(max_tokens))
        return turn_cap
    return TurnCap(turn_cap or "share", max_tokens=int(max_tokens) if max_tokens is not None else None)


class OpenAIChatPolicy(_ConversationPolicy):
    """A chat model behind an OpenAI-compatible ``/chat/completions`` endpoint (hosted API, vLLM,
    llama.cpp server, SGLang, ...), called with ``httpx``.

    Args:
        base_url: API root, e.g. ``https://api.example.com/v1`` or ``http://127.0.0.1:8001/v1``.
        model: Model name sent in the request.
        api_key: Bearer token (``None``: no Authorization header).
        name: Row label (default ``llm_api``).
        tokenizer_name: Tokenizer the environment counts with (the model's; default: the model
            name if it loads with :func:`~reasoning_env.tokenization.get_tokenizer`, else the
            config's, with a warning in the run metadata).
        temperature: Sampling temperature (default 0.0).
        max_tokens: Extra fixed cap on generated tokens per answer.
        turn_cap: The per-answer cap rule: a :class:`~reasoning_env.policies.turn_cap.TurnCap`,
            ``"share"`` (default: 2 x the remaining budget per remaining question, at least 64) or
            ``"env"`` (``step_token_cap`` alone).
        max_tokens_field: Request field carrying the cap (``"max_tokens"``, or
            ``"max_completion_tokens"`` for APIs that require it).
        timeout_s: Per-request timeout (seconds).
        retries: Extra attempts after a timeout, connection error or HTTP 408/409/425/429/5xx.
        backoff_s: First retry delay (seconds); doubles each attempt with +-25% jitter; a
            ``Retry-After`` header (seconds) is honoured up to 60 s.
        extra_body: Extra JSON fields merged into every request (e.g. ``{"top_p": 0.95}`` or
            vLLM's ``{"chat_template_kwargs": {"enable_thinking": false}}``).
        system_prompt: System message (default: the template's).
        seed: Sent as the request ``seed`` (for endpoints that honour it); ``None`` to omit.
        format: ``"multi_turn"`` (default: the whole episode so far, as training plays it) or
            ``"single_turn"`` (each question alone).
        history_thinking: ``"keep"`` (earlier answers as generated) or ``"strip"`` (only their text
            after ``</think>``); see :mod:`reasoning_env.conversation`.

    Raises:
        ValueError: empty ``base_url`` or ``model``; unknown format.
    """

    kind = "llm"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        name: str = "llm_api",
        tokenizer_name: str | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        max_tokens_field: str = "max_tokens",
        turn_cap: TurnCap | str | None = None,
        timeout_s: float = 300.0,
        retries: int = 4,
        backoff_s: float = 1.0,
        extra_body: dict[str, Any] | None = None,
        system_prompt: str | None = SYSTEM_PROMPT,
        seed: int | None = None,
        format: str = "multi_turn",
        history_thinking: str = "keep",
    ) -> None:
        super().__init__()
        self._init_format(format, history_thinking)
        if not base_url or not str(base_url).strip():
            raise ValueError(
                "base_url is required (e.g. http://127.0.0.1:8001/v1); set --llm-base-url or BASELINE_*_BASE_URL"
            )
        if not model or not str(model).strip():
            raise ValueError("model is required; set --llm-model or BASELINE_*_MODEL")
        self.base_url = str(base_url).rstrip("/")
        self.model = str(model)
        self.api_key = api_key
        self.name = name
        self.tokenizer_name = tokenizer_name
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
        self.turn_cap = _turn_cap(turn_cap, max_tokens)
        self.max_tokens_field = max_tokens_field
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.backoff_s = float(backoff_s)
        self.extra_body = dict(extra_body or {})
        self.system_prompt = system_prompt
        self.seed = seed
        self.engine: dict[str, Any] | None = None
        #: The LoRA adapter the server applies for :attr:`model`, when it names one
        #: (:meth:`reasoning_env.lora_adapter.AdapterInfo.describe`): recorded in ``run.json``.
        self.adapter: dict[str, Any] | None = None
        self._client = None
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        """Settings for ``run.json`` (the API key is never included), with what serves the model and the LoRA
        adapter it applies, if any."""
        spec = model_spec_for(self.model)
        return {
            "engine": self.engine_info(),
            "model_info": ResolvedModel(self.model, self.model, "server", self.model, spec).describe()
            if spec is not None
            else {"name": self.model, "origin": "server"},
            **super().describe(),
            "base_url": self.base_url,
            "model": self.model,
            "tokenizer_name": self.tokenizer_name,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "turn_cap": self.turn_cap.describe(),
            "timeout_s": self.timeout_s,
            "retries": self.retries,
            "format": self.format,
            "history_thinking": self.history_thinking,
            **({"adapter": dict(self.adapter)} if self.adapter else {}),
        }

    def engine_info(self) -> dict[str, Any]:
        """What serves the model, asked once of the server: its ``/v1/models`` entry (``owned_by``:
        ``vllm`` for vLLM) and, for vLLM, ``/version``. Set :attr:`engine` beforehand to state it
        (the evaluation does when it starts vLLM itself: engine, version, device)."""
        if self.engine is not None:
            return dict(self.engine)
        import httpx

        info: dict[str, Any] = {"engine": "openai-compatible server", "base_url": self.base_url}
        try:
            client = self._http()
            r = client.get(f"{self.base_url}/models", timeout=5.0)
            entries = (r.json() or {}).get("data") or [] if r.status_code == 200 else []
            entry = next((e for e in entries if isinstance(e, dict) and e.get("id") == self.model), None)
            if entry is not None and entry.get("owned_by") == "vllm":
                info["engine"] = "vllm"
                root = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
                v = client.get(f"{root}/version", timeout=5.0)
                if v.status_code == 200:
                    info["engine_version"] = (v.json() or {}).get("version")
                info["max_model_len"] = entry.get("max_model_len")
            elif entry is not None:
                info["owned_by"] = entry.get("owned_by")
        except (httpx.HTTPError, ValueError, AttributeError):
            info["probe"] = "the server did not describe itself"
        self.engine = info
        return dict(info)

    def _http(self):
        import httpx

        with self._lock:
            if self._client is None:
                headers = {"Content-Type": "application/json"}
                if self.api_key:
                    headers["Authorization"] = f"Bearer {self.api_key}"
                self._client = httpx.Client(
                    headers=headers, timeout=httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s))
                )
            return self._client

    def _body(self, messages: list[dict], max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            self.max_tokens_field: int(max_tokens),
        }
        if self.seed is not None:
            body["seed"] = int(self.seed)
        body.update(self.extra_body)
        return body

    def complete(self, messages: list[dict], max_tokens: int) -> dict[str, Any]:
        """POST one chat completion with retries.

        Returns:
            The decoded JSON body, plus ``_attempts`` and ``_latency_s`` (seconds, last attempt).

        Raises:
            PolicyError: non-retryable HTTP status, a body without ``choices``, or retries used up.
        """
        import httpx

        body = self._body(messages, max_tokens)
        url = f"{self.base_url}/chat/completions"
        client = self._http()
        last_err = "no attempt made"
        for attempt in range(self.retries + 1):
            t0 = time.perf_counter()
            retry_after = None
            try:
                resp = client.post(url, json=body)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last_err = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code == 200:
                    try:
                        data = resp.json()
                    except ValueError:
                        raise PolicyError(f"{url} returned non-JSON: {resp.text[:300]!r}") from None
                    if not isinstance(data, dict) or not data.get("choices"):
                        raise PolicyError(f"{url} returned no choices: {str(data)[:300]}")
                    data["_attempts"] = attempt + 1
                    data["_latency_s"] = time.perf_counter() - t0
                    return data
                last_err = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if resp.status_code not in RETRY_STATUS:
                    raise PolicyError(f"{url} refused the request ({last_err}); check the model name, key and URL")
                ra = resp.headers.get("retry-after")
                try:
                    retry_after = min(60.0, float(ra)) if ra is not None else None
                except ValueError:
                    retry_after = None
            if attempt < self.retries:
                delay = (
                    retry_after
                    if retry_after is not None
                    else self.backoff_s * (2**attempt) * random.uniform(0.75, 1.25)
                )
                logger.warning(
                    "%s: attempt %d failed (%s); retrying in %.1f s", self.name, attempt + 1, last_err, delay
                )
                time.sleep(delay)
        raise PolicyError(f"{url}: gave up after {self.retries + 1} attempts; last error: {last_err}")

    def act(self, obs: Any) -> PolicyOutput:
        """One chat completion for the current question (the episode so far in the chosen
        format), capped by :attr:`turn_cap`."""
        cap = self.turn_cap(obs)
        conv = self._ask(capped_observation(obs, cap))
        data = self.complete(conv.messages(), cap)
        choice = data["choices"][0]
        msg = choice.get("message") or {}
        return self._output(
            cap,
            msg.get("content") or "",
            msg.get("reasoning_content") or msg.get("reasoning") or "",
            choice.get("finish_reason"),
            data.get("usage") or {},
            data.get("_latency_s"),
            data.get("_attempts"),
        )

    def act_stream(self, obs: Any) -> Iterator[str | PolicyOutput]:
        """:meth:`act`, streamed (``"stream": true``): yields the answer's text so far each time the
        server sends more, then the :class:`PolicyOutput` as the last item (the same one :meth:`act`
        returns). One attempt: a stream is not retried once text has been shown.

        Raises:
            PolicyError: the server refused the request, sent something that is not a chat
                completion stream, or the connection failed.
        """
        import httpx

        cap = self.turn_cap(obs)
        conv = self._ask(capped_observation(obs, cap))
        body = self._body(conv.messages(), cap)
        body.update({"stream": True, "stream_options": {"include_usage": True}})
        url = f"{self.base_url}/chat/completions"
        content: list[str] = []
        reasoning: list[str] = []
        finish, usage = None, {}
        t0 = time.perf_counter()
        try:
            with self._http().stream("POST", url, json=body) as resp:
                if resp.status_code != 200:
                    resp.read()
                    raise PolicyError(
                        f"{url} refused the streamed request (HTTP {resp.status_code}: {resp.text[:300]}); "
                        "check the model name, key and URL"
                    )
                for line in resp.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    payload = line[len("data:") :].strip()
                    if payload == "[DONE]":
                        break
                    try:
                        chunk = json.loads(payload)
                    except ValueError:
                        raise PolicyError(f"{url} streamed a line that is not JSON: {payload[:200]!r}") from None
                    if not isinstance(chunk, dict):
                        continue
                    usage = chunk.get("usage") or usage
                    grew = False
                    for ch in chunk.get("choices") or []:
                        delta = ch.get("delta") or {}
                        if delta.get("content"):
                            content.append(str(delta["content"]))
                            grew = True
                        piece = delta.get("reasoning_content") or delta.get("reasoning")
                        if piece:
                            reasoning.append(str(piece))
                            grew = True
                        finish = ch.get("finish_reason") or finish
                    if grew:
                        yield _joined("".join(content), "".join(reasoning))
        except httpx.HTTPError as exc:
            raise PolicyError(f"{url}: the stream failed ({type(exc).__name__}: {exc})") from None
        yield self._output(cap, "".join(content), "".join(reasoning), finish, usage, time.perf_counter() - t0, 1)

    def _output(
        self,
        cap: int,
        content: str,
        reasoning: str,
        finish: Any,
        usage: dict[str, Any],
        latency_s: float | None,
        attempts: int | None,
    ) -> PolicyOutput:
        text = _joined(content, reasoning)
        response, grading = split_thinking(text)
        self._answered(response, None)
        meta = {
            "max_tokens": cap,
            "tokens": usage.get("completion_tokens"),
            "prompt_tokens": usage.get("prompt_tokens"),
            "finish_reason": finish,
            "latency_s": latency_s,
            "attempts": attempts,
        }
        return PolicyOutput(response=response, grading_response=grading, meta=meta)

    def close(self) -> None:
        """Close the HTTP client."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


def openai_policy_from_env(kind: str = "api", **overrides: Any) -> OpenAIChatPolicy:
    """An :class:`OpenAIChatPolicy` configured from the seed's environment variables.

    Args:
        kind: ``"api"`` (``BASELINE_API_*``, name ``llm_api``) or ``"local"``
            (``BASELINE_LOCAL_*``, name ``llm_local``).
        **overrides: Constructor arguments that win over the environment (``None`` values are
            ignored).

    Raises:
        ValueError: unknown kind, or base URL / model missing from both.
    """
    if kind not in ("api", "local"):
        raise ValueError(f"kind must be 'api' or 'local', got {kind!r}")
    prefix = "BASELINE_API_" if kind == "api" else "BASELINE_LOCAL_"
    args: dict[str, Any] = {
        "base_url": os.environ.get(prefix + "BASE_URL"),
        "api_key": os.environ.get(prefix + "API_KEY") if kind == "local" else os.environ.get(prefix + "KEY"),
        "model": os.environ.get(prefix + "MODEL"),
        "name": f"llm_{kind}",
    }
    args.update({k: v for k, v in overrides.items() if v is not None})
    missing = [k for k in ("base_url", "model") if not args.get(k)]
    if missing:
        names = {"base_url": prefix + "BASE_URL", "model": prefix + "MODEL"}
        raise ValueError(
            f"llm_{kind} needs {', '.join(missing)}: set {', '.join(names[m] for m in missing)} "
            f"or pass --llm-base-url / --llm-model"
        )
    return OpenAIChatPolicy(**args)


class TransformersPolicy(_ConversationPolicy):
    """A local causal LM run with ``transformers``' ``generate`` (CPU or GPU).

    Args:
        model: A local folder or Hub id, or an already loaded ``PreTrainedModel``.
        tokenizer: A tokenizer object, a folder/Hub id, or ``None`` (= ``model`` when it is a path).
        name: Row label (default ``hf_local``).
        tokenizer_name: What the environment counts with (default: the model path/id when it is
            a string; else the tokenizer's ``name_or_path``).
        temperature: 0 = greedy decoding; > 0 samples with this temperature.
        max_tokens: Extra fixed cap on new tokens per answer.
        turn_cap: The per-answer cap rule (as :class:`OpenAIChatPolicy`; default ``"share"``).
        device: ``"cpu"``, ``"cuda"``, ... (default: CUDA if available).
        dtype: torch dtype name for loading (``"auto"``, ``"bfloat16"``...; default ``"auto"``: the
            checkpoint's dtype on a GPU, float32 on a CPU, where bf16 matmuls ran 2-3x slower here).
        system_prompt: System message (default: the template's).
        seed: Torch seed set before each sampled generation (with the step index).
        chat_template_kwargs: ``{"enable_thinking": False/True}`` sets ``reasoning_mode`` off/on
            (kept for compatibility).
        format: ``"multi_turn"`` or ``"single_turn"``; default: the model folder's
            ``episode_format.json`` (written by training), else ``"multi_turn"``.
        history_thinking: ``"keep"`` or ``"strip"``; default as ``format``, else ``"keep"``.
        reasoning_mode: ``"auto"``, ``"on"`` or ``"off"`` (Qwen3 thinking); default as ``format``,
            else ``"auto"`` (the template's default).

    In ``multi_turn`` + ``keep`` the prompt of question ``k`` is the training rollout's token
    sequence: the first prompt, each earlier answer's ids as generated, and the environment turns
    between them (:class:`~reasoning_env.conversation.EpisodeTokens`); otherwise the conversation
    is re-rendered by the chat template each turn.

    Raises:
        PolicyError: the model or tokenizer cannot be loaded, or a multi-turn format with a
            tokenizer that has no chat template (raised on first use).
        ValueError: unknown format, history mode or reasoning mode.
    """

    kind = "llm"

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        name: str = "hf_local",
        tokenizer_name: str | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        turn_cap: TurnCap | str | None = None,
        device: str | None = None,
        dtype: str = "auto",
        system_prompt: str | None = SYSTEM_PROMPT,
        seed: int = 0,
        chat_template_kwargs: dict[str, Any] | None = None,
        format: str | None = None,
        history_thinking: str | None = None,
        reasoning_mode: str | None = None,
    ) -> None:
        super().__init__()
        self.resolved: ResolvedModel | None = None
        if isinstance(model, str):  # a folder, a Hub id or embedded:<key>: where its weights are, offline too
            self.resolved = resolve_model(model)
        load_ref = self.resolved.ref if self.resolved is not None else model
        saved = read_episode_format(load_ref) if isinstance(model, str) else {}
        self._init_format(
            format or saved.get("format") or "multi_turn", history_thinking or saved.get("history_thinking") or "keep"
        )
        thinking = (chat_template_kwargs or {}).get("enable_thinking")
        if reasoning_mode is None and thinking is not None:
            reasoning_mode = "on" if thinking else "off"
        self.reasoning_mode = reasoning_mode or saved.get("reasoning_mode") or "auto"
        if self.reasoning_mode not in REASONING_MODES:
            raise ValueError(f"reasoning_mode must be one of {REASONING_MODES}, got {self.reasoning_mode!r}")
        if saved.get("system_prompt") and system_prompt == SYSTEM_PROMPT:
            system_prompt = saved["system_prompt"]
        self.episode_format_source = "episode_format.json" if saved else "arguments"
        self._chat: ChatFormat | None = None
        self._tokens: EpisodeTokens | None = None
        self._open_mark: int | None = None
        self._model_ref = model
        self._load_ref = load_ref
        self._tok_ref = tokenizer if tokenizer is not None else (load_ref if isinstance(model, str) else None)
        self.name = name
        if tokenizer_name is None:
            if self.resolved is not None and tokenizer is None:
                tokenizer_name = self.resolved.tokenizer_name
            elif isinstance(self._tok_ref, str):
                tokenizer_name = self._tok_ref
            elif self._tok_ref is not None:
                tokenizer_name = getattr(self._tok_ref, "name_or_path", None) or None
        self.tokenizer_name = tokenizer_name
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
        self.turn_cap = _turn_cap(turn_cap, max_tokens)
        self.device = device
        self.dtype = dtype
        self.system_prompt = system_prompt
        self.seed = int(seed)
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self._model = None if isinstance(model, str) else model
        self._tok = None if isinstance(self._tok_ref, str) or self._tok_ref is None else self._tok_ref
        self._lock = threading.Lock()
        self._step = 0

    def describe(self) -> dict[str, Any]:
        """Settings for ``run.json``."""
        return {
            **super().describe(),
            "model": self._model_ref if isinstance(self._model_ref, str) else type(self._model_ref).__name__,
            "tokenizer_name": self.tokenizer_name,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "turn_cap": self.turn_cap.describe(),
            "device": self.device,
            "format": self.format,
            "history_thinking": self.history_thinking,
            "reasoning_mode": self.reasoning_mode,
            "episode_format_source": self.episode_format_source,
            "model_info": self.resolved.describe() if self.resolved is not None else None,
            "engine": self.engine_info(),
        }

    def engine_info(self) -> dict[str, Any]:
        """What generates: ``transformers`` (its version), the device and the loaded dtype."""
        from importlib.metadata import PackageNotFoundError, version

        try:
            tv = version("transformers")
        except PackageNotFoundError:  # pragma: no cover - the policy cannot run without it
            tv = None
        dtype = getattr(self._model, "dtype", None)
        return {
            "engine": "transformers",
            "engine_version": tv,
            "device": self.device,
            "dtype": str(dtype).replace("torch.", "") if dtype is not None else self.dtype,
        }

    def _load(self) -> None:
        with self._lock:
            if self._model is None or self._tok is None:
                self._load_model()
            self._build_chat()

    def _load_model(self) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - torch is in requirements
            raise PolicyError(f"the transformers policy needs torch and transformers ({exc})") from None
        if self._tok is None:
            if self._tok_ref is None:
                raise PolicyError("TransformersPolicy: pass a tokenizer when model is an object")
            try:
                self._tok = AutoTokenizer.from_pretrained(self._tok_ref)
            except Exception as exc:  # noqa: BLE001 - a Hugging Face load raises many types (OSError, ValueError, Hub HTTP errors)
                raise PolicyError(f"could not load tokenizer {self._tok_ref!r}: {type(exc).__name__}: {exc}") from None
        if self._model is None:
            try:
                kwargs: dict[str, Any] = {}
                on_cpu = (self.device or ("cuda" if torch.cuda.is_available() else "cpu")) == "cpu"
                if self.dtype and self.dtype != "auto":
                    kwargs["dtype"] = getattr(torch, self.dtype)
                elif on_cpu:  # bf16 weights on a CPU: compute in float32 (bf16 matmuls ran 2-3x slower here)
                    kwargs["dtype"] = torch.float32
                self._model = AutoModelForCausalLM.from_pretrained(self._load_ref, **kwargs)
            except Exception as exc:  # noqa: BLE001 - a Hugging Face load raises many types (OSError, ValueError, Hub HTTP errors)
                raise PolicyError(f"could not load model {self._model_ref!r}: {type(exc).__name__}: {exc}") from None
        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.device = device
        self._model.to(device)
        self._model.eval()

    def _build_chat(self) -> None:
        if self._chat is None and getattr(self._tok, "chat_template", None):
            try:
                self._chat = ChatFormat(
                    self._tok, reasoning_mode=self.reasoning_mode, system_prompt=self.system_prompt
                )
            except ChatFormatError as exc:
                raise PolicyError(f"{self.name}: {exc}") from None
        if self._chat is None and self.format == "multi_turn":
            raise PolicyError(
                f"{self.name}: the tokenizer has no chat template, so the multi-turn format (the one training uses) "
                "cannot be rendered; pass format='single_turn' (--llm-format single_turn)"
            )

    def clone(self) -> TransformersPolicy:
        twin = super().clone()
        twin._tokens, twin._open_mark = None, None
        return twin

    def _appends_tokens(self) -> bool:
        return self.format == "multi_turn" and self.history_thinking == "keep"

    def _new_episode(self) -> None:
        self._tokens, self._open_mark = None, None

    def _drop_open_question(self) -> None:
        if self._tokens is not None and self._open_mark is not None:
            tk, n = self._tokens, self._open_mark
            del tk.completion_ids[n:], tk.env_mask[n:], tk.logprobs[n:]
        self._open_mark = None

    def _ask(self, obs: Any) -> EpisodeConversation:
        conv = super()._ask(obs)
        if self._appends_tokens():
            assert self._chat is not None
            if self._tokens is None or conv.asked == 1:
                self._tokens = EpisodeTokens(self._chat)
                self._tokens.start(obs)
                self._open_mark = 0
            else:
                self._open_mark = len(self._tokens.completion_ids)
                self._tokens.add_env_turn(self._tokens.next_question_ids(obs))
        return conv

    def _answered(self, text: str, ids: list[int] | None) -> None:
        super()._answered(text, ids)
        if self._appends_tokens() and self._tokens is not None:
            assert self._chat is not None
            self._tokens.add_model_turn(list(ids) if ids is not None else self._chat.encode(text))
        self._open_mark = None

    def record_answer(self, obs: Any, response: str) -> None:
        """See :meth:`_ConversationPolicy.record_answer` (loads the tokenizer on first use)."""
        self._load()
        super().record_answer(obs, response)

    def prompt_ids(self, obs: Any) -> list[int]:
        """The token ids the model is prompted with for ``obs``'s question (asks it in the
        conversation; the answer must follow through :meth:`act` or :meth:`record_answer`)."""
        self._load()
        conv = self._ask(obs)
        if self._appends_tokens():
            assert self._tokens is not None
            return self._tokens.context()
        if self._chat is not None:
            return self._chat.conversation_ids(conv)
        messages = conv.messages()  # a base model without a template (single-turn): plain text
        text = "\n\n".join(m["content"] for m in messages) + "\n\n"
        return list(self._tok(text, add_special_tokens=False)["input_ids"])

    def act(self, obs: Any) -> PolicyOutput:
        """Generate at most :attr:`turn_cap` new tokens for the current question."""
        import torch

        self._load()
        cap = self.turn_cap(obs)
        input_ids = torch.tensor([self.prompt_ids(capped_observation(obs, cap))], dtype=torch.long, device=self.device)
        attn = torch.ones_like(input_ids)
        tok = self._tok
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        gen_kwargs: dict[str, Any] = {"max_new_tokens": cap, "pad_token_id": pad}
        if self.temperature > 0:
            gen_kwargs.update(do_sample=True, temperature=self.temperature, top_k=0, top_p=1.0)
        else:
            gen_kwargs.update(do_sample=False, temperature=None, top_k=None, top_p=None)
        t0 = time.perf_counter()
        with self._lock:
            self._step += 1
            if self.temperature > 0:
                torch.manual_seed(self.seed * 1_000_003 + self._step)
            with torch.no_grad():
                out = self._model.generate(input_ids=input_ids, attention_mask=attn, **gen_kwargs)
        latency = time.perf_counter() - t0
        new_ids = out[0, input_ids.shape[1] :].tolist()
        eos = {
            i
            for i in ([tok.eos_token_id] if isinstance(tok.eos_token_id, int) else (tok.eos_token_id or []))
            if i is not None
        }
        finish = "length"
        if new_ids and new_ids[-1] in eos:
            finish = "stop"
        text = tok.decode(new_ids, skip_special_tokens=True)
        response, grading = split_thinking(text)
        if self._chat is not None:  # graded as training grades it (a thinking turn cut before </think>: no answer)
            grading = self._chat.grading_response(text)
        self._answered(response, new_ids)
        meta = {
            "max_tokens": cap,
            "tokens": len(new_ids),
            "prompt_tokens": int(input_ids.shape[1]),
            "finish_reason": finish,
            "latency_s": latency,
        }
        # The stop token ends the turn but is not part of the response text.
        generated = len(new_ids) - (1 if finish == "stop" else 0)
        return PolicyOutput(response=response, grading_response=grading, meta=meta, num_generated_tokens=generated)

    def reset(self, info: EpisodeInfo) -> None:
        """Start an episode (loads the model on first use)."""
        super().reset(info)
        self._load()

    def close(self) -> None:
        """Drop the model reference (memory is freed when no other copy holds it)."""
        self._model = None if isinstance(self._model_ref, str) else self._model

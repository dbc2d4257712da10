"""LLM policies: any OpenAI-compatible chat endpoint, or a local ``transformers`` model.

Both build their prompt with :func:`reasoning_env.prompting.build_messages` (the one template)
and cap generation at the observation's ``step_token_cap`` (the tokens the budget still allows,
at most ``max_tokens_per_step``), optionally lower with ``max_tokens``.

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

import logging
import os
import random
import threading
import time
from typing import Any, Optional

from reasoning_env.policies.base import BasePolicy, EpisodeInfo, PolicyError, PolicyOutput, obs_get
from reasoning_env.prompting import SYSTEM_PROMPT, build_messages

logger = logging.getLogger(__name__)

__all__ = ["OpenAIChatPolicy", "TransformersPolicy", "openai_policy_from_env", "split_thinking"]

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


def split_thinking(text: str) -> tuple[str, Optional[str]]:
    """Split a Qwen3-style response.

    Returns:
        ``(response, grading_response)``: the text unchanged, and the visible part after the last
        ``</think>`` (``None`` when there is no ``</think>``; ``""`` when nothing follows it).
    """
    close = text.rfind("</think>")
    if close == -1:
        return text, None
    return text, text[close + len("</think>"):].strip()


def _step_cap(obs: Any, max_tokens: Optional[int]) -> int:
    cap = int(obs_get(obs, "step_token_cap", 0) or 0)
    if max_tokens is not None:
        cap = min(cap, int(max_tokens)) if cap > 0 else int(max_tokens)
    return max(1, cap)


class OpenAIChatPolicy(BasePolicy):
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
        max_tokens: Extra cap on generated tokens per step (default: only ``step_token_cap``).
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

    Raises:
        ValueError: empty ``base_url`` or ``model``.
    """

    kind = "llm"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: Optional[str] = None,
        *,
        name: str = "llm_api",
        tokenizer_name: Optional[str] = None,
        temperature: float = 0.0,
        max_tokens: Optional[int] = None,
        max_tokens_field: str = "max_tokens",
        timeout_s: float = 300.0,
        retries: int = 4,
        backoff_s: float = 1.0,
        extra_body: Optional[dict[str, Any]] = None,
        system_prompt: Optional[str] = SYSTEM_PROMPT,
        seed: Optional[int] = None,
    ) -> None:
        super().__init__()
        if not base_url or not str(base_url).strip():
            raise ValueError("base_url is required (e.g. http://127.0.0.1:8001/v1); set --llm-base-url or BASELINE_*_BASE_URL")
        if not model or not str(model).strip():
            raise ValueError("model is required; set --llm-model or BASELINE_*_MODEL")
        self.base_url = str(base_url).rstrip("/")
        self.model = str(model)
        self.api_key = api_key
        self.name = name
        self.tokenizer_name = tokenizer_name
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
        self.max_tokens_field = max_tokens_field
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.backoff_s = float(backoff_s)
        self.extra_body = dict(extra_body or {})
        self.system_prompt = system_prompt
        self.seed = seed
        self._client = None
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        """Settings for ``run.json`` (the API key is never included)."""
        return {
            **super().describe(),
            "base_url": self.base_url,
            "model": self.model,
            "tokenizer_name": self.tokenizer_name,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "timeout_s": self.timeout_s,
            "retries": self.retries,
        }

    def _http(self):
        import httpx

        with self._lock:
            if self._client is None:
                headers = {"Content-Type": "application/json"}
                if self.api_key:
                    headers["Authorization"] = f"Bearer {self.api_key}"
                self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s)))
            return self._client

    def clone(self) -> "OpenAIChatPolicy":
        """A copy for a parallel worker (the HTTP client is thread-safe and shared)."""
        twin = super().clone()
        return twin

    def complete(self, messages: list[dict], max_tokens: int) -> dict[str, Any]:
        """POST one chat completion with retries.

        Returns:
            The decoded JSON body, plus ``_attempts`` and ``_latency_s`` (seconds, last attempt).

        Raises:
            PolicyError: non-retryable HTTP status, a body without ``choices``, or retries used up.
        """
        import httpx

        body = {"model": self.model, "messages": messages, "temperature": self.temperature, self.max_tokens_field: int(max_tokens)}
        if self.seed is not None:
            body["seed"] = int(self.seed)
        body.update(self.extra_body)
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
                delay = retry_after if retry_after is not None else self.backoff_s * (2**attempt) * random.uniform(0.75, 1.25)
                logger.warning("%s: attempt %d failed (%s); retrying in %.1f s", self.name, attempt + 1, last_err, delay)
                time.sleep(delay)
        raise PolicyError(f"{url}: gave up after {self.retries + 1} attempts; last error: {last_err}")

    def act(self, obs: Any) -> PolicyOutput:
        """One chat completion for the current question, capped at ``step_token_cap``."""
        cap = _step_cap(obs, self.max_tokens)
        data = self.complete(build_messages(obs, system_prompt=self.system_prompt), cap)
        choice = data["choices"][0]
        msg = choice.get("message") or {}
        content = msg.get("content") or ""
        reasoning = msg.get("reasoning_content") or msg.get("reasoning") or ""
        if reasoning and "</think>" not in content:
            text = f"<think>\n{reasoning}\n</think>\n\n{content}"
        else:
            text = content
        response, grading = split_thinking(text)
        usage = data.get("usage") or {}
        meta = {
            "max_tokens": cap,
            "tokens": usage.get("completion_tokens"),
            "prompt_tokens": usage.get("prompt_tokens"),
            "finish_reason": choice.get("finish_reason"),
            "latency_s": data.get("_latency_s"),
            "attempts": data.get("_attempts"),
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


class TransformersPolicy(BasePolicy):
    """A local causal LM run with ``transformers``' ``generate`` (CPU or GPU).

    Args:
        model: A local folder or Hub id, or an already loaded ``PreTrainedModel``.
        tokenizer: A tokenizer object, a folder/Hub id, or ``None`` (= ``model`` when it is a path).
        name: Row label (default ``hf_local``).
        tokenizer_name: What the environment counts with (default: the model path/id when it is
            a string; else the tokenizer's ``name_or_path``).
        temperature: 0 = greedy decoding; > 0 samples with this temperature.
        max_tokens: Extra cap on new tokens per step (default: only ``step_token_cap``).
        device: ``"cpu"``, ``"cuda"``, ... (default: CUDA if available).
        dtype: torch dtype name for loading (``"auto"``, ``"bfloat16"``...; default ``"auto"``).
        system_prompt: System message (default: the template's).
        seed: Torch seed set before each sampled generation (with the step index).
        chat_template_kwargs: Passed to ``apply_chat_template`` (e.g. ``{"enable_thinking": False}``).

    Raises:
        PolicyError: the model or tokenizer cannot be loaded (raised on first use).
    """

    kind = "llm"

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        name: str = "hf_local",
        tokenizer_name: Optional[str] = None,
        temperature: float = 0.0,
        max_tokens: Optional[int] = None,
        device: Optional[str] = None,
        dtype: str = "auto",
        system_prompt: Optional[str] = SYSTEM_PROMPT,
        seed: int = 0,
        chat_template_kwargs: Optional[dict[str, Any]] = None,
    ) -> None:
        super().__init__()
        self._model_ref = model
        self._tok_ref = tokenizer if tokenizer is not None else (model if isinstance(model, str) else None)
        self.name = name
        if tokenizer_name is None:
            if isinstance(self._tok_ref, str):
                tokenizer_name = self._tok_ref
            elif self._tok_ref is not None:
                tokenizer_name = getattr(self._tok_ref, "name_or_path", None) or None
        self.tokenizer_name = tokenizer_name
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
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
            "device": self.device,
        }

    def _load(self) -> None:
        with self._lock:
            if self._model is not None and self._tok is not None:
                return
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
                except Exception as exc:
                    raise PolicyError(f"could not load tokenizer {self._tok_ref!r}: {type(exc).__name__}: {exc}") from None
            if self._model is None:
                try:
                    kwargs: dict[str, Any] = {}
                    if self.dtype and self.dtype != "auto":
                        kwargs["dtype"] = getattr(torch, self.dtype)
                    self._model = AutoModelForCausalLM.from_pretrained(self._model_ref, **kwargs)
                except Exception as exc:
                    raise PolicyError(f"could not load model {self._model_ref!r}: {type(exc).__name__}: {exc}") from None
            device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
            self.device = device
            self._model.to(device)
            self._model.eval()

    def _prompt_ids(self, obs: Any):
        messages = build_messages(obs, system_prompt=self.system_prompt)
        tok = self._tok
        if getattr(tok, "chat_template", None):
            text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **self.chat_template_kwargs)
        else:  # a base model without a template: plain text
            text = "\n\n".join(m["content"] for m in messages) + "\n\n"
        return tok(text, return_tensors="pt", add_special_tokens=False)

    def act(self, obs: Any) -> PolicyOutput:
        """Generate at most ``step_token_cap`` new tokens for the current question."""
        import torch

        self._load()
        cap = _step_cap(obs, self.max_tokens)
        enc = self._prompt_ids(obs)
        input_ids = enc["input_ids"].to(self.device)
        attn = enc.get("attention_mask")
        attn = attn.to(self.device) if attn is not None else torch.ones_like(input_ids)
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
        new_ids = out[0, input_ids.shape[1]:].tolist()
        eos = {i for i in ([tok.eos_token_id] if isinstance(tok.eos_token_id, int) else (tok.eos_token_id or [])) if i is not None}
        finish = "length"
        if new_ids and new_ids[-1] in eos:
            finish = "stop"
        text = tok.decode(new_ids, skip_special_tokens=True)
        response, grading = split_thinking(text)
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

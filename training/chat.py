"""Chat formatting for multi-turn episodes, as token ids: the first prompt, and the environment
text inserted between two model turns.

An episode is ONE token sequence: ``prompt_ids`` (system + first user message + assistant header)
followed by the completion, which alternates model turns (generated ids, trained) with environment
turns (the end of the assistant message, the next user message and the next assistant header,
not trained). Nothing is ever re-rendered: a model turn stays exactly the ids that were sampled,
and each environment turn is tokenised once, on its own, from the chat template's own text.

The environment-turn text is taken from the tokenizer's chat template by rendering a two-question
conversation with placeholders and cutting it at the placeholders, so any template that renders
``user``/``assistant`` messages in order works (ChatML for Qwen2.5, Qwen3's template with
``enable_thinking``). Reasoning (``<think>``) handling follows Qwen3: the visible answer is the
text after the last ``</think>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from reasoning_env.prompting import SYSTEM_PROMPT, build_messages, build_user_prompt

REASONING_MODES = ("auto", "on", "off")

#: Graded instead of the response when a thinking turn never closed ``</think>``: it holds no
#: answer, so the step is graded "no_answer" (the tokens are still charged on the full response).
NO_VISIBLE_ANSWER = "[no visible answer: the reasoning was cut off before </think>]"

_ASSISTANT_MARK = "\u2063@@ASSISTANT_PLACEHOLDER@@\u2063"
_USER_MARK = "\u2063@@USER_PLACEHOLDER@@\u2063"


class ChatFormatError(ValueError):
    """The tokenizer's chat template cannot be used for multi-turn episodes (message says why)."""


def template_supports_thinking(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template reads an ``enable_thinking`` switch (Qwen3 family)."""
    template = getattr(tokenizer, "chat_template", None) or ""
    if isinstance(template, dict):  # named templates
        template = " ".join(str(v) for v in template.values())
    return "enable_thinking" in str(template)


def visible_answer(text: str, thinking: bool) -> Optional[str]:
    """The text to grade for a response (``metadata["grading_response"]``), or ``None`` to grade
    the whole response.

    Args:
        text: The decoded model turn.
        thinking: Whether the turn was generated in thinking mode.
    Returns:
        The part after the last ``</think>`` (stripped; :data:`NO_VISIBLE_ANSWER` if empty); in
        thinking mode with no ``</think>`` (the reasoning was cut by the token cap),
        :data:`NO_VISIBLE_ANSWER`; otherwise ``None``.
    """
    if "</think>" in text:
        after = text.rsplit("</think>", 1)[1].strip()
        return after or NO_VISIBLE_ANSWER
    if thinking:
        return NO_VISIBLE_ANSWER
    return None


@dataclass
class ChatFormat:
    """Renders an episode's turns as token ids for one tokenizer.

    Args:
        tokenizer: A Hugging Face tokenizer with a chat template.
        reasoning_mode: ``"auto"`` (the template's default: thinking on for Qwen3 hybrid
            templates, off for templates without ``enable_thinking``), ``"on"`` or ``"off"``.
        system_prompt: System message of the first turn (default: the shared
            :data:`reasoning_env.prompting.SYSTEM_PROMPT`; ``None`` for none).
        history_len: Past answers summarised in each user message (as in evaluation).

    Raises:
        ChatFormatError: no chat template; ``reasoning_mode="on"`` with a template that has no
            thinking switch; a template that does not render messages in order.
        ValueError: unknown ``reasoning_mode``.
    """

    tokenizer: Any
    reasoning_mode: str = "auto"
    system_prompt: Optional[str] = SYSTEM_PROMPT
    history_len: int = 3
    thinking: bool = field(init=False)
    template_kwargs: dict = field(init=False)
    _between: tuple[str, str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.reasoning_mode not in REASONING_MODES:
            raise ValueError(f"reasoning_mode must be one of {REASONING_MODES}, got {self.reasoning_mode!r}")
        if not getattr(self.tokenizer, "chat_template", None):
            raise ChatFormatError(
                "the tokenizer has no chat template; multi-turn episodes need one (use an instruct/chat "
                "model or set tokenizer.chat_template)"
            )
        supports = template_supports_thinking(self.tokenizer)
        if self.reasoning_mode == "on":
            if not supports:
                raise ChatFormatError(
                    "--reasoning_mode on needs a chat template with an enable_thinking switch (Qwen3 family); "
                    "this tokenizer's template has none: use --reasoning_mode auto or off"
                )
            self.thinking, self.template_kwargs = True, {"enable_thinking": True}
        elif self.reasoning_mode == "off":
            self.thinking = False
            self.template_kwargs = {"enable_thinking": False} if supports else {}
        else:  # auto: the template's own default (Qwen3 hybrid templates think by default)
            self.thinking, self.template_kwargs = supports, {}
        self._between = self._derive_between()

    # ------------------------------------------------------------------ rendering
    def _render(self, messages: list[dict], add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt, **self.template_kwargs
        )

    def _derive_between(self) -> tuple[str, str]:
        msgs = []
        if self.system_prompt:
            msgs.append({"role": "system", "content": "S"})
        msgs += [
            {"role": "user", "content": "Q1"},
            {"role": "assistant", "content": _ASSISTANT_MARK},
            {"role": "user", "content": _USER_MARK},
        ]
        text = self._render(msgs, add_generation_prompt=True)
        if text.count(_ASSISTANT_MARK) != 1 or text.count(_USER_MARK) != 1:
            raise ChatFormatError("the chat template does not render each message once; cannot derive the turn separator")
        after_assistant = text.split(_ASSISTANT_MARK, 1)[1]
        pre, post = after_assistant.split(_USER_MARK, 1)
        if not post:
            raise ChatFormatError("the chat template adds no assistant header after a user message (add_generation_prompt)")
        return pre, post

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` as it appears inside a rendered chat (no BOS/EOS added)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def user_text(self, obs: Any) -> str:
        """The user message for the observation's current question (shared evaluation template)."""
        return build_user_prompt(obs, history_len=self.history_len)

    def prompt_text(self, obs: Any) -> str:
        """The first prompt: system + user message for ``obs`` + the assistant header."""
        return self._render(build_messages(obs, system_prompt=self.system_prompt, history_len=self.history_len), True)

    def prompt_ids(self, obs: Any) -> list[int]:
        """Token ids of :meth:`prompt_text` (shape: ``[prompt_len]``)."""
        return self.encode(self.prompt_text(obs))

    def between_text(self, obs: Any) -> str:
        """Environment text after a model turn: end of the assistant message, the next user
        message for ``obs``, and the next assistant header (e.g. ChatML
        ``<|im_end|>\\n<|im_start|>user\\n...<|im_end|>\\n<|im_start|>assistant\\n``)."""
        pre, post = self._between
        return pre + self.user_text(obs) + post

    def between_ids(self, obs: Any, last_model_ids: list[int]) -> list[int]:
        """Token ids of :meth:`between_text`; when the model turn already ended with the token
        that closes the assistant message (e.g. ``<|im_end|>``), that token is not repeated.

        Args:
            obs: The observation of the next question.
            last_model_ids: The model turn just generated (token ids).
        Returns:
            The environment turn's ids (all get ``env_mask = 0``).
        """
        ids = self.encode(self.between_text(obs))
        if last_model_ids and ids and last_model_ids[-1] == ids[0]:
            ids = ids[1:]
        return ids

    def grading_response(self, text: str) -> Optional[str]:
        """:func:`visible_answer` for this format's thinking mode."""
        return visible_answer(text, self.thinking)

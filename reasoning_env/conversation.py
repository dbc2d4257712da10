"""One episode as one conversation: the format that training and every LLM policy share.

An episode is rendered as a chat (the user messages come from :mod:`reasoning_env.prompting`)::

    system     SYSTEM_PROMPT (the rules)
    user       question 1 with the budget state
    assistant  answer 1, exactly as generated (reasoning included)
    user       question 2 with the budget state after answer 1
    assistant  answer 2 ...

Two formats (:data:`FORMATS`):

- ``"multi_turn"`` (default): the growing conversation above. It is what GRPO training plays
  (``training.rollout``), so a trained policy must be evaluated in it: every LLM policy of
  ``workbench.evaluate`` and Play uses it unless told otherwise.
- ``"single_turn"``: each question alone (system + one user message that summarises the last
  answers in a "Recent:" line), the format of the seed's baselines; an explicit option.

Earlier reasoning in the history (:data:`HISTORY_THINKING`):

- ``"keep"`` (default): earlier answers stay as generated, ``<think>`` blocks included. This is
  the only history GRPO can train as ONE token sequence per episode (TRL's ``rollout_func`` returns
  one row per episode, and every token is scored with the exact context it was sampled in); it is
  what TRL's own prefix-preserving training template for Qwen3 renders
  (``trl/chat_templates/qwen3_training.jinja``: "always include the thinking block").
- ``"strip"``: earlier answers keep only the text after their last ``</think>`` (``lstrip("\\n")``),
  which is what Qwen3's own inference template does with turns before the last user message. A
  policy evaluated this way sees a shorter history than it was trained with; training refuses it.

Two renderings of the same conversation:

- :class:`EpisodeConversation`: chat messages (for OpenAI-compatible endpoints, whose server
  applies the model's template).
- :class:`ChatFormat` + :class:`EpisodeTokens`: token ids for one Hugging Face tokenizer, built by
  appending (never re-rendering): the first prompt, each model turn's ids as generated, and the
  environment text between two turns, derived once from the chat template (so ChatML and Qwen3's
  template both work). Training and the local ``transformers`` policy both use it, so they prompt
  the model with the same ids for the same episode and answers.

No torch here: tokenizers are Hugging Face ``tokenizers``/``transformers`` objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reasoning_env.errors import ChatFormatError
from reasoning_env.prompting import SYSTEM_PROMPT, build_messages, build_user_prompt

__all__ = [
    "FORMATS",
    "HISTORY_THINKING",
    "NO_VISIBLE_ANSWER",
    "REASONING_MODES",
    "ChatFormat",
    "ChatFormatError",
    "EpisodeConversation",
    "EpisodeTokens",
    "strip_thinking",
    "template_supports_thinking",
    "visible_answer",
]

FORMATS = ("multi_turn", "single_turn")
HISTORY_THINKING = ("keep", "strip")
REASONING_MODES = ("auto", "on", "off")

#: Graded instead of the response when a thinking turn never closed ``</think>``: it holds no
#: answer, so the step is graded "no_answer" (the tokens are still charged on the full response).
NO_VISIBLE_ANSWER = "[no visible answer: the reasoning was cut off before </think>]"

_ASSISTANT_MARK = "\u2063@@ASSISTANT_PLACEHOLDER@@\u2063"
_USER_MARK = "\u2063@@USER_PLACEHOLDER@@\u2063"


def check_format(fmt: str, history_thinking: str = "keep") -> None:
    """Raise ``ValueError`` unless ``fmt`` is in :data:`FORMATS` and ``history_thinking`` in
    :data:`HISTORY_THINKING`."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    if history_thinking not in HISTORY_THINKING:
        raise ValueError(f"history_thinking must be one of {HISTORY_THINKING}, got {history_thinking!r}")


def template_supports_thinking(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template reads an ``enable_thinking`` switch (Qwen3 family)."""
    template = getattr(tokenizer, "chat_template", None) or ""
    if isinstance(template, dict):  # named templates
        template = " ".join(str(v) for v in template.values())
    return "enable_thinking" in str(template)


def strip_thinking(text: str) -> str:
    """An earlier answer as Qwen3's inference template shows it in the history: the text after the
    last ``</think>``, leading newlines removed (unchanged when there is no ``</think>``)."""
    if "</think>" not in text:
        return text
    return text.split("</think>")[-1].lstrip("\n")


def visible_answer(text: str, thinking: bool) -> str | None:
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


# ---------------------------------------------------------------------------- messages
@dataclass
class EpisodeConversation:
    """An episode as chat messages, grown one question and one answer at a time.

    Args:
        format: ``"multi_turn"`` or ``"single_turn"`` (:data:`FORMATS`).
        history_thinking: ``"keep"`` or ``"strip"`` (:data:`HISTORY_THINKING`).
        system_prompt: The system message (``None`` for none).
        history_len: Past answers summarised in each user message ("Recent: ...").

    Raises:
        ValueError: unknown format or history mode.
    """

    format: str = "multi_turn"
    history_thinking: str = "keep"
    system_prompt: str | None = SYSTEM_PROMPT
    history_len: int = 3
    turns: list[tuple[Any, str | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_format(self.format, self.history_thinking)

    @property
    def asked(self) -> int:
        """Questions asked so far."""
        return len(self.turns)

    @property
    def answered(self) -> int:
        """Questions answered so far."""
        return sum(1 for _, a in self.turns if a is not None)

    def ask(self, obs: Any) -> None:
        """Add the user message of ``obs``'s current question.

        Raises:
            ValueError: the previous question has no answer yet.
        """
        if self.turns and self.turns[-1][1] is None:
            raise ValueError("the previous question has no answer yet: call answer() before asking the next one")
        self.turns.append((obs, None))

    def answer(self, text: str) -> None:
        """Record the answer to the last question (the full text as generated or typed).

        Raises:
            ValueError: no open question.
        """
        if not self.turns or self.turns[-1][1] is not None:
            raise ValueError("no open question to answer: call ask(obs) first")
        self.turns[-1] = (self.turns[-1][0], str(text))

    def user_text(self, obs: Any) -> str:
        """The user message of ``obs``'s question (:func:`reasoning_env.prompting.build_user_prompt`)."""
        return build_user_prompt(obs, history_len=self.history_len)

    def messages(self) -> list[dict]:
        """The chat to send for the last (open) question.

        Returns:
            ``[{"role": ..., "content": ...}]``: single-turn, the system message and the last user
            message; multi-turn, the system message then every question and answer so far (earlier
            answers per ``history_thinking``).
        Raises:
            ValueError: nothing asked yet.
        """
        if not self.turns:
            raise ValueError("nothing asked yet: call ask(obs) first")
        if self.format == "single_turn":
            return build_messages(self.turns[-1][0], system_prompt=self.system_prompt, history_len=self.history_len)
        msgs: list[dict] = []
        if self.system_prompt:
            msgs.append({"role": "system", "content": self.system_prompt})
        for obs, ans in self.turns:
            msgs.append({"role": "user", "content": self.user_text(obs)})
            if ans is not None:
                content = strip_thinking(ans) if self.history_thinking == "strip" else ans
                msgs.append({"role": "assistant", "content": content})
        return msgs


# ---------------------------------------------------------------------------- token ids
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
    system_prompt: str | None = SYSTEM_PROMPT
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
                "model, set tokenizer.chat_template, or evaluate with the single_turn format)"
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
    def render(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        """The chat template's text for ``messages`` (with this format's template switches)."""
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
        text = self.render(msgs, add_generation_prompt=True)
        if text.count(_ASSISTANT_MARK) != 1 or text.count(_USER_MARK) != 1:
            raise ChatFormatError(
                "the chat template does not render each message once; cannot derive the turn separator"
            )
        after_assistant = text.split(_ASSISTANT_MARK, 1)[1]
        pre, post = after_assistant.split(_USER_MARK, 1)
        if not post:
            raise ChatFormatError(
                "the chat template adds no assistant header after a user message (add_generation_prompt)"
            )
        return pre, post

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` as it appears inside a rendered chat (no BOS/EOS added)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def user_text(self, obs: Any) -> str:
        """The user message for the observation's current question (shared evaluation template)."""
        return build_user_prompt(obs, history_len=self.history_len)

    def prompt_text(self, obs: Any) -> str:
        """The first prompt: system + user message for ``obs`` + the assistant header."""
        return self.render(build_messages(obs, system_prompt=self.system_prompt, history_len=self.history_len), True)

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

    def conversation_ids(self, conversation: EpisodeConversation) -> list[int]:
        """Token ids of a whole conversation rendered by the template (re-rendered, not appended):
        what a policy in ``history_thinking="strip"`` or ``single_turn`` format is prompted with."""
        return self.encode(self.render(conversation.messages(), True))

    def grading_response(self, text: str) -> str | None:
        """:func:`visible_answer` for this format's thinking mode."""
        return visible_answer(text, self.thinking)


@dataclass
class EpisodeTokens:
    """An episode's token sequence in the multi-turn ``keep`` format, built by appending.

    Shapes: ``prompt_ids [P]``; ``completion_ids``, ``env_mask`` and ``logprobs`` ``[C]``: model
    turns (ids as generated, ``env_mask`` 1, their sampling log-probs) alternate with environment
    turns (``env_mask`` 0, log-prob 0.0). :meth:`context` is what the model is prompted with for
    the next turn. Training (``training.rollout``) and the local ``transformers`` policy both build
    their prompts with it.
    """

    chat: ChatFormat
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    _last_model: list[int] = field(default_factory=list, repr=False)

    def start(self, obs: Any) -> list[int]:
        """Begin with the first question's prompt; returns ``prompt_ids``."""
        self.prompt_ids = self.chat.prompt_ids(obs)
        self.completion_ids, self.env_mask, self.logprobs, self._last_model = [], [], [], []
        return self.prompt_ids

    def context(self) -> list[int]:
        """``prompt_ids + completion_ids``: the ids the next turn is generated from."""
        return self.prompt_ids + self.completion_ids

    def add_model_turn(self, ids: list[int], logprobs: list[float] | None = None) -> tuple[int, int]:
        """Append a model turn (the ids exactly as generated, stop token included when sampled).

        Returns:
            ``(start, end)`` of the turn in ``completion_ids``.
        """
        start = len(self.completion_ids)
        self.completion_ids += [int(i) for i in ids]
        self.env_mask += [1] * len(ids)
        self.logprobs += [float(x) for x in (logprobs if logprobs is not None else [0.0] * len(ids))]
        self._last_model = [int(i) for i in ids]
        return start, len(self.completion_ids)

    def next_question_ids(self, obs: Any) -> list[int]:
        """The environment turn that would introduce ``obs``'s question (not appended)."""
        return self.chat.between_ids(obs, self._last_model)

    def add_env_turn(self, ids: list[int]) -> None:
        """Append an environment turn (from :meth:`next_question_ids`)."""
        self.completion_ids += [int(i) for i in ids]
        self.env_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)

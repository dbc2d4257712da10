"""Chat formatting of multi-turn episodes (token ids, environment turns, thinking mode)."""

from __future__ import annotations

import pytest
from training_helpers import SHARED_DATA, tiny_tokenizer

from reasoning_env.conversation import (
    NO_VISIBLE_ANSWER,
    ChatFormat,
    ChatFormatError,
    template_supports_thinking,
    visible_answer,
)
from reasoning_env.models import ReasoningEconomicsObservation

# its tests share tokenizers and chat templates loaded once (module fixtures): one worker runs them all (pytest-xdist
# --dist loadgroup)
pytestmark = pytest.mark.xdist_group("test_conversation")


def _obs(index: int = 0, question: str = "What is 2+2?") -> ReasoningEconomicsObservation:
    return ReasoningEconomicsObservation(
        question=question,
        question_index=index,
        num_questions=3,
        total_budget=300,
        remaining_budget=200,
        questions_remaining=3 - index,
        step_token_cap=64,
        budget_per_remaining_question=66.0,
        problem_type="t",
    )


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def qwen3_tok():
    from transformers import AutoTokenizer

    path = SHARED_DATA / "qwen3_tokenizer"
    if not (path / "tokenizer_config.json").is_file():
        pytest.skip("../shared/data/qwen3_tokenizer is absent")
    return AutoTokenizer.from_pretrained(str(path))


def test_chatml_between_text_and_ids(tok):
    chat = ChatFormat(tok)
    assert not chat.thinking and chat.template_kwargs == {}
    obs = _obs(1)
    between = chat.between_text(obs)
    assert between.startswith("<|im_end|>\n<|im_start|>user\nQuestion 2/3")
    assert between.endswith("<|im_end|>\n<|im_start|>assistant\n")
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    full = chat.between_ids(obs, [5, 6])
    assert full[0] == im_end
    # a model turn that already closed with <|im_end|> is not closed twice
    assert chat.between_ids(obs, [5, im_end]) == full[1:]


def test_token_appending_matches_a_full_render(tok):
    """Prompt + model turn + environment turn decode to exactly the chat template's rendering of
    the same conversation: nothing is re-rendered, yet the text is the template's."""
    chat = ChatFormat(tok)
    o1, o2 = _obs(0, "What is 2+2?"), _obs(1, "What is 3+3?")
    answer = "It is \\boxed{4}."
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    model_ids = chat.encode(answer) + [im_end]
    ids = chat.prompt_ids(o1) + model_ids + chat.between_ids(o2, model_ids)
    from reasoning_env.prompting import SYSTEM_PROMPT, build_user_prompt

    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": build_user_prompt(o1)},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": build_user_prompt(o2)},
    ]
    rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert tok.decode(ids) == rendered
    assert ids == tok(rendered, add_special_tokens=False)["input_ids"]


def test_visible_answer_rules():
    assert visible_answer("abc \\boxed{1}", thinking=False) is None
    assert visible_answer("<think>\\boxed{9}</think> so \\boxed{1}", thinking=True) == "so \\boxed{1}"
    assert visible_answer("<think>\\boxed{9}</think>   ", thinking=True) == NO_VISIBLE_ANSWER
    assert visible_answer("<think>long reasoning cut off \\boxed{9}", thinking=True) == NO_VISIBLE_ANSWER
    assert visible_answer("reasoning \\boxed{9}", thinking=True) == NO_VISIBLE_ANSWER


def test_reasoning_mode_on_needs_a_thinking_template(tok):
    assert not template_supports_thinking(tok)
    with pytest.raises(ChatFormatError, match="enable_thinking"):
        ChatFormat(tok, reasoning_mode="on")
    with pytest.raises(ValueError, match="reasoning_mode"):
        ChatFormat(tok, reasoning_mode="maybe")
    assert ChatFormat(tok, reasoning_mode="off").template_kwargs == {}


def test_qwen3_modes(qwen3_tok):
    assert template_supports_thinking(qwen3_tok)
    auto = ChatFormat(qwen3_tok, reasoning_mode="auto")
    on = ChatFormat(qwen3_tok, reasoning_mode="on")
    off = ChatFormat(qwen3_tok, reasoning_mode="off")
    assert auto.thinking and on.thinking and not off.thinking
    assert off.template_kwargs == {"enable_thinking": False}
    # thinking off: every assistant header carries the empty think block
    assert off.prompt_text(_obs()).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert off.between_text(_obs(1)).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert on.prompt_text(_obs()).endswith("<|im_start|>assistant\n")
    assert on.between_text(_obs(1)).startswith("<|im_end|>\n<|im_start|>user\n")
    assert on.grading_response("<think>x \\boxed{2}</think>\n\\boxed{4}") == "\\boxed{4}"
    assert on.grading_response("<think>x \\boxed{2}") == NO_VISIBLE_ANSWER


def test_no_chat_template_is_a_clear_error(tok):
    class NoTemplate:
        chat_template = None

    with pytest.raises(ChatFormatError, match="chat template"):
        ChatFormat(NoTemplate())


def _thinking_answer(reasoning: str, answer: str) -> str:
    return f"<think>\n{reasoning}\n</think>\n\n{answer}"


def test_qwen3_kept_history_is_trls_prefix_preserving_training_render(qwen3_tok):
    """Qwen3 thinking, history kept (the training format): the appended ids equal TRL's
    qwen3_training template's rendering of the conversation (every think block kept)."""
    from reasoning_env.conversation import EpisodeConversation, EpisodeTokens

    trl = pytest.importorskip("trl")
    from pathlib import Path

    path = Path(trl.__file__).parent / "chat_templates" / "qwen3_training.jinja"
    if not path.is_file():
        pytest.skip(f"this TRL ({trl.__version__}) ships no qwen3_training.jinja")
    training_template = path.read_text()
    chat = ChatFormat(qwen3_tok, reasoning_mode="on")
    im_end = qwen3_tok.convert_tokens_to_ids("<|im_end|>")
    tokens, conv = EpisodeTokens(chat), EpisodeConversation()
    answers = [_thinking_answer("2 and 2 make 4.", "\\boxed{4}"), _thinking_answer("3 and 3.", "\\boxed{6}")]
    for k, ans in enumerate(answers + [None]):
        obs = _obs(k, f"What is {k}+{k}?")
        if k == 0:
            tokens.start(obs)
        else:
            tokens.add_env_turn(tokens.next_question_ids(obs))
        conv.ask(obs)
        rendered = qwen3_tok.apply_chat_template(
            conv.messages(),
            tokenize=False,
            add_generation_prompt=True,
            chat_template=training_template,
            enable_thinking=True,
        )
        assert qwen3_tok.decode(tokens.context()) == rendered
        if ans is not None:
            tokens.add_model_turn(chat.encode(ans) + [im_end])
            conv.answer(ans)


def test_qwen3_stripped_history_is_qwen3s_own_template(qwen3_tok):
    """history_thinking="strip" renders what Qwen3's own template renders from the full answers:
    earlier turns keep only the text after </think>."""
    from reasoning_env.conversation import EpisodeConversation

    chat = ChatFormat(qwen3_tok, reasoning_mode="on")
    full, strip = EpisodeConversation(), EpisodeConversation(history_thinking="strip")
    for k in range(3):
        obs = _obs(k, f"What is {k}+{k}?")
        full.ask(obs)
        strip.ask(obs)
        if k < 2:
            ans = _thinking_answer(f"thinking about {k}", f"\\boxed{{{2 * k}}}")
            full.answer(ans)
            strip.answer(ans)
    own = chat.render(full.messages())  # Qwen3's template strips earlier reasoning itself
    assert chat.render(strip.messages()) == own
    assert "thinking about 0" not in own and chat.conversation_ids(strip) == chat.encode(own)

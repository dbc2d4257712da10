"""Shared helpers of the training tests (not a test module)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path

from reasoning_env.config import EnvConfig
from training.generation import Generation, GenerationBackend

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = (REPO_ROOT / ".." / "shared" / "data").resolve()

#: Small, offline episodes: 3 reasoning-gym questions, 16 tokens per turn.
#: The tiny random model never answers right: the seed's cost penalty (beta 0.05; the default reward has none) gives
#: its groups reward variance (training.grpo_train.SMOKE_ENV).
TINY_ENV = {"sources": ["reasoning_gym"], "num_questions": 3, "max_tokens_per_step": 16, "beta": 0.05}


def tiny_env_config(**changes) -> EnvConfig:
    return EnvConfig(**{**TINY_ENV, **changes})


@functools.lru_cache(maxsize=1)
def tiny_tokenizer():
    """The embedded offline Qwen2.5 tokenizer (ChatML template)."""
    from training.models import load_tokenizer, tiny_tokenizer_dir

    return load_tokenizer(str(tiny_tokenizer_dir()))


@functools.lru_cache(maxsize=1)
def tiny_policy():
    """The tiny random Qwen2 + embedded Qwen2.5 tokenizer (built once per test process)."""
    from training.models import load_policy

    return load_policy("tiny", seed=0)


class ScriptedBackend(GenerationBackend):
    """A backend that answers with text from ``respond(context_text) -> str`` (then EOS), cut
    at the cap; log-probs are all ``-1.0``. For testing rollouts without a model."""

    def __init__(self, tokenizer, respond: Callable[[str], str], eos_id: int | None = None) -> None:
        eos = eos_id if eos_id is not None else tokenizer.convert_tokens_to_ids("<|im_end|>")
        super().__init__([eos])
        self.tokenizer = tokenizer
        self.respond = respond
        self.batch_sizes: list[int] = []

    def _generate(self, contexts, caps, call_max):
        self.batch_sizes.append(len(contexts))
        out = []
        for ctx, cap in zip(contexts, caps):
            text = self.respond(self.tokenizer.decode(ctx))
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.eos_ids[0]]
            ids = ids[:cap]
            out.append(Generation(ids, [-1.0] * len(ids), finished=ids[-1] == self.eos_ids[0]))
        return out


def last_question(context_text: str) -> str:
    """The question text of the last user message in a rendered ChatML context."""
    user = context_text.rsplit("<|im_start|>user\n", 1)[1]
    body = user.split("<|im_end|>", 1)[0]
    parts = body.split("\n\n")
    # header lines, blank, question (may contain blank lines), blank, instruction
    return "\n\n".join(parts[1:-1]).strip()


def gold_lookup(factory) -> Callable[[str], str]:
    """Map a question text to its gold answer using the factory's loaded pools."""
    session = factory.new_session()
    table = {}
    for qs in session.env.pools.pools.values():
        for q in qs:
            table[q.text.strip()] = q.gold_answer
    return lambda text: table[text.strip()]


_WS = re.compile(r"\s+")

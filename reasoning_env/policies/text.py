"""Text of an exact token length ending in a final answer (for budget baselines and simulated
solvers), so that the environment's token counting and grading run on real text.

``write_response(tokenizer, target_tokens, answer, rng)`` returns a reasoning-like trace of
generic sentences followed by ``So the final result is \\boxed{<answer>}.``. Its length,
counted with ``tokenizer`` (the environment's tokenizer), is exactly ``target_tokens`` whenever
``target_tokens >= minimal_tokens(tokenizer, answer)``; shorter targets give the minimal
response ``\\boxed{<answer>}`` alone.

How exactness is reached: the sentences and the one-token filler word are counted once; they are
additive under byte-level BPE because every piece starts with a space (a pre-tokenizer split).
The assembled text is then counted for real and corrected with filler words until the count
matches (joins such as ``.`` + ``\\n\\n`` can merge into one token).
"""

from __future__ import annotations

import random
from typing import Any

__all__ = ["SENTENCES", "answer_tail", "minimal_response", "minimal_tokens", "write_response"]

#: Generic reasoning sentences the filler is drawn from (none mentions an "answer", none has a box).
SENTENCES = (
    "Let me work through this step by step.",
    "First, I restate what the question asks.",
    "Then I check each quantity once more.",
    "This follows from the previous line.",
    "Next, I simplify the expression.",
    "I compare the two cases carefully.",
    "Now I combine the partial results.",
    "So far the numbers are consistent.",
    "I write down the known values.",
    "Each term can be handled on its own.",
    "The same rule applies to the other part.",
    "I double check the arithmetic here.",
    "That gives a simpler form to work with.",
    "We can substitute this back in.",
    "Nothing in the setup contradicts this.",
    "I keep track of the units as I go.",
)
_FILLERS = (" so", " then", " and", " we")  # one token each in byte-level BPE vocabularies (Qwen, GPT-2 family)


def answer_tail(answer: str) -> str:
    """The closing line every synthetic response ends with."""
    return f" So the final result is \\boxed{{{answer}}}."


def minimal_response(answer: str) -> str:
    """The shortest response: the boxed answer alone."""
    return f"\\boxed{{{answer}}}"


def _count(tokenizer: Any, text: str) -> int:
    return int(tokenizer.count(text))


def minimal_tokens(tokenizer: Any, answer: str) -> int:
    """Tokens of :func:`minimal_response` (the shortest response this module writes)."""
    return _count(tokenizer, minimal_response(answer))


_COUNTS_CACHE: dict[tuple[str, str], tuple[int, ...]] = {}


def _sentence_counts(tokenizer: Any) -> tuple[int, ...]:
    key = (str(getattr(tokenizer, "name", "")), str(getattr(tokenizer, "origin", "")))
    if key[0] and key in _COUNTS_CACHE:
        return _COUNTS_CACHE[key]
    counts = tuple(_count(tokenizer, " " + s) for s in SENTENCES)
    if key[0]:
        _COUNTS_CACHE[key] = counts
    return counts


def write_response(tokenizer: Any, target_tokens: int, answer: str, rng: random.Random | None = None) -> str:
    """A response of exactly ``target_tokens`` tokens (counted with ``tokenizer``) ending in
    ``\\boxed{answer}``.

    Args:
        tokenizer: Anything with ``count(text) -> int`` (a
            :class:`~reasoning_env.tokenization.LoadedTokenizer`).
        target_tokens: Wanted length in tokens.
        answer: The final answer to box (LaTeX allowed).
        rng: Picks the sentences (default: a fixed order).

    Returns:
        The text. Its token count equals ``target_tokens`` if ``target_tokens`` is at least the
        length of a tail-only response; otherwise the minimal response ``\\boxed{answer}``
        (``minimal_tokens`` long) is returned.
    """
    target = int(target_tokens)
    tail = answer_tail(answer)
    tail_n = _count(tokenizer, "Done." + tail) - _count(tokenizer, "Done.")
    if target < tail_n + 2:
        return minimal_response(answer)
    counts = _sentence_counts(tokenizer)
    order = list(range(len(SENTENCES)))
    pieces: list[str] = []
    n = 0
    need = target - tail_n
    i = 0
    while True:
        if i % len(order) == 0 and rng is not None:
            rng.shuffle(order)
        k = order[i % len(order)]
        if n + counts[k] > need:
            break
        pieces.append(" " + SENTENCES[k])
        n += counts[k]
        i += 1
    body = "".join(pieces)
    fill = need - n
    text = ""
    filler_i = 0
    tried: set[tuple[int, int, int]] = set()
    for _ in range(24):
        key = (len(pieces), fill, filler_i)
        if key in tried:  # oscillating at a merge: try another filler word
            filler_i += 1
            if filler_i >= len(_FILLERS):
                break
            continue
        tried.add(key)
        core = body + _FILLERS[filler_i] * max(0, fill)
        text = core.lstrip() + tail
        diff = target - _count(tokenizer, text)
        if diff == 0:
            return text
        fill += diff
        if fill < 0:  # drop a sentence and refill
            if not pieces:
                return minimal_response(answer)
            last = pieces.pop()
            body = "".join(pieces)
            fill += _count(tokenizer, last)
    return text

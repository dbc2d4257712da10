"""``LoadedTokenizer.count``'s fast path (``tiktoken`` over Qwen's ranks) gives exactly the Hugging
Face pipeline's counts, is taken only where that is certain, and releases the GIL for big texts."""

from __future__ import annotations

import json
import random
import string
import threading
import time

import pytest
from conftest import SHARED_DATA

from reasoning_env.tokenization import QWEN_BPE_MODEL_SHA256, LoadedTokenizer, get_tokenizer

NAMES = ["Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen3-4B"]


def _reference(lt: LoadedTokenizer, text: str) -> int:
    """The count as it was before the fast path: the Hugging Face pipeline."""
    return len(lt.backend.encode_batch_fast([text], add_special_tokens=False)[0].ids)


def _texts() -> list[str]:
    """Benchmark-like responses, the datasets' texts, edge cases and random ASCII (fixed seed)."""
    out = []
    for fname in ("math500_test.jsonl", "gsm8k_test.jsonl"):
        path = SHARED_DATA / fname
        if path.is_file():
            for line in list(path.open(encoding="utf-8"))[:300]:
                out += [v for v in json.loads(line).values() if isinstance(v, str)]
    out += [
        "",
        " ",
        "\n\n\n",
        "\t\t x",
        "a  b   c    d",
        "trailing   ",
        "\r\n\r\n",
        "1234567890",
        "It's we're they've I'm you'll he'd IT'S WE'RE",
        "x < 3 and y > 2, so <x> is fine",
        "<|im_start|>user\nhi<|im_end|>",
        "<|endoftext|> after",
        "<think>hidden</think> shown",
        "<tool_call>{}</tool_call>",
        "naïve café: 2 × 3 = 6",
        "e\u0301 combining",
        "数学题：求 x 的值。 \\boxed{4}",
        "😀 \\boxed{1}",
        "x" * 5000,
        "ab" * 3000,
        " " * 3000 + "x",
        "\x00\x01\x1b\x1c\x1f\x7f \x0b\x0c",
    ]
    rng = random.Random(34)
    alphabets = [string.ascii_letters, string.digits, " \t\n\r\x0b\x0c", string.punctuation, "'sStTdDmMlLrReEvV"]
    for _ in range(3000):
        out.append("".join(rng.choice(rng.choice(alphabets)) for _ in range(rng.randint(1, 60))))
    words = " ".join(out[:600]).split()
    seps = [" ", "  ", "\n", " \n ", "\t", "", "'", "'s ", "\r\n", "   \n\n"]
    for _ in range(1000):
        out.append("".join(rng.choice(words) + rng.choice(seps) for _ in range(rng.randint(1, 40))))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_counts_are_the_hugging_face_pipelines(name):
    lt = get_tokenizer(name)
    assert lt._fast is not None  # the fast path is on for Qwen's vocabulary (else this test proves nothing)
    texts = _texts()
    assert sum(t.isascii() for t in texts) > 4000
    assert [lt.count(t) for t in texts] == [_reference(lt, t) for t in texts]


def test_qwens_own_files_get_the_fast_path_too():
    """The hash is of the model, not of our build: Qwen's own vocab.json / merges.txt match it."""
    folders = [SHARED_DATA / "qwen2.5_tokenizer", SHARED_DATA / "qwen3_tokenizer"]
    if not all((f / "merges.txt").is_file() for f in folders):
        pytest.skip("reference tokenizer files not found")
    for folder in folders:
        lt = get_tokenizer(str(folder))
        assert lt._fast is not None, folder
        assert lt.count("Natalia sold 48/2 = 24 clips in May.") == _reference(
            lt, "Natalia sold 48/2 = 24 clips in May."
        )


def _copy(name: str, edit=None) -> LoadedTokenizer:
    """A separate tokenizer object with ``name``'s pipeline (optionally edited as JSON)."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    spec = json.loads(get_tokenizer(name).backend.to_str())
    if edit is not None:
        edit(spec)
    return LoadedTokenizer(
        name, PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(spec))), "test"
    )


def test_the_fast_path_is_taken_only_for_ascii_without_added_tokens():
    lt = _copy(NAMES[1])
    calls = []
    fast = lt._fast
    object.__setattr__(lt, "_fast", lambda text: calls.append(text) or fast(text))
    plain = "Let me work through this: 12 + 35 = 47, so x < 50. \\boxed{47}"
    assert lt.count(plain) == _reference(lt, plain) and calls == [plain]
    for text in ("<think>x</think> \\boxed{1}", "a <|im_end|> b", "<tool_call>", "café \\boxed{1}", "2 × 3"):
        calls.clear()
        assert lt.count(text) == _reference(lt, text)
        assert calls == [], text
    lt.backend.enable_truncation(5)  # a backend that truncates counts what it keeps, as before
    calls.clear()
    assert lt.count(plain) == _reference(lt, plain) == 5 and calls == []
    lt.backend.no_truncation()
    lt.tokenizer.add_tokens(["12 + 35 = 47"])  # a token added later is split out as before
    calls.clear()
    assert lt.count(plain) == _reference(lt, plain) != len(fast(plain))
    assert calls == []


@pytest.mark.parametrize(
    "edit",
    [
        lambda j: j.update(normalizer={"type": "Lowercase"}),
        lambda j: j["pre_tokenizer"]["pretokenizers"].pop(0),
        lambda j: j["model"]["merges"].pop(),
        lambda j: j["model"]["vocab"].update(
            {"Ġthe": j["model"]["vocab"]["Ġand"], "Ġand": j["model"]["vocab"]["Ġthe"]}
        ),
    ],
    ids=["normalizer", "split", "merges", "vocab"],
)
def test_any_other_pipeline_gets_no_fast_path(edit):
    lt = _copy(NAMES[0], edit)
    assert lt._fast is None
    assert lt.count("The Cat sat.") == _reference(lt, "The Cat sat.")


def test_the_model_hash_is_qwens():
    import hashlib

    assert hashlib.sha256(get_tokenizer(NAMES[0]).backend.model.__getstate__()).hexdigest() == QWEN_BPE_MODEL_SHA256


def test_a_big_fast_count_releases_the_gil():
    """A 1 MB response is counted without holding the GIL: another thread keeps running (in a
    server, the event loop), and the count is the pipeline's."""
    lt = get_tokenizer(NAMES[0])
    big = ("Let us add the numbers one at a time: 12 + 35 = 47, then 47 + 8 = 55. " * 14_000)[:999_000]
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(lt.count(big)))
    t0 = time.perf_counter()
    worker.start()
    gaps, last = [], time.perf_counter()
    while worker.is_alive():
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
    worker.join()
    elapsed = time.perf_counter() - t0
    assert result == [_reference(lt, big)] and result[0] > 200_000
    assert len(gaps) > 1000, f"the main thread ran {len(gaps)} times in {elapsed:.2f} s"
    assert max(gaps) < 0.5 * elapsed, (max(gaps), elapsed)


def test_the_fast_path_keeps_no_python_copy_of_the_ranks():
    """Only tiktoken's Rust encoder is kept: its ``Encoding`` would also hold the 151,643 ranks as
    a Python dict (~15 MiB) that counting never reads."""
    fast = get_tokenizer(NAMES[0])._fast
    owner = getattr(fast, "__self__", None)
    assert owner is not None and not hasattr(owner, "_mergeable_ranks"), type(owner)


def test_a_tokenizer_load_hands_the_freed_heap_back(monkeypatch):
    """``get_tokenizer`` trims the C heap once a load is done (what the load and the model's hash
    freed: ~30 MiB that stayed resident in a server, docs/server.md)."""
    import os

    import reasoning_env.tokenization as tokenization

    release = tokenization.release_free_heap
    release()  # glibc's malloc_trim here; a no-op elsewhere: never an error
    calls = []
    monkeypatch.setattr(tokenization, "release_free_heap", lambda: calls.append(1))
    folder = str(tokenization.embedded_tokenizer_dir(tokenization.QWEN3)) + os.sep  # a name no other test loads
    lt = tokenization.get_tokenizer(folder)
    assert calls == [1] and lt._fast is not None
    tokenization.get_tokenizer(folder)  # cached: no load, no trim
    assert calls == [1]

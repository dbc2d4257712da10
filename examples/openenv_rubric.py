"""The environment's reward as an OpenEnv rubric tree: play one episode, print what each named child scored.

Run: ``python examples/openenv_rubric.py``
"""

from __future__ import annotations

from reasoning_env import EnvConfig, ReasoningEconomicsEnv

config = EnvConfig.build(
    num_questions=3,
    sources=["builtin"],
    reward={"type": "combined", "rewards": [{"type": "economics", "label": "econ"}, {"type": "accuracy"}]},
)
env = ReasoningEconomicsEnv(config)
obs = env.reset(seed=1, tokenizer_name="Qwen/Qwen2.5-0.5B-Instruct")
print("rubric tree:", [name for name, _ in env.rubric.named_rubrics()])
while not obs.done:
    gold = env.questions[obs.question_index].gold_answer
    obs = env.step(f"Adding up gives \\boxed{{{gold}}}")
    # the env ran its rubric in step(): every node's last_score is this step's number
    scores = {name: round(r.last_score, 4) for name, r in env.rubric.named_rubrics()}
    print(f"paid {obs.reward:+.4f} = rubric {env.rubric.last_score:+.4f}  {scores}")
print("episode credit of econ.episode_bonus:", env.rubric.get_rubric("econ.episode_bonus").compute_step_rewards())

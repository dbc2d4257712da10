"""The shipped curriculum config (examples/training/cpu_allocation.yaml): it loads, every episode is 2 easy chain sums
and 2 simple equations as configured, and the training command it documents gives training the config's budget."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from reasoning_env.config import EnvConfig
from reasoning_env.env import ReasoningEconomicsEnv

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "training" / "cpu_allocation.yaml"
TOKENIZER = "embedded:qwen2.5"  # the served model's token ids (docs/real_model.md)


@pytest.fixture(scope="module")
def env() -> ReasoningEconomicsEnv:
    return ReasoningEconomicsEnv(EnvConfig.from_yaml(CONFIG))


def _documented_command() -> list[str]:
    """The ``python -m training.grpo_train ...`` command in the config's header comment, as argv."""
    lines = [ln.lstrip("#").strip() for ln in CONFIG.read_text().splitlines() if ln.startswith("#")]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("python -m training.grpo_train"))
    cmd = ""
    for ln in lines[start:]:
        cmd += " " + ln.rstrip("\\").strip()
        if not ln.endswith("\\"):
            break
    return [a for a in shlex.split(cmd)[3:] if a != "..."]


def test_every_episode_is_two_chain_sums_and_two_equations(env):
    for seed in range(20):
        obs = env.reset(seed=seed)
        types = sorted(obs.metadata["problem_types"])
        assert types == ["reasoning_gym/chain_sum"] * 2 + ["reasoning_gym/simple_equations"] * 2, seed


def test_the_questions_have_the_configured_size(env):
    pools = env.pools.pools
    chains = pools["reasoning_gym/chain_sum"]
    equations = pools["reasoning_gym/simple_equations"]
    assert len(chains) == len(equations) == 500
    for q in chains:
        terms = re.findall(r"\d+", q.text.split(":")[-1])
        assert 2 <= len(terms) <= 3 and all(len(t) <= 2 for t in terms) and q.difficulty == 1
    assert {q.difficulty for q in equations} == {3}
    assert all(1 <= int(q.gold_answer) <= 20 for q in equations)


def test_the_documented_training_command_gives_training_the_configs_budget(env):
    """Training names a tokenizer at every reset, which takes the tokenizer-native budget (~300 tokens here) over
    the config's total_budget: training passes the config's own budget to every reset, and the reset training makes
    with the documented command gets the config's figure."""
    from training.envs import Session
    from training.grpo_train import parse_args, training_total_budget

    args = parse_args(_documented_command())
    cfg = env.config
    assert Path(args.config).resolve() == CONFIG and training_total_budget(args) == cfg.total_budget == 480
    assert args.temperature == 0.7
    session = Session(env)
    obs = session.reset(seed=3, tokenizer_name=TOKENIZER, total_budget=training_total_budget(args))
    assert obs.total_budget == 480 and obs.metadata["budget_source"] == "client"
    native = session.reset(seed=3, tokenizer_name=TOKENIZER, total_budget=None)
    assert native.metadata["budget_source"] == "tokenizer_native" and native.total_budget < 400


def test_a_reset_without_a_tokenizer_uses_the_configs_budget(env):
    obs = env.reset(seed=0)
    assert obs.total_budget == 480 and obs.metadata["budget_source"] == "config"
    assert env.config.max_tokens_per_step == 320


def test_training_takes_the_configs_own_budget_without_the_flag(tmp_path):
    """A --config that writes total_budget is the budget of every training reset even without --total_budget
    (training names a tokenizer, which would otherwise take the tokenizer-native ~300); a config without the key
    leaves the tokenizer-native default."""
    from training.grpo_train import config_total_budget, parse_args, training_total_budget

    assert config_total_budget(str(CONFIG)) == 480
    assert training_total_budget(parse_args(["--config", str(CONFIG), "--total_budget", "600"])) == 600
    bare = tmp_path / "bare.yaml"
    bare.write_text("num_questions: 4\n", encoding="utf-8")
    assert config_total_budget(str(bare)) is None
    assert config_total_budget(None) is None


HELD_OUT = ROOT / "examples" / "training" / "cpu_allocation_heldout.yaml"


def _questions(path: Path) -> dict[str, set[str]]:
    pools = ReasoningEconomicsEnv(EnvConfig.from_yaml(path)).pools
    return {ptype: {q.text for q in pool} for ptype, pool in pools.pools.items()}


def test_the_held_out_config_is_the_training_mix_with_other_questions():
    train, held = EnvConfig.from_yaml(CONFIG), EnvConfig.from_yaml(HELD_OUT)
    assert held.replace(sources=train.sources) == train  # budget, caps, mix: the same
    a, b = _questions(CONFIG), _questions(HELD_OUT)
    assert a.keys() == b.keys()
    assert not a["reasoning_gym/simple_equations"] & b["reasoning_gym/simple_equations"]
    # 2-3 terms of 1-2 digits is a small space: a few chain sums coincide (the config's header gives the count)
    shared = a["reasoning_gym/chain_sum"] & b["reasoning_gym/chain_sum"]
    assert len(shared) == 51 and len(b["reasoning_gym/chain_sum"]) == 466
    assert "51 of the 466" in HELD_OUT.read_text()


def test_reasoning_gym_seeds_next_to_each_other_repeat_questions():
    """Why the held-out config's seed is far from training's: reasoning-gym seeds question i with seed + i."""
    import reasoning_gym

    opts = {"min_terms": 2, "max_terms": 2, "min_value": 1, "max_value": 20}
    a = [q["question"] for q in reasoning_gym.create_dataset("simple_equations", size=5, seed=0, **opts)]
    b = [q["question"] for q in reasoning_gym.create_dataset("simple_equations", size=5, seed=1, **opts)]
    assert a[1:] == b[:-1]


def test_the_learning_experiments_command_is_the_registered_plan(tmp_path):
    """scripts/learning_experiment.sh trains what docs/training.md registered: 200 steps of 4 groups of 4 on the
    curriculum, held-out evaluations of 192 episodes from the held-out config every 50 steps, greedy."""
    from training.grpo_train import batch_layout, parse_args
    from workbench.experiment import LEARNING_EXPERIMENT

    script = (ROOT / "scripts" / "learning_experiment.sh").read_text()
    cmd = script[script.index("exec python -m training.grpo_train") :].split('"$@"')[0]
    cmd = cmd.replace("\\\n", " ").replace('"${REE_RUN_DIR:-runs/learning-qwen0.5b-allocation}"', str(tmp_path))
    args = parse_args(shlex.split(cmd)[4:])
    assert args.max_steps == LEARNING_EXPERIMENT.after_step == 200 and args.eval_every == 50
    assert args.eval_seeds == 192 and args.eval_temperature == 0 and args.temperature == 0.7
    assert args.config.endswith("cpu_allocation.yaml") and args.eval_config.endswith("cpu_allocation_heldout.yaml")
    # one episode a micro-batch, without gradient checkpointing (from step 3: the same loss, faster on this CPU)
    assert batch_layout(args) == (1, 16, 4) and not args.gradient_checkpointing
    assert args.model == "embedded:qwen2.5-coder-0.5b"
    assert args.save_steps == 1 and args.weight_handoff == "merged" and args.dtype == "float32"

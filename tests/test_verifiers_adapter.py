"""The verifiers adapter (reasoning_env_verifiers) end to end: ``vf-eval`` of verifiers 0.4.0 plays this
environment's episodes against an OpenAI-compatible stub model on loopback, and the rewards and metrics
in its traces equal what the environment pays for the same answers, played here in the core venv. The
generation limit sent with every reply is never below the cap the prompt states (the taskset sets it when the
run does not; a lower ``max_tokens`` of the run is stated in the prompts and warned about), and ``vf-validate``
checks every task's golds through the environment's grader. The same ``vf-eval`` against the real model on
vLLM's CPU server is tests/test_verifiers_vllm.py.

Runs in the ``verifiers`` venv of ``scripts/ci_venvs.sh`` (skipped with the fix when it is not built).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import openai_stub
import pytest
import tomli_w
from ci_venvs import ci_venv_python

from reasoning_env import EnvConfig, ReasoningEconomicsEnv
from reasoning_env.models import ReasoningEconomicsAction

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("verifiers_adapter"), pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[1]
SEEDS = (100, 101, 102)
TOKENIZER = "Qwen/Qwen2.5-0.5B-Instruct"
ENV_FIELDS = {
    "num_questions": 3,
    "sources": ["builtin"],
    "reward": {
        "type": "combined",
        "rewards": [
            {"type": "economics", "label": "econ"},
            {"type": "accuracy", "weight": 0.5},
            {"type": "l1_max", "weight": 0.2},
        ],
    },
}


def _episode_questions(seed: int) -> list:
    env = ReasoningEconomicsEnv(EnvConfig.build(**ENV_FIELDS))
    env.reset(seed=seed, tokenizer_name=TOKENIZER)
    return env.questions


def _toml(url: str, *, seeds=SEEDS, sampling: dict | None = None) -> str:
    """The eval config (as examples/verifiers/eval.toml, pointed at the stub)."""
    config = {
        "model": "stub-model",
        "client": {"base_url": url, "api_key_var": "STUB_API_KEY"},
        "env": {
            "taskset": {
                "id": "reasoning_env_verifiers",
                "num_episodes": len(seeds),
                "seed": seeds[0],
                "tokenizer_name": TOKENIZER,
                "env": ENV_FIELDS,
            },
            "player": {"runtime": {"type": "subprocess"}},
        },
    }
    if sampling:
        config["sampling"] = sampling
    return tomli_w.dumps(config)


#: Seconds a ``vf-eval`` / ``vf-validate`` run may take: 92 s at load 8-11 once, over 5 minutes of start-up alone at
#: load ~7 beside a training run on this 2-core machine.
VF_TIMEOUT_S = 1200


def _vf(py: Path, tmp: Path, *args: str, timeout: int = VF_TIMEOUT_S) -> subprocess.CompletedProcess:
    """Run a verifiers command (``vf-eval``, ``vf-validate``) of the venv of ``py`` in ``tmp``."""
    env = dict(os.environ, STUB_API_KEY="stub", PATH=f"{py.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [str(py.parent / args[0]), *args[1:]], cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout
    )


def _eval(tmp: Path, seeds=SEEDS, sampling: dict | None = None):
    """``vf-eval`` on the stub; returns the episodes of its ``traces.jsonl`` (by seed), the stub, the output."""
    py = ci_venv_python("verifiers")
    questions = {q.text: q.gold_answer for seed in seeds for q in _episode_questions(seed)}
    stub, server = openai_stub.start(questions)
    try:
        (tmp / "eval.toml").write_text(_toml(stub.url, seeds=seeds, sampling=sampling))
        proc = _vf(py, tmp, "vf-eval", "@", "eval.toml", "--no-push", "--no-rich", "-o", "out", "-c", "3")
    finally:
        server.shutdown()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (traces,) = list((tmp / "out").glob("*/traces.jsonl"))
    episodes = [json.loads(line) for line in traces.read_text().splitlines() if line.strip()]
    logs = "\n".join(p.read_text(errors="replace") for p in (tmp / "out").glob("*/logs/*/*.log") if p.is_file())
    return {e["task"]["data"]["info"]["seed"]: e for e in episodes}, stub, proc.stdout + proc.stderr + logs


@pytest.fixture(scope="module")
def vf_run(tmp_path_factory):
    """Run ``vf-eval`` once (no ``max_tokens`` in the run's sampling); yield the episodes (by seed) and the stub."""
    episodes, stub, _ = _eval(tmp_path_factory.mktemp("vf"))
    return episodes, stub


def _stated_caps(trace: dict) -> list[int]:
    """The per-answer cap each user turn of the trace states ("This answer may use at most N tokens")."""
    texts = [str(n["message"]["content"]) for n in trace["nodes"] if n["message"]["role"] == "user"]
    return [int(m.group(1)) for t in texts for m in [re.search(r"may use at most (\d+) tokens", t)] if m]


def _paid(seed: int) -> tuple[ReasoningEconomicsEnv, list]:
    """The episode played in the core venv with the stub's answers (its rule, its reported token counts)."""
    env = ReasoningEconomicsEnv(EnvConfig.build(**ENV_FIELDS))
    obs = env.reset(seed=seed, tokenizer_name=TOKENIZER)
    steps = []
    while not obs.done:
        q = env.questions[obs.question_index]
        text = openai_stub.reply_for(q.text, q.gold_answer)
        obs = env.step(ReasoningEconomicsAction(response=text, metadata={"num_generated_tokens": len(text.split())}))
        steps.append(obs)
    return env, steps


def test_every_episode_ran_and_ended_with_the_environment(vf_run):
    episodes, stub = vf_run
    assert sorted(episodes) == list(SEEDS)
    for episode in episodes.values():
        assert episode["ok"], episode.get("errors")
        (trace,) = episode["traces"]
        assert trace["stop_condition"] == "user_closed"  # the env ended the exchange when the episode was done
        assert len([n for n in trace["nodes"] if n["message"]["role"] == "user"]) == ENV_FIELDS["num_questions"]
    assert len(stub.replies) == len(SEEDS) * ENV_FIELDS["num_questions"]


def test_trace_rewards_and_metrics_equal_what_the_environment_pays(vf_run):
    episodes, _ = vf_run
    totals = set()
    for seed, episode in episodes.items():
        (trace,) = episode["traces"]
        env, steps = _paid(seed)
        assert trace["rewards"] == {"reasoning_economics": {"score": env.state.episode_reward, "weight": 1.0}}
        components: dict[str, float] = {}
        for obs in steps:
            for name, value in obs.last_step.reward_components.items():
                components[f"reward/{name}"] = components.get(f"reward/{name}", 0.0) + value
        metrics = trace["metrics"]
        assert {k: v for k, v in metrics.items() if k.startswith("reward/")} == components
        assert metrics["num_correct"] == env.state.total_correct
        assert metrics["tokens_spent"] == env.state.spent_budget
        assert [s["reward"] for s in trace["info"]["steps"]] == [o.reward for o in steps]
        assert [s["tokens"] for s in trace["info"]["steps"]] == [o.last_step.tokens for o in steps]
        totals.add(env.state.episode_reward)
    assert len(totals) > 1  # the stub's right and wrong answers make the episodes differ
    assert any(k.startswith("reward/econ.") for k in metrics) and "reward/accuracy" in metrics


def test_load_environment_builds_the_env_from_keyword_arguments():
    py = ci_venv_python("verifiers")
    code = (
        "import reasoning_env_verifiers as m\n"
        "e = m.load_environment(num_episodes=2, seed=7, env={'num_questions': 2, 'sources': ['builtin']})\n"
        "print(type(e).__name__, [t.data.info['seed'] for t in e.taskset.load()])\n"
        "try:\n"
        "    m.load_environment(env={'num_questions': 0})\n"
        "except ValueError as exc:\n"
        "    print('refused:', ' '.join(str(exc).split()))\n"
    )
    proc = subprocess.run(
        [str(py), "-c", code],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=VF_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, refused = proc.stdout.strip().splitlines()[-2:]
    assert first == "ReasoningEconomicsVfEnv [7, 8]"
    assert refused.startswith("refused:") and "num_questions" in refused


def test_generation_is_never_limited_below_the_cap_the_prompt_states(vf_run):
    """No ``max_tokens`` in the run: the taskset sends the largest cap the episode's prompts can state (the
    environment's max_tokens_per_step, at most the budget in hard-cap mode) with every reply."""
    episodes, stub = vf_run
    config = EnvConfig.build(**ENV_FIELDS)
    limits = set()
    for episode in episodes.values():
        (trace,) = episode["traces"]
        budget = trace["info"]["episode"]["total_budget"]
        limit = trace["info"]["episode"]["generation_limit"]
        assert limit == {"max_tokens": min(config.max_tokens_per_step, budget), "source": "taskset"}
        caps = _stated_caps(trace)
        assert len(caps) == ENV_FIELDS["num_questions"] and all(1 <= c <= limit["max_tokens"] for c in caps)
        limits.add(limit["max_tokens"])
    sent = [r.get("max_tokens", r.get("max_completion_tokens")) for r in stub.chat_requests]
    assert sent and set(sent) <= limits, f"the model calls carried max_tokens {set(sent)}, not the taskset's {limits}"


def test_a_lower_max_tokens_of_the_run_is_stated_in_the_prompts_and_warned_about(tmp_path):
    """The run's ``max_tokens`` (30) is below the environment's cap: it is kept, every prompt states it as the
    answer's cap (the limit generation really has), and the run says so."""
    episodes, stub, output = _eval(tmp_path, seeds=(SEEDS[0],), sampling={"max_tokens": 30})
    (trace,) = episodes[SEEDS[0]]["traces"]
    assert trace["info"]["episode"]["generation_limit"] == {"max_tokens": 30, "source": "run"}
    caps = _stated_caps(trace)
    assert caps and caps[0] == 30 and all(c <= 30 for c in caps)
    assert {r.get("max_tokens", r.get("max_completion_tokens")) for r in stub.chat_requests} == {30}
    assert "max_tokens 30 (the run's sampling) is below the environment's per-answer cap" in output, output[-3000:]


def test_vf_validate_checks_every_gold_through_the_environments_grader(tmp_path):
    """``vf-validate``'s gold check plays each episode with every question answered ``\\boxed{gold}`` and is
    valid when the environment grades them all right; the noop check scores an untouched episode (0: not a
    pass). Both checked, none "unchecked"."""
    py = ci_venv_python("verifiers")
    config = {
        "output_dir": "out",
        "rich": False,
        "taskset": {
            "id": "reasoning_env_verifiers",
            "num_episodes": 2,
            "seed": SEEDS[0],
            "tokenizer_name": TOKENIZER,
            "env": ENV_FIELDS,
        },
        "runtime": {"type": "subprocess"},
    }
    (tmp_path / "validate.toml").write_text(tomli_w.dumps(config))
    proc = _vf(py, tmp_path, "vf-validate", "@", "validate.toml")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (summary,) = list((tmp_path / "out").glob("*/summary.json"))
    checks = json.loads(summary.read_text())["checks"]
    assert checks["gold"]["valid"] == 2 and checks["gold"]["unchecked"] == 0, checks
    assert checks["noop"]["valid"] == 2 and checks["noop"]["unchecked"] == 0, checks

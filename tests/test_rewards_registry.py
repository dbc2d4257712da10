"""The reward registry: names, slider metadata, specs and their YAML round trip, build(EnvConfig)."""

from __future__ import annotations

import json

import pytest
import yaml

from reasoning_env.config import ConfigError, EnvConfig
from reasoning_env.rewards import (
    COMPONENTS,
    CombinedReward,
    EconomicsReward,
    StepContext,
    available,
    build,
    build_reward,
    describe,
    info,
    load_spec,
    normalize_spec,
    spec_to_yaml,
    trl_reward_function,
    trl_reward_functions,
    validate_reward_spec,
)

REQUIRED = {
    "economics",
    "budget_aware",
    "accuracy",
    "format",
    "repetition",
    "l1_exact",
    "l1_max",
    "dapo_overlong",
    "kimi_length",
    "cosine",
    "shorter_better",
    "combined",
}


def test_available_lists_the_registry():
    names = available()
    assert REQUIRED <= set(names)
    assert names[0] == "economics" and names[-1] == "combined"


def test_metadata_is_complete_and_json_ready():
    meta = describe()
    json.dumps(meta)  # machine-readable
    for name, m in meta.items():
        assert m["summary"] and m["formula"] and m["source"], name
        assert m["scope"] in ("step", "episode", "step+episode", "group")
        if name != "combined":
            assert m["components"], name
        for p in m["params"]:
            assert p["description"], (name, p["name"])
            if p["kind"] == "choice":
                assert p["default"] in p["choices"]
            else:
                assert p["min"] is not None and p["max"] is not None and p["step"] > 0, (name, p["name"])
                assert p["min"] <= p["default"] <= p["max"], (name, p["name"])
    assert info("kimi_length").is_group and not info("l1_max").is_group
    assert describe("l1_max")["params"][0]["name"] == "alpha"
    assert "Aggarwal" in describe("l1_exact")["source"] and "DAPO" in describe("dapo_overlong")["source"]


@pytest.mark.parametrize("name", [n for n in available() if n != "combined"])
def test_every_reward_round_trips_through_yaml(name):
    rw = build_reward(name, context="rescore")
    spec = rw.to_spec()
    text = spec_to_yaml(spec)
    again = load_spec(text)
    assert normalize_spec(again) == normalize_spec(spec)
    assert build_reward(again, context="rescore") == rw
    # non-default parameters survive too
    params = {}
    for p in info(name).params:
        params[p.name] = p.choices[-1] if p.kind == "choice" else (p.max if p.kind == "float" else int(p.max))
    if name == "dapo_overlong":
        params["l_cache"] = params["l_max"]
    spec = {"type": name, "weight": 0.5, "params": params}
    rebuilt = build_reward(load_spec(spec_to_yaml(spec)), context="rescore")
    assert rebuilt == build_reward(spec, context="rescore")
    assert rebuilt.to_spec()["weight"] == 0.5


def test_combined_round_trip_and_file(tmp_path):
    text = """
type: combined
rewards:
  - type: accuracy
  - {type: dapo_overlong, weight: 0.5, params: {l_max: 1024, l_cache: 256}}
  - {type: l1_max, label: budget, alpha: 0.001}   # inline params
"""
    rw = build(text)
    assert isinstance(rw, CombinedReward)
    assert rw.component_names == ("accuracy", "dapo_overlong", "budget")
    norm = normalize_spec(load_spec(text))
    assert norm["rewards"][2]["params"]["alpha"] == 0.001 and norm["rewards"][2]["label"] == "budget"
    path = tmp_path / "reward.yaml"
    path.write_text(spec_to_yaml(text))
    assert build(str(path)) == rw
    assert normalize_spec(yaml.safe_load(path.read_text())) == norm
    assert build(rw.to_spec()) == rw
    # an EnvConfig file's reward: key is read
    cfg = tmp_path / "env.yaml"
    EnvConfig(reward=load_spec(text)).to_yaml(cfg)
    assert build(load_spec(str(cfg))) == rw


@pytest.mark.parametrize(
    "spec, match",
    [
        ({"type": "nope"}, "unknown reward 'nope'"),
        ({"type": "l1_max", "params": {"alpah": 1}}, "unknown parameter"),
        ({"type": "l1_max", "alpah": 1}, "unknown key"),
        ({"type": "l1_max", "params": {"alpha": -1}}, ">= 0"),
        ({"type": "l1_max", "params": {"alpha": "big"}}, "must be a number"),
        ({"type": "l1_max", "params": {"target": "median"}}, "must be one of"),
        ({"type": "repetition", "params": {"ngram_size": 2.5}}, "integer"),
        ({"type": "accuracy", "weight": "x"}, "weight"),
        ({"type": "combined", "rewards": []}, "non-empty"),
        ({"type": "combined", "rewards": ["accuracy", "accuracy"]}, "distinct 'label'"),
        ({"type": "combined", "rewards": [{"type": "combined", "rewards": ["accuracy"]}]}, "nested"),
        ({"type": "combined", "rewards": [{"params": {}}]}, "needs a 'type'"),
        ({"label": "x"}, "needs a 'type'"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec, match):
    with pytest.raises(ValueError, match=match):
        validate_reward_spec(spec)


def test_group_reward_in_env_config_is_a_clear_error():
    for spec in ({"type": "shorter_better"}, {"type": "combined", "rewards": ["accuracy", "kimi_length"]}):
        with pytest.raises(ConfigError, match="group reward.*training.*re-scoring"):
            EnvConfig.build(reward=spec)
        validate_reward_spec(spec, context="rescore")  # fine for re-scoring and training


def test_build_envconfig_default_is_the_seed_with_flat_weights():
    assert build(EnvConfig()) == EconomicsReward()
    assert build(None) == EconomicsReward()
    assert build(EnvConfig(beta=0.2, gamma=0.3)) == EconomicsReward(beta=0.2, gamma=0.3)
    # legacy {name: economics, params} and the new form: spec params override flat weights
    assert build(EnvConfig(beta=0.2, reward={"name": "economics", "params": {"gamma": 0.4}})) == EconomicsReward(
        beta=0.2, gamma=0.4
    )
    assert build(EnvConfig(beta=0.2, reward={"type": "economics"})) == EconomicsReward(beta=0.2)
    assert build(EnvConfig(reward={"params": {"gamma": 0.4}})) == EconomicsReward(gamma=0.4)  # legacy: no type
    assert build(EnvConfig(reward={})) == EconomicsReward()
    # flat weights fill economics/budget_aware entries of a combined spec
    rw = build(EnvConfig(lambda_ep=0.0, reward={"type": "combined", "rewards": ["accuracy", "budget_aware"]}))
    assert rw.entries[1].reward.lambda_ep == 0.0
    assert tuple(build(EnvConfig()).component_names) == COMPONENTS


def test_trl_reward_callables():
    comps = ["so \\boxed{4}", "long " * 50 + "\\boxed{5}", [{"role": "assistant", "content": "\\boxed{4}"}]]
    ids = [[0] * 100, [0] * 300, [0] * 200]
    f = trl_reward_function("accuracy")
    assert f.__name__ == "reward_accuracy"
    assert f(comps, prompts=["p"] * 3, completion_ids=ids, answer=["4", "4", "4"]) == [1.0, 0.0, 1.0]
    assert f(comps, completion_ids=ids, correct=[False, True, False]) == [0.0, 1.0, 0.0]
    k = trl_reward_function("kimi_length")
    # one prompt = one group: lengths 100, 300, 200
    assert k(comps, prompts=["p"] * 3, completion_ids=ids, correct=[True, True, True]) == pytest.approx(
        [0.5, -0.5, 0.0]
    )
    # two prompts = two groups
    assert k(
        comps[:2] * 2, prompts=["a", "a", "b", "b"], completion_ids=ids[:2] * 2, correct=[True] * 4
    ) == pytest.approx([0.5, -0.5] * 2)
    sb = trl_reward_function({"type": "shorter_better", "beta": 0.01})
    assert sb(comps, prompts=["p"] * 3, completion_ids=ids, correct=[True, False, True]) == pytest.approx(
        [2.0, -2.0, 2.0 - 1.0]
    )
    l1 = trl_reward_function({"type": "l1_max", "target": "fixed", "n_target": 200, "alpha": 0.001})
    assert l1(comps, completion_ids=ids, correct=[True] * 3) == pytest.approx([0.6, 0.4, 0.5])
    fns = trl_reward_functions({"type": "combined", "rewards": ["accuracy", {"type": "kimi_length", "weight": 0.5}]})
    assert [fn.__name__ for fn in fns] == ["reward_accuracy", "reward_kimi_length"]
    assert fns[1](comps, prompts=["p"] * 3, completion_ids=ids, correct=[True] * 3) == pytest.approx(
        [0.25, -0.25, 0.0]
    )
    with pytest.raises(ValueError, match="token counts"):
        f(["x"], correct=[True])


def test_env_reports_components_of_the_configured_reward():
    rw = build(EnvConfig(reward={"type": "combined", "rewards": ["accuracy", {"type": "l1_exact", "label": "l1"}]}))
    c = rw.step_components(
        StepContext(
            correct=True,
            has_answer=True,
            tokens=50,
            raw_tokens=50,
            total_budget=1000,
            num_questions=10,
            spent_before=0,
            question_index=0,
        )
    )
    assert c == {"accuracy": 1.0, "l1.correctness": 1.0, "l1.length_penalty": pytest.approx(-0.015)}


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "economics", "params": {"target_utilization": 0.7}},
        {"type": "budget_aware", "target_utilization": 0.7},  # inline parameter
        "type: combined\nrewards:\n  - {type: economics, params: {target_utilization: 0.7}}\n",
    ],
    ids=["params", "inline", "combined-yaml"],
)
def test_a_spec_with_the_old_target_utilization_name_still_builds(spec):
    """Reward specs (and the saved runs that hold them) written before the rename keep working."""
    with pytest.warns(FutureWarning, match="old spelling of 'target_utilisation'"):
        norm = normalize_spec(load_spec(spec))
    entry = norm["rewards"][0] if norm["type"] == "combined" else norm
    assert entry["params"]["target_utilisation"] == 0.7 and "target_utilization" not in entry["params"]


def test_an_env_config_spec_with_the_old_name_is_not_doubled_by_the_flat_default():
    with pytest.warns(FutureWarning):
        cfg = EnvConfig(reward={"type": "economics", "params": {"target_utilization": 0.6}})
    assert cfg.reward == {"type": "economics", "params": {"target_utilisation": 0.6}}  # saved under the new name
    assert build(cfg).target_utilisation == 0.6


def test_the_reward_classes_take_the_old_keyword_with_a_warning():
    with pytest.warns(FutureWarning, match="EconomicsReward"):
        old = EconomicsReward(target_utilization=0.8)
    assert old == EconomicsReward(target_utilisation=0.8)
    with pytest.warns(FutureWarning):
        assert old.target_utilization == 0.8
    with pytest.raises(TypeError, match="give 'target_utilisation' only"):
        EconomicsReward(target_utilization=0.8, target_utilisation=0.7)


def test_components_total_sums_a_batch_of_components_and_is_zero_without_any():
    import numpy as np

    from reasoning_env.rewards import components_total

    total = components_total({"correctness": np.array([1.0, 0.0]), "cost": np.array([-0.25, -0.5])}, 2)
    assert total.tolist() == [0.75, -0.5]
    assert components_total({}, 3).tolist() == [0.0, 0.0, 0.0]

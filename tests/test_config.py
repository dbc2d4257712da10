"""EnvConfig: contract defaults, validation, YAML round trip."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from reasoning_env import ConfigError, EnvConfig


def test_defaults_follow_the_v2_contract():
    c = EnvConfig()
    assert (c.num_questions, c.budget_ratio, c.min_tokens, c.max_tokens, c.max_tokens_per_step) == (
        10,
        4.0,
        10,
        800,
        2048,
    )
    # the default reward's cost weight is 0; the contract's 0.05 is the reference reward's (test_env_rewards.py)
    assert (c.beta, c.gamma, c.lambda_ep, c.target_utilisation, c.soft_overspend_penalty) == (
        0.0,
        0.1,
        0.5,
        0.9,
        0.25,
    )
    assert (c.correct_reward, c.wrong_reward) == (1.0, -0.1)
    assert c.hard_cap_mode is True
    assert c.tokenizer_name == "Qwen/Qwen2.5-0.5B-Instruct"
    assert [s.name for s in c.sources] == ["metamathqa", "numina_tir"]


def test_config_budget_formula():
    # budget_ratio * num_questions * (min_tokens + max_tokens) / 2 = 4 * 10 * 810 / 2
    assert EnvConfig().config_budget() == 16200
    assert EnvConfig(total_budget=777).config_budget() == 777


def test_yaml_round_trip(tmp_path):
    c = EnvConfig.build(
        num_questions=4,
        budget_ratio=2.5,
        hard_cap_mode=False,
        beta=0.2,
        sources=["gsm8k", {"name": "reasoning_gym", "options": {"datasets": ["gcd"], "size": 5}}],
        mix={"GSM8K": 2.0},
        seed=7,
    )
    path = tmp_path / "env.yaml"
    c.to_yaml(path)
    back = EnvConfig.from_yaml(path)
    assert back == c
    assert back.sources[1].options == {"datasets": ["gcd"], "size": 5}


def test_yaml_with_env_section(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text("env:\n  num_questions: 3\n  hard_cap_mode: false\n")
    c = EnvConfig.from_yaml(path)
    assert c.num_questions == 3 and c.hard_cap_mode is False


@pytest.mark.parametrize(
    "values, needle",
    [
        ({"total_budget": -5}, "total_budget"),
        ({"budget_ratio": 0}, "budget_ratio"),
        ({"num_questions": 0}, "num_questions"),
        ({"sources": ["nope"]}, "unknown source 'nope'"),
        ({"sources": [{"name": "gsm8k", "options": {"colour": 1}}]}, "does not take option"),
        ({"sources": [{"name": "metamathqa", "options": {"types": ["GSM_XX"]}}]}, "unknown type"),
        ({"mix": {"GSM8K": -1}}, "mix weight"),
        ({"min_tokens": 900, "max_tokens": 800}, "min_tokens"),
        ({"typo_field": 1}, "unknown setting 'typo_field'"),
        ({"tokenizer_name": ""}, "tokenizer_name"),
        ({"budget_ratio": float("inf")}, "budget_ratio"),
        ({"budget_ratio": 1e300}, "budget_ratio"),
        ({"total_budget": 10**21}, "total_budget"),
        ({"correct_reward": float("nan")}, "correct_reward"),
        ({"wrong_reward": float("-inf")}, "wrong_reward"),
        ({"beta": float("inf")}, "beta"),
        ({"soft_overspend_penalty": float("inf")}, "soft_overspend_penalty"),
        ({"num_questions": 10_000, "max_tokens": 100_000}, "config budget formula gives"),
    ],
)
def test_invalid_values_are_clear_errors(values, needle):
    with pytest.raises(ConfigError) as exc:
        EnvConfig.build(**values)
    assert needle in str(exc.value)


def test_missing_and_malformed_yaml(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        EnvConfig.from_yaml(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("num_questions: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        EnvConfig.from_yaml(bad)


def test_invalid_yaml_settings_name_the_file(tmp_path):
    path = tmp_path / "env.yaml"
    path.write_text("num_questions: -3\n")
    with pytest.raises(ConfigError) as exc:
        EnvConfig.from_yaml(path)
    assert str(path) in str(exc.value) and "num_questions" in str(exc.value)


def test_config_is_immutable_and_replace_validates():
    c = EnvConfig()
    with pytest.raises(ValidationError, match="frozen"):
        c.num_questions = 3  # type: ignore[misc]
    assert c.replace(num_questions=3).num_questions == 3
    with pytest.raises(ConfigError):
        c.replace(num_questions=-1)


def test_coerce_accepts_a_config_a_dict_or_none():
    c = EnvConfig(num_questions=3)
    assert EnvConfig.coerce(c) is c
    assert EnvConfig.coerce({"num_questions": 3}) == c
    assert EnvConfig.coerce(None) == EnvConfig()
    with pytest.raises(TypeError, match="EnvConfig"):
        EnvConfig.coerce("config.yaml")
    with pytest.raises(ConfigError):
        EnvConfig.coerce({"num_questions": -3})


def test_the_constructor_itself_raises_config_error():
    with pytest.raises(ConfigError, match="total_budget"):
        EnvConfig(total_budget=-5)
    with pytest.raises(ConfigError, match="unknown source"):
        EnvConfig(sources=["nope"])
    with pytest.raises(ConfigError, match="unknown setting 'foo'"):
        EnvConfig(foo=1)


def test_a_reward_name_is_shorthand_for_its_spec(tmp_path):
    c = EnvConfig(reward="l1_max")
    assert c.reward == {"type": "l1_max"}
    path = tmp_path / "r.yaml"
    path.write_text("reward: budget_aware\n")
    assert EnvConfig.from_yaml(path).reward == {"type": "budget_aware"}
    with pytest.raises(ConfigError):
        EnvConfig(reward="no_such_reward")


def test_infinite_yaml_values_are_refused_at_load(tmp_path):
    """`.inf` in YAML used to load and then crash every reset with an OverflowError."""
    path = tmp_path / "inf.yaml"
    path.write_text("budget_ratio: .inf\n")
    with pytest.raises(ConfigError, match="budget_ratio"):
        EnvConfig.from_yaml(path)


# ----------------------------------------------------------------------------- renamed keys
def test_the_old_target_utilization_key_still_loads_with_a_warning(tmp_path):
    """A YAML file written before the rename (utilization -> utilisation) keeps working."""
    path = tmp_path / "old.yaml"
    path.write_text("num_questions: 4\ntarget_utilization: 0.8\n")
    with pytest.warns(FutureWarning, match="'target_utilization' is the old spelling of 'target_utilisation'"):
        cfg = EnvConfig.from_yaml(path)
    assert cfg.target_utilisation == 0.8
    assert "target_utilisation: 0.8" in cfg.to_yaml() and "target_utilization" not in cfg.to_yaml()
    with pytest.warns(FutureWarning):
        assert cfg.target_utilization == 0.8  # the old attribute reads the new field


def test_both_spellings_at_once_are_a_config_error():
    with pytest.raises(ConfigError, match="give 'target_utilisation' only"):
        EnvConfig(target_utilization=0.8, target_utilisation=0.7)


def test_the_old_key_reaches_the_reward_it_configures():
    from reasoning_env.rewards import build_reward

    with pytest.warns(FutureWarning):
        old = build_reward(EnvConfig(target_utilization=0.5))
    assert old == build_reward(EnvConfig(target_utilisation=0.5)) and old.target_utilisation == 0.5

"""A YAML boolean is not a number: ``num_questions: true`` must not become a one-question episode
(pydantic's lax mode reads True as 1), nor ``seed: yes`` seed 1; the error names the setting."""

from __future__ import annotations

import pytest

from reasoning_env.config import ConfigError, EnvConfig


@pytest.mark.parametrize("field", ["num_questions", "budget_ratio", "total_budget", "max_tokens", "seed", "beta"])
@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_for_a_number_is_refused(field, value) -> None:
    with pytest.raises(ConfigError, match=rf"{field}: .*a number, not a boolean"):
        EnvConfig(**{field: value})


def test_a_boolean_in_yaml_names_the_file_and_setting(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("num_questions: yes\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"(?s)c\.yaml.*num_questions: .*not a boolean"):
        EnvConfig.from_yaml(path)


def test_numbers_and_boolean_settings_still_load() -> None:
    cfg = EnvConfig(num_questions=3, budget_ratio=2, seed=0, hard_cap_mode=False)
    assert (cfg.num_questions, cfg.budget_ratio, cfg.seed, cfg.hard_cap_mode) == (3, 2.0, 0, False)


@pytest.mark.parametrize("field", ["hard_cap_mode", "grade_beyond_budget", "offline_fallback"])
@pytest.mark.parametrize("value", ["yes", "false", "1", 1, 0])
def test_a_string_or_number_for_a_boolean_is_refused(field, value) -> None:
    with pytest.raises(ConfigError, match=rf"{field}: .*must be true or false"):
        EnvConfig(**{field: value})


def test_a_quoted_boolean_in_yaml_names_the_setting(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("hard_cap_mode: 'yes'\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"(?s)c\.yaml.*hard_cap_mode: .*must be true or false.*not a str"):
        EnvConfig.from_yaml(path)


@pytest.mark.parametrize("value", [10**22, 1e22, 100_000_001])
def test_max_tokens_per_step_has_an_upper_bound_named_in_the_error(value) -> None:
    with pytest.raises(ConfigError, match=r"max_tokens_per_step: must be at most 100,000,000 tokens"):
        EnvConfig(max_tokens_per_step=value)

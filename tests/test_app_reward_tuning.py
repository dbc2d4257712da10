"""workbench.reward_lab.tuning: controls from the registry, specs from slider values, re-scoring
tables, the induced allocation and tuned YAML."""

from __future__ import annotations

import math

import numpy as np
import pytest

import reasoning_env.rewards as R
from reasoning_env.config import EnvConfig
from workbench.reward_lab import tuning as rt


def test_every_registry_parameter_has_a_control_within_its_range():
    ctrls = rt.controls()
    keys = {c.key for c in ctrls}
    for name in rt.reward_names():
        assert f"{name}.weight" in keys
        for p in R.describe(name)["params"]:
            assert f"{name}.{p['name']}" in keys
    for c in ctrls:
        if c.kind != "choice":
            assert c.minimum <= c.default <= c.maximum and c.step > 0
        else:
            assert c.default in c.choices
    assert "combined" not in rt.reward_names()


def test_group_rewards_can_be_left_out():
    assert "kimi_length" in rt.reward_names() and "kimi_length" not in rt.reward_names(include_group=False)


def test_defaults_give_the_registry_defaults():
    defaults = [c.default for c in rt.controls()]
    assert rt.values_to_spec(["l1_max"], defaults) == R.normalize_spec("l1_max")


def test_one_shape_gives_a_single_spec_with_the_slider_values():
    spec = rt.values_to_spec(["l1_max"], {"l1_max.alpha": 0.001, "l1_max.weight": 2})
    assert spec["type"] == "l1_max" and spec["params"]["alpha"] == 0.001 and spec["weight"] == 2.0


def test_several_shapes_give_a_weighted_combination():
    spec = rt.values_to_spec(
        ["accuracy", "dapo_overlong"],
        {"dapo_overlong.weight": 0.5, "dapo_overlong.l_max": 1024, "dapo_overlong.l_cache": 256},
    )
    assert spec["type"] == "combined"
    assert [(e["type"], e["weight"], e["label"]) for e in spec["rewards"]] == [
        ("accuracy", 1.0, "accuracy"),
        ("dapo_overlong", 0.5, "dapo_overlong"),
    ]
    assert set(R.build_reward(spec, context="rescore").component_names) == {"accuracy", "dapo_overlong"}


def test_int_params_are_rounded_and_choices_kept():
    spec = rt.values_to_spec(["repetition"], {"repetition.ngram_size": 4.0})
    assert spec["params"]["ngram_size"] == 4 and isinstance(spec["params"]["ngram_size"], int)
    assert rt.values_to_spec(["l1_exact"], {"l1_exact.target": "fixed"})["params"]["target"] == "fixed"


def test_bad_selections_and_values_are_errors():
    with pytest.raises(ValueError, match="at least one"):
        rt.values_to_spec([], {})
    with pytest.raises(ValueError, match="unknown reward"):
        rt.values_to_spec(["nope"], {})
    with pytest.raises(ValueError, match="expected"):
        rt.values_to_spec(["accuracy"], [1.0, 2.0])
    with pytest.raises(ValueError, match="l_cache"):
        rt.values_to_spec(["dapo_overlong"], {"dapo_overlong.l_cache": -5})
    with pytest.raises(ValueError, match="finite number"):
        rt.values_to_spec(["l1_max"], {"l1_max.alpha": float("nan")})
    with pytest.raises(ValueError, match="must be a number"):
        rt.values_to_spec(["l1_max"], {"l1_max.alpha": "abc"})


def test_spec_to_values_round_trips():
    spec = rt.values_to_spec(
        ["economics", "l1_max"], {"economics.beta": 0.3, "l1_max.alpha": 0.002, "l1_max.weight": 0.5}
    )
    selected, values, notes = rt.spec_to_values(spec)
    assert selected == ["economics", "l1_max"] and notes == []
    assert rt.values_to_spec(selected, values) == spec


def test_spec_to_values_notes_what_controls_cannot_show():
    spec = {
        "type": "combined",
        "weight": 2.0,
        "rewards": [{"type": "accuracy", "label": "a"}, {"type": "accuracy", "label": "b"}],
    }
    selected, values, notes = rt.spec_to_values(spec)
    assert selected == ["accuracy"] and values["accuracy.weight"] == 2.0 and len(notes) == 2


def test_recorded_spec_follows_the_config_flat_weights():
    spec = rt.recorded_spec(EnvConfig(beta=0.3))
    assert spec["type"] == "economics" and spec["params"]["beta"] == 0.3
    assert rt.recorded_spec(None) == R.normalize_spec("economics")


@pytest.mark.parametrize(
    "text,expected", [("", list(rt.DEFAULT_BUDGETS)), ("2500, 1000 1000", [1000, 2500]), ([500, 800], [500, 800])]
)
def test_parse_budgets(text, expected):
    assert rt.parse_budgets(text) == expected


@pytest.mark.parametrize("text", ["abc", "1000, -5", "12.5", "1 2 3 4 5 6 7", ",,,"])
def test_parse_budgets_rejects_bad_input(text):
    with pytest.raises(ValueError):
        rt.parse_budgets(text, lo=1)


# ------------------------------------------------------------------------------- re-scoring
@pytest.fixture(scope="module")
def lab():
    return rt.LabRun.synthetic(800, seed=3)


def test_rescoring_with_the_recorded_reward_changes_nothing(lab):
    table, tuned, base, notes = lab.rescore(lab.recorded)
    assert np.allclose(table["change"], 0.0) and list(table["tuned_rank"]) == list(table["recorded_rank"])
    assert np.allclose(tuned.episodes["reward"], base.episodes["reward"])


def test_rescoring_under_another_reward_reports_the_change(lab):
    spec = rt.values_to_spec(["l1_max"], {"l1_max.alpha": 0.002})
    table, tuned, _base, _ = lab.rescore(spec)
    direct = lab.rescorer.rescore(spec).summary()
    assert table.loc[0, "tuned_reward"] == pytest.approx(float(direct["reward"].iloc[0]))
    assert not math.isclose(table.loc[0, "tuned_reward"], table.loc[0, "recorded_reward"])


def test_group_reward_on_a_run_without_groups_groups_by_episode(tmp_path):
    from test_app_support import make_eval_run

    run = rt.LabRun.from_path(make_eval_run(tmp_path))
    assert not run.has_groups
    table, _t, _b, notes = run.rescore(rt.values_to_spec(["kimi_length"], {}))
    assert len(table) == 2 and any("same episode" in n for n in notes)


def test_lab_run_describes_itself(lab):
    text = lab.describe()
    assert "synthetic demo run" in text and "economics" in text and "GRPO groups" in text


def test_lab_run_refuses_a_metrics_only_folder(tmp_path):
    from workbench.reward_lab import RescoreError
    from workbench.runs import RunWriter

    w = RunWriter(tmp_path / "m", kind="training", config=EnvConfig())
    w.write()
    (tmp_path / "m" / "trajectories.parquet").unlink()
    (tmp_path / "m" / "metrics.jsonl").write_text('{"step": 1, "reward": 0.1}\n')
    with pytest.raises(RescoreError, match="no trajectories"):
        rt.LabRun.from_path(tmp_path / "m")


def test_induced_allocation_compares_with_the_oracle():
    res, notes = rt.induced({"tuned": "l1_max", "group": "kimi_length"}, [1000, 3000])
    assert set(res.summary["reward"]) == {"oracle", "tuned"} and any("group reward" in n for n in notes)
    assert (res.summary.query("reward == 'oracle'")["regret"].abs() < 1e-9).all()
    assert rt.induced({"g": "kimi_length"}, [1000])[0] is None


# ------------------------------------------------------------------------------- YAML
def test_tuned_yaml_is_an_env_config_the_environment_accepts(tmp_path):
    from reasoning_env.env import ReasoningEconomicsEnv

    spec = rt.values_to_spec(["economics", "l1_max"], {"economics.gamma": 0.3})
    path = tmp_path / "tuned.yaml"
    path.write_text(rt.tuned_yaml(spec, EnvConfig(num_questions=5)), encoding="utf-8")
    cfg = EnvConfig.from_yaml(path)
    assert cfg.num_questions == 5 and R.normalize_spec(cfg.reward) == spec
    env = ReasoningEconomicsEnv(cfg)
    assert set(env.reward_fn.component_names) >= {"economics.correctness", "l1_max"}


def test_group_reward_cannot_be_saved_as_an_env_config():
    with pytest.raises(ValueError, match="group reward"):
        rt.tuned_yaml(rt.values_to_spec(["shorter_better"], {}))

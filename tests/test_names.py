"""One name for the environment family, one spelling; the old names stay importable."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("kind", ["Action", "Observation", "State"])
def test_the_reference_model_names_are_the_same_classes(kind):
    import reasoning_env
    from reasoning_env import models

    new = getattr(models, f"ReasoningEconomics{kind}")
    assert new.__name__ == f"ReasoningEconomics{kind}"
    assert getattr(models, f"ReasonBudget{kind}") is new
    assert (
        getattr(reasoning_env, f"ReasonBudget{kind}") is new
        and getattr(reasoning_env, f"ReasoningEconomics{kind}") is new
    )


def test_the_family_prefix_is_the_root_packages_public_classes():
    import reasoning_env

    family = {n for n in reasoning_env.__all__ if n.startswith("ReasoningEconomics")}
    assert family == {
        "ReasoningEconomicsAction",
        "ReasoningEconomicsClient",
        "ReasoningEconomicsEnv",
        "ReasoningEconomicsError",
        "ReasoningEconomicsObservation",
        "ReasoningEconomicsState",
    }
    assert reasoning_env.ReasoningEconomicsClient.__module__ == "reasoning_env.client"


def test_the_openenv_name_is_the_servers():
    from reasoning_env.server.app import ENV_NAME

    manifest = yaml.safe_load((REPO / "openenv.yaml").read_text())
    assert manifest["name"] == ENV_NAME == "reasoning_economics_env"


def test_the_old_spelling_of_normalise_spec_is_the_same_function():
    from reasoning_env import rewards

    assert rewards.normalize_spec is rewards.normalise_spec
    assert rewards.normalise_spec("l1_max") == rewards.normalize_spec("l1_max")

"""One registry shape (reasoning_env.registry) for sources, rewards and policies: the same calls,
the same return types, the same error for an unknown name."""

from __future__ import annotations

import pytest

from reasoning_env import policies, rewards, sources
from reasoning_env.errors import RewardSpecError, SourceError, UnknownNameError
from reasoning_env.registry import Registry

#: (package, its registry, singular kind, the package's own error an unknown name also is)
PACKAGES = [
    (sources, sources.SOURCES, "source", SourceError),
    (rewards, rewards.REWARDS, "reward", RewardSpecError),
    (policies, policies.POLICIES, "policy", ValueError),
]
IDS = [kind for _, _, kind, _ in PACKAGES]


@pytest.mark.parametrize(("package", "registry", "kind", "own_error"), PACKAGES, ids=IDS)
def test_available_is_the_list_of_registered_names(package, registry, kind, own_error):
    names = package.available()
    assert isinstance(names, list) and names == registry.names() and len(names) == len(set(names)) > 0
    assert all(isinstance(n, str) for n in names)


@pytest.mark.parametrize(("package", "registry", "kind", "own_error"), PACKAGES, ids=IDS)
def test_describe_gives_a_dict_per_name_with_a_one_line_summary(package, registry, kind, own_error):
    every = package.describe()
    assert isinstance(every, dict) and list(every) == package.available()
    for name, meta in every.items():
        assert meta["name"] == name and isinstance(meta["summary"], str) and meta["summary"].strip()
        assert "\n" not in meta["summary"]
        assert package.describe(name) == meta


@pytest.mark.parametrize(("package", "registry", "kind", "own_error"), PACKAGES, ids=IDS)
def test_an_unknown_name_is_the_same_error_everywhere(package, registry, kind, own_error):
    with pytest.raises(UnknownNameError, match=f"^unknown {kind} 'nope'; available: ") as info:
        registry.get("nope")
    assert isinstance(info.value, own_error), "an unknown name stays the package's own error"
    assert info.value.kind == kind and info.value.name == "nope" and list(info.value.available) == package.available()
    with pytest.raises(UnknownNameError):
        package.describe("nope")


def test_each_package_getter_uses_its_registry():
    assert sources.get_source("gsm8k") is sources.SOURCES.get("gsm8k")
    assert rewards.reward_class("l1_max") is rewards.REWARDS.get("l1_max")
    with pytest.raises(UnknownNameError, match="unknown source 'nope'"):
        sources.get_source("nope")
    with pytest.raises(UnknownNameError, match="unknown reward 'nope'"):
        rewards.build_reward({"type": "nope"})
    with pytest.raises(UnknownNameError, match="unknown policy 'nope'"):
        policies.make_policy("nope")


def test_every_policy_is_built_from_its_registry_entry_with_its_kind():
    for name, meta in policies.describe().items():
        if meta["kind"] == "llm":
            continue  # needs an endpoint or a model (tests/test_policies_llm.py)
        pol = policies.make_policy(name)
        assert pol.name == name and pol.kind == meta["kind"]
    assert policies.make_policy("oracle").name == "oracle_allocation"  # an alias, not a listed name
    assert "oracle" not in policies.available() and "oracle" in policies.POLICIES


def test_the_policy_kinds_and_labels_come_from_the_registry():
    from workbench.app.play_tab import POLICY_LABELS

    assert policies.POLICY_NAMES == tuple(policies.available())
    informed = tuple(n for n in policies.SIMULATED if n not in policies.BLIND_SIMULATED)
    assert policies.DEFAULT_POLICIES == policies.BUDGET_BASELINES + informed + policies.ORACLE  # blind ones on request
    assert set(policies.BLIND_SIMULATED) == {"sim_proportional_blind", "sim_greedy_blind"}
    assert all(policies.describe(n)["kind"] == "llm" for n in policies.LLM_POLICIES)
    assert set(POLICY_LABELS) == set(policies.available())
    for name, label in POLICY_LABELS.items():
        assert label == f"{name}: {policies.describe(name)['summary']}"


def test_combined_is_the_last_registered_reward():
    assert rewards.available()[-1] == "combined"
    assert rewards.describe("combined") == rewards.info("combined").to_dict()


def test_sources_describe_their_options_and_standins():
    meta = sources.describe("metamathqa")
    assert meta["standin"] == "metamathqa" and "split" in meta["options"]
    assert sources.describe("builtin")["standin"] is None


def test_a_registry_refuses_repeated_and_malformed_names():
    reg: Registry[int] = Registry("thing")
    reg.add("one", 1, summary="the first", aliases=("uno",))
    assert reg.get("uno") == 1 and reg.names() == ["one"] and reg.canonical("uno") == "one"
    with pytest.raises(ValueError, match="already registered"):
        reg.add("one", 2, summary="again")
    with pytest.raises(ValueError, match="already registered"):
        reg.add("uno", 2, summary="an alias taken")
    with pytest.raises(ValueError, match="name must match"):
        reg.add("Two Words", 2, summary="bad name")
    with pytest.raises(ValueError, match="summary"):
        reg.add("two", 2, summary=" ")
    assert reg.describe() == {"one": {"name": "one", "summary": "the first"}}

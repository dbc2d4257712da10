"""One error hierarchy (reasoning_env.errors): one base class, the old built-in bases kept, the old
import paths kept, and the callers that caught tuples catching the base."""

from __future__ import annotations

import importlib
import pickle

import pytest

from reasoning_env import errors
from reasoning_env.errors import ReasoningEconomicsError

#: (class name, where it was defined before reasoning_env.errors, the built-in class it keeps)
CORE = [
    ("ConfigError", "reasoning_env.config", ValueError),
    ("EpisodeError", "reasoning_env.env", ValueError),
    ("EpisodeStateError", "reasoning_env.server.served_env", ValueError),
    ("TokenizerNotAllowedError", "reasoning_env.server.served_env", ValueError),
    ("ServerConfigError", "reasoning_env.server.settings", ValueError),
    ("SourceError", "reasoning_env.sources", ValueError),
    ("SourceUnavailable", "reasoning_env.sources", RuntimeError),
    ("SamplingError", "reasoning_env.sampler", ValueError),
    ("GroupRewardError", "reasoning_env.rewards", ValueError),
    ("RewardSpecError", "reasoning_env.rewards", ValueError),
    ("PolicyError", "reasoning_env.policies", RuntimeError),
    ("CurveFitError", "reasoning_env.policies", ValueError),
    ("UnmeasuredProblemTypeError", "reasoning_env.policies.curves", ValueError),
    ("ChatFormatError", "reasoning_env.conversation", ValueError),
    ("TokenizerLoadError", "reasoning_env.tokenization", RuntimeError),
    ("ServerError", "reasoning_env.client", RuntimeError),
    ("ServerGoneError", "reasoning_env.client", ConnectionError),
    ("EpisodeLostError", "reasoning_env.remote", ConnectionError),
    ("ModelNotAvailableError", "reasoning_env.offline_model", RuntimeError),
    ("ModelServerError", "reasoning_env.model_server", RuntimeError),
]

#: Errors of the packages built on the core: (module, class name, built-in class it keeps)
OUTER = [
    ("workbench.play", "PlayError", ValueError),
    ("workbench.runs", "RunFolderError", ValueError),
    ("workbench.reward_lab", "RescoreError", ValueError),
    ("training.grpo_train", "TrainSetupError", RuntimeError),
    ("training.models", "ModelLoadError", RuntimeError),
    ("training.export", "ExportError", RuntimeError),
    ("reasoning_env.server.protocol", "FrameError", Exception),
    ("reasoning_env.server.sessions", "AdmissionError", Exception),
]


@pytest.mark.parametrize(("name", "old_module", "builtin"), CORE)
def test_core_error_has_the_base_and_keeps_its_builtin_class(name, old_module, builtin):
    cls = getattr(errors, name)
    assert issubclass(cls, ReasoningEconomicsError) and issubclass(cls, builtin)
    assert getattr(importlib.import_module(old_module), name) is cls, f"{old_module}.{name} must stay importable"


@pytest.mark.parametrize(("module", "name", "builtin"), OUTER)
def test_workbench_training_and_server_errors_derive_from_the_base(module, name, builtin):
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, ReasoningEconomicsError) and issubclass(cls, builtin)


def test_every_error_in_the_module_is_listed_and_documented():
    classes = {n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, BaseException)}
    assert classes == set(errors.__all__)
    assert {n for n, _, _ in CORE} | {
        "ReasoningEconomicsError",
        "UnknownNameError",
        "UnknownRewardError",
        "UnknownSourceError",
    } == classes
    for name in classes - {"ReasoningEconomicsError"}:
        assert name in errors.__doc__, f"{name} missing from the hierarchy in the module docstring"


def test_the_root_package_exports_the_base():
    import reasoning_env

    assert reasoning_env.ReasoningEconomicsError is ReasoningEconomicsError


@pytest.mark.parametrize(
    "exc",
    [
        errors.SourceUnavailable(
            "no data", source="gsm8k", tried=("the Hub is unreachable",), local_patterns=("gsm8k_test.jsonl",)
        ),
        errors.UnknownSourceError("unknown source 'x'", kind="source", name="x", available=("gsm8k",)),
        errors.ServerError({"code": "CAPACITY_REACHED", "message": "full"}),
        errors.ServerGoneError("ws://127.0.0.1:1/ws", 1006, "gone"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_errors_with_fields_keep_them_across_processes(exc):
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is type(exc) and str(again) == str(exc) and vars(again) == vars(exc)


def test_the_app_shows_any_project_error_as_a_message():
    """A source that cannot be reached (a RuntimeError, missing from the app's old tuple) is a
    message for the user, not an "unexpected error"."""
    import gradio as gr

    from workbench.app.common import user_errors

    @user_errors
    def handler():
        raise errors.SourceUnavailable("gsm8k_test.jsonl not found: set the data folder")

    with pytest.raises(gr.Error) as info:
        handler()
    assert str(info.value.message) == "gsm8k_test.jsonl not found: set the data folder"


def test_a_group_reward_in_the_environment_is_a_group_reward_error():
    from reasoning_env.rewards import build_reward

    with pytest.raises(errors.GroupRewardError, match="kimi_length"):
        build_reward("kimi_length", context="env")


def test_a_bad_reward_parameter_is_a_reward_spec_error():
    from reasoning_env.rewards import build_reward

    with pytest.raises(errors.RewardSpecError, match="alpha"):
        build_reward({"type": "l1_max", "params": {"alpha": "big"}})

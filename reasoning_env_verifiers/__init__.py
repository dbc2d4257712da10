"""This environment for `verifiers <https://github.com/PrimeIntellect-ai/verifiers>`_ 0.4.0 (``verifiers.v1``),
so ``vf-eval`` and prime-rl can run its episodes. Install ``requirements-verifiers.txt`` (see
docs/integrations.md); the core (``reasoning_env``) never imports this package.

- ``vf-eval reasoning_env_verifiers --env.taskset.num-episodes 4 ...``: the taskset id is this
  package's name; it exports its taskset, its env (the episode loop) and its default harness.
- :func:`load_environment` builds the same ``vf.Env`` from keyword arguments, in Python.
"""

from __future__ import annotations

from typing import Any

from reasoning_env_verifiers.taskset import (
    ChatHarness,
    ReasoningEconomicsConfig,
    ReasoningEconomicsEnvConfig,
    ReasoningEconomicsTaskset,
    ReasoningEconomicsVfEnv,
)

#: The taskset id of this package (what ``vf-eval`` and ``--env.taskset.id`` take).
TASKSET_ID = "reasoning_env_verifiers"

__all__ = ["ChatHarness", "ReasoningEconomicsTaskset", "ReasoningEconomicsVfEnv", "TASKSET_ID", "load_environment"]


def load_environment(**kwargs: Any) -> ReasoningEconomicsVfEnv:
    """The verifiers env that plays this environment's episodes.

    Args:
        **kwargs: :class:`ReasoningEconomicsConfig` fields (``config``, ``env``, ``seed``,
            ``num_episodes``, ``tokenizer_name``, ``total_budget``, ``history_len``, ``task``).

    Raises:
        pydantic.ValidationError: an unknown or ill-typed setting.
        ConfigError: the EnvConfig they describe is invalid.
    """
    taskset = ReasoningEconomicsConfig(id=TASKSET_ID, **kwargs)
    taskset.env_config()
    return ReasoningEconomicsVfEnv(ReasoningEconomicsEnvConfig(taskset=taskset))

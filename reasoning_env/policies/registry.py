"""The policy registry: every policy name, its kind and its one-line summary, written once.

Each entry is a factory ``(PolicyArgs) -> BasePolicy`` registered with :func:`register_policy`;
:func:`make_policy` builds a policy by name, :func:`available` lists the names (registration
order: the budget baselines, the simulated solvers, the oracle, the LLM policies) and
:func:`describe` gives ``{"name", "summary", "kind"}`` of each, which the evaluation command line
and the app's Play tab show. The registry (:data:`POLICIES`) has the shape of every registry of
the core (:mod:`reasoning_env.registry`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reasoning_env.policies.base import BasePolicy
from reasoning_env.policies.budget import DifficultyOraclePolicy, GreedyMaxPolicy, UniformPolicy
from reasoning_env.policies.curves import SolverCurves
from reasoning_env.policies.llm import TransformersPolicy, openai_policy_from_env
from reasoning_env.policies.oracle import OracleCache
from reasoning_env.policies.simulated import OracleAllocationPolicy, SimulatedSolverPolicy
from reasoning_env.registry import Registry

__all__ = [
    "KINDS",
    "POLICIES",
    "PolicyArgs",
    "available",
    "describe",
    "make_policy",
    "names_of_kind",
    "register_policy",
]

#: Policy kinds, in the order the registry lists them (``Policy.kind``).
KINDS = ("budget_baseline", "simulated", "oracle", "llm")


@dataclass(frozen=True)
class PolicyArgs:
    """What :func:`make_policy` passes to a factory (see its arguments)."""

    name: str
    curves: SolverCurves = field(default_factory=SolverCurves)
    oracle_cache: OracleCache | None = None
    llm: dict[str, Any] = field(default_factory=dict)
    hf: dict[str, Any] = field(default_factory=dict)
    baseline_answer: str = "solver"


Factory = Callable[[PolicyArgs], BasePolicy]

#: The registered policies: name -> factory, with ``kind`` in the metadata.
POLICIES: Registry[Factory] = Registry("policy")


def register_policy(
    name: str, *, kind: str, summary: str, aliases: tuple[str, ...] = ()
) -> Callable[[Factory], Factory]:
    """Decorator: register a factory ``(PolicyArgs) -> BasePolicy`` under ``name``.

    Args:
        name: The policy's name (its row label in tables and run folders).
        kind: One of :data:`KINDS`.
        summary: One line: what it does (shown by ``--help`` and in the Play tab's picker).
        aliases: Other names :func:`make_policy` accepts.

    Raises:
        ValueError: unknown kind, or a bad or repeated name.
    """
    if kind not in KINDS:
        raise ValueError(f"policy kind must be one of {KINDS}, got {kind!r}")
    return POLICIES.register(name, summary=summary, meta={"kind": kind}, aliases=aliases)


@register_policy(
    "uniform", kind="budget_baseline", summary="fair share (total_budget // num_questions) on every question"
)
def _uniform(a: PolicyArgs) -> BasePolicy:
    return UniformPolicy(curves=a.curves, answer=a.baseline_answer)


@register_policy(
    "greedy_max", kind="budget_baseline", summary="max_tokens on every question until the budget runs dry"
)
def _greedy_max(a: PolicyArgs) -> BasePolicy:
    return GreedyMaxPolicy(curves=a.curves, answer=a.baseline_answer)


@register_policy(
    "difficulty_oracle", kind="budget_baseline", summary="fixed length by difficulty level (64 * 2**(d-1) tokens)"
)
def _difficulty_oracle(a: PolicyArgs) -> BasePolicy:
    return DifficultyOraclePolicy(curves=a.curves, answer=a.baseline_answer)


@register_policy("sim_uniform", kind="simulated", summary="simulated solver, what is left split evenly")
def _sim_uniform(a: PolicyArgs) -> BasePolicy:
    return SimulatedSolverPolicy("uniform", a.curves)


@register_policy("sim_proportional", kind="simulated", summary="simulated solver, length proportional to difficulty")
def _sim_proportional(a: PolicyArgs) -> BasePolicy:
    return SimulatedSolverPolicy("proportional", a.curves)


@register_policy("sim_greedy", kind="simulated", summary="simulated solver, marginal gains on concave envelopes")
def _sim_greedy(a: PolicyArgs) -> BasePolicy:
    return SimulatedSolverPolicy("greedy", a.curves)


@register_policy(
    "sim_proportional_blind",
    kind="simulated",
    summary="simulated solver, length proportional to a difficulty guessed from type and text length (no label)",
)
def _sim_proportional_blind(a: PolicyArgs) -> BasePolicy:
    return SimulatedSolverPolicy("proportional", a.curves, blind=True)


@register_policy(
    "sim_greedy_blind",
    kind="simulated",
    summary="simulated solver, marginal gains on curves guessed from type and text length (no label)",
)
def _sim_greedy_blind(a: PolicyArgs) -> BasePolicy:
    return SimulatedSolverPolicy("greedy", a.curves, blind=True)


@register_policy(
    "oracle_allocation",
    kind="oracle",
    aliases=("oracle",),
    summary="simulated solver, the optimal split knowing every question's curve",
)
def _oracle_allocation(a: PolicyArgs) -> BasePolicy:
    return OracleAllocationPolicy(a.curves, oracle_cache=a.oracle_cache)


@register_policy("llm_api", kind="llm", summary="OpenAI-compatible endpoint (BASELINE_API_*)")
def _llm_api(a: PolicyArgs) -> BasePolicy:
    return openai_policy_from_env("api", **a.llm)


@register_policy(
    "llm_local",
    kind="llm",
    summary="a real model on a local OpenAI-compatible server (vLLM's CPU engine, or BASELINE_LOCAL_*)",
)
def _llm_local(a: PolicyArgs) -> BasePolicy:
    return openai_policy_from_env("local", **a.llm)


@register_policy(
    "hf_local", kind="llm", summary="local transformers model with generate (BASELINE_LOCAL_MODEL or --hf-model)"
)
def _hf_local(a: PolicyArgs) -> BasePolicy:
    args = dict(a.hf)
    if not args.get("model"):
        args["model"] = os.environ.get("BASELINE_LOCAL_MODEL")
    if not args.get("model"):
        raise ValueError(
            "hf_local needs a model: pass --hf-model (a local folder or Hub id) or set BASELINE_LOCAL_MODEL"
        )
    return TransformersPolicy(**{k: v for k, v in args.items() if v is not None})


def available() -> list[str]:
    """Registered policy names, in registration order (aliases such as ``oracle`` not included)."""
    return POLICIES.names()


def describe(name: str | None = None) -> dict[str, Any]:
    """JSON-ready ``{"name", "summary", "kind"}`` of one policy, or ``{name: that}`` of all.

    Raises:
        UnknownNameError: ``name`` is not registered (a ``ValueError``).
    """
    return POLICIES.describe(name)


def names_of_kind(*kinds: str) -> tuple[str, ...]:
    """Registered names whose kind is one of ``kinds``, in registration order."""
    return tuple(n for n in POLICIES.names() if POLICIES.describe(n)["kind"] in kinds)


def make_policy(
    name: str,
    *,
    curves: SolverCurves | None = None,
    oracle_cache: OracleCache | None = None,
    llm: dict[str, Any] | None = None,
    hf: dict[str, Any] | None = None,
    baseline_answer: str = "solver",
) -> BasePolicy:
    """Build a registered policy by name (:func:`available`, :func:`describe`).

    Args:
        name: A registered name (or an alias: ``oracle`` for ``oracle_allocation``).
        curves: Curves of the simulated solver (default: defaults).
        oracle_cache: Shared oracle plans for ``oracle_allocation`` (see :class:`OracleCache`).
        baseline_answer: How the budget baselines answer: ``"solver"`` (default: like the simulated
            solver at the length they spend, so their accuracy reflects their allocation rule) or
            ``"placeholder"`` (``\\boxed{0}``, the v2 environment's pure budget smoke test).
        llm: Overrides for ``llm_api`` / ``llm_local`` (:func:`openai_policy_from_env` arguments).
        hf: Arguments of :class:`TransformersPolicy` for ``hf_local`` (``model`` required, or
            ``BASELINE_LOCAL_MODEL`` set).

    Returns:
        A new policy (its own state; build one per worker or clone it).

    Raises:
        UnknownNameError: unknown name (a ``ValueError``; the message lists the names).
        ValueError: missing LLM settings.
    """
    factory = POLICIES.get(name)
    args = PolicyArgs(
        name=POLICIES.canonical(name),
        curves=curves or SolverCurves(),
        oracle_cache=oracle_cache,
        llm=dict(llm or {}),
        hf=dict(hf or {}),
        baseline_answer=baseline_answer,
    )
    return factory(args)

"""Policies: one small class each, one interface (:mod:`.base`), one registry (:mod:`.registry`).

:func:`available` lists the policy names, :func:`describe` gives each one's kind and one-line
summary, :func:`make_policy` builds one by name; :data:`DEFAULT_POLICIES` is the evaluation
default. The kinds, in registry order: the budget baselines (``uniform``, ``greedy_max``,
``difficulty_oracle``: fixed allocation rules), the simulated solvers (``sim_*``: the accuracy
curves of :mod:`.curves` answer), the ``oracle_allocation`` upper bound and the LLM policies
(``llm_api``, ``llm_local``, ``hf_local``). docs/evaluation.md explains each rule.
"""

from __future__ import annotations

from reasoning_env.policies.allocation import Allocation, greedy_allocation, optimal_allocation
from reasoning_env.policies.base import BasePolicy, EpisodeInfo, Policy, PolicyError, PolicyOutput
from reasoning_env.policies.budget import DifficultyOraclePolicy, GreedyMaxPolicy, UniformPolicy
from reasoning_env.policies.curve_fit import CurveFit
from reasoning_env.policies.curves import Curve, CurveFitError, SolverCurves, fit_run
from reasoning_env.policies.llm import OpenAIChatPolicy, TransformersPolicy, openai_policy_from_env, split_thinking
from reasoning_env.policies.oracle import EpisodeRegret, OracleCache, episode_regret, oracle_plan
from reasoning_env.policies.registry import (
    POLICIES,
    PolicyArgs,
    available,
    describe,
    make_policy,
    names_of_kind,
    register_policy,
)
from reasoning_env.policies.simulated import OracleAllocationPolicy, SimulatedSolverPolicy

__all__ = [
    "Allocation",
    "BUDGET_BASELINES",
    "BasePolicy",
    "Curve",
    "CurveFit",
    "CurveFitError",
    "BLIND_SIMULATED",
    "DEFAULT_POLICIES",
    "DifficultyOraclePolicy",
    "EpisodeInfo",
    "EpisodeRegret",
    "GreedyMaxPolicy",
    "LLM_POLICIES",
    "OpenAIChatPolicy",
    "OracleAllocationPolicy",
    "OracleCache",
    "POLICIES",
    "POLICY_NAMES",
    "Policy",
    "PolicyArgs",
    "PolicyError",
    "PolicyOutput",
    "SimulatedSolverPolicy",
    "SolverCurves",
    "TransformersPolicy",
    "UniformPolicy",
    "available",
    "describe",
    "episode_regret",
    "fit_run",
    "greedy_allocation",
    "make_policy",
    "openai_policy_from_env",
    "optimal_allocation",
    "oracle_plan",
    "register_policy",
    "split_thinking",
]

BUDGET_BASELINES = names_of_kind("budget_baseline")
SIMULATED = names_of_kind("simulated")
ORACLE = names_of_kind("oracle")
LLM_POLICIES = names_of_kind("llm")
#: The blind simulated allocators (no difficulty label; see :mod:`.simulated`).
BLIND_SIMULATED = tuple(n for n in SIMULATED if n.endswith("_blind"))
#: Policies run by ``python -m workbench.evaluate`` when ``--policies`` is not given (the blind
#: variants are asked for by name: two more policies would cost the main job time and widen Holm's
#: adjustment from 21 to 36 pairs).
DEFAULT_POLICIES = BUDGET_BASELINES + tuple(n for n in SIMULATED if n not in BLIND_SIMULATED) + ORACLE
POLICY_NAMES = tuple(available())

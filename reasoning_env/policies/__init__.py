"""Policies: one small class each, one interface (:mod:`.base`).

==================== ================= =========================================================
name                 kind              what it does
==================== ================= =========================================================
``uniform``          budget_baseline   fair share ``total_budget // num_questions`` per question
``greedy_max``       budget_baseline   ``max_tokens`` per question until the budget runs dry
``difficulty_oracle`` budget_baseline  fixed length by difficulty level (64 * 2**(d-1) tokens)
``sim_uniform``      simulated         simulated solver, remaining budget split evenly
``sim_proportional`` simulated         simulated solver, length proportional to difficulty
``sim_greedy``       simulated         simulated solver, marginal gains on concave envelopes
``oracle_allocation`` oracle           simulated solver, DP-optimal split knowing every curve
``llm_api``          llm               OpenAI-compatible endpoint (``BASELINE_API_*``)
``llm_local``        llm               OpenAI-compatible local server (``BASELINE_LOCAL_*``)
``hf_local``         llm               local ``transformers`` model with ``generate``
==================== ================= =========================================================

:func:`make_policy` builds one by name; :data:`DEFAULT_POLICIES` is the evaluation default.
"""

from __future__ import annotations

from typing import Any, Optional

from reasoning_env.policies.allocation import Allocation, greedy_allocation, optimal_allocation
from reasoning_env.policies.base import BasePolicy, EpisodeInfo, Policy, PolicyError, PolicyOutput
from reasoning_env.policies.budget import DifficultyOraclePolicy, GreedyMaxPolicy, UniformPolicy
from reasoning_env.policies.curve_fit import CurveFit
from reasoning_env.policies.curves import Curve, CurveFitError, SolverCurves, fit_run
from reasoning_env.policies.llm import OpenAIChatPolicy, TransformersPolicy, openai_policy_from_env, split_thinking
from reasoning_env.policies.oracle import EpisodeRegret, OracleCache, episode_regret, oracle_plan
from reasoning_env.policies.simulated import OracleAllocationPolicy, SimulatedSolverPolicy

__all__ = [
    "Allocation",
    "BUDGET_BASELINES",
    "BasePolicy",
    "Curve",
    "CurveFit",
    "CurveFitError",
    "DEFAULT_POLICIES",
    "DifficultyOraclePolicy",
    "EpisodeInfo",
    "EpisodeRegret",
    "GreedyMaxPolicy",
    "LLM_POLICIES",
    "OpenAIChatPolicy",
    "OracleAllocationPolicy",
    "OracleCache",
    "POLICY_NAMES",
    "Policy",
    "PolicyError",
    "PolicyOutput",
    "SimulatedSolverPolicy",
    "SolverCurves",
    "TransformersPolicy",
    "UniformPolicy",
    "episode_regret",
    "fit_run",
    "greedy_allocation",
    "make_policy",
    "openai_policy_from_env",
    "optimal_allocation",
    "oracle_plan",
    "split_thinking",
]

BUDGET_BASELINES = ("uniform", "greedy_max", "difficulty_oracle")
SIMULATED = ("sim_uniform", "sim_proportional", "sim_greedy")
ORACLE = ("oracle_allocation",)
LLM_POLICIES = ("llm_api", "llm_local", "hf_local")
#: Policies run by ``python -m workbench.evaluate`` when ``--policies`` is not given.
DEFAULT_POLICIES = BUDGET_BASELINES + SIMULATED + ORACLE
POLICY_NAMES = DEFAULT_POLICIES + LLM_POLICIES


def make_policy(
    name: str,
    *,
    curves: Optional[SolverCurves] = None,
    oracle_cache: Optional[OracleCache] = None,
    llm: Optional[dict[str, Any]] = None,
    hf: Optional[dict[str, Any]] = None,
    baseline_answer: str = "solver",
) -> BasePolicy:
    """Build a policy by name (see the module table).

    Args:
        name: One of :data:`POLICY_NAMES`.
        curves: Curves of the simulated solver (default: defaults).
        oracle_cache: Shared oracle plans for ``oracle_allocation`` (see :class:`OracleCache`).
        baseline_answer: How the budget baselines answer: ``"solver"`` (default: like the simulated
            solver at the length they spend, so their accuracy reflects their allocation rule) or
            ``"placeholder"`` (``\\boxed{0}``, the seed's pure budget smoke test).
        llm: Overrides for ``llm_api`` / ``llm_local`` (:func:`openai_policy_from_env` arguments).
        hf: Arguments of :class:`TransformersPolicy` for ``hf_local`` (``model`` required, or
            ``BASELINE_LOCAL_MODEL`` set).

    Raises:
        ValueError: unknown name or missing LLM settings.
    """
    curves = curves or SolverCurves()
    if name == "uniform":
        return UniformPolicy(curves=curves, answer=baseline_answer)
    if name == "greedy_max":
        return GreedyMaxPolicy(curves=curves, answer=baseline_answer)
    if name == "difficulty_oracle":
        return DifficultyOraclePolicy(curves=curves, answer=baseline_answer)
    if name in SIMULATED:
        return SimulatedSolverPolicy(name.split("_", 1)[1], curves)
    if name in ("oracle_allocation", "oracle"):
        return OracleAllocationPolicy(curves, oracle_cache=oracle_cache)
    if name in ("llm_api", "llm_local"):
        return openai_policy_from_env(name.split("_", 1)[1], **(llm or {}))
    if name == "hf_local":
        import os

        args = dict(hf or {})
        if not args.get("model"):
            args["model"] = os.environ.get("BASELINE_LOCAL_MODEL")
        if not args.get("model"):
            raise ValueError("hf_local needs a model: pass --hf-model (a local folder or Hub id) or set BASELINE_LOCAL_MODEL")
        return TransformersPolicy(**{k: v for k, v in args.items() if v is not None})
    raise ValueError(f"unknown policy {name!r}; available: {', '.join(POLICY_NAMES)}")

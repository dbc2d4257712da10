"""Reward lab: what would this reward teach, before spending GPU hours on it?

- Counterfactual re-scoring (:mod:`~workbench.reward_lab.rescore`): recompute every step's and
  episode's reward of a recorded run under any reward spec, vectorised (10,000 steps in
  milliseconds; no re-grading, no re-tokenising).
- Induced behaviour (:mod:`~workbench.reward_lab.induced`): the token allocation a
  reward-maximising policy would choose under the solver curves (the evaluation's model,
  :class:`reasoning_env.policies.SolverCurves`), its accuracy, whether it pays harder questions
  more tokens, and its regret against the accuracy-maximising oracle, all from the project's one
  exact optimiser (:func:`reasoning_env.policies.optimal_allocation`).
- Figures (:mod:`~workbench.reward_lab.figures`): Plotly figures of both.

Command line: ``python -m workbench.reward_lab {bench,induced,rescore,describe} --help``.
"""

from workbench.reward_lab.induced import (
    AllocationCache,
    InducedResult,
    QuestionSpec,
    default_questions,
    induced_allocation,
    induced_behaviour,
    oracle_allocation,
    oracle_frontier,
    spearman,
)
from workbench.reward_lab.rescore import Rescored, RescoreError, Rescorer, compare_to_stored, rescore

__all__ = [
    "AllocationCache",
    "InducedResult",
    "QuestionSpec",
    "RescoreError",
    "Rescored",
    "Rescorer",
    "compare_to_stored",
    "default_questions",
    "induced_allocation",
    "induced_behaviour",
    "oracle_allocation",
    "oracle_frontier",
    "rescore",
    "spearman",
]

"""Calibrating the simulated solver from a real model's run: the protocol and its fit.

The solver curves' defaults are hand-chosen (:data:`reasoning_env.policies.curves.DEFAULTS_PROVENANCE`).
To speak about a real model, measure its accuracy against the tokens it may spend and fit the
curves to that:

1. **Sweep the per-question cap.** Evaluate the model at several caps, with a budget that never
   binds before the cap does (``cap x num_questions``)::

       python -m workbench.evaluate --policies llm_local --caps 64,128,256,512,1024,2048 \\
           --n_episodes 20 --out runs/calib-qwen

   Every step row records its ``token_cap``; the model sees the cap as ``step_token_cap`` and
   its generation is limited to it.
2. **Fit per problem type and difficulty.** The evaluation then fits
   ``p(cap, d) = ceiling * sigmoid(k (ln cap - ln(t50 growth^(d-1))))`` by maximum likelihood
   to those rows (:meth:`reasoning_env.policies.SolverCurves.fit` with ``x="token_cap"``): one curve
   per problem type with enough rows, per family otherwise, with standard errors (clustered by
   question: one question answered at every cap gives correlated verdicts), goodness of fit and
   the parameters the rows cannot identify (growth without difficulty labels, a ceiling the
   caps do not reach). It is saved in the run folder as ``fitted_curves.json``
   (:data:`CALIBRATION_FILE`; re-fit with ``python -m workbench.calibration RUN``).
3. **Use it.** ``--curves runs/calib-qwen/fitted_curves.json`` makes the simulated policies, the
   oracle and the regret of an evaluation, the Play tab (its "Solver curves" field) and the reward
   lab (``python -m workbench.reward_lab induced --curves ...``) use the model's curves.

The curve is fitted against the cap, not the tokens spent: a model that stops early at a cap of
512 is still "the model given 512 tokens", which is what an allocation chooses. A test
(``tests/test_calibration.py``) runs the protocol with a scripted policy whose correctness follows
known curves and checks that the fit recovers them (tolerances stated there).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from reasoning_env.errors import ReasoningEconomicsError
from reasoning_env.policies import SolverCurves
from reasoning_env.policies.curve_fit import format_fit

__all__ = ["CALIBRATION_FILE", "calibrate", "default_fit_policies", "fit_summary", "main"]

#: The curves file a calibration writes into its run folder.
CALIBRATION_FILE = "fitted_curves.json"


def default_fit_policies(episodes: pd.DataFrame) -> list[str]:
    """The policies a calibration fits by default: the LLM policies of the run when there are
    any, else every policy."""
    if episodes is None or episodes.empty:
        return []
    kinds = (
        episodes.drop_duplicates("policy").set_index("policy")["kind"]
        if "kind" in episodes.columns
        else pd.Series(dtype=str)
    )
    llm = [p for p, k in kinds.items() if k == "llm"]
    return llm or list(dict.fromkeys(episodes["policy"]))


def calibrate(
    run: str | Path,
    *,
    policies: Sequence[str] | None = None,
    per: str = "type",
    min_rows: int = 30,
    ceiling: float | str | None = "fit",
    base: SolverCurves | None = None,
    save: bool = True,
) -> SolverCurves:
    """Fit the solver curves to a cap-sweep run and save them as ``<run>/fitted_curves.json``.

    Args:
        run: The run folder of ``python -m workbench.evaluate --caps ...``.
        policies: Policies whose rows are fitted (default :func:`default_fit_policies`).
        per, min_rows, ceiling, base: As :meth:`reasoning_env.policies.SolverCurves.fit`.
        save: Write the curves file.

    Returns:
        The fitted curves (their :attr:`~reasoning_env.policies.SolverCurves.fits` hold the reports).

    Raises:
        workbench.runs.RunFolderError: not a run folder.
        ValueError: the run has no ``token_cap`` column (not a cap sweep) or no rows of ``policies``.
        reasoning_env.policies.CurveFitError: the rows cannot identify a curve.
    """
    from workbench.runs import load_run

    r = load_run(run)
    steps = r.steps
    if "token_cap" not in steps.columns or steps["token_cap"].isna().all():
        raise ValueError(
            f"{str(run)!r} is not a cap sweep (no token_cap column): run python -m "
            "workbench.evaluate --caps 64,128,... first"
        )
    pols = list(policies) if policies else default_fit_policies(r.episodes)
    rows = steps[steps["policy"].isin(pols)]
    if rows.empty:
        raise ValueError(
            f"no rows of policies {pols} in {str(run)!r} (policies there: {sorted(set(steps['policy']))})"
        )
    curves = SolverCurves.fit(
        rows, per=per, min_rows=min_rows, ceiling=ceiling, base=base, x="token_cap", cluster="question_id"
    )
    curves.source += f" from {Path(run).name} (policies {', '.join(pols)})"
    if save:
        curves.save(Path(run) / CALIBRATION_FILE)
    return curves


def fit_summary(fit: dict) -> str:
    """Text of one fit report (see :func:`reasoning_env.policies.curve_fit.format_fit`)."""
    return format_fit(fit)


def main(argv: list[str] | None = None) -> int:
    """``python -m workbench.calibration RUN [--by type|family] [--policies a,b]``: fit and save."""
    p = argparse.ArgumentParser(
        prog="python -m workbench.calibration", description="Fit the solver curves to a cap-sweep run folder."
    )
    p.add_argument("run")
    p.add_argument("--by", choices=("type", "family"), default="type")
    p.add_argument("--policies", help="comma list of policies to fit (default: the LLM policies, else all)")
    p.add_argument("--min-rows", dest="min_rows", type=int, default=30)
    args = p.parse_args(argv)
    try:
        pols = [s.strip() for s in args.policies.split(",")] if args.policies else None
        curves = calibrate(args.run, policies=pols, per=args.by, min_rows=args.min_rows)
    except (ReasoningEconomicsError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for rep in curves.fits.values():
        print(fit_summary(rep))
    print(f"saved {Path(args.run) / CALIBRATION_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

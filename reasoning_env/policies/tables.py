"""The tables the allocation DP maximises and the curve type they are built from: the lowest allocation
module. :mod:`.allocation` (the solver) and :mod:`.objective` (a reward's tables) both import it, so the
solver imports the objective and the objective never imports the solver.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

__all__ = ["CurveFn", "Tables", "curve_values"]

#: A question's curve: token counts (1-D float array) -> probabilities of a correct answer.
CurveFn = Callable[[np.ndarray], np.ndarray]


def curve_values(f: CurveFn, t: np.ndarray) -> np.ndarray:
    """``f`` at the token counts ``t``, as probabilities (clipped to [0, 1])."""
    return np.clip(np.asarray(f(t.astype(float)), dtype=float), 0.0, 1.0)


@dataclass
class Tables:
    """What the DP maximises (built by :mod:`.objective` or :func:`accuracy_tables`).

    Attributes:
        lengths: Per question, the allowed lengths (int array, increasing).
        p: Per question, ``p_i`` at those lengths.
        value: Per question, ``E_i`` at those lengths: shape ``(len,)`` when it does not depend
            on the spent budget, else ``(len, n_cells)`` read through ``cell_of`` (the certified
            upper envelope of the cells).
        cell_of: Spend state -> cell index, shape ``(S+1,)`` (for 2-D values), else ``None``.
        ends: End states: ``("done", S)`` for every final spend after the last question and
            ``(i, S)`` for an early end after question ``i``; with their episode-term
            coefficients ``a`` (per correct answer) and ``b`` (constant).
        exact_value: ``plan -> exact objective`` (for plans read off a cell envelope).
    """

    lengths: list
    p: list
    value: list
    cell_of: np.ndarray | None
    n_states: int
    terminal_from: int | None
    end_a_done: np.ndarray
    end_b_done: np.ndarray
    end_a_dry: np.ndarray | None = None  # (n-1, n_states) for early ends
    end_b_dry: np.ndarray | None = None
    exact_value: Callable[[list[int], list[bool]], float] | None = None
    notes: list = field(default_factory=list)
    value_low: list | None = None  # the lower cell envelope (cells only): a second, safe plan

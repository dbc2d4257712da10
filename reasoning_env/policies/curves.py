"""Accuracy-vs-tokens curves of the simulated solver, their defaults, and a maximum-likelihood fit.

The curve (logistic in log-tokens, with a ceiling)::

    p(t, d) = floor + (ceiling - floor) * sigmoid(k * (ln t - ln t50(d)))
    t50(d)  = t50 * growth ** (d - 1)

``t`` is the response length in tokens of the episode's tokenizer, ``d`` the difficulty on the
MATH level scale 1..5 (the question's own label, else the default level of its problem type),
``t50`` the tokens at which a level-1 question is solved with probability
``floor + (ceiling - floor) / 2``, ``growth`` the factor by which that length grows per level,
``k`` the steepness (doubling the tokens multiplies the odds by ``2 ** k`` when floor = 0,
ceiling = 1). ``p(t <= 0) = floor``. Following FIELD_NOTES section 1 (``k = 2``, ``t50``
doubling per level) with a ceiling below 1, since no model solves everything.

Defaults per problem-type family (:data:`DEFAULT_CURVES`; chosen by hand to be plausible for a
small instruct model, *not* fitted to one -- fit your own with :meth:`SolverCurves.fit`):

============== ==== ===== ====== ======= ==================
family          k   t50   growth ceiling default difficulty
============== ==== ===== ====== ======= ==================
GSM (GSM_*,     2.0  50    2.0    0.95    2
GSM8K)
MATH (MATH_*,   1.8  50    2.0    0.90    3
MATH-500)
NuminaMath-TIR  1.6  60    2.0    0.85    4
reasoning_gym   2.5  20    2.0    0.98    1
other           2.0  50    2.0    0.90    3
============== ==== ===== ====== ======= ==================

So a GSM8K question (level 2) is solved half the time (of its 0.95 ceiling) at 100 tokens and
with p = 0.76 at 200; a MATH level-5 question needs 800 tokens for p = 0.45.

:meth:`SolverCurves.fit` estimates ``k``, ``t50`` and ``growth`` by maximum likelihood from
``(tokens, problem_type, difficulty, correct)`` rows (e.g. a run folder's
``trajectories.parquet`` from a real model), with ``floor`` and ``ceiling`` held fixed. With the
reparametrisation ``z = a ln t + b + c (d - 1)`` (``a = k``, ``b = -k ln t50``,
``c = -k ln growth``) the Bernoulli log-likelihood is maximised by Fisher scoring (iteratively
reweighted least squares; with floor 0 and ceiling 1 this is exactly logistic regression).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

__all__ = [
    "Curve",
    "CurveFitError",
    "DEFAULT_CURVES",
    "DEFAULT_DIFFICULTY",
    "SolverCurves",
    "fit_run",
    "problem_family",
]


class CurveFitError(ValueError):
    """The rows cannot identify a curve (too few, one class only, accuracy not rising with tokens)."""


@dataclass(frozen=True)
class Curve:
    """One accuracy-vs-tokens curve (see the module docstring for the formula).

    Attributes:
        k: Steepness in log-tokens (> 0).
        t50: Tokens for the mid-point at difficulty 1 (> 0).
        growth: Factor by which ``t50`` grows per difficulty level (> 0).
        ceiling: Accuracy approached with unlimited tokens (0 < ceiling <= 1).
        floor: Accuracy with no tokens (guessing), 0 <= floor < ceiling.

    Raises:
        ValueError: a parameter is out of range.
    """

    k: float = 2.0
    t50: float = 50.0
    growth: float = 2.0
    ceiling: float = 0.95
    floor: float = 0.0

    def __post_init__(self) -> None:
        for name in ("k", "t50", "growth"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"curve {name} must be a finite number > 0, got {v!r}")
        if not (0.0 <= self.floor < self.ceiling <= 1.0):
            raise ValueError(f"curve needs 0 <= floor < ceiling <= 1, got floor={self.floor}, ceiling={self.ceiling}")

    def t50_at(self, difficulty: float) -> float:
        """Mid-point length (tokens) at ``difficulty``: ``t50 * growth ** (difficulty - 1)``."""
        return self.t50 * self.growth ** (float(difficulty) - 1.0)

    def p(self, tokens: Union[float, np.ndarray], difficulty: float) -> Union[float, np.ndarray]:
        """Probability of a correct answer with ``tokens`` tokens (scalar or array) at ``difficulty``."""
        t = np.asarray(tokens, dtype=float)
        with np.errstate(divide="ignore"):
            z = self.k * (np.log(np.maximum(t, 1e-300)) - math.log(self.t50_at(difficulty)))
        out = self.floor + (self.ceiling - self.floor) / (1.0 + np.exp(-np.clip(z, -60, 60)))
        out = np.where(t > 0, out, self.floor)
        return float(out) if np.ndim(out) == 0 else out

    def tokens_for(self, p: float, difficulty: float) -> float:
        """Tokens needed to reach accuracy ``p`` (inverse of :meth:`p`; ``inf`` at or above the ceiling)."""
        if p <= self.floor:
            return 0.0
        if p >= self.ceiling:
            return math.inf
        q = (p - self.floor) / (self.ceiling - self.floor)
        return self.t50_at(difficulty) * math.exp(math.log(q / (1 - q)) / self.k)


FAMILIES = ("GSM", "MATH", "NuminaMath-TIR", "reasoning_gym", "other")

#: Default curve per problem-type family (see the module docstring table).
DEFAULT_CURVES: dict[str, Curve] = {
    "GSM": Curve(k=2.0, t50=50.0, growth=2.0, ceiling=0.95),
    "MATH": Curve(k=1.8, t50=50.0, growth=2.0, ceiling=0.90),
    "NuminaMath-TIR": Curve(k=1.6, t50=60.0, growth=2.0, ceiling=0.85),
    "reasoning_gym": Curve(k=2.5, t50=20.0, growth=2.0, ceiling=0.98),
    "other": Curve(k=2.0, t50=50.0, growth=2.0, ceiling=0.90),
}
#: Difficulty assumed for questions without a label, per family.
DEFAULT_DIFFICULTY: dict[str, int] = {"GSM": 2, "MATH": 3, "NuminaMath-TIR": 4, "reasoning_gym": 1, "other": 3}


def problem_family(problem_type: Optional[str]) -> str:
    """The family of a problem type: ``GSM_*``/``GSM8K`` -> ``"GSM"``, ``MATH_*``/``MATH-500`` ->
    ``"MATH"``, ``"NuminaMath-TIR"``, ``reasoning_gym/*`` -> ``"reasoning_gym"``, else ``"other"``."""
    pt = problem_type or ""
    if pt.startswith("GSM"):
        return "GSM"
    if pt.startswith("MATH"):
        return "MATH"
    if pt.startswith("NuminaMath"):
        return "NuminaMath-TIR"
    if pt.startswith("reasoning_gym"):
        return "reasoning_gym"
    return "other"


def _get(row: Any, key: str, default: Any = None) -> Any:
    if isinstance(row, Mapping):
        return row.get(key, default)
    return getattr(row, key, default)


@dataclass
class SolverCurves:
    """The curves of every problem type: per exact problem type, else per family, else ``other``.

    Attributes:
        families: family -> :class:`Curve` (defaults: :data:`DEFAULT_CURVES`).
        types: exact problem type -> :class:`Curve` (overrides the family; e.g. from a per-type fit).
        default_difficulty: family -> level used when a question has no difficulty label.
        source: Where the curves came from (``"defaults"`` or a fit description).
    """

    families: dict[str, Curve] = field(default_factory=lambda: dict(DEFAULT_CURVES))
    types: dict[str, Curve] = field(default_factory=dict)
    default_difficulty: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_DIFFICULTY))
    source: str = "defaults"

    # ------------------------------------------------------------------ lookup
    def curve_for(self, problem_type: Optional[str]) -> Curve:
        """The curve of ``problem_type``."""
        if problem_type and problem_type in self.types:
            return self.types[problem_type]
        fam = problem_family(problem_type)
        return self.families.get(fam) or self.families.get("other") or DEFAULT_CURVES["other"]

    def difficulty_for(self, problem_type: Optional[str], difficulty: Optional[float]) -> float:
        """``difficulty`` if given (not None/NaN), else the family default level."""
        if difficulty is not None:
            try:
                d = float(difficulty)
                if math.isfinite(d):
                    return d
            except (TypeError, ValueError):
                pass
        fam = problem_family(problem_type)
        return float(self.default_difficulty.get(fam, self.default_difficulty.get("other", 3)))

    def p(self, tokens: Union[float, np.ndarray], problem_type: Optional[str], difficulty: Optional[float]) -> Union[float, np.ndarray]:
        """Probability of a correct answer with ``tokens`` tokens for a question of this type/difficulty."""
        return self.curve_for(problem_type).p(tokens, self.difficulty_for(problem_type, difficulty))

    def question_fn(self, problem_type: Optional[str], difficulty: Optional[float]):
        """``f(tokens array) -> p array`` for one question (for the allocators)."""
        curve = self.curve_for(problem_type)
        d = self.difficulty_for(problem_type, difficulty)
        return lambda t: np.asarray(curve.p(np.asarray(t, dtype=float), d), dtype=float)

    # ------------------------------------------------------------------ persistence
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``curves.json`` of a run folder); :meth:`from_dict` reads it back."""
        return {
            "formula": "p = floor + (ceiling - floor) * sigmoid(k * (ln t - ln(t50 * growth**(d-1))))",
            "source": self.source,
            "families": {k: asdict(v) for k, v in self.families.items()},
            "types": {k: asdict(v) for k, v in self.types.items()},
            "default_difficulty": dict(self.default_difficulty),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SolverCurves":
        """Build from :meth:`to_dict` output. Missing families keep their defaults.

        Raises:
            ValueError: a curve has invalid parameters.
        """
        fams = dict(DEFAULT_CURVES)
        fams.update({k: Curve(**v) for k, v in (data.get("families") or {}).items()})
        types = {k: Curve(**v) for k, v in (data.get("types") or {}).items()}
        dd = dict(DEFAULT_DIFFICULTY)
        dd.update({k: int(v) for k, v in (data.get("default_difficulty") or {}).items()})
        return cls(families=fams, types=types, default_difficulty=dd, source=str(data.get("source", "file")))

    def save(self, path: Union[str, Path]) -> None:
        """Write :meth:`to_dict` as JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2), encoding="utf-8")

    @classmethod
    def load(cls, path: Union[str, Path]) -> "SolverCurves":
        """Read a JSON file written by :meth:`save` (e.g. a run folder's ``curves.json``)."""
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    # ------------------------------------------------------------------ fitting
    @classmethod
    def fit(
        cls,
        rows: Any,
        *,
        per_family: bool = True,
        min_rows: int = 30,
        ceiling: Optional[float] = None,
        floor: float = 0.0,
        base: Optional["SolverCurves"] = None,
    ) -> "SolverCurves":
        """Maximum-likelihood curves from recorded steps.

        Args:
            rows: A DataFrame or an iterable of mappings/objects with ``tokens`` (charged tokens,
                > 0), ``problem_type``, ``difficulty`` (may be missing/None) and ``correct``.
            per_family: Also fit each family with at least ``min_rows`` rows (others use the
                pooled fit).
            min_rows: Minimum rows for a fit.
            ceiling: Fixed ceiling of the fitted curves (default: each family's default ceiling;
                the pooled fit uses the mean of those).
            floor: Fixed floor.
            base: Curves whose defaults (difficulty levels, unfitted families) are kept
                (default: :class:`SolverCurves` defaults).

        Returns:
            New curves: fitted families replace the base ones; ``source`` describes the fit.

        Raises:
            CurveFitError: fewer than ``min_rows`` usable rows, only correct or only wrong rows,
                or a fitted ``k <= 0`` (accuracy does not rise with tokens).
        """
        base = base or cls()
        data = _rows_to_arrays(rows, base)
        n = len(data["t"])
        if n < min_rows:
            raise CurveFitError(f"need at least {min_rows} rows with tokens > 0 to fit a curve, got {n}")
        fams = dict(base.families)
        notes = []
        fam_names = sorted(set(data["family"]))
        pooled_ceiling = ceiling if ceiling is not None else float(np.mean([base.families.get(f, DEFAULT_CURVES["other"]).ceiling for f in fam_names]))
        pooled = _fit_arrays(data["t"], data["d"], data["y"], ceiling=pooled_ceiling, floor=floor, prior=base.families.get(fam_names[0]) if len(fam_names) == 1 else None)
        fitted_any = False
        for fam in fam_names:
            mask = data["family"] == fam
            cur = pooled
            if per_family and mask.sum() >= min_rows and len(fam_names) > 1:
                try:
                    ceil_f = ceiling if ceiling is not None else base.families.get(fam, DEFAULT_CURVES["other"]).ceiling
                    cur = _fit_arrays(data["t"][mask], data["d"][mask], data["y"][mask], ceiling=ceil_f, floor=floor, prior=base.families.get(fam))
                except CurveFitError as exc:
                    notes.append(f"{fam}: pooled fit used ({exc})")
            fams[fam] = cur
            fitted_any = True
        if not fitted_any:  # pragma: no cover - fam_names is never empty when n >= min_rows
            raise CurveFitError("no rows to fit")
        src = f"fit: {n} rows, families {fam_names}" + (f"; {'; '.join(notes)}" if notes else "")
        return cls(families=fams, types=dict(base.types), default_difficulty=dict(base.default_difficulty), source=src)


def _rows_to_arrays(rows: Any, curves: SolverCurves) -> dict[str, np.ndarray]:
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # a pandas DataFrame
        records = rows.to_dict(orient="records")
    else:
        records = list(rows)
    t, d, y, fam = [], [], [], []
    for r in records:
        tok = _get(r, "tokens")
        if tok is None:
            continue
        try:
            tok = float(tok)
        except (TypeError, ValueError):
            continue
        if not math.isfinite(tok) or tok <= 0:
            continue
        pt = _get(r, "problem_type")
        t.append(tok)
        d.append(curves.difficulty_for(pt, _get(r, "difficulty")))
        y.append(1.0 if bool(_get(r, "correct")) else 0.0)
        fam.append(problem_family(pt))
    return {"t": np.array(t, dtype=float), "d": np.array(d, dtype=float), "y": np.array(y, dtype=float), "family": np.array(fam, dtype=object)}


def _fit_arrays(t: np.ndarray, d: np.ndarray, y: np.ndarray, *, ceiling: float, floor: float, prior: Optional[Curve] = None, iters: int = 100) -> Curve:
    """Fisher scoring for ``z = a ln t + b + c (d - 1)``; see the module docstring.

    When every row has the same difficulty ``d0``, ``growth`` is not identifiable: it is kept at
    the prior's (default 2.0) and ``t50`` is set so the curve fits at ``d0``.
    """
    if len(t) == 0:
        raise CurveFitError("no rows")
    if y.min() == y.max():
        raise CurveFitError("all rows are " + ("correct" if y[0] == 1 else "wrong") + ": accuracy vs tokens is not identifiable")
    vary_d = float(np.ptp(d)) > 0
    cols = [np.log(t), np.ones_like(t)] + ([d - 1.0] if vary_d else [])
    X = np.stack(cols, axis=1)
    ridge = 1e-6 * np.eye(X.shape[1])

    def loglik(b: np.ndarray) -> float:
        z = np.clip(X @ b, -60, 60)
        p = np.clip(floor + (ceiling - floor) / (1 + np.exp(-z)), 1e-12, 1 - 1e-12)
        return float(np.sum(y * np.log(p) + (1 - y) * np.log(1 - p)))

    beta = np.zeros(X.shape[1])
    beta[0] = 1.0
    beta[1] = -math.log(float(np.median(t)))
    ll = loglik(beta)
    for _ in range(iters):
        z = np.clip(X @ beta, -60, 60)
        s = 1 / (1 + np.exp(-z))
        p = np.clip(floor + (ceiling - floor) * s, 1e-12, 1 - 1e-12)
        dp = (ceiling - floor) * s * (1 - s)
        score = X.T @ ((y - p) / (p * (1 - p)) * dp)
        info = X.T @ (X * (dp * dp / (p * (1 - p)))[:, None]) + ridge
        try:
            step = np.linalg.solve(info, score)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(info, score, rcond=None)[0]
        lam, cand, ll_c = 1.0, beta + step, loglik(beta + step)
        while ll_c < ll - 1e-12 and lam > 1e-6:
            lam /= 2
            cand = beta + lam * step
            ll_c = loglik(cand)
        if ll_c < ll - 1e-12:
            break
        beta, ll_prev, ll = cand, ll, ll_c
        if abs(ll - ll_prev) < 1e-10 and float(np.max(np.abs(lam * step))) < 1e-8:
            break
    a = float(beta[0])
    if not math.isfinite(a) or a <= 1e-6:
        raise CurveFitError(f"fitted k = {a:.3g} <= 0: accuracy does not rise with tokens in these rows")
    if vary_d:
        t50 = math.exp(-float(beta[1]) / a)
        growth = math.exp(-float(beta[2]) / a)
    else:
        growth = prior.growth if prior else 2.0
        t50 = math.exp(-float(beta[1]) / a) / growth ** (float(d[0]) - 1.0)
    if not all(math.isfinite(v) and 0 < v < 1e12 for v in (t50, growth)) or a > 1e3:
        raise CurveFitError(f"fit diverged (k={a:.3g}, t50={t50:.3g}, growth={growth:.3g}): the rows are probably perfectly separable")
    return Curve(k=a, t50=t50, growth=growth, ceiling=ceiling, floor=floor)


def fit_run(path: Union[str, Path], *, policies: Optional[Sequence[str]] = None, **kwargs: Any) -> SolverCurves:
    """Fit curves from a run folder's ``trajectories.parquet`` (see :meth:`SolverCurves.fit`).

    Args:
        path: The run folder.
        policies: Keep only these policies' rows (default: all rows).
        **kwargs: Passed to :meth:`SolverCurves.fit`.

    Raises:
        FileNotFoundError: no ``trajectories.parquet`` in ``path``.
        CurveFitError: see :meth:`SolverCurves.fit`.
    """
    import pandas as pd

    p = Path(path) / "trajectories.parquet"
    if not p.is_file():
        raise FileNotFoundError(f"{str(p)!r} not found: pass a run folder written by workbench.evaluate or training")
    df = pd.read_parquet(p, columns=None)
    if policies:
        df = df[df["policy"].isin(list(policies))]
    curves = SolverCurves.fit(df, **kwargs)
    curves.source += f" from {Path(path).name}" + (f" (policies {list(policies)})" if policies else "")
    return curves

"""Accuracy-vs-tokens curves: the one solver model of the project, its defaults, and its fit.

Used by the simulated policies, the oracle and the evaluation's regret, Play's saved runs and
the reward lab (one model, one file format: :meth:`SolverCurves.save` / ``--curves FILE``).

The curve (logistic in log-tokens, with a ceiling)::

    p(t, d) = floor + (ceiling - floor) * sigmoid(k * (ln t - ln t50(d)))
    t50(d)  = t50 * growth ** (d - 1)

``t`` is the response length in tokens of the episode's tokenizer, ``d`` the difficulty on the
MATH level scale 1..5 (the question's own label, else the default level of its problem type),
``t50`` the tokens at which a level-1 question is solved with probability
``floor + (ceiling - floor) / 2``, ``growth`` the factor by which that length grows per level,
``k`` the steepness (doubling the tokens multiplies the odds by ``2 ** k`` when floor = 0,
ceiling = 1). ``p(t <= 0) = floor``.

Defaults per problem-type family (:data:`DEFAULT_CURVES`). **They are hand-chosen, not fitted to
any model and not taken from a paper** (:data:`DEFAULTS_PROVENANCE`): a logistic in log-tokens
with ``t50`` doubling per level, ceilings below 1. They are generous for a small model: the
GSM8K default predicts 0.94 at 1,024 tokens, where the one published small-model figure we
found (a 0.5B model, "When More Tokens Hurt", openreview RoTJh22LGx) is 18.7%. Numbers computed
with them describe this toy solver; calibrate the curves from a real model's run
(:mod:`workbench.calibration`) before reading anything about real models into them; the package ships
one such set, ``qwen2.5-coder-0.5b`` (``--curves qwen2.5-coder-0.5b``, :func:`load_curves`), fitted to a real
0.5B model's budget sweep (``workbench.real_sweep``; docs/evaluation.md, "Curve sets").

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

:meth:`SolverCurves.fit` estimates ``k``, ``t50``, ``growth`` and the ``ceiling`` by maximum
likelihood, with standard errors, goodness of fit and the parameters the rows cannot identify
(:mod:`.curve_fit`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from reasoning_env.errors import UnmeasuredProblemTypeError
from reasoning_env.policies.curve_fit import CurveFitError

__all__ = [
    "CURVE_SETS_DIR",
    "DEFAULTS_PROVENANCE",
    "Curve",
    "CurveFitError",
    "DEFAULT_CURVES",
    "DEFAULT_DIFFICULTY",
    "SolverCurves",
    "curve_set_names",
    "fit_run",
    "load_curves",
    "problem_family",
]

#: Curve sets shipped in the package (``--curves NAME``): one JSON file each, written by
#: :meth:`SolverCurves.save`, whose ``source`` says what it was fitted to and how.
CURVE_SETS_DIR = Path(__file__).with_name("curve_sets")


def curve_set_names() -> list[str]:
    """``"defaults"`` (the hand-chosen curves) and every curve set shipped in the package."""
    return ["defaults", *sorted(p.stem for p in CURVE_SETS_DIR.glob("*.json"))]


def load_curves(spec: str) -> SolverCurves:
    """A curve set by name (:func:`curve_set_names`) or a curves JSON file path.

    Raises:
        ValueError: neither a shipped name nor a readable curves file; the message lists the names.
    """
    name = str(spec).strip()
    if name == "defaults":
        return SolverCurves()
    shipped = CURVE_SETS_DIR / f"{name}.json"
    if "/" not in name and shipped.is_file():
        return SolverCurves.load(shipped)
    try:
        return SolverCurves.load(name)
    except ValueError as exc:
        raise ValueError(f"{exc}; or name a shipped curve set: {', '.join(curve_set_names())}") from None


@dataclass(frozen=True)
class Curve:
    """One accuracy-vs-tokens curve (see the module docstring for the formula).

    Attributes:
        k: Steepness in log-tokens (> 0).
        t50: Tokens for the mid-point at difficulty 1 (> 0).
        growth: Factor by which ``t50`` grows per difficulty level (> 0).
        ceiling: Accuracy approached with unlimited tokens (0 < ceiling <= 1).
        floor: Accuracy with no tokens (guessing), 0 <= floor < ceiling.
        measured_up_to: The largest length the curve was measured at (a fitted curve's largest cap), or
            ``None`` (hand-chosen). Past it :meth:`p` holds the value there: nothing is predicted where nothing
            was measured.

    Raises:
        ValueError: a parameter is out of range.
    """

    k: float = 2.0
    t50: float = 50.0
    growth: float = 2.0
    ceiling: float = 0.95
    floor: float = 0.0
    measured_up_to: float | None = None

    def __post_init__(self) -> None:
        for name in ("k", "t50", "growth"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"curve {name} must be a finite number > 0, got {v!r}")
        if not (0.0 <= self.floor < self.ceiling <= 1.0):
            raise ValueError(f"curve needs 0 <= floor < ceiling <= 1, got floor={self.floor}, ceiling={self.ceiling}")
        if self.measured_up_to is not None and not (math.isfinite(self.measured_up_to) and self.measured_up_to > 0):
            raise ValueError(f"curve measured_up_to must be a length > 0 or None, got {self.measured_up_to!r}")

    def t50_at(self, difficulty: float) -> float:
        """Mid-point length (tokens) at ``difficulty``: ``t50 * growth ** (difficulty - 1)``."""
        return self.t50 * self.growth ** (float(difficulty) - 1.0)

    def p(self, tokens: float | np.ndarray, difficulty: float) -> float | np.ndarray:
        """Probability of a correct answer with ``tokens`` tokens (scalar or array) at ``difficulty``."""
        t = np.asarray(tokens, dtype=float)
        if self.measured_up_to is not None:
            t = np.minimum(t, self.measured_up_to)
        with np.errstate(divide="ignore"):
            z = self.k * (np.log(np.maximum(t, 1e-300)) - math.log(self.t50_at(difficulty)))
        out = self.floor + (self.ceiling - self.floor) / (1.0 + np.exp(-np.clip(z, -60, 60)))
        out = np.where(t > 0, out, self.floor)
        return float(out) if np.ndim(out) == 0 else out

    def tokens_for(self, p: float, difficulty: float) -> float:
        """Tokens needed to reach accuracy ``p`` (inverse of :meth:`p`; ``inf`` at or above the ceiling, or past
        the largest length measured)."""
        if p <= self.floor:
            return 0.0
        if p >= self.ceiling:
            return math.inf
        q = (p - self.floor) / (self.ceiling - self.floor)
        t = self.t50_at(difficulty) * math.exp(math.log(q / (1 - q)) / self.k)
        return math.inf if self.measured_up_to is not None and t > self.measured_up_to else t


FAMILIES = ("GSM", "MATH", "NuminaMath-TIR", "reasoning_gym", "other")

#: Where :data:`DEFAULT_CURVES` come from, said wherever numbers computed with them are shown.
DEFAULTS_PROVENANCE = (
    "simulated-solver curves: the hand-chosen defaults (not fitted to any model; generous for a small model, "
    "e.g. GSM8K p = 0.94 at 1,024 tokens). Calibrate them from a real model's run to speak about real models."
)

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


def problem_family(problem_type: str | None) -> str:
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


def _curve_dict(curve: Curve) -> dict[str, Any]:
    """A curve's parameters for JSON (``measured_up_to`` only when set)."""
    d = asdict(curve)
    if d.get("measured_up_to") is None:
        d.pop("measured_up_to", None)
    return d


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
        covers: The families a fit measured (``None``: every family has a curve it may use, as the defaults and
            a pooled fit do). A problem type of another family, not named in :attr:`types`, is refused
            (:class:`~reasoning_env.errors.UnmeasuredProblemTypeError`) rather than given a hand-chosen default.
    """

    families: dict[str, Curve] = field(default_factory=lambda: dict(DEFAULT_CURVES))
    types: dict[str, Curve] = field(default_factory=dict)
    default_difficulty: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_DIFFICULTY))
    source: str = "defaults"
    fits: dict[str, dict] = field(default_factory=dict)
    covers: list[str] | None = None

    @classmethod
    def single(cls, curve: Curve, *, default_difficulty: int = 3, source: str = "one curve") -> SolverCurves:
        """Curves that give every problem type the same ``curve`` (and unlabelled questions the
        level ``default_difficulty``)."""
        return cls(
            families={f: curve for f in FAMILIES},
            default_difficulty={f: int(default_difficulty) for f in FAMILIES},
            source=source,
        )

    def __call__(
        self, tokens: float | np.ndarray, difficulty: float | None, problem_type: str | None = None
    ) -> np.ndarray:
        """``p(tokens)`` for a question of this difficulty and type, as an array: the
        accuracy-curve call of the reward lab (``curve(tokens, difficulty, problem_type)``)."""
        return np.asarray(self.p(np.asarray(tokens, dtype=float), problem_type, difficulty), dtype=float)

    @property
    def provenance(self) -> str:
        """One sentence on where the curves come from, for reports and the UI."""
        if self.source == "defaults":
            return DEFAULTS_PROVENANCE
        return f"curves {self.source}"

    # ------------------------------------------------------------------ lookup
    def curve_for(self, problem_type: str | None) -> Curve:
        """The curve of ``problem_type``."""
        if problem_type and problem_type in self.types:
            return self.types[problem_type]
        fam = problem_family(problem_type)
        if self.covers is not None and fam not in self.covers:
            raise UnmeasuredProblemTypeError(
                f"the curve set ({self.source}) was measured on the families {', '.join(self.covers)}"
                + (f" and the types {', '.join(sorted(self.types))}" if self.types else "")
                + f", not on {problem_type!r} (family {fam}): measure it (workbench.real_sweep) or use a curve set "
                "that covers it"
            )
        return self.families.get(fam) or self.families.get("other") or DEFAULT_CURVES["other"]

    def difficulty_for(self, problem_type: str | None, difficulty: float | None) -> float:
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

    def p(self, tokens: float | np.ndarray, problem_type: str | None, difficulty: float | None) -> float | np.ndarray:
        """Probability of a correct answer with ``tokens`` tokens for a question of this type/difficulty."""
        return self.curve_for(problem_type).p(tokens, self.difficulty_for(problem_type, difficulty))

    def question_fn(self, problem_type: str | None, difficulty: float | None):
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
            "families": {k: _curve_dict(v) for k, v in self.families.items()},
            "types": {k: _curve_dict(v) for k, v in self.types.items()},
            "default_difficulty": dict(self.default_difficulty),
            **({"covers": list(self.covers)} if self.covers is not None else {}),
            **({"fits": self.fits} if self.fits else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SolverCurves:
        """Build from :meth:`to_dict` output. Missing families keep their defaults.

        Raises:
            ValueError: a curve has invalid parameters.
        """
        fams = dict(DEFAULT_CURVES)
        fams.update({k: Curve(**v) for k, v in (data.get("families") or {}).items()})
        types = {k: Curve(**v) for k, v in (data.get("types") or {}).items()}
        dd = dict(DEFAULT_DIFFICULTY)
        dd.update({k: int(v) for k, v in (data.get("default_difficulty") or {}).items()})
        return cls(
            families=fams,
            types=types,
            default_difficulty=dd,
            source=str(data.get("source", "file")),
            fits=dict(data.get("fits") or {}),
            covers=None if data.get("covers") is None else [str(c) for c in data["covers"]],
        )

    def save(self, path: str | Path) -> None:
        """Write :meth:`to_dict` as JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> SolverCurves:
        """Read a JSON file written by :meth:`save` (e.g. a run folder's ``curves.json``).

        Raises:
            ValueError: the file is missing or unreadable, is not JSON, or does not hold solver
                curves (a JSON object with ``families``: ``{family: {curve parameters}}``); the
                message names the file and the format expected.
        """
        expected = (
            "expected a solver curves JSON file (a run folder's curves.json, fitted_curves.json, "
            "or SolverCurves.save output)"
        )
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or type(exc).__name__
            raise ValueError(f"cannot read solver curves {str(path)!r} ({reason}): {expected}") from None
        try:
            data = json.loads(text)
            if not isinstance(data, Mapping):
                raise TypeError(f"a JSON {type(data).__name__}, not an object")
            return cls.from_dict(data)
        except (ValueError, TypeError, AttributeError) as exc:
            raise ValueError(f"{str(path)!r} does not hold solver curves ({exc}): {expected}") from None

    # ------------------------------------------------------------------ fitting
    @classmethod
    def fit(
        cls,
        rows: Any,
        *,
        per: str = "family",
        per_family: bool = True,
        min_rows: int = 30,
        ceiling: float | str | None = "fit",
        floor: float = 0.0,
        base: SolverCurves | None = None,
        x: str = "tokens",
        cluster: str | None = None,
    ) -> SolverCurves:
        """Maximum-likelihood curves from recorded steps, with standard errors and goodness of
        fit (:mod:`.curve_fit`; the reports are kept in :attr:`fits` and in the saved file).

        Args:
            rows: A DataFrame or an iterable of mappings/objects with the length column ``x``
                (> 0), ``problem_type``, ``difficulty`` (may be missing/None) and ``correct``.
            per: ``"family"`` (one curve per problem-type family, stored in :attr:`families`) or
                ``"type"`` (also one per exact problem type with at least ``min_rows`` rows, stored
                in :attr:`types`; other types use their family's fit).
            per_family: With ``per="family"``: fit each family with at least ``min_rows`` rows
                on its own (False: one pooled curve for every family present).
            min_rows: Minimum rows for a fit; a group with fewer uses the pooled fit (noted).
            ceiling: ``"fit"`` (estimate it; kept at the prior's and reported when the rows do
                not reach the plateau), a number to hold, or ``None`` to hold each prior's.
            floor: Fixed floor.
            base: Curves whose defaults (difficulty levels, unfitted families, priors) are kept
                (default: :class:`SolverCurves` defaults).
            x: The length column: ``"tokens"`` (charged) or ``"token_cap"`` (the per-question
                cap of a calibration sweep).
            cluster: A column whose equal values mark correlated rows (e.g. ``"question_id"``:
                one question answered at several caps): cluster-robust standard errors.

        Returns:
            New curves: fitted groups replace the base ones; ``source`` describes the fit.

        Raises:
            CurveFitError: fewer than ``min_rows`` usable rows, only correct or only wrong rows,
                one length only, or a fitted ``k <= 0`` (accuracy does not rise with tokens).
            ValueError: unknown ``per``.
        """
        from reasoning_env.policies.curve_fit import fit_group

        if per not in ("family", "type"):
            raise ValueError(f"per must be 'family' or 'type', got {per!r}")
        base = base or cls()
        data = _rows_to_arrays(rows, base, x, cluster)
        n = len(data["t"])
        if n < min_rows:
            raise CurveFitError(f"need at least {min_rows} rows with {x} > 0 to fit a curve, got {n}")
        fams, types = dict(base.families), dict(base.types)
        fits: dict[str, dict] = {}
        notes: list[str] = []
        fam_key = data["family"]
        groups = sorted(set(fam_key))
        pooled_cache: list = []

        def pooled() -> Curve:
            if not pooled_cache:
                prior = (
                    (base.families.get(groups[0]) or DEFAULT_CURVES["other"])
                    if len(groups) == 1
                    else Curve(
                        k=2.0,
                        t50=50.0,
                        growth=2.0,
                        ceiling=float(
                            np.mean([(base.families.get(g) or DEFAULT_CURVES["other"]).ceiling for g in groups])
                        ),
                    )
                )
                cur, rep = fit_group(
                    data["t"],
                    data["d"],
                    data["y"],
                    group="pooled" if len(groups) > 1 else f"family:{groups[0]}",
                    prior=prior,
                    ceiling=ceiling,
                    floor=floor,
                    x_name=x,
                    clusters=data["cluster"],
                )
                fits[rep.group] = rep.to_dict()
                pooled_cache.append(cur)
            return pooled_cache[0]

        for g in groups:
            mask = fam_key == g
            if len(groups) > 1 and per_family and mask.sum() >= min_rows:
                try:
                    cur, rep = fit_group(
                        data["t"][mask],
                        data["d"][mask],
                        data["y"][mask],
                        group=f"family:{g}",
                        prior=base.families.get(g) or DEFAULT_CURVES["other"],
                        ceiling=ceiling,
                        floor=floor,
                        x_name=x,
                        clusters=None if data["cluster"] is None else data["cluster"][mask],
                    )
                    fits[rep.group] = rep.to_dict()
                except CurveFitError as exc:
                    notes.append(f"{g}: pooled fit used ({exc})")
                    cur = pooled()
            else:
                if len(groups) > 1:
                    notes.append(
                        f"{g}: pooled fit used ({int(mask.sum())} rows < {min_rows})"
                        if per_family
                        else f"{g}: pooled fit"
                    )
                cur = pooled()
            fams[g] = cur
        if per == "type":
            for t in sorted(set(data["type"])):
                mask = data["type"] == t
                fam = problem_family(t)
                if mask.sum() < min_rows:
                    notes.append(f"type {t}: its family's curve ({int(mask.sum())} rows < {min_rows})")
                    continue
                try:
                    cur, rep = fit_group(
                        data["t"][mask],
                        data["d"][mask],
                        data["y"][mask],
                        group=f"type:{t}",
                        prior=fams[fam],
                        ceiling=ceiling,
                        floor=floor,
                        x_name=x,
                        clusters=None if data["cluster"] is None else data["cluster"][mask],
                    )
                except CurveFitError as exc:
                    notes.append(f"type {t}: its family's curve ({exc})")
                    continue
                types[t] = cur
                fits[rep.group] = rep.to_dict()
        covers: list[str] | None = sorted(set(groups) | set(base.covers or []))
        if len(groups) > 1 and not per_family:  # one pooled curve: the calibrated family for every type
            fams = {f: pooled() for f in sorted(set(FAMILIES) | set(fams))}
            covers = None
        src = (
            f"fit: {n} rows, families {groups}"
            + (", per type" if per == "type" else "")
            + f", length {x}"
            + (f"; {'; '.join(notes)}" if notes else "")
        )
        return cls(
            families=fams,
            types=types,
            default_difficulty=dict(base.default_difficulty),
            source=src,
            fits=fits,
            covers=covers,
        )


def _rows_to_arrays(
    rows: Any, curves: SolverCurves, x: str = "tokens", cluster: str | None = None
) -> dict[str, np.ndarray]:
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # a pandas DataFrame
        if x not in rows.columns:
            raise CurveFitError(f"the rows have no {x!r} column (columns: {', '.join(map(str, rows.columns))})")
        records = rows.to_dict(orient="records")
    else:
        records = list(rows)
    t, d, y, fam, typ, grp = [], [], [], [], [], []
    for r in records:
        tok = _get(r, x)
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
        typ.append(str(pt or "other"))
        grp.append(str(_get(r, cluster)) if cluster else "")
    return {
        "t": np.array(t, dtype=float),
        "d": np.array(d, dtype=float),
        "y": np.array(y, dtype=float),
        "family": np.array(fam, dtype=object),
        "type": np.array(typ, dtype=object),
        "cluster": np.array(grp, dtype=object) if cluster else None,
    }


def fit_run(path: str | Path, *, policies: Sequence[str] | None = None, **kwargs: Any) -> SolverCurves:
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

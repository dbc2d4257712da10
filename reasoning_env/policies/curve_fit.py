"""Maximum-likelihood fit of the solver curves (:mod:`.curves`) to recorded steps, with standard
errors, goodness of fit and an account of what the rows cannot identify.

Model (per group of rows: a problem-type family, or one exact problem type)::

    p = floor + (ceiling - floor) * sigmoid(z),   z = a ln x + b + c (d - 1)
    k = a,  t50 = exp(-b / a),  growth = exp(-c / a)

``x`` is the length read from the rows (``tokens`` charged, or the per-question cap
``token_cap`` of a calibration sweep, see :mod:`workbench.calibration`), ``d`` the difficulty
(the question's level, else its family's default). ``ceiling`` is estimated too
(``ceiling="fit"``, the default) or held at a given value. The Bernoulli log-likelihood is
maximised by Fisher scoring (with floor 0 and a fixed ceiling 1 this is logistic regression).

Intervals: every parameter's 95% interval is its **profile likelihood**'s (SciPy's bounded truncated Newton, TNC,
maximises the others at each value; the bounds are where twice the log-likelihood drop reaches 3.84, chi^2_1's 95%
point), searched over :data:`PROFILE_LIMITS`: a parameter whose profile stays flat to an end of that range is
reported unbounded there and **not identified** (e.g. ``k`` when caps a factor 2 apart cannot say how steep the
curve is between them). The profile treats rows as independent; verdicts of one question at several caps are
correlated, so these intervals are if anything too narrow. The fitted curve holds its value past the largest length
measured (``measured_up_to``): nothing is predicted there.

Standard errors: the covariance of ``(a, b, c, ceiling)`` is the inverse Fisher information at the
optimum, or, when rows come in clusters (``clusters``: e.g. one question answered at several caps
of a calibration sweep, whose verdicts are correlated), the cluster-robust sandwich
``I^-1 (sum_g s_g s_g^T) I^-1 * G / (G - 1)`` with ``s_g`` the score summed over cluster ``g``
(Liang & Zeger 1986; the ordinary standard errors would be too small). Standard errors of ``k``,
``t50`` and ``growth`` follow by the delta method (``se``; the Wald intervals they would give are not reported:
on the shipped real-model sweep they were far narrower than the likelihood allows).
Goodness of fit: deviance, McFadden's pseudo-R^2 (1 - ll / ll_null) and the Hosmer-Lemeshow
test over deciles of the fitted probability (chi^2 with g - 2 degrees of freedom; Hosmer &
Lemeshow, *Applied Logistic Regression*, 2000, sec. 5.2.2), with the calibration table of those
deciles.

What rows cannot tell (reported in :attr:`CurveFit.unidentified`, never silently fixed):

- ``growth`` when every row has the same difficulty (no labels: each family's default level);
  it is then kept at the prior's value;
- ``ceiling`` when the rows do not reach the plateau: the estimate sits at a bound, or its
  standard error exceeds :data:`CEILING_SE_LIMIT`; the prior's ceiling is then kept.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import stats as _st

from reasoning_env.errors import CurveFitError

__all__ = ["CEILING_SE_LIMIT", "CurveFit", "CurveFitError", "Estimate", "fit_group", "format_fit"]

#: A fitted ceiling with a larger standard error than this is reported as not identified.
CEILING_SE_LIMIT = 0.15
_Z95 = float(_st.norm.ppf(0.975))


@dataclass(frozen=True)
class Estimate:
    """A fitted parameter: ``value`` with its standard error and 95% interval (NaN when not
    estimated), and whether the rows identify it."""

    value: float
    se: float = math.nan
    low: float = math.nan
    high: float = math.nan
    identified: bool = True
    interval: str = "wald"

    def __str__(self) -> str:
        if math.isnan(self.low) and math.isnan(self.high):
            return f"{self.value:.4g} (held, not estimated)"
        se = "" if math.isnan(self.se) else f" ± {self.se:.2g}"
        flag = "" if self.identified else "  NOT IDENTIFIED"
        return f"{self.value:.4g}{se} [{self.low:.4g}, {self.high:.4g}] ({self.interval}){flag}"


@dataclass
class CurveFit:
    """What one fit found (JSON-ready through :meth:`to_dict`).

    Attributes:
        group: ``"family:<name>"``, ``"type:<problem type>"`` or ``"pooled"``.
        n: Rows used. n_correct: Correct rows among them. x: The length column fitted on.
        clusters: Number of clusters of the robust standard errors (``None``: independent rows).
        estimates: ``k``, ``t50``, ``growth``, ``ceiling`` as :class:`Estimate` (``floor`` is fixed).
        floor: The fixed floor.
        loglik, null_loglik: Log-likelihood of the fit and of a constant accuracy.
        deviance: ``-2 loglik``. pseudo_r2: McFadden's ``1 - loglik / null_loglik``.
        hosmer_lemeshow: ``{"statistic", "df", "p_value"}`` (a small p-value: the curve shape
            does not fit these rows).
        calibration: Deciles of the fitted probability: ``[{"predicted", "observed", "n"}]``.
        unidentified: One sentence per parameter the rows cannot identify, with the value kept.
    """

    group: str
    n: int
    n_correct: int
    x: str
    estimates: dict[str, Estimate]
    floor: float
    loglik: float
    null_loglik: float
    hosmer_lemeshow: dict[str, float]
    calibration: list[dict[str, float]]
    unidentified: list[str] = field(default_factory=list)
    clusters: int | None = None
    loglik_max: float | None = None
    measured_up_to: float | None = None

    @property
    def deviance(self) -> float:
        """``-2 * loglik``."""
        return -2.0 * self.loglik

    @property
    def pseudo_r2(self) -> float:
        """McFadden's pseudo-R^2."""
        return 1.0 - self.loglik / self.null_loglik if self.null_loglik < 0 else math.nan

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (stored under ``fits`` in a curves file)."""
        d = asdict(self)
        d["deviance"] = self.deviance
        d["pseudo_r2"] = self.pseudo_r2
        return d

    def summary(self) -> str:
        """One line per parameter and one for the goodness of fit (:func:`format_fit`)."""
        return format_fit(self.to_dict())


def format_fit(fit: dict[str, Any]) -> str:
    """Text of a fit report (:meth:`CurveFit.to_dict` form, as stored under ``fits`` in a curves
    file): rows, each parameter with its standard error and interval, goodness of fit, and what
    the rows could not identify."""
    clustered = f", standard errors clustered over {fit['clusters']} questions" if fit.get("clusters") else ""
    lines = [f"{fit['group']}: {fit['n']} rows ({fit['n_correct']} correct), length = {fit['x']}{clustered}"]
    for name, e in fit["estimates"].items():
        e = e if isinstance(e, Estimate) else Estimate(**e)
        lines.append(f"  {name:<8s} {e}")
    hl = fit["hosmer_lemeshow"]
    lines.append(
        f"  fit: deviance {fit['deviance']:.1f}, pseudo-R2 {fit['pseudo_r2']:.3f}, "
        f"Hosmer-Lemeshow chi2 {hl['statistic']:.2f} "
        f"(df {hl['df']:.0f}, p = {hl['p_value']:.3g})"
    )
    if fit.get("loglik_max") is not None and fit["loglik_max"] > fit["loglik"] + 1e-3:
        lines.append(
            f"  log-likelihood {fit['loglik']:.3f}; the profile search met {fit['loglik_max']:.3f} elsewhere "
            "(a flat ridge: the intervals above are measured from that maximum)"
        )
    if fit.get("measured_up_to"):
        lines.append(f"  measured up to {fit['measured_up_to']:g} tokens: no prediction past it (held at its value)")
    lines.extend(f"  not identified: {u}" for u in fit.get("unidentified") or [])
    return "\n".join(lines)


def _exp(x: float) -> float:
    """``exp(x)``, ``inf`` past the float range: an interval bound of a parameter the rows barely
    identify (a standard error of hundreds on the log scale) is unbounded, not an OverflowError."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _loglik(y: np.ndarray, p: np.ndarray) -> float:
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return float(np.sum(y * np.log(p) + (1 - y) * np.log(1 - p)))


def _model(X: np.ndarray, beta: np.ndarray, ceiling: float, floor: float) -> tuple[np.ndarray, np.ndarray]:
    s = 1.0 / (1.0 + np.exp(-np.clip(X @ beta, -60, 60)))
    return floor + (ceiling - floor) * s, s


def _jacobian(X: np.ndarray, beta: np.ndarray, c: float, floor: float, free_c: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(p, dp/dtheta)`` per row (theta = beta, then the ceiling when it is free)."""
    p, s = _model(X, beta, c, floor)
    J = X * ((c - floor) * s * (1 - s))[:, None]
    if free_c:
        J = np.concatenate([J, s[:, None]], axis=1)
    return np.clip(p, 1e-12, 1 - 1e-12), J


def _covariance(
    X: np.ndarray,
    y: np.ndarray,
    beta: np.ndarray,
    c: float,
    floor: float,
    free_c: bool,
    info: np.ndarray,
    clusters: np.ndarray | None,
) -> np.ndarray | None:
    """Inverse Fisher information, or its cluster-robust sandwich (see the module docstring)."""
    try:
        inv = np.linalg.inv(info)
    except np.linalg.LinAlgError:
        return None
    if clusters is None:
        return inv
    p, J = _jacobian(X, beta, c, floor, free_c)
    scores = J * ((y - p) / (p * (1 - p)))[:, None]
    _, idx = np.unique(clusters, return_inverse=True)
    G = int(idx.max()) + 1
    if G < 2:
        return inv
    summed = np.zeros((G, scores.shape[1]))
    np.add.at(summed, idx, scores)
    meat = summed.T @ summed * (G / (G - 1))
    return inv @ meat @ inv


def _scoring(
    X: np.ndarray, y: np.ndarray, *, floor: float, ceiling: float | None, c0: float, iters: int = 200
) -> tuple[np.ndarray, float, np.ndarray]:
    """Fisher scoring over ``beta`` (and the ceiling when ``ceiling is None``), with step halving.

    Returns ``(beta, ceiling, Fisher information at the optimum)``.
    """
    free_c = ceiling is None
    C = float(c0 if free_c else ceiling)
    beta = np.zeros(X.shape[1])
    beta[0] = 1.0
    beta[1] = -float(np.median(X[:, 0]))
    lo_c, hi_c = min(1.0, floor + 1e-3), 1.0

    def info_and_score(b: np.ndarray, c: float) -> tuple[np.ndarray, np.ndarray]:
        p, J = _jacobian(X, b, c, floor, free_c)
        w = 1.0 / (p * (1 - p))
        return J.T @ (J * w[:, None]), J.T @ ((y - p) * w)

    ll = _loglik(y, _model(X, beta, C, floor)[0])
    for _ in range(iters):
        info, score = info_and_score(beta, C)
        ridge = 1e-9 * np.eye(info.shape[0]) * max(1.0, float(np.trace(info)) / info.shape[0])
        try:
            step = np.linalg.solve(info + ridge, score)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(info + ridge, score, rcond=None)[0]
        lam = 1.0
        while True:
            nb = beta + lam * step[: X.shape[1]]
            nc = float(np.clip(C + lam * step[-1], lo_c, hi_c)) if free_c else C
            ll_new = _loglik(y, _model(X, nb, nc, floor)[0])
            if ll_new >= ll - 1e-12 or lam < 1e-6:
                break
            lam /= 2
        if ll_new < ll - 1e-12:
            break
        moved = float(np.max(np.abs(lam * step)))
        beta, C, ll_prev, ll = nb, nc, ll, ll_new
        if abs(ll - ll_prev) < 1e-10 and moved < 1e-8:
            break
    info, _ = info_and_score(beta, C)
    return beta, C, info


def _hosmer_lemeshow(
    y: np.ndarray, p: np.ndarray, groups: int = 10
) -> tuple[dict[str, float], list[dict[str, float]]]:
    order = np.argsort(p, kind="stable")
    bins = [b for b in np.array_split(order, min(groups, len(y))) if len(b)]
    stat, table = 0.0, []
    for b in bins:
        n_g, obs, exp = len(b), float(y[b].sum()), float(p[b].sum())
        table.append({"predicted": exp / n_g, "observed": obs / n_g, "n": n_g})
        denom = exp * (1 - exp / n_g)
        if denom > 1e-12:
            stat += (obs - exp) ** 2 / denom
    df = max(1, len(bins) - 2)
    return {"statistic": float(stat), "df": float(df), "p_value": float(_st.chi2.sf(stat, df))}, table


#: Search range of each parameter's profile (natural units): an interval that reaches an end is unbounded there.
PROFILE_LIMITS = {"k": (0.05, 1000.0), "t50": (1e-2, 1e7), "growth": (0.02, 50.0)}
_CHI2_95 = float(_st.chi2.ppf(0.95, 1))


def _profile(
    lx: np.ndarray,
    d: np.ndarray,
    y: np.ndarray,
    *,
    start: dict[str, float],
    vary_d: bool,
    free_c: bool,
    floor: float,
) -> tuple[dict[str, tuple[float, float, bool, bool]], float]:
    """Profile-likelihood 95% intervals of ``k``, ``ln t50``, ``ln growth`` and the ceiling (SciPy's bounded
    truncated Newton, TNC, maximises the other parameters at each value; the bounds are where
    ``2 (ll_max - ll_profile)`` reaches chi^2_1's 95% point, 3.84, found by Brent's method). The rows count as
    independent here.

    Returns ``({name: (low, high, bounded_low, bounded_high)}, ll_max)`` on the natural scale (``t50`` at the
    level of ``d[0]`` when ``vary_d`` is False), where ``ll_max`` is the largest log-likelihood met, which can
    exceed the scoring fit's on a flat ridge.
    """
    from scipy.optimize import brentq, minimize

    names = ["k", "t50"] + (["growth"] if vary_d else []) + (["ceiling"] if free_c else [])
    lim = {n: tuple(math.log(v) for v in PROFILE_LIMITS[n]) for n in ("k", "t50", "growth")}
    lim["ceiling"] = (floor + 1e-4, 1.0)
    bounds = [lim[n] for n in names]
    x0 = np.array(
        [
            math.log(start["k"]),
            math.log(start["t50"]),
            *([math.log(start["growth"])] if vary_d else []),
            *([start["ceiling"]] if free_c else []),
        ]
    )
    x0 = np.clip(x0, [b[0] for b in bounds], [b[1] for b in bounds])
    dm1 = d - 1.0
    fixed_c = start["ceiling"]

    def nll(v: np.ndarray) -> tuple[float, np.ndarray]:
        k = math.exp(v[0])
        w = lx - v[1] - (v[2] * dm1 if vary_d else 0.0)
        z = np.clip(k * w, -60, 60)
        c = v[-1] if free_c else fixed_c
        sig = 1.0 / (1.0 + np.exp(-z))
        p = np.clip(floor + (c - floor) * sig, 1e-12, 1 - 1e-12)
        value = -float(np.sum(y * np.log(p) + (1 - y) * np.log(1 - p)))
        dl = -(y / p - (1 - y) / (1 - p))  # d nll / dp per row
        dz = dl * (c - floor) * sig * (1 - sig)
        grad = [float(np.sum(dz * k * w)), float(np.sum(dz * -k))]
        if vary_d:
            grad.append(float(np.sum(dz * -k * dm1)))
        if free_c:
            grad.append(float(np.sum(dl * sig)))
        return value, np.array(grad)

    def fit(v0: np.ndarray, fixed: int | None = None, value: float = 0.0) -> tuple[float, np.ndarray]:
        """Maximise over every parameter but ``fixed`` (held at ``value``), from ``v0`` and from the scoring
        fit (a start far up a flat ridge has no gradient back), keeping the better."""
        free = [i for i in range(len(v0)) if i != fixed]
        best_fun, best_v = math.inf, v0
        for start in (v0, x0):
            full = start.copy()
            if fixed is not None:
                full[fixed] = value

            def f(w: np.ndarray, full: np.ndarray = full) -> tuple[float, np.ndarray]:
                full[free] = w
                val, g = nll(full)
                return val, g[free]

            res = minimize(f, full[free], jac=True, method="TNC", bounds=[bounds[i] for i in free])
            if float(res.fun) < best_fun:
                full[free] = res.x
                best_fun, best_v = float(res.fun), full.copy()
            if start is x0 or np.allclose(v0, x0):
                break
        return best_fun, best_v

    best, v_hat = nll(x0)[0], x0
    for factor in (1.0, 4.0, 20.0):  # a flat ridge towards a steeper curve is common: start up it too
        trial = x0.copy()
        trial[0] = min(bounds[0][1], trial[0] + math.log(factor))
        got, v = fit(trial)
        if got < best:
            best, v_hat = got, v
    steps = {"k": 0.1, "t50": 0.05, "growth": 0.05, "ceiling": 0.01}
    out: dict[str, tuple[float, float, bool, bool]] = {}
    for j, name in enumerate(names):
        ends = []
        for sign in (-1.0, 1.0):
            edge = bounds[j][0] if sign < 0 else bounds[j][1]
            inside, v_in, step, found = float(v_hat[j]), v_hat, steps[name], None
            while True:
                val = float(np.clip(v_hat[j] + sign * step, *bounds[j]))
                val_nll, v_at = fit(v_in, j, val)
                best = min(best, val_nll)
                if 2 * (val_nll - best) > _CHI2_95:
                    start_v = v_in

                    def excess(x: float, start_v: np.ndarray = start_v, j: int = j, ref: float = best) -> float:
                        return 2 * (fit(start_v, j, x)[0] - ref) - _CHI2_95

                    lo, hi = sorted((inside, val))
                    found = float(brentq(excess, lo, hi, xtol=2e-3)) if excess(inside) < 0 else inside
                    break
                if val == edge:
                    break
                inside, v_in, step = val, v_at, step * 2
            ends.append((found if found is not None else edge, found is not None))
        (lo_v, lo_ok), (hi_v, hi_ok) = ends
        if name == "ceiling":
            out[name] = (lo_v, hi_v, lo_ok, hi_ok or hi_v >= 1.0)
        else:
            out[name] = (
                0.0 if not lo_ok else math.exp(lo_v),
                math.inf if not hi_ok else math.exp(hi_v),
                lo_ok,
                hi_ok,
            )
    return out, -best


def fit_group(
    x: np.ndarray,
    d: np.ndarray,
    y: np.ndarray,
    *,
    group: str,
    prior: Any,
    ceiling: float | str | None = "fit",
    floor: float = 0.0,
    x_name: str = "tokens",
    clusters: np.ndarray | None = None,
):
    """Fit one group of rows (lengths ``x`` > 0, difficulties ``d``, verdicts ``y`` in {0, 1}).

    Args:
        prior: The :class:`~.curves.Curve` whose ``growth`` / ``ceiling`` are kept when the rows
            cannot identify them; the fitted curve is a copy of it with every parameter fitted.
        ceiling: ``"fit"`` (estimate it), a number (hold it), or ``None`` (hold the prior's).
        clusters: One label per row; rows sharing a label are correlated (cluster-robust
            standard errors). ``None``: independent rows.

    Returns:
        ``(Curve, CurveFit)``.

    Raises:
        CurveFitError: no rows, one class only, lengths all equal, accuracy not rising with
            length, or a diverging fit (perfectly separable rows).
    """
    n = len(x)
    if n == 0:
        raise CurveFitError("no rows")
    if y.min() == y.max():
        raise CurveFitError(
            "all rows are " + ("correct" if y[0] == 1 else "wrong") + ": accuracy vs tokens is not identifiable"
        )
    lx = np.log(x)
    if float(np.ptp(lx)) == 0:
        raise CurveFitError(
            f"every row has the same {x_name} ({x[0]:g}): accuracy vs length is not "
            "identifiable; sweep the per-question cap"
        )
    unidentified: list[str] = []
    vary_d = float(np.ptp(d)) > 0
    X = np.stack([lx, np.ones(n)] + ([d - 1.0] if vary_d else []), axis=1)
    if not vary_d:
        unidentified.append(
            f"growth: every row has difficulty {d[0]:g} (no difficulty labels, or one "
            f"level): kept at the prior's {prior.growth:g}"
        )
    fixed_c: float | None
    if ceiling == "fit":
        fixed_c = None
    elif ceiling is None:
        fixed_c = float(prior.ceiling)
    else:
        fixed_c = float(ceiling)
    beta, C, info = _scoring(X, y, floor=floor, ceiling=fixed_c, c0=float(prior.ceiling))
    cov = None
    ceiling_est: Estimate
    if fixed_c is None:
        cov = _covariance(X, y, beta, C, floor, True, info, clusters)
        se_c = math.sqrt(cov[-1, -1]) if cov is not None and cov[-1, -1] > 0 else math.inf
        at_bound = C >= 1.0 - 1e-6 or C <= floor + 2e-3
        if at_bound or not se_c <= CEILING_SE_LIMIT:
            why = (
                "at its bound 1"
                if C >= 1.0 - 1e-6
                else (
                    f"at its bound {floor:g}"
                    if C <= floor + 2e-3
                    else f"standard error {se_c:.2g} > {CEILING_SE_LIMIT}"
                )
            )
            unidentified.append(
                f"ceiling: the rows do not reach the plateau (estimate {C:.3g}, {why}): kept at "
                f"the prior's {prior.ceiling:g}"
            )
            fixed_c = float(prior.ceiling)
            beta, C, info = _scoring(X, y, floor=floor, ceiling=fixed_c, c0=fixed_c)
            cov = None
            ceiling_est = Estimate(fixed_c, identified=False)
        else:
            ceiling_est = Estimate(C, se_c, max(floor, C - _Z95 * se_c), min(1.0, C + _Z95 * se_c))
    else:
        ceiling_est = Estimate(fixed_c, identified=False)
    if cov is None:
        cov = _covariance(X, y, beta, C, floor, False, info, clusters)
        if cov is None:
            cov = np.full(info.shape, np.nan)
    a = float(beta[0])
    if not math.isfinite(a) or a <= 1e-6:
        raise CurveFitError(f"fitted k = {a:.3g} <= 0: accuracy does not rise with tokens in these rows")
    log_t50 = -float(beta[1]) / a
    grad_t = np.zeros(len(beta))
    grad_t[0], grad_t[1] = float(beta[1]) / a**2, -1.0 / a
    sub = cov[: len(beta), : len(beta)]
    se_log_t50 = math.sqrt(max(0.0, float(grad_t @ sub @ grad_t)))
    se_a = math.sqrt(max(0.0, float(sub[0, 0])))
    if vary_d:
        log_g = -float(beta[2]) / a
        grad_g = np.zeros(len(beta))
        grad_g[0], grad_g[2] = float(beta[2]) / a**2, -1.0 / a
        se_log_g = math.sqrt(max(0.0, float(grad_g @ sub @ grad_g)))
        growth = _exp(log_g)
        growth_est = Estimate(growth, growth * se_log_g, _exp(log_g - _Z95 * se_log_g), _exp(log_g + _Z95 * se_log_g))
        t50 = _exp(log_t50)
        t50_est = Estimate(t50, t50 * se_log_t50, _exp(log_t50 - _Z95 * se_log_t50), _exp(log_t50 + _Z95 * se_log_t50))
    else:
        growth = float(prior.growth)
        growth_est = Estimate(growth, identified=False)
        # The fit is at the one level d0: t50(d0) = exp(log_t50); level 1 follows from the kept growth.
        scale = growth ** (float(d[0]) - 1.0)
        t50 = _exp(log_t50) / scale
        t50_est = Estimate(
            t50,
            t50 * se_log_t50,
            _exp(log_t50 - _Z95 * se_log_t50) / scale,
            _exp(log_t50 + _Z95 * se_log_t50) / scale,
        )
    if not all(math.isfinite(v) and 0 < v < 1e12 for v in (t50, growth)) or a > 1e3:
        raise CurveFitError(
            f"fit diverged (k={a:.3g}, t50={t50:.3g}, growth={growth:.3g}): the rows are probably perfectly separable"
        )
    k_est = Estimate(a, se_a, a - _Z95 * se_a, a + _Z95 * se_a)
    free_c = ceiling_est.identified
    scale = 1.0 if vary_d else float(growth) ** (float(d[0]) - 1.0)
    prof, ll_max = _profile(
        lx,
        d,
        y,
        start={"k": a, "t50": t50 * scale, "growth": growth, "ceiling": float(C)},
        vary_d=vary_d,
        free_c=free_c,
        floor=floor,
    )
    estimates = {"k": k_est, "t50": t50_est, "growth": growth_est, "ceiling": ceiling_est}
    for name, (lo, hi, lo_ok, hi_ok) in prof.items():
        e = estimates[name]
        if name == "t50":
            lo, hi = lo / scale, hi / scale
        estimates[name] = Estimate(e.value, e.se, lo, hi, identified=lo_ok and hi_ok, interval="profile")
        if not (lo_ok and hi_ok):
            side = " and ".join(w for w, ok in (("below", lo_ok), ("above", hi_ok)) if not ok)
            unidentified.append(
                f"{name}: the profile likelihood does not bound it from {side} (95% interval [{lo:.4g}, {hi:.4g}]): "
                f"the rows cannot say what it is there; {e.value:.4g} is one point of that range"
            )
    # the prior's type (a curves.Curve) with every parameter fitted: this module never imports curves.py
    curve = dataclasses.replace(
        prior, k=a, t50=t50, growth=growth, ceiling=float(C), floor=floor, measured_up_to=float(np.max(x))
    )
    p_hat = _model(X, beta, C, floor)[0]
    ybar = float(y.mean())
    hl, table = _hosmer_lemeshow(y, p_hat)
    report = CurveFit(
        group=group,
        n=int(n),
        n_correct=int(y.sum()),
        x=x_name,
        clusters=None if clusters is None else int(len(np.unique(clusters))),
        estimates=estimates,
        floor=float(floor),
        loglik=_loglik(y, p_hat),
        null_loglik=_loglik(y, np.full(n, ybar)),
        hosmer_lemeshow=hl,
        calibration=table,
        unidentified=unidentified,
        loglik_max=ll_max,
        measured_up_to=float(np.max(x)),
    )
    return curve, report

"""Equivalence of two parsed answers, without sympy and without running anything.

:func:`compare` returns a :class:`Verdict`: ``equal`` is ``True``/``False`` when the fast path can
decide, ``None`` when it cannot (the grader then asks math-verify in a worker process).

Rules (each motivated by a public grading failure, see the labelled cases of docs/grading.md):

* Numbers compare exactly as rationals (``0.75 == \\frac34``, ``29.00 == 29``; ``100001 !=
  100000``: no relative tolerance on integers). Irrational values compare at ~77 significant
  digits, relatively, so tiny magnitudes stay distinct (``1/2004! != 1/2006!``; math-verify
  rounds to 6 decimals and accepts that pair, Math-Verify issue #14).
* A decimal literal matches an exact value it correctly rounds or truncates, if it has at least
  3 significant digits (``0.0833333333333333`` ~ ``1/12``, ``4.123105625617661`` ~
  ``\\sqrt{17}``; ``0.33`` is not ``1/3``). A decimal gold with >= 3 significant digits accepts
  an exact answer that rounds to it. Two decimal literals must be equal.
* Percent: ``25%`` matches ``25`` and ``0.25``; ``33\\frac13\\%`` matches ``\\frac13`` (exactly
  equal), and ``33.33%`` is the decimal ``0.3333`` (so it matches ``\\frac13`` as ``0.3333``
  does; ``33%`` does not).
* Expressions with variables are compared at 3 seeded random points (complex-safe); this
  decides identities such as ``\\sec^2 y = \\tan^2 y + 1`` or ``(x+1)^2 = x^2+2x+1``. Renamed
  integration constants (``A + B/x`` vs ``C + D/x``) match when a renaming makes them equal.
* Equations match when ``lhs - rhs`` are proportional (a nonzero constant factor), so the same
  line or plane written differently matches; assignments (``x = 5``, ``|PQ| = 2``) match the
  bare value; lists of assignments to distinct names match by name, and in order against a
  bare tuple when that order is the conventional one (``x, y``; ``a_1, a_2``; ``\\rho, \\theta,
  \\phi``): ``y = 2, x = 3`` is not ``(2, 3)``. Several values of one variable (``x = 2, 3``) are
  never a tuple nor several names.
* Inequalities are the sets they allow: single-variable ones are intervals (``m \\ge \\sqrt2`` ==
  ``[\\sqrt2, \\infty)``), linear ones are solved (``-y < -2`` == ``y > 2``), absolute values split
  (``2 \\le |w| \\le 5`` == ``[-5,-2] \\cup [2,5]``), and on a name they are its range.
* ``\\approx``: an exact value followed by its rounding is the exact value; an approximation
  alone is a decimal; an approximation that is not the exact value rounded is a mismatch.
* Tuples/intervals are ordered and their brackets must agree (``(1, 2) != [1, 2]``); sets and
  bare lists are unordered; ``\\pm`` means both values (``1 \\pm \\sqrt{19}``), so a single root
  does not match; a subset of a multi-answer gold does not match; an answer repeated in a bare
  list counts once unless the gold repeats one (multiplicities).
* Structure mismatches (a number vs a tuple, different sizes) are rejected at once.

Everything is bounded: evaluation refuses astronomically large powers (:class:`TooBig`),
loops are over at most a few dozen items, and a ``deadline`` (:func:`now` seconds: wall or CPU time)
is checked; past it the verdict is ``None``.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from reasoning_env.grading.values import (
    APPROX_SUBJECT,
    Assign,
    Choice,
    EvalError,
    Matrix,
    NotExact,
    Relation,
    Seq,
    Text,
    TooBig,
    Union,
    affine_coefficients,
    decimal_literal,
    exact_value,
    free_vars,
    is_positive_monotone,
    iter_nodes,
    num_context,
    numeric_value,
    rename_vars,
    value_name,
)

__all__ = ["Verdict", "compare", "describe_kind"]

#: Relative tolerance for variable-free irrational values (evaluated at 256 bits).
CONST_REL_TOL = Fraction(1, 10**50)
# Magnitudes below which a relative equality of 50 (250) digits also separates integers.
_RESOLVED_AT_50_DIGITS = 10**40
_RESOLVED_AT_250_DIGITS = 10**200
#: Relative tolerance at random points (evaluated at 128 bits).
POINT_REL_TOL = 1e-20
#: Points that must agree for two expressions with variables to be equal.
POINTS_NEEDED = 3
#: Points tried at most (some may hit a pole).
POINTS_TRIED = 8
#: Most items in a set/list compared pairwise.
MAX_ITEMS = 64
#: Values this close (relatively) but not within tolerance are re-evaluated at higher precision.
RECHECK_REL = 1e-6
#: Precision of that re-evaluation (bits, ~308 digits).
RECHECK_PREC_BITS = 1024
#: Minimum significant digits of a decimal answer matched against a non-decimal value.
MIN_DECIMAL_SIG = 3

_CONST_NAME_RE = re.compile(r"^(?:[A-DK]|[Cc]_\d{1,2})$")
_INF = ("c", "inf")
_NEG_INF = ("-", ("c", "inf"))


@dataclass(frozen=True)
class Verdict:
    """Outcome of a comparison.

    Attributes:
        equal: ``True``/``False`` when decided, ``None`` when undecided.
        reason: ``"numeric"`` (numbers), ``"equivalent"`` (structure/symbolic), ``"mismatch"``,
            or ``"undecided"``.
        detail: One short phrase saying why.
    """

    equal: bool | None
    reason: str
    detail: str = ""


_UNDECIDED = Verdict(None, "undecided")


def _yes(reason: str, detail: str = "") -> Verdict:
    return Verdict(True, reason, detail)


def _no(detail: str = "") -> Verdict:
    return Verdict(False, "mismatch", detail)


def _undecided(detail: str) -> Verdict:
    return Verdict(None, "undecided", detail)


def describe_kind(v: Any) -> str:
    """A short name of an answer value's kind (``"number"``, ``"expression"``, ``"tuple"``...)."""
    if isinstance(v, tuple):
        if v and v[0] == "n":
            return "number"
        return "expression" if free_vars(v) else "number"
    if isinstance(v, Seq):
        return {"tuple": "tuple", "set": "set", "list": "list", "ratio": "ratio"}[v.kind]
    if isinstance(v, Union):
        return "union"
    if isinstance(v, Relation):
        return "equation" if set(v.ops) == {"="} else "inequality"
    if isinstance(v, Assign):
        return "assignment"
    if isinstance(v, Matrix):
        return "matrix"
    if isinstance(v, Text):
        return "text"
    if isinstance(v, Choice):
        return "choice"
    return type(v).__name__


# ----------------------------------------------------------------------------- scalars
def _seeded_points() -> list:
    rng = random.Random(20240229)
    # values in (0.3, 2.7), away from 0, 1 and 2 where special identities hide differences
    return [[0.3 + 2.4 * rng.random() for _ in range(64)] for _ in range(POINTS_TRIED)]


_POINTS = _seeded_points()


def _close(ctx: Any, a: Any, b: Any, rel: float) -> bool:
    diff = abs(a - b)
    scale = max(abs(a), abs(b))
    return diff <= rel * scale + ctx.mpf(10) ** -30


def _ulp(places: int) -> Fraction:
    """One unit in the last place of a decimal with ``places`` decimals (negative: tens...)."""
    return Fraction(1, 10**places) if places >= 0 else Fraction(10 ** (-places))


def _real_part(value: Any, ctx: Any) -> Any:
    """An mpmath number as a real (its imaginary part negligible), or ``None`` if it is complex."""
    if isinstance(value, ctx.mpc):
        if abs(value.imag) > abs(value.real) * ctx.mpf(10) ** -40:
            return None
        return value.real
    return value


def _decimal_matches(lit: tuple, other: Any, ctx: Any) -> bool:
    """``lit = (value, places, sig)`` is a decimal literal; ``other`` an exact Fraction or an
    mpmath real. True when the literal is ``other`` rounded or truncated to ``places``."""
    value, places, sig = lit
    if sig < MIN_DECIMAL_SIG:
        return False
    ulp = _ulp(places)
    if isinstance(other, Fraction):
        if _terminates(other):
            return False  # 1.00 vs 201/200: a terminating value needs exact equality
        diff = abs(other - value)
        if diff * 2 <= ulp:
            return True
        return (other >= 0) == (value >= 0) and abs(value) <= abs(other) and diff < ulp
    other = _real_part(other, ctx)
    if other is None:
        return False
    v = ctx.mpf(value.numerator) / value.denominator
    u = ctx.mpf(ulp.numerator) / ulp.denominator
    diff = abs(other - v)
    slack = u * ctx.mpf(10) ** -30
    if diff * 2 <= u + slack:
        return True
    return (other >= 0) == (v >= 0) and abs(v) <= abs(other) and diff < u


def _terminates(x: Fraction) -> bool:
    """Whether a rational has a terminating decimal expansion (its reduced denominator has
    no prime factor but 2 and 5): such a value is written exactly, never rounded."""
    d = x.denominator
    twos = (d & -d).bit_length() - 1
    d >>= twos
    # d is a power of 5 iff it divides 5^M for M >= log_5 d (one big-int modulo, not a loop)
    return 5 ** (d.bit_length() // 2 + 1) % d == 0


def _gold_decimal_matches(lit: tuple, other: Any, ctx: Any) -> bool:
    """A decimal gold (>= 3 significant digits) accepts an exact value that rounds to it."""
    value, places, sig = lit
    if sig < MIN_DECIMAL_SIG:
        return False
    ulp = _ulp(places)
    if isinstance(other, Fraction):
        return not _terminates(other) and abs(other - value) * 2 <= ulp
    other = _real_part(other, ctx)
    if other is None:
        return False
    v = ctx.mpf(value.numerator) / value.denominator
    u = ctx.mpf(ulp.numerator) / ulp.denominator
    return abs(other - v) * 2 <= u * (1 + ctx.mpf(10) ** -30)


def _strip_percent(node: Any) -> tuple:
    if node[0] == "%":
        return node[1], True
    if node[0] == "-" and node[1][0] == "%":  # -25\% is -(25\%)
        return ("-", node[1][1]), True
    return node, False


def _hundredth(node: Any) -> Any:
    """``node / 100``; a decimal literal stays one with two more places (``33.33`` ->
    ``0.3333``), so a percent follows the same rounding rule as the decimal it denotes."""
    neg = node[0] == "-" and node[1][0] == "n"
    lit = node[1] if neg else node
    if lit[0] == "n" and lit[2] is not None:
        out = ("n", lit[1] / 100, lit[2] + 2)
        return ("-", out) if neg else out
    return ("/", node, ("n", Fraction(100), None))


def _numeric_or_toobig(node: Any, ctx: Any) -> Any:
    """``node``'s numeric value, the :class:`TooBig` class when it is too large to evaluate,
    or ``None`` when it is undefined (division by zero, a domain error...)."""
    try:
        return numeric_value(node, {}, ctx)
    except TooBig:
        return TooBig
    except (EvalError, ZeroDivisionError, OverflowError, ValueError, ArithmeticError):
        return None


def _const_compare(p: Any, g: Any) -> Verdict:
    """Two variable-free expressions."""
    try:
        ep = exact_value(p)
    except (NotExact, EvalError, ZeroDivisionError, OverflowError, ValueError):
        ep = None
    try:
        eg = exact_value(g)
    except (NotExact, EvalError, ZeroDivisionError, OverflowError, ValueError):
        eg = None
    lit_p = decimal_literal(p)
    lit_g = decimal_literal(g)
    ctx = num_context()
    if ep is not None and eg is not None:
        if ep == eg:
            return _yes("numeric", "equal rationals")
        if lit_p is not None and lit_g is None and _decimal_matches(lit_p, eg, ctx):
            return _yes("numeric", "decimal rounds the exact value")
        if lit_g is not None and lit_p is None and _gold_decimal_matches(lit_g, ep, ctx):
            return _yes("numeric", "exact value rounds to the decimal gold")
        return _no("different numbers")
    if (ep == 0 and _certainly_nonzero(g)) or (eg == 0 and _certainly_nonzero(p)):
        # 1e-999999999 vs 0: too small for the numeric check's "both below 1e-250" rule.
        return _no("a nonzero value vs 0")
    np_ = _numeric_or_toobig(p, ctx)
    if np_ is None:
        return _undecided("prediction undefined numerically")
    ng = _numeric_or_toobig(g, ctx)
    if ng is None:
        return _undecided("gold undefined numerically")
    if np_ is TooBig or ng is TooBig:
        if np_ is TooBig and ng is not TooBig and is_positive_monotone(p) and abs(ng) < ctx.mpf(2) ** (2**40):
            return _no("prediction is astronomically large")
        if ng is TooBig and np_ is not TooBig and is_positive_monotone(g) and abs(np_) < ctx.mpf(2) ** (2**40):
            return _no("gold is astronomically large")
        return _undecided("too large to evaluate")
    if ctx.isnan(np_) or ctx.isnan(ng):
        return _undecided("not a number")
    if ctx.isinf(np_) or ctx.isinf(ng):
        return _yes("numeric", "same infinity") if np_ == ng else _no("infinity vs finite")
    diff = abs(np_ - ng)
    scale = max(abs(np_), abs(ng))
    tol = ctx.mpf(CONST_REL_TOL.numerator) / CONST_REL_TOL.denominator
    if diff <= tol * scale:
        if scale < _RESOLVED_AT_50_DIGITS or p == g:
            return _yes("numeric", "equal to 50 digits")
        # 10^{40000} and 10^{40000}+1 agree to 50 digits: past 10^40, 50 digits cannot tell
        # neighbouring integers apart. 250 digits can up to 10^200; beyond, the worker decides.
        settled = _recheck({}, p, g)
        if settled is False:
            return _no("different numbers")
        if settled and scale < _RESOLVED_AT_250_DIGITS:
            return _yes("numeric", "equal to 250 digits")
        return _undecided("equal to 50 digits, too large to tell neighbouring integers apart")
    if lit_p is not None and lit_g is None and _decimal_matches(lit_p, ng if eg is None else eg, ctx):
        return _yes("numeric", "decimal rounds the exact value")
    if lit_g is not None and lit_p is None and _gold_decimal_matches(lit_g, np_, ctx):
        return _yes("numeric", "exact value rounds to the decimal gold")
    if diff <= RECHECK_REL * scale or (not np_ or not ng):
        # Close but not equal (cancellation?) or zero vs a tiny value: settle it at 1024 bits.
        settled = _recheck({}, p, g)
        if settled is None:
            return _undecided("cannot settle a near-equality")
        return _yes("numeric", "equal to 250 digits") if settled else _no("different numbers")
    return _no("different numbers")


def _certainly_nonzero(node: Any) -> bool:
    """True when a variable-free expression is a nonzero literal, or a product, quotient,
    negation or power of such (no sum, function or constant that could cancel to 0)."""
    stack = [node]
    while stack:
        x = stack.pop()
        k = x[0]
        if k == "n":
            if x[1] == 0:
                return False
        elif k == "*":
            stack.extend(x[1])
        elif k in ("-", "%"):
            stack.append(x[1])
        elif k in ("/", "^"):
            stack.append(x[1])  # a zero denominator is undefined, any exponent keeps b != 0
        else:
            return False
    return True


def _recheck(env: dict, p: Any, g: Any) -> bool | None:
    """Equality at :data:`RECHECK_PREC_BITS` bits (relative 1e-250, or both below 1e-250 in
    absolute value); ``None`` when evaluation fails there."""
    ctx = num_context(RECHECK_PREC_BITS)
    try:
        env_hp = {k: ctx.mpf(v) for k, v in env.items()}
        a = numeric_value(p, env_hp, ctx)
        b = numeric_value(g, env_hp, ctx)
    except (TooBig, EvalError, ZeroDivisionError, OverflowError, ValueError, ArithmeticError):
        return None
    tiny = ctx.mpf(10) ** -250
    diff = abs(a - b)
    return bool(diff <= tiny * max(abs(a), abs(b)) or (abs(a) < tiny and abs(b) < tiny))


def _has_piecewise(node: Any) -> bool:
    """Whether ``node`` uses abs/floor/ceil (random positive points cannot judge those)."""
    return any(x[0] == "f" and x[1] in ("abs", "floor", "ceil") for x in iter_nodes(node))


_clock = threading.local()


def now() -> float:
    """The clock deadlines are read on: ``time.perf_counter()``, or the clock a
    :class:`~reasoning_env.grading.Grader` runs its grade on in this thread (:func:`using_clock`;
    a server grades on the thread's CPU time, so that a busy machine does not turn a grade into
    "undecided")."""
    return getattr(_clock, "fn", time.perf_counter)()


@contextlib.contextmanager
def using_clock(fn):
    """Read deadlines on ``fn`` (seconds) in this thread inside the block."""
    before = getattr(_clock, "fn", None)
    _clock.fn = fn
    try:
        yield
    finally:
        if before is None:
            del _clock.fn
        else:
            _clock.fn = before


class _Deadline(Exception):
    """The comparison ran past its deadline."""


def _evaluations(p: Any, g: Any, names: list, deadline: float, ctx: Any) -> Iterator[tuple]:
    """``(env, p_value, g_value)`` at each seeded point where both are defined and finite.

    Raises:
        TooBig: a value is astronomically large at some point.
        _Deadline: past ``deadline`` (:func:`now` seconds).
    """
    # A side without variables has one value: evaluate it once (a constant answer's sums against
    # a gold with variables would otherwise be summed at every point).
    const = {}
    for side in (p, g):
        if not free_vars(side):
            try:
                const[id(side)] = numeric_value(side, {}, ctx)
            except (EvalError, ZeroDivisionError, OverflowError, ValueError, ArithmeticError):
                return  # undefined everywhere
    for k in range(POINTS_TRIED):
        if now() > deadline:
            raise _Deadline
        row = _POINTS[k]
        env = {name: ctx.mpf(row[j]) for j, name in enumerate(names)}
        try:
            a = const[id(p)] if id(p) in const else numeric_value(p, env, ctx)
            b = const[id(g)] if id(g) in const else numeric_value(g, env, ctx)
        except (EvalError, ZeroDivisionError, OverflowError, ValueError, ArithmeticError):
            continue
        if ctx.isnan(a) or ctx.isnan(b) or ctx.isinf(a) or ctx.isinf(b):
            continue
        yield env, a, b


def _point_compare(p: Any, g: Any, names: list, deadline: float) -> Verdict:
    """Compare two expressions with variables at seeded random points."""
    if len(names) > 64:
        return _undecided("too many variables")
    if _has_piecewise(p) or _has_piecewise(g):
        return _undecided("abs/floor/ceil of a variable")
    ctx = num_context(128)
    good = 0
    try:
        for env, a, b in _evaluations(p, g, names, deadline, ctx):
            if not _close(ctx, a, b, POINT_REL_TOL):
                if abs(a - b) > RECHECK_REL * max(abs(a), abs(b)):
                    return _no("differ at a random point")
                settled = _recheck(env, p, g)  # close: cancellation at 128 bits?
                if settled is None:
                    return _undecided("cannot settle a near-equality")
                if not settled:
                    return _no("differ at a random point")
            good += 1
            if good >= POINTS_NEEDED:
                if _differ_at_negative_points(p, g, names, deadline, ctx):
                    return _no("differ at a negative point")
                return _yes("equivalent", "equal at random points")
    except TooBig:
        return _undecided("too large to evaluate")
    except _Deadline:
        return _undecided("deadline")
    return _undecided("too few points where both are defined")


def _differ_at_negative_points(p: Any, g: Any, names: list, deadline: float, ctx: Any) -> bool:
    """Whether ``p`` and ``g`` differ at a point with every variable negated (and, with
    several variables, at points with every other one negated), where both are real-valued
    (``\\sqrt{x^2}`` vs ``x``; positive points cannot tell them apart). A point where either side
    is undefined or not real is skipped (``\\ln x^2`` vs ``2\\ln x`` are not compared outside
    ``x > 0``)."""
    tiny = ctx.mpf(10) ** -40
    for k in range(POINTS_NEEDED):
        if now() > deadline:
            return False
        if k and len(names) < 2:
            break  # one variable: negating it once is enough
        row = _POINTS[k]
        # all variables negated, then every other one (sqrt(x^2 y^2) vs xy)
        env = {name: -ctx.mpf(row[j]) if k == 0 or j % 2 == k % 2 else ctx.mpf(row[j]) for j, name in enumerate(names)}
        try:
            a = numeric_value(p, env, ctx)
            b = numeric_value(g, env, ctx)
        except (TooBig, EvalError, ZeroDivisionError, OverflowError, ValueError, ArithmeticError):
            continue
        if ctx.isnan(a) or ctx.isnan(b) or ctx.isinf(a) or ctx.isinf(b):
            continue
        if abs(ctx.im(a)) > tiny * (1 + abs(a)) or abs(ctx.im(b)) > tiny * (1 + abs(b)):
            continue
        if abs(a - b) > RECHECK_REL * max(abs(a), abs(b)) + ctx.mpf(10) ** -30:
            return True
    return False


def _scalar_compare(p: Any, g: Any, deadline: float) -> Verdict:
    p, p_pct = _strip_percent(p)
    g, g_pct = _strip_percent(g)
    if p_pct != g_pct:
        # 25% vs 25 or vs 0.25
        if p_pct:
            alt = _hundredth(p)
            first = _scalar_compare(p, g, deadline)
            return first if first.equal else _scalar_compare(alt, g, deadline)
        alt = _hundredth(g)
        first = _scalar_compare(p, g, deadline)
        return first if first.equal else _scalar_compare(p, alt, deadline)
    if p[0] == "base" or g[0] == "base":
        return _base_compare(p, g)
    vp = free_vars(p)
    vg = free_vars(g)
    if not vp and not vg:
        return _const_compare(p, g)
    verdict = _point_compare(p, g, sorted(vp | vg), deadline)
    if verdict.equal is False and vp != vg:
        # A + B/x vs C + D/x: integration constants named differently.
        return _renamed_constants_compare(p, g, vp, vg, deadline)
    return verdict


def _base_compare(p: Any, g: Any) -> Verdict:
    """``52_8``: same digits and base; a bare integer with the gold's digits also matches
    (the base was asked for in the question); a decimal value does not."""
    if p[0] == "base" and g[0] == "base":
        same = p[2] == g[2] and int(p[1], p[2]) == int(g[1], g[2])
        return _yes("equivalent", "same base-b number") if same else _no("different base-b numbers")
    other, based = (p, g) if g[0] == "base" else (g, p)
    if other[0] == "n" and other[2] is None and other[1].denominator == 1 and other[1] >= 0:
        if int(other[1]) == int(based[1]):  # same digit string (leading zeros aside)
            return _yes("equivalent", "digits of the base-b number")
    return _no("base-b number vs another value")


def _renamed_constants_compare(p: Any, g: Any, vp: frozenset, vg: frozenset, deadline: float) -> Verdict:
    shared = vp & vg
    only_p = sorted(vp - vg)
    only_g = sorted(vg - vp)
    if shared and 1 <= len(only_p) == len(only_g) <= 3 and all(_CONST_NAME_RE.match(v) for v in only_p + only_g):
        for perm in itertools.permutations(only_g):
            renamed = rename_vars(p, dict(zip(only_p, perm)))
            v = _point_compare(renamed, g, sorted(vg), deadline)
            if v.equal:
                return _yes("equivalent", "equal after renaming arbitrary constants")
    return _no("different expressions")


# ----------------------------------------------------------------------------- relations
# A function's head: one letter applied to variables (``f(x)``, ``g(t)``, ``h(x,y)``).
_FUNCTION_HEAD_RE = re.compile(r"[A-Za-z]\((?:[A-Za-z],)*[A-Za-z]\)")


def _function_label(a: Assign) -> bool:
    """Whether ``a``'s left side only names the function its right side defines: a function head
    (``f(x) = 2x+3``) or ``y`` in front of an expression of other variables (``y = 2x+3``). Such
    labels are not part of the value: each already equals the bare ``2x+3``, so they equal each
    other. ``y = 5`` (a variable's value) and ``f(3) = 9`` (a value at a number) are not labels."""
    if not isinstance(a.value, tuple):
        return False
    if a.lhs == "y":
        names = free_vars(a.value)
        return bool(names) and "y" not in names
    return _FUNCTION_HEAD_RE.fullmatch(a.lhs) is not None


def _equation_function(r: Any) -> Any | None:
    """``lhs - rhs`` of a single equation (``Relation`` or variable ``Assign``), else None."""
    if isinstance(r, Relation) and r.ops == ("=",) and all(isinstance(s, tuple) for s in r.sides):
        return ("+", ((1, r.sides[0]), (-1, r.sides[1])))
    if isinstance(r, Assign) and isinstance(r.value, tuple) and "(" not in r.lhs:
        return ("+", ((1, ("v", r.lhs)), (-1, r.value)))
    return None


def _proportional(fp: Any, fg: Any, deadline: float) -> Verdict:
    """Whether ``fp = c * fg`` for a nonzero constant ``c`` (same zero set, linear scaling)."""
    names = sorted(free_vars(fp) | free_vars(fg))
    if not names:
        return _undecided("equation without variables")
    if free_vars(fp) != free_vars(fg):
        return _no("equations in different variables")
    ctx = num_context(128)
    small = ctx.mpf(10) ** -25
    ratio = None
    good = 0
    try:
        for _, a, b in _evaluations(fp, fg, names, deadline, ctx):
            if abs(b) < small:
                if abs(a) < small:
                    continue
                return _no("different equations")
            r = a / b
            if abs(r) < small:
                return _no("different equations")
            if ratio is None:
                ratio = r
            elif not _close(ctx, r, ratio, POINT_REL_TOL):
                return _no("different equations")
            good += 1
            if good >= POINTS_NEEDED:
                return _yes("equivalent", "equations agree up to a constant factor")
    except TooBig:
        return _undecided("too large to evaluate")
    except _Deadline:
        return _undecided("deadline")
    return _undecided("too few points where both are defined")


_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}


def _relation_set(r: Any) -> tuple | None:
    """``(subject, set)`` for an inequality (or chain of two) on one subject between constants:
    the set of values it allows, an interval or a union of intervals.

    The subject is a name (``x``, ``g(t)`` read as ``gt``, ``PQ``: the set is its range), an
    affine expression of one variable with rational coefficients (``-2y \\ge -4`` is ``y \\le 2``;
    ``subject`` is then the variable) or the absolute value of one (``2 \\le |w| \\le 5`` is
    ``[-5,-2] \\cup [2,5]``). ``None`` for anything else (``x^2 < 4``, ``x < y``, ``1 < x > 3``).
    """
    if not isinstance(r, Relation) or not r.ops or len(r.sides) > 3 or any(op not in _FLIP for op in r.ops):
        return None
    sides = r.sides
    if not all(isinstance(s, tuple) for s in sides):
        return None
    if len(r.ops) == 2 and (r.ops[0] in ("<", "<=")) != (r.ops[1] in ("<", "<=")):
        return None
    var_idx = [i for i, s in enumerate(sides) if free_vars(s)]
    if len(var_idx) != 1:
        return None
    i = var_idx[0]
    lo, lo_closed, hi, hi_closed = _NEG_INF, False, _INF, False
    # Constraint between the subject and its neighbours, as "subject OP bound".
    for j, op in ((i - 1, r.ops[i - 1] if i >= 1 else None), (i + 1, r.ops[i] if i < len(r.ops) else None)):
        if op is None:
            continue
        eff = op if j > i else _FLIP[op]
        if eff in (">", ">="):
            lo, lo_closed = sides[j], eff == ">="
        else:
            hi, hi_closed = sides[j], eff == "<="
    subject = sides[i]
    names = free_vars(subject)
    if len(names) == 1:
        (var,) = names
        if subject[0] == "f" and subject[1] == "abs" and affine_coefficients(subject[2], var) is not None:
            inner = _abs_preimage(lo, lo_closed, hi, hi_closed)
            if inner is None:
                return None
            parts = tuple(_affine_preimage(x, *affine_coefficients(subject[2], var)) for x in inner)
            if not parts:
                return var, Seq("set", ())
            return var, parts[0] if len(parts) == 1 else Union(parts)
        line = affine_coefficients(subject, var)
        if line is not None:
            if _empty_bounds(lo, lo_closed, hi, hi_closed):
                return var, Seq("set", ())
            return var, _affine_preimage(_interval(lo, lo_closed, hi, hi_closed), *line)
    name = value_name(subject)
    if name is not None:
        if _empty_bounds(lo, lo_closed, hi, hi_closed):
            return name, Seq("set", ())
        return name, _interval(lo, lo_closed, hi, hi_closed)
    return None


def _empty_bounds(lo: Any, lo_closed: bool, hi: Any, hi_closed: bool) -> bool:
    """Whether exact bounds allow nothing (``5 < x < 3`` is the empty set, not the pair (5, 3))."""
    lv, hv = _bound_value(lo), _bound_value(hi)
    if lv is None or hv is None:
        return False
    return lv > hv or (lv == hv and not (lo_closed and hi_closed))


def _interval(lo: Any, lo_closed: bool, hi: Any, hi_closed: bool) -> Seq:
    return Seq("tuple", (lo, hi), "[" if lo_closed else "(", "]" if hi_closed else ")")


def _affine_preimage(interval: Seq, a: Fraction, b: Fraction) -> Seq:
    """The interval of ``x`` where ``a * x + b`` lies in ``interval`` (``a != 0``)."""
    (lo, hi), lo_c, hi_c = interval.items, interval.open == "[", interval.close == "]"

    def back(u: Any) -> Any:
        if u == _INF or u == _NEG_INF:
            return u if a > 0 else (_NEG_INF if u == _INF else _INF)
        if b != 0:
            u = ("+", ((1, u), (-1, ("n", b, None))))
        return u if a == 1 else ("/", u, ("n", a, None))

    if a > 0:
        return _interval(back(lo), lo_c, back(hi), hi_c)
    return _interval(back(hi), hi_c, back(lo), lo_c)


def _bound_value(node: Any) -> Any | None:
    """An exact rational bound, ``±inf`` as ``float``, or ``None`` when not exact."""
    if node == _INF:
        return float("inf")
    if node == _NEG_INF:
        return float("-inf")
    try:
        return exact_value(node)
    except (NotExact, EvalError, ZeroDivisionError, OverflowError, ValueError):
        return None


def _abs_preimage(lo: Any, lo_closed: bool, hi: Any, hi_closed: bool) -> tuple | None:
    """The intervals of ``u`` where ``|u|`` lies between ``lo`` and ``hi`` (exact bounds only)."""
    lv, hv = _bound_value(lo), _bound_value(hi)
    if lv is None or hv is None:
        return None
    if hv < 0 or (hv == 0 and not hi_closed) or hv < lv or (hv == lv and not (lo_closed and hi_closed)):
        return ()
    neg_hi = _NEG_INF if hi == _INF else ("-", hi)
    if lv < 0 or (lv == 0 and lo_closed):
        return (_interval(neg_hi, hi_closed, hi, hi_closed),)  # |u| >= 0 always holds
    if hv == lv:
        return None  # "c <= |u| <= c": two points, not intervals (outside this subset)
    return (_interval(neg_hi, hi_closed, ("-", lo), lo_closed), _interval(lo, lo_closed, hi, hi_closed))


def _relation_compare(p: Any, g: Any, deadline: float) -> Verdict:
    sp = _relation_set(p)
    sg = _relation_set(g)
    if sp is not None or sg is not None:
        if sp is not None and sg is not None and sp[0] != sg[0]:
            return _no("inequalities on different subjects")
        a, b = (sp[1] if sp is not None else p), (sg[1] if sg is not None else g)
        for side, other in ((sp, g), (sg, p)):
            if side is not None and isinstance(other, Assign) and other.lhs != side[0]:
                return _no("a set of values for another variable")
        if isinstance(a, Assign):
            a = a.value
        if isinstance(b, Assign):
            b = b.value
        if isinstance(a, Relation) or isinstance(b, Relation):
            return _no("inequality vs another relation")
        return compare(a, b, deadline)
    fp = _equation_function(p)
    fg = _equation_function(g)
    if fp is not None and fg is not None:
        return _proportional(fp, fg, deadline)
    if isinstance(p, Relation) and isinstance(g, Relation) and p.ops == g.ops and len(p.sides) == len(g.sides):
        return _ordered(p.sides, g.sides, deadline)
    if isinstance(p, Relation) and isinstance(g, Relation):
        return _undecided("relations of different shapes")
    return _no("relation vs a value")


# ----------------------------------------------------------------------------- collections
def _ordered(ps: tuple, gs: tuple, deadline: float) -> Verdict:
    if len(ps) != len(gs):
        return _no("different sizes")
    if len(ps) > MAX_ITEMS:
        return _undecided("too many items")
    undecided = False
    for a, b in zip(ps, gs):
        v = compare(a, b, deadline)
        if v.equal is False:
            return _no("an element differs")
        if v.equal is None:
            undecided = True
    if undecided:
        return _undecided("an element is undecided")
    return _yes("equivalent", "elementwise equal")


def _unordered(ps: tuple, gs: tuple, deadline: float) -> Verdict:
    if len(ps) != len(gs):
        return _no("different number of answers")
    if len(ps) > MAX_ITEMS:
        return _undecided("too many items")
    remaining = list(range(len(gs)))
    undecided = False
    for a in ps:
        found = None
        for idx in remaining:
            v = compare(a, gs[idx], deadline)
            if v.equal:
                found = idx
                break
            if v.equal is None:
                undecided = True
        if found is None:
            return _undecided("an element is undecided") if undecided else _no("an answer is missing")
        remaining.remove(found)
    return _yes("equivalent", "same elements")


def _matrix_items(m: Matrix) -> tuple | None:
    if len(m.rows) == 1:
        return m.rows[0]
    if all(len(r) == 1 for r in m.rows):
        return tuple(r[0] for r in m.rows)
    return None


def _seq_compare(p: Any, g: Seq, deadline: float) -> Verdict:
    if g.kind == "tuple":
        if isinstance(p, Seq) and p.kind == "tuple":
            if (p.open, p.close) != (g.open, g.close):
                return _no("different brackets")
            return _ordered(p.items, g.items, deadline)
        if isinstance(p, Seq) and p.kind == "list" and (g.open, g.close) == ("(", ")"):
            named_p = _named(p)
            if named_p is not None and not _conventional_order(tuple(named_p)):
                return _no("named values in an unusual order vs a tuple (which entry is which?)")
            return _ordered(p.items, g.items, deadline)
        if isinstance(p, Matrix) and (g.open, g.close) == ("(", ")"):
            items = _matrix_items(p)
            return _ordered(items, g.items, deadline) if items is not None else _no("matrix vs tuple")
        return _no(f"{describe_kind(p)} vs tuple")
    if g.kind == "ratio":
        if isinstance(p, Seq) and p.kind == "ratio":
            return _ordered(p.items, g.items, deadline)
        return _no(f"{describe_kind(p)} vs ratio")
    # set / list
    named_g, named_p = _named(g), _named(p)
    if named_g is not None and isinstance(p, Seq):
        if named_p is not None:  # x=5, y=3 vs y=3, x=5: matched by name
            if set(named_p) != set(named_g):
                return _no("values of different names")
            return _ordered(tuple(named_p[k] for k in named_g), tuple(named_g.values()), deadline)
        if p.kind == "list" or (p.kind == "tuple" and (p.open, p.close) == ("(", ")")):
            if not _conventional_order(tuple(named_g)):
                return _no("a tuple vs named values in an unusual order (which entry is which?)")
            return _ordered(p.items, g.items, deadline)  # (5,3) vs x=5, y=3: in order
    if isinstance(p, Seq) and (
        p.kind in ("set", "list") or (p.kind == "tuple" and g.kind == "list" and (p.open, p.close) == ("(", ")"))
    ):
        # a set has no repeated elements: \{1,2,2\} is \{1,2\} (identical items collapse); in a
        # list, an answer written twice counts once, unless the gold repeats one itself (then the
        # repeats are multiplicities, 2, 2, 3, and must match)
        gs = tuple(dict.fromkeys(g.items)) if g.kind == "set" else g.items
        gold_repeats = len(set(gs)) != len(gs)
        ps = p.items if p.kind != "set" and gold_repeats else tuple(dict.fromkeys(p.items))
        return _unordered(ps, gs, deadline)
    return _no(f"{describe_kind(p)} vs {g.kind}")


def _letters_word(p: Any) -> str | None:
    """A short bare word parsed as a product of letters (``no`` -> ``n * o``), lower-cased."""
    if not isinstance(p, tuple) or not p:
        return None
    parts = p[1] if p[0] == "*" else (p,)
    letters = []
    for x in parts:
        if not (isinstance(x, tuple) and x and x[0] in ("v", "c") and len(x[1]) == 1):
            return None
        letters.append(x[1])
    return "".join(letters).lower()


# ----------------------------------------------------------------------------- approximations
def _as_approximate(node: Any) -> Any:
    """An approximation graded as the decimal it is: an integer literal gets zero decimal places,
    so ``\\approx 7`` needs exact equality with a terminating gold and 3 significant digits
    against any other value (the decimal rule), like ``7.`` would."""
    neg = node[0] == "-"
    lit = node[1] if neg else node
    if lit[0] == "n" and lit[2] is None:
        lit = ("n", lit[1], 0)
        return ("-", lit) if neg else lit
    return node


def _approximation_digits(node: Any) -> tuple | None:
    """``(value, places)`` of an approximation written as a decimal (``0.29``, ``7``, ``-1.5``) or
    ``m \\times 10^{k}`` (places shifted by ``k``); ``None`` for anything else."""
    lit = decimal_literal(node)
    if lit is not None:
        return lit[0], lit[1]
    sign, x = 1, node
    while x[0] == "-":
        sign, x = -sign, x[1]
    if x[0] == "n":
        return sign * x[1], 0
    if x[0] == "*" and len(x[1]) == 2:
        m, pw = x[1]
        mant = decimal_literal(m) or ((m[1], 0, 0) if m[0] == "n" else None)
        if (
            mant is not None
            and pw[0] == "^"
            and pw[1] == ("n", Fraction(10), None)
            and pw[2][0] in ("n", "-")
            and decimal_literal(pw[2]) is None
        ):
            try:
                k = exact_value(pw[2])
            except (NotExact, EvalError):
                return None
            if k.denominator == 1 and abs(k) <= 400:
                return sign * mant[0] * Fraction(10) ** int(k), mant[1] - int(k)
    return None


def _approximation_agrees(exact: Any, approx: Any) -> bool:
    """Whether ``approx`` is ``exact`` rounded or truncated to the digits it shows (any number
    of them: ``\\frac{2}{7} \\approx 0.29``, ``\\sqrt{50} \\approx 7``; not ``\\frac13 \\approx 1.3``)."""
    digits = _approximation_digits(approx)
    if digits is None:
        return False
    value, places = digits
    ulp = _ulp(places)
    try:
        e: Any = exact_value(exact)
        diff = abs(e - value)
        return diff * 2 <= ulp or ((e >= 0) == (value >= 0) and abs(value) <= abs(e) and diff < ulp)
    except (NotExact, EvalError, ZeroDivisionError, OverflowError, ValueError):
        pass
    ctx = num_context()
    e = (
        _real_part(_numeric_or_toobig(exact, ctx), ctx)
        if _numeric_or_toobig(exact, ctx) not in (None, TooBig)
        else None
    )
    if e is None:
        return False
    v = ctx.mpf(value.numerator) / value.denominator
    u = ctx.mpf(ulp.numerator) / ulp.denominator
    diff = abs(e - v)
    return diff * 2 <= u or ((e >= 0) == (v >= 0) and abs(v) <= abs(e) and diff < u)


def _resolve_approx(r: Relation) -> tuple:
    """``(value, "")`` for a relation holding ``\\approx``, or ``(None, why)``.

    The rule (docs/grading.md): an exact value followed by its approximation is the exact value
    (``y = \\frac{2}{7} \\approx 0.29`` is ``y = \\frac27``), and the approximation must be that value
    rounded or truncated (else the answer names two different values: a mismatch); an
    approximation alone (``y \\approx 0.286``, ``\\approx 7``) is graded as the decimal it is."""
    j = r.ops.index("~")
    head, head_ops, approx = r.sides[: j + 1], r.ops[:j], r.sides[j + 1 :]
    if any(op != "~" for op in r.ops[j:]) or any(op != "=" for op in head_ops):
        return None, "an approximation mixed with another relation"
    if not all(isinstance(x, tuple) for x in r.sides):
        return None, "an approximation of a structure"
    first = head[0]
    name = value_name(first)
    if len(head) == 1 and (first == APPROX_SUBJECT or name is not None):
        value = _as_approximate(approx[0])
        if free_vars(value) or not all(_approximation_agrees(approx[0], a) for a in approx[1:]):
            return None, "approximations that disagree"
        return (value if first == APPROX_SUBJECT else Assign(name, value)), ""
    exact = head[-1]
    if free_vars(exact):
        return None, "an approximation of an expression with variables"
    if not all(_approximation_agrees(exact, a) for a in approx):
        return None, "the approximation is not the exact value rounded (two different values)"
    if len(head) == 1:
        return exact, ""
    if name is not None and not (free_vars(first) & free_vars(exact)):
        return Assign(name, exact), ""
    return Relation(head_ops, head), ""


#: Orders of coordinate names that are conventional without being alphabetical.
_COORDINATE_ORDERS = frozenset({("rho", "theta", "phi")})
_GREEK_ORDER = {
    name: i
    for i, name in enumerate(
        "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi "
        "omicron pi rho varrho sigma tau upsilon phi varphi chi psi omega".split()
    )
}
_DIGITS_RE = re.compile(r"(\d+)")


def _name_key(name: str) -> tuple:
    """Sort key of a variable name: Latin letters alphabetically (case-folded), then Greek ones
    in the Greek alphabet's order; subscripts numerically (``a_2`` before ``a_10``)."""
    if name in _GREEK_ORDER:
        return (1, _GREEK_ORDER[name])
    parts = tuple((0, int(t)) if t.isdigit() else (1, t.lower()) for t in _DIGITS_RE.split(name) if t)
    return (0,) + parts


def _conventional_order(names: tuple) -> bool:
    """Whether named values are written in the order a tuple of them conventionally has
    (``x, y, z``; ``a_1, a_2``; ``r, \\theta``; ``\\rho, \\theta, \\phi``), so their written order can
    stand for the tuple's: ``y = 2, x = 3`` against the pair ``(2, 3)`` cannot say which entry is
    which (for ``(x, y)`` it is ``(3, 2)``)."""
    keys = [_name_key(n) for n in names]
    return keys == sorted(keys) or names in _COORDINATE_ORDERS


def _several_values(v: Any) -> bool:
    """An assignment of several values to one variable (``x = 2, 3``; ``x = 2, x = 3``)."""
    return isinstance(v, Assign) and isinstance(v.value, Seq) and v.value.kind == "list"


def _named(v: Any) -> dict | None:
    """``{name: value}`` of a list of assignments to distinct names (``x=5, y=3``), else None."""
    if not (isinstance(v, Seq) and v.kind == "list" and len(v.items) >= 2):
        return None
    if not all(isinstance(x, Assign) for x in v.items):
        return None
    out = {x.lhs: x.value for x in v.items}
    return out if len(out) == len(v.items) else None


# ----------------------------------------------------------------------------- entry point
def compare(p: Any, g: Any, deadline: float) -> Verdict:
    """Compare a parsed prediction ``p`` with a parsed gold ``g``.

    Args:
        p: Prediction value (from :func:`~reasoning_env.grading.latex.parse_answer`).
        g: Gold value.
        deadline: :func:`now` value after which the answer is "undecided".
    Returns:
        A :class:`Verdict`.
    """
    if now() > deadline:
        return _undecided("deadline")
    if isinstance(p, Relation) and "~" in p.ops:
        if p == g:
            return _yes("equivalent", "the same approximation")  # as an exact match would say
        p, why = _resolve_approx(p)
        if p is None:
            return _no(why)
    if isinstance(g, Relation) and "~" in g.ops:
        g, why = _resolve_approx(g)
        if g is None:
            return _undecided(f"gold: {why}")
    if isinstance(p, Choice) and p.value is not None and not isinstance(g, Choice):
        return compare(p.value, g, deadline)  # "(E) 10" vs 10: the option's value
    # Assignments: "x = 5" is the value 5 unless both sides name the variable.
    if isinstance(g, Assign) or isinstance(p, Assign):
        one, other = (p, g) if isinstance(p, Assign) else (g, p)
        if not isinstance(other, Assign) and (
            _named(other) is not None or (_several_values(one) and isinstance(other, Seq) and other.kind == "tuple")
        ):
            # x = 2, 3 (or x=2, x=3) is one variable's values: not the point (2, 3), nor x=2, y=3
            return _no("values of one variable vs a tuple or several named values")
        if isinstance(g, Assign) and isinstance(p, Assign):
            if p.lhs == g.lhs:
                return compare(p.value, g.value, deadline)
            if _function_label(p) and _function_label(g):
                return compare(p.value, g.value, deadline)  # y = 2x+3 vs f(x) = 2x+3: one function
            fp, fg = _equation_function(p), _equation_function(g)
            if fp is not None and fg is not None:
                return _proportional(fp, fg, deadline)
            return _no("assignments to different variables")
        if isinstance(g, Assign):
            if isinstance(p, Relation):
                return _relation_compare(p, g, deadline)
            return compare(p, g.value, deadline)
        if isinstance(g, Relation):
            return _relation_compare(p, g, deadline)
        return compare(p.value, g, deadline)
    if isinstance(g, Relation) or isinstance(p, Relation):
        return _relation_compare(p, g, deadline)
    if (
        isinstance(p, Seq)
        and p.kind == "list"
        and len(set(p.items)) == 1
        and not (isinstance(g, Seq) and g.kind in ("list", "set"))
    ):
        return compare(p.items[0], g, deadline)  # the same answer written twice: "3, 3" is 3
    if isinstance(g, tuple):
        if isinstance(p, Text):
            word = _letters_word(g)
            if word is not None:
                return _yes("equivalent", "same words") if word == p.text else _no("different words")
        if isinstance(p, tuple):
            return _scalar_compare(p, g, deadline)
        return _no(f"{describe_kind(p)} vs a single value")
    if isinstance(g, Seq):
        return _seq_compare(p, g, deadline)
    if isinstance(g, Union):
        if isinstance(p, Union):
            return _unordered(p.parts, g.parts, deadline)
        return _no(f"{describe_kind(p)} vs a union")
    if isinstance(g, Matrix):
        if isinstance(p, Matrix):
            if len(p.rows) != len(g.rows) or len(p.rows[0]) != len(g.rows[0]):
                return _no("different matrix shapes")
            return _ordered(tuple(x for r in p.rows for x in r), tuple(x for r in g.rows for x in r), deadline)
        if isinstance(p, Seq) and p.kind == "tuple" and (p.open, p.close) == ("(", ")"):
            items = _matrix_items(g)
            return _ordered(p.items, items, deadline) if items is not None else _no("tuple vs matrix")
        return _no(f"{describe_kind(p)} vs a matrix")
    if isinstance(g, Text):
        word = p.text if isinstance(p, Text) else _letters_word(p)
        if word is not None:
            return _yes("equivalent", "same words") if word == g.text else _no("different words")
        return _no(f"{describe_kind(p)} vs a word answer")
    if isinstance(g, Choice):
        if isinstance(p, Choice):
            if p.letter != g.letter:
                return _no("different choice")
            if p.value is not None and g.value is not None:
                v = compare(p.value, g.value, deadline)
                if not v.equal:
                    return v if v.equal is None else _no("same choice, different values")
            return _yes("equivalent", "same choice")
        if g.value is not None and not isinstance(p, Text):
            return compare(p, g.value, deadline)  # 10 vs "(E) 10"
        if isinstance(p, Text) and p.text.upper() == g.letter:
            return _yes("equivalent", "same choice")
        return _no(f"{describe_kind(p)} vs a choice letter")
    return _UNDECIDED

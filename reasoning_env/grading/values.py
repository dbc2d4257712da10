"""Answer values: a small immutable AST for the answer subset of LaTeX, and its evaluation.

Scalar expressions are nested tuples (cheap, hashable, immutable):

==================  ==========================================================================
``("n", q, p)``     number literal, ``q`` a :class:`fractions.Fraction`, ``p`` the digits after
                    the decimal point (``None`` for an integer literal)
``("v", name)``     variable (``x``, ``a_1``, ``\\alpha``)
``("c", name)``     constant: ``"pi"``, ``"e"``, ``"i"`` (imaginary unit), ``"inf"``
``("+", terms)``    sum; ``terms`` a tuple of ``(sign, node)`` with sign +1/-1
``("*", factors)``  product
``("/", a, b)``     quotient
``("^", a, b)``     power
``("-", a)``        negation
``("pm", a)``       ``\\pm a`` (expanded into two answers before evaluation)
``("f", name, a)``  function: sqrt, abs, floor, ceil, sin, cos, tan, sec, csc, cot, asin, acos,
                    atan, sinh, cosh, tanh, ln, exp
``("log", b, a)``   logarithm of ``a`` to base ``b`` (``None``: natural, as sympy reads ``\\log``)
``("root", n, a)``  ``n``-th root (real root of a negative number for odd ``n``)
``("!", a)``        factorial
``("binom", n, k)`` binomial coefficient
``("%", a)``        percent (``a/100``)
``("base", d, b)``  ``d`` read in base ``b`` (MATH's ``52_8``)
``("sum", k, lo,    ``\\sum_{k=lo}^{hi} body`` (``"prod"``: ``\\prod``); ``k`` the index's name
hi, body)``         (bound: not a free variable); finite integer bounds only, see
                    :data:`MAX_SUM_WORK`
==================  ==========================================================================

Structured answers are frozen dataclasses: :class:`Seq` (tuples, intervals, sets, lists),
:class:`Union`, :class:`Relation`, :class:`Assign`, :class:`Matrix`, :class:`Text`,
:class:`Choice`.

Evaluation is bounded: :func:`exact_value` computes in :class:`~fractions.Fraction` and refuses
results over :data:`MAX_EXACT_BITS`; :func:`numeric_value` computes with mpmath at a fixed
precision in a per-thread context (mpmath's global ``mp`` is shared mutable state) and raises
:class:`TooBig` for powers, factorials or function arguments whose evaluation would need
astronomically many digits (``9^{9^{9^9}}``); callers then defer or decide by monotonicity.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import mpmath

__all__ = [
    "Seq",
    "Union",
    "Relation",
    "Assign",
    "Matrix",
    "Text",
    "Choice",
    "Answer",
    "NotExact",
    "TooBig",
    "EvalError",
    "exact_value",
    "numeric_value",
    "free_vars",
    "iter_nodes",
    "expand_pm",
    "has_pm",
    "rename_vars",
    "decimal_literal",
    "decimal_digits",
    "is_positive_monotone",
    "num_context",
    "sum_work",
    "value_free_vars",
    "value_name",
    "poly_degree",
    "affine_coefficients",
    "APPROX_SUBJECT",
    "MAX_EXACT_BITS",
    "MAX_SUM_WORK",
    "POINT_EVALUATIONS",
]

#: Largest integer (numerator/denominator) size in bits that exact evaluation will build.
#: 2006! has ~19,000 bits; 5^3125 ~7,300.
MAX_EXACT_BITS = 100_000
#: Largest factorial argument computed exactly.
MAX_EXACT_FACTORIAL = 5_000
#: A power ``b^e`` is refused numerically when ``|e| * log2|b|`` exceeds this (the result's
#: binary exponent would not fit any sane computation).
MAX_LOG2_MAGNITUDE = 2.0**50
#: Largest argument magnitude accepted by trig/hyperbolic/exp/gamma (argument reduction cost
#: grows with the magnitude).
MAX_FUNCTION_ARG = 1e12
#: Working precision of numeric evaluation (bits): ~77 significant digits.
NUMERIC_PREC_BITS = 256
#: Work allowed to the ``\\sum``/``\\prod`` nodes of one answer (:func:`sum_work`: terms times the
#: cost of one term, nested sums and series included; about 0.75 us a unit at 256 bits on the
#: project's loaded VM, so ``\\sum_{k=1}^{10000} \\frac{1}{k^2}`` costs 150,000). The parser refuses
#: an answer over it (it goes to math-verify, killed at its deadline), so one evaluation of an
#: answer's sums costs at most ~0.12 s; an answer with variables is evaluated at several points
#: and may hold only a :data:`POINT_EVALUATIONS`-th of it.
MAX_SUM_WORK = 160_000
#: Cost of evaluating one node, by kind, in the units of :data:`MAX_SUM_WORK` (others cost 1):
#: measured per term at 256 bits (``k!`` ~50 us, ``\\binom{3000}{k}`` ~100 us, ``\\sin k`` ~18 us
#: and ``\\sin(k+i)`` ~40 us, ``k^2`` ~8 us, ``(k+i)^{k+i}`` ~60 us, ``k`` ~1.5 us with the loop).
#: A power with an integer literal exponent costs :data:`_INTEGER_POWER_COST`.
_NODE_COST = {"^": 25, "f": 30, "log": 25, "root": 30, "!": 60, "binom": 120}
_INTEGER_POWER_COST = 10
#: Terms an infinite series may cost (mpmath ``nsum`` evaluates up to ~10 per decimal digit).
MAX_SERIES_TERMS = 800
#: Evaluations at random points an answer with variables may need (3 agreeing + misses +
#: negated points): its sums may cost at most ``MAX_SUM_WORK / POINT_EVALUATIONS``.
POINT_EVALUATIONS = 8
#: Most bits of the terms (together) of one exact sum or product; past it the sum is evaluated
#: numerically (``\\sum_{k=1}^{3000} k!`` would build ~10^8 bits of factorials exactly).
MAX_SUM_EXACT_TERM_BITS = 2_000_000
#: A sum costing more than this is not re-evaluated above 256 bits (a near-equality recheck
#: would cost several times the evaluation): the pair is then undecided.
MAX_RECHECK_SUM_WORK = 40_000
#: Largest numerator/denominator (bits) of an exact partial sum or product of rationals; a sum
#: whose exact value grows past it (``\\sum 1/k^2`` over thousands of terms) is evaluated numerically.
MAX_SUM_EXACT_BITS = 4_096
#: Largest magnitude of a sum's bounds.
MAX_SUM_BOUND = 10**12


# ----------------------------------------------------------------------------- structured values
@dataclass(frozen=True)
class Seq:
    """An ordered or unordered collection.

    Attributes:
        kind: ``"tuple"`` (bracketed, ordered: points, vectors, and intervals, since ``(a, b)``
            is both), ``"set"`` (``\\{..\\}``, unordered), ``"list"`` (bare commas: several
            answers, unordered) or ``"ratio"`` (``a:b``, ordered).
        items: The elements (expression nodes or structured values).
        open: Opening bracket for tuples (``"("`` or ``"["``), else ``""``.
        close: Closing bracket for tuples (``")"`` or ``"]"``), else ``""``.
    """

    kind: str
    items: tuple
    open: str = ""
    close: str = ""


@dataclass(frozen=True)
class Union:
    """``A \\cup B \\cup ...`` of intervals (unordered)."""

    parts: tuple


@dataclass(frozen=True)
class Relation:
    """An equation or (chained) inequality: ``sides[0] ops[0] sides[1] ops[1] ...``.

    ``ops`` are ``"="``, ``"<"``, ``"<="``, ``">"``, ``">="``, ``"!="``.
    """

    ops: tuple
    sides: tuple


@dataclass(frozen=True)
class Assign:
    """``lhs = value`` where ``lhs`` is a variable or a function head (``"Y(x)"``), or
    ``x \\in S``. Compared by ``value`` against a bare answer."""

    lhs: str
    value: Any


@dataclass(frozen=True)
class Matrix:
    """A matrix (``pmatrix``/``bmatrix``...): rows of expression nodes."""

    rows: tuple


@dataclass(frozen=True)
class Text:
    """A word answer, canonicalised (lower case, letters/digits and single spaces)."""

    text: str


@dataclass(frozen=True)
class Choice:
    """A multiple-choice letter ``A``-``E`` (``(C)``, ``\\text{(C)}``, ``C``), optionally with
    the option's value (AMC style ``\\textbf{(E)}\\ 10``).

    Attributes:
        letter: The letter.
        value: The parsed value written after ``(E)``, or ``None`` (none, or not parsed).
    """

    letter: str
    value: Any = None


Answer = tuple | Seq | Union | Relation | Assign | Matrix | Text | Choice


class NotExact(Exception):
    """The expression has no exact rational value (or it is not computable exactly here)."""


class TooBig(Exception):
    """Evaluating the expression would need astronomically large numbers or precision."""


class EvalError(Exception):
    """The expression is undefined at this point (division by zero, log of zero...)."""


# ----------------------------------------------------------------------------- tree helpers
def iter_nodes(node: Any) -> Iterator[tuple]:
    """Every expression node under ``node`` (itself included), iteratively (no recursion)."""
    stack = [node]
    while stack:
        x = stack.pop()
        if not isinstance(x, tuple) or not x:
            continue
        yield x
        k = x[0]
        if k in ("n", "c", "v", "base"):
            continue
        if k == "+":
            stack.extend(t for _, t in x[1])
        elif k == "*":
            stack.extend(x[1])
        else:
            stack.extend(c for c in x[1:] if isinstance(c, tuple))


def free_vars(node: Any) -> frozenset:
    """Names of the free variables in an expression node (``frozenset`` of ``str``); the index of
    a ``\\sum``/``\\prod`` is bound in its body (``\\sum_{k=1}^{n} k`` has ``n`` only)."""
    names = []
    for x in iter_nodes(node):
        k = x[0]
        if k == "v":
            names.append(x[1])
        elif k == "sum" or k == "prod":
            return _free_vars_bound(node)
    return frozenset(names)


_BIG_OPS = ("sum", "prod")


def _free_vars_bound(node: Any) -> frozenset:
    """:func:`free_vars` of a node holding sums (recursive over sums only; nesting is capped by
    the parser)."""
    out: set = set()
    stack = [node]
    while stack:
        x = stack.pop()
        if not isinstance(x, tuple) or not x:
            continue
        k = x[0]
        if k == "v":
            out.add(x[1])
        elif k in _BIG_OPS:
            out |= _free_vars_bound(x[2]) | _free_vars_bound(x[3]) | (_free_vars_bound(x[4]) - {x[1]})
        elif k in ("n", "c", "base"):
            continue
        elif k == "+":
            stack.extend(t for _, t in x[1])
        elif k == "*":
            stack.extend(x[1])
        else:
            stack.extend(c for c in x[1:] if isinstance(c, tuple))
    return frozenset(out)


#: Placeholder subject of an approximation written alone (``\\approx 0.29``): ``Relation(("~",),
#: (APPROX_SUBJECT, value))``. Its name cannot be written in an answer.
APPROX_SUBJECT = ("v", "\u2248")


def value_name(node: Any) -> str | None:
    """The name an expression gives to a value, when it is only a name: a variable (``x``,
    ``a_1``, ``\\alpha``), two to four letters (``PQ``, ``xy``, ``g(t)`` read as ``gt``), the
    absolute value of a name (``|PQ|``; that of a segment is the segment, ``PQ``) or a quotient of
    names (``\\frac{AM}{MB}``). ``None`` for anything else (``2x``, ``x^2``, ``x+1``).
    """
    if not isinstance(node, tuple) or not node:
        return None
    k = node[0]
    if k == "v":
        return None if node == APPROX_SUBJECT else node[1]
    if k == "*":
        letters = []
        for f in node[1]:
            if isinstance(f, tuple) and f and f[0] in ("v", "c") and f[1] not in ("pi", "inf") and f != APPROX_SUBJECT:
                letters.append(f[1])
            else:
                return None
        if not 2 <= len(letters) <= 4:
            return None
        return "".join(letters) if all(len(x) == 1 for x in letters) else " ".join(letters)
    if k == "f" and node[1] == "abs":
        inner = value_name(node[2])
        if inner is None:
            return None
        return inner if inner.isalpha() and inner.isupper() and len(inner) >= 2 else f"|{inner}|"
    if k == "/":
        a, b = value_name(node[1]), value_name(node[2])
        return f"{a}/{b}" if a is not None and b is not None else None
    return None


def value_free_vars(v: Any) -> frozenset:
    """:func:`free_vars` of any answer value (expression nodes inside :class:`Seq`,
    :class:`Relation`, :class:`Assign`, :class:`Union`, :class:`Matrix`, :class:`Choice`)."""
    out: frozenset = frozenset()
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, tuple):
            out |= free_vars(x)
        elif isinstance(x, Seq):
            stack.extend(x.items)
        elif isinstance(x, Relation):
            stack.extend(x.sides)
        elif isinstance(x, Assign):
            out |= {x.lhs}
            stack.append(x.value)
        elif isinstance(x, Union):
            stack.extend(x.parts)
        elif isinstance(x, Matrix):
            stack.extend(c for row in x.rows for c in row)
        elif isinstance(x, Choice) and x.value is not None:
            stack.append(x.value)
    return out


def node_count(node: Any) -> int:
    """Number of expression nodes under ``node`` (itself included)."""
    return sum(1 for _ in iter_nodes(node))


def has_pm(node: Any) -> bool:
    """Whether an expression contains ``\\pm``/``\\mp``."""
    return any(x[0] == "pm" for x in iter_nodes(node))


def _subst_pm(node: Any, sign: int) -> Any:
    if not isinstance(node, tuple) or not node:
        return node
    k = node[0]
    if k in ("n", "c", "v", "base"):
        return node
    if k == "pm":
        inner = _subst_pm(node[1], sign)
        return inner if sign > 0 else ("-", inner)
    if k == "+":
        return ("+", tuple((s, _subst_pm(t, sign)) for s, t in node[1]))
    if k == "*":
        return ("*", tuple(_subst_pm(t, sign) for t in node[1]))
    return (k,) + tuple(_subst_pm(c, sign) if isinstance(c, tuple) else c for c in node[1:])


def expand_pm(node: Any) -> tuple:
    """The two readings of an expression with ``\\pm`` (all ``\\pm`` take the same sign, and
    ``\\mp`` the opposite one, the usual convention). Without ``\\pm``: ``(node,)``."""
    if not has_pm(node):
        return (node,)
    return (_subst_pm(node, 1), _subst_pm(node, -1))


def rename_vars(node: Any, mapping: Mapping[str, str]) -> Any:
    """A copy of ``node`` with variables renamed by ``mapping``."""
    if not isinstance(node, tuple) or not node:
        return node
    k = node[0]
    if k == "v":
        return ("v", mapping.get(node[1], node[1]))
    if k in ("n", "c", "base"):
        return node
    if k == "+":
        return ("+", tuple((s, rename_vars(t, mapping)) for s, t in node[1]))
    if k == "*":
        return ("*", tuple(rename_vars(t, mapping) for t in node[1]))
    return (k,) + tuple(rename_vars(c, mapping) if isinstance(c, tuple) else c for c in node[1:])


def decimal_literal(node: Any) -> tuple | None:
    """``(value, places, significant_digits)`` when ``node`` is a (signed) decimal literal such
    as ``0.0833`` or ``-4.5``; ``None`` otherwise (integers, fractions, expressions)."""
    sign = 1
    while isinstance(node, tuple) and node and node[0] == "-":
        sign = -sign
        node = node[1]
    scientific = _scientific(node)
    if scientific is not None:  # 2.3148 \times 10^{-3} is the decimal 0.0023148
        mantissa, exponent = scientific
        lit = decimal_literal(mantissa)
        if lit is None:
            return None
        return (sign * lit[0] * Fraction(10) ** exponent, lit[1] - exponent, lit[2])
    if not (isinstance(node, tuple) and node and node[0] == "n" and node[2] is not None):
        return None
    value, places = node[1], node[2]
    if value == 0:
        sig = 0
    else:
        # significant digits of the literal = digits of round(|value| * 10^places)
        sig = decimal_digits(abs(value.numerator * 10**places // value.denominator))
    return (sign * value, places, sig)


#: Largest power of ten read as the exponent of scientific notation (as literals: 10^±30,000).
MAX_SCIENTIFIC_EXPONENT = 30_000


def _scientific(node: Any) -> tuple | None:
    """``(mantissa, exponent)`` when ``node`` is ``mantissa \\times 10^{exponent}`` with an integer
    literal exponent (at most :data:`MAX_SCIENTIFIC_EXPONENT` in size); else ``None``."""
    if not (isinstance(node, tuple) and node and node[0] == "*" and len(node[1]) == 2):
        return None
    mantissa, power = node[1]
    if not (power[0] == "^" and power[1] == ("n", Fraction(10), None)):
        return None
    exp, sign = power[2], 1
    if exp[0] == "-":
        exp, sign = exp[1], -1
    if not (exp[0] == "n" and exp[2] is None and exp[1].denominator == 1 and exp[1] <= MAX_SCIENTIFIC_EXPONENT):
        return None
    return mantissa, sign * int(exp[1])


def decimal_digits(n: int) -> int:
    """Number of decimal digits of ``n >= 0`` (1 for 0), without ``str(n)``: Python refuses to
    convert integers over 4,300 digits to text (``1e5000`` is a valid literal)."""
    if n < 10**18:
        return len(str(n))
    d = int((n.bit_length() - 1) * 0.30102999566398120)  # floor(log10 n), or one less
    return d + 2 if n >= 10 ** (d + 1) else d + 1


def is_positive_monotone(node: Any) -> bool:
    """True when the expression is built only from numbers >= 1, ``\\pi`` and ``e`` with
    ``+``, ``*``, ``^`` and ``!``: its value then grows with every part, so an overflowing
    power means the whole value is astronomically large (a safe "not equal" to a moderate
    number)."""
    stack = [node]
    while stack:
        x = stack.pop()
        if not isinstance(x, tuple) or not x:
            return False
        k = x[0]
        if k == "n":
            if x[1] < 1:
                return False
        elif k == "c":
            if x[1] not in ("pi", "e"):
                return False
        elif k == "+":
            if any(s < 0 for s, _ in x[1]):
                return False
            stack.extend(t for _, t in x[1])
        elif k == "*":
            stack.extend(x[1])
        elif k == "^":
            stack.extend(x[1:3])
        elif k == "!":
            stack.append(x[1])
        else:
            return False
    return True


# ----------------------------------------------------------------------------- exact evaluation
def _bits(q: Fraction) -> int:
    return max(q.numerator.bit_length(), q.denominator.bit_length())


def _check_size(q: Fraction) -> Fraction:
    if _bits(q) > MAX_EXACT_BITS:
        raise NotExact("exact value too large")
    return q


def _int_root(n: int, k: int) -> int | None:
    """Exact non-negative integer ``k``-th root of ``n >= 0``, or ``None``."""
    if n < 2:
        return n
    if k == 2:
        r = math.isqrt(n)
        return r if r * r == n else None
    r = int(round(n ** (1.0 / k))) if n.bit_length() < 1000 else None
    if r is None:
        # Newton iteration on integers (bounded: n has at most MAX_EXACT_BITS bits).
        r = 1 << ((n.bit_length() + k - 1) // k)
        while True:
            nr = ((k - 1) * r + n // r ** (k - 1)) // k
            if nr >= r:
                break
            r = nr
    for cand in (r - 1, r, r + 1):
        if cand >= 0 and cand**k == n:
            return cand
    return None


def _rational_root(q: Fraction, k: int) -> Fraction:
    if k <= 0 or k > 64:
        raise NotExact("root index")
    neg = q < 0
    if neg and k % 2 == 0:
        raise NotExact("even root of a negative number")
    a = _int_root(abs(q.numerator), k)
    b = _int_root(q.denominator, k)
    if a is None or b is None:
        raise NotExact("irrational root")
    r = Fraction(a, b)
    return -r if neg else r


def _exact_pow(b: Fraction, e: Fraction) -> Fraction:
    if e.denominator == 1:
        n = e.numerator
        if b == 0:
            if n < 0:
                raise EvalError("0 to a negative power")
            return Fraction(1) if n == 0 else Fraction(0)
        if b in (1, -1):
            return b ** (n % 2) if b == -1 else b
        if abs(n) * _bits(b) > MAX_EXACT_BITS:
            raise NotExact("power too large for exact arithmetic")
        return b**n
    # rational exponent p/q: exact only for perfect roots
    root = _rational_root(b, e.denominator)
    return _exact_pow(root, Fraction(e.numerator))


def exact_value(node: Any, env: Mapping[str, Fraction] | None = None) -> Fraction:
    """Exact rational value of an expression node.

    Args:
        node: Expression node (no ``pm``).
        env: Values of variables (``Fraction``); default none (a variable is not exact).
    Raises:
        NotExact: irrational (``\\sqrt 2``, ``\\pi``), has unbound variables, or too large.
        EvalError: undefined (division by zero, ``0^{-1}``).
    """
    k = node[0]
    if k == "n":
        return node[1]
    if k == "v":
        if env is not None and node[1] in env:
            return env[node[1]]
        raise NotExact("variable")
    if k == "+":
        total = Fraction(0)
        for s, t in node[1]:
            v = exact_value(t, env)
            total = total + v if s > 0 else total - v
        return _check_size(total)
    if k == "*":
        prod = Fraction(1)
        for t in node[1]:
            prod = _check_size(prod * exact_value(t, env))
        return prod
    if k == "/":
        a = exact_value(node[1], env)
        b = exact_value(node[2], env)
        if b == 0:
            raise EvalError("division by zero")
        return _check_size(a / b)
    if k == "-":
        return -exact_value(node[1], env)
    if k == "^":
        return _check_size(_exact_pow(exact_value(node[1], env), exact_value(node[2], env)))
    if k == "%":
        return exact_value(node[1], env) / 100
    if k == "f":
        name = node[1]
        if name == "sqrt":
            return _rational_root(exact_value(node[2], env), 2)
        if name == "abs":
            return abs(exact_value(node[2], env))
        if name == "floor":
            return Fraction(math.floor(exact_value(node[2], env)))
        if name == "ceil":
            return Fraction(math.ceil(exact_value(node[2], env)))
        raise NotExact(name)
    if k == "root":
        n = exact_value(node[1], env)
        if n.denominator != 1:
            raise NotExact("root index")
        return _rational_root(exact_value(node[2], env), int(n))
    if k == "!":
        n = exact_value(node[1], env)
        if n.denominator != 1 or n < 0:
            raise NotExact("factorial of a non-natural number")
        if n > MAX_EXACT_FACTORIAL:
            raise NotExact("factorial too large")
        return Fraction(math.factorial(int(n)))
    if k == "binom":
        n = exact_value(node[1], env)
        r = exact_value(node[2], env)
        if n.denominator != 1 or r.denominator != 1 or n < 0 or n > MAX_EXACT_FACTORIAL:
            raise NotExact("binomial")
        return Fraction(math.comb(int(n), int(r))) if r >= 0 else Fraction(0)
    if k == "base":
        return Fraction(int(node[1], node[2]))
    if k in _BIG_OPS:
        return _exact_big_op(node, env)
    raise NotExact(k)


def sum_span(node: tuple) -> int | None:
    """Number of terms of a ``\\sum``/``\\prod`` node whose bounds are constant integers of at
    most :data:`MAX_SUM_BOUND` in magnitude (0 for an empty range); ``None`` otherwise (a bound
    with a variable or ``\\infty``: such a sum is never evaluated here)."""
    bounds = []
    for b in node[2:4]:
        try:
            v = exact_value(b)
        except (NotExact, EvalError, ArithmeticError, ValueError):
            return None
        if v.denominator != 1 or abs(v) > MAX_SUM_BOUND:
            return None
        bounds.append(int(v))
    return max(0, bounds[1] - bounds[0] + 1)


def _term_cost(body: Any) -> int:
    """Cost of one evaluation of a sum's body (:data:`_NODE_COST`); a nested sum or series costs
    its own :func:`sum_work` (each node is counted once)."""
    total = 0
    stack = [body]
    while stack:
        x = stack.pop()
        if not isinstance(x, tuple) or not x:
            continue
        k = x[0]
        if k in _BIG_OPS:
            total += sum_work(x) + _term_cost(x[2]) + _term_cost(x[3])
            continue
        if k == "^" and x[2][0] == "n" and x[2][1].denominator == 1:
            total += _INTEGER_POWER_COST
        else:
            total += _NODE_COST.get(k, 1)
        if k in ("n", "c", "v", "base"):
            continue
        if k == "+":
            stack.extend(t for _, t in x[1])
        elif k == "*":
            stack.extend(x[1])
        else:
            stack.extend(c for c in x[1:] if isinstance(c, tuple))
    return total


@lru_cache(maxsize=4096)
def sum_work(node: tuple) -> int:
    """Evaluation cost of a ``\\sum``/``\\prod`` node (units of :data:`MAX_SUM_WORK`): its terms
    times (1 + the cost of one term, nested sums and series included). An infinite series counts
    :data:`MAX_SERIES_TERMS` terms; a sum whose bounds are not constant integers one (it is never
    evaluated: the first attempt fails)."""
    if node[0] == "sum" and node[3] == ("c", "inf"):
        terms = MAX_SERIES_TERMS
    else:
        span = sum_span(node)
        terms = 1 if span is None else span
    return terms * (1 + _term_cost(node[4]))


def _big_op_range(node: tuple) -> range:
    span = sum_span(node)
    if span is None:
        raise NotExact("sum bounds are not constant integers")
    if sum_work(node) > MAX_SUM_WORK:
        raise TooBig("sum or product with too many terms")
    lo = int(exact_value(node[2]))
    return range(lo, lo + span)


def _exact_big_op(node: tuple, env: Mapping[str, Fraction] | None) -> Fraction:
    """Exact ``\\sum``/``\\prod`` over constant integer bounds (the parser caps the total work of
    an answer's sums at :data:`MAX_SUM_WORK`)."""
    kind, var, _, _, body = node
    try:
        terms = _big_op_range(node)
    except TooBig:
        raise NotExact("sum or product with too many terms") from None
    inner = dict(env) if env is not None else {}
    acc = Fraction(0) if kind == "sum" else Fraction(1)
    term_bits = 0
    for i in terms:
        inner[var] = Fraction(i)
        v = exact_value(body, inner)
        term_bits += _bits(v)
        if term_bits > MAX_SUM_EXACT_TERM_BITS:
            raise NotExact("exact terms too large")
        acc = acc + v if kind == "sum" else acc * v
        if acc.denominator.bit_length() > MAX_SUM_EXACT_BITS or acc.numerator.bit_length() > MAX_EXACT_BITS:
            raise NotExact("exact sum too large")
    return acc


# ----------------------------------------------------------------------------- numeric evaluation
_local = threading.local()


def num_context(prec: int = NUMERIC_PREC_BITS) -> Any:
    """This thread's mpmath context at ``prec`` bits (created once per thread and precision;
    never shared across threads because mpmath changes precision while it works)."""
    cache = getattr(_local, "ctxs", None)
    if cache is None:
        cache = _local.ctxs = {}
    ctx = cache.get(prec)
    if ctx is None:
        ctx = mpmath.MPContext()
        ctx.prec = prec
        cache[prec] = ctx
    return ctx


def _mag(ctx: Any, x: Any) -> float:
    """Approximate log2|x| (0 for x == 0)."""
    if not x:
        return 0.0
    return float(ctx.mag(x))


def _check_arg(ctx: Any, x: Any) -> None:
    if ctx.isinf(x) or ctx.isnan(x):
        raise EvalError("non-finite argument")
    if abs(x) > MAX_FUNCTION_ARG:
        raise TooBig("function argument too large")


def _real_if_close(ctx: Any, x: Any) -> Any:
    if isinstance(x, ctx.mpc) and x.imag == 0:
        return x.real
    return x


def numeric_value(node: Any, env: Mapping[str, Any], ctx: Any) -> Any:
    """Numeric value (mpmath ``mpf``/``mpc``) of an expression node.

    Args:
        node: Expression node (no ``pm``).
        env: Variable name -> value (mpmath numbers).
        ctx: An mpmath context from :func:`num_context`.
    Raises:
        TooBig: a power/factorial/function argument is astronomically large.
        EvalError: undefined here (division by zero, unknown variable, log of zero...).
    """
    k = node[0]
    if k == "n":
        q = node[1]
        return ctx.mpf(q.numerator) / q.denominator if q.denominator != 1 else ctx.mpf(q.numerator)
    if k == "v":
        try:
            return env[node[1]]
        except KeyError:
            raise EvalError(f"unbound variable {node[1]}") from None
    if k == "c":
        name = node[1]
        if name == "pi":
            return +ctx.pi
        if name == "e":
            return +ctx.e
        if name == "i":
            return ctx.mpc(0, 1)
        return ctx.inf
    if k == "+":
        total = ctx.mpf(0)
        for s, t in node[1]:
            v = numeric_value(t, env, ctx)
            total = total + v if s > 0 else total - v
        return total
    if k == "*":
        prod = ctx.mpf(1)
        for t in node[1]:
            prod = prod * numeric_value(t, env, ctx)
        return prod
    if k == "/":
        a = numeric_value(node[1], env, ctx)
        b = numeric_value(node[2], env, ctx)
        if not b:
            raise EvalError("division by zero")
        return a / b
    if k == "-":
        return -numeric_value(node[1], env, ctx)
    if k == "^":
        b = numeric_value(node[1], env, ctx)
        e = numeric_value(node[2], env, ctx)
        if ctx.isinf(b) or ctx.isinf(e) or ctx.isnan(b) or ctx.isnan(e):
            raise EvalError("non-finite power")
        if not b:
            if (e.real if isinstance(e, ctx.mpc) else e) <= 0:
                raise EvalError("0 to a non-positive power")
            return ctx.mpf(0)
        if abs(e) * max(1.0, abs(_mag(ctx, b))) > MAX_LOG2_MAGNITUDE:
            raise TooBig("power too large")
        # real odd roots of negative bases: (-8)^(1/3) = -2, as written by hand
        if not isinstance(b, ctx.mpc) and b < 0 and not isinstance(e, ctx.mpc) and e != int(e):
            q = node[2]
            if q[0] == "/" and q[2][0] == "n" and q[2][1].denominator == 1 and q[2][1].numerator % 2 == 1:
                p_ = q[1][1] if q[1][0] == "-" else q[1]
                if p_[0] == "n" and p_[1].denominator == 1 and p_[1].numerator % 2 == 0:
                    return ctx.power(-b, e)  # (-8)^(2/3) = ((-8)^(1/3))^2 = 4
                return -ctx.power(-b, e)
        return _real_if_close(ctx, ctx.power(b, e))
    if k == "%":
        return numeric_value(node[1], env, ctx) / 100
    if k == "f":
        name = node[1]
        x = numeric_value(node[2], env, ctx)
        if name == "sqrt":
            return _real_if_close(ctx, ctx.sqrt(x))
        if name == "abs":
            return abs(x)
        if name in ("floor", "ceil"):
            if isinstance(x, ctx.mpc):
                raise EvalError("floor of a complex number")
            return ctx.floor(x) if name == "floor" else ctx.ceil(x)
        if name == "ln":
            if not x:
                raise EvalError("log of zero")
            return _real_if_close(ctx, ctx.ln(x))
        _check_arg(ctx, x)
        if name == "exp":
            return ctx.exp(x)
        if name in ("sec", "csc", "cot"):
            base = {"sec": ctx.cos, "csc": ctx.sin, "cot": ctx.tan}[name](x)
            if not base:
                raise EvalError("pole")
            return 1 / base
        fn = getattr(ctx, {"asin": "asin", "acos": "acos", "atan": "atan"}.get(name, name), None)
        if fn is None:
            raise EvalError(f"unknown function {name}")
        return _real_if_close(ctx, fn(x))
    if k == "log":
        x = numeric_value(node[2], env, ctx)
        if not x:
            raise EvalError("log of zero")
        if node[1] is None:
            return _real_if_close(ctx, ctx.ln(x))
        b = numeric_value(node[1], env, ctx)
        lb = ctx.ln(b) if b else 0
        if not lb:
            raise EvalError("log base")
        return _real_if_close(ctx, ctx.ln(x) / lb)
    if k == "root":
        n = numeric_value(node[1], env, ctx)
        x = numeric_value(node[2], env, ctx)
        if not n:
            raise EvalError("zeroth root")
        if not isinstance(x, ctx.mpc) and x < 0 and n == int(n) and int(n) % 2 == 1:
            return -ctx.root(-x, int(n))
        return _real_if_close(ctx, ctx.power(x, 1 / n))
    if k == "!":
        x = numeric_value(node[1], env, ctx)
        if isinstance(x, ctx.mpc):
            raise EvalError("factorial of a non-real number")  # complex Gamma: ~5 ms at 256 bits
        _check_arg(ctx, x)
        if not isinstance(x, ctx.mpc) and x < 0 and x == int(x):
            raise EvalError("factorial of a negative integer")
        return ctx.gamma(x + 1)
    if k == "binom":
        n = numeric_value(node[1], env, ctx)
        r = numeric_value(node[2], env, ctx)
        if isinstance(n, ctx.mpc) or isinstance(r, ctx.mpc):
            raise EvalError("binomial of a non-real number")
        _check_arg(ctx, n)
        _check_arg(ctx, r)
        return ctx.binomial(n, r)
    if k == "base":
        return ctx.mpf(int(node[1], node[2]))
    if k in _BIG_OPS:
        return _numeric_big_op(node, env, ctx)
    if k == "pm":
        raise EvalError("unexpanded \\pm")
    raise EvalError(f"unknown node {k}")


def _numeric_big_op(node: tuple, env: Mapping[str, Any], ctx: Any) -> Any:
    """Numeric ``\\sum``/``\\prod`` over constant integer bounds, or an infinite series of a
    shape :func:`series_converges` accepts."""
    kind, var, _, hi_node, body = node
    if kind == "sum" and hi_node == ("c", "inf"):
        return _numeric_series(node, env, ctx)
    try:
        terms = _big_op_range(node)
    except NotExact:
        raise EvalError("sum bounds are not constant integers") from None
    if ctx.prec > NUMERIC_PREC_BITS and sum_work(node) > MAX_RECHECK_SUM_WORK:
        raise TooBig("long sum above 256 bits")
    inner = dict(env)
    acc = ctx.mpf(0) if kind == "sum" else ctx.mpf(1)
    for i in terms:
        inner[var] = ctx.mpf(i)
        v = numeric_value(body, inner, ctx)
        acc = acc + v if kind == "sum" else acc * v
    return acc


# ----------------------------------------------------------------------------- infinite series
#: Most precision (bits) at which an infinite series is evaluated (a recheck at higher precision
#: is refused: the pair is then undecided).
MAX_SERIES_PREC_BITS = NUMERIC_PREC_BITS
#: Smallest magnitude of a series value trusted (the extrapolation's tolerance is absolute).
MIN_SERIES_MAGNITUDE = 1e-30


def _flat_factors(node: Any, out_num: list, out_den: list, sign: list) -> None:
    """Split a product/quotient/negation into numerator and denominator factors."""
    k = node[0]
    if k == "*":
        for f in node[1]:
            _flat_factors(f, out_num, out_den, sign)
    elif k == "/":
        _flat_factors(node[1], out_num, out_den, sign)
        _flat_factors(node[2], out_den, out_num, sign)
    elif k == "-":
        sign[0] = -sign[0]
        _flat_factors(node[1], out_num, out_den, sign)
    else:
        out_num.append(node)


def poly_degree(node: Any, var: str) -> int | None:
    """Degree in ``var`` of a polynomial built with ``+ - *``, constant divisors and natural
    powers (at most 16); ``None`` when the expression is not one (``1/x``, ``\\sqrt x``, ``x^y``).
    Leading terms that cancel are not detected (``(x+1)^2 - x^2`` reports 2)."""
    k = node[0]
    if var not in free_vars(node):
        return 0
    if k == "v":
        return 1
    if k == "+":
        degs = [poly_degree(t, var) for _, t in node[1]]
        return None if None in degs else max(degs)
    if k == "*":
        degs = [poly_degree(t, var) for t in node[1]]
        return None if None in degs else sum(degs)
    if k in ("-", "%"):
        return poly_degree(node[1], var)
    if k == "/" and var not in free_vars(node[2]):
        return poly_degree(node[1], var)
    if k == "^" and node[2][0] == "n" and node[2][1].denominator == 1 and 1 <= node[2][1] <= 16:
        d = poly_degree(node[1], var)
        return None if d is None else d * int(node[2][1])
    return None


def affine_coefficients(node: Any, var: str) -> tuple | None:
    """``(a, b)`` (exact rationals, ``a != 0``) when ``node`` is ``a * var + b``, else ``None``."""
    if poly_degree(node, var) != 1:
        return None
    try:
        b = exact_value(node, {var: Fraction(0)})
        a = exact_value(node, {var: Fraction(1)}) - b
    except (NotExact, EvalError, ArithmeticError, ValueError):
        return None
    return (a, b) if a != 0 else None


def _affine_int_coefficient(node: Any, var: str) -> int | None:
    """``a`` when ``node`` is ``a * var + b`` with integers ``a``, ``b``; else ``None``."""
    line = affine_coefficients(node, var)
    if line is None or line[0].denominator != 1 or line[1].denominator != 1:
        return None
    return int(line[0])


def _degree_holds(node: Any, var: str, degree: int) -> bool:
    """Whether a polynomial grows like ``var^degree`` (its leading terms do not cancel:
    ``(n+1)^2 - n^2`` has degree 1, not 2), checked exactly at ``2^20`` and ``2^21``."""
    try:
        a = exact_value(node, {var: Fraction(2**20)})
        b = exact_value(node, {var: Fraction(2**21)})
    except (NotExact, EvalError, ArithmeticError, ValueError):
        return False
    if a == 0 or b == 0:
        return False
    return abs(math.log2(abs(b / a)) - degree) < 0.05


@lru_cache(maxsize=1024)
def series_converges(body: tuple, var: str) -> bool:
    """Whether ``\\sum_{var=a}^{\\infty} body`` has a shape whose value Richardson extrapolation
    finds reliably, and converges: a product of constants, polynomials in ``var`` (numerator
    degree at least 2 below the denominator's), ``c^{k var + m}`` factors (together a ratio
    below 1, or exactly 1 with an alternating ``(-1)^{var}`` and a degree gap of 1) and
    factorials ``(k var + m)!`` in the denominator. Anything else (``\\sin n / n``, ``1/\\ln n``,
    ``1/n``) is left to math-verify."""
    num: list = []
    den: list = []
    _flat_factors(body, num, den, [1])
    degree = 0
    log_ratio = 0.0
    alternating = False
    factorial = False
    for factors, side in ((num, 1), (den, -1)):
        for f in factors:
            if var not in free_vars(f):
                continue
            if f[0] == "!":
                if side > 0 or _affine_int_coefficient(f[1], var) is None or _affine_int_coefficient(f[1], var) < 0:
                    return False
                factorial = True
                continue
            if f[0] == "^" and var not in free_vars(f[1]):
                k = _affine_int_coefficient(f[2], var)
                if k is None:
                    return False
                try:
                    base = exact_value(f[1])
                except (NotExact, EvalError, ArithmeticError, ValueError):
                    return False
                if base == 0:
                    return False
                if base < 0:
                    if base == -1:
                        alternating = alternating != (k % 2 == 1)
                        continue
                    if k % 2 == 1:
                        alternating = not alternating
                log_ratio += side * k * math.log(abs(base))
                continue
            d = poly_degree(f, var)
            if d is None or not _degree_holds(f, var, d):
                return False
            degree += side * d
    if factorial:
        return True
    if log_ratio < -1e-9:
        return True
    if log_ratio > 1e-9:
        return False
    return degree <= -2 or (alternating and degree <= -1)


def _numeric_series(node: tuple, env: Mapping[str, Any], ctx: Any) -> Any:
    """``\\sum_{k=a}^{\\infty} body`` by Richardson extrapolation (mpmath ``nsum``, strict: no
    value unless it converged), for the shapes :func:`series_converges` accepts.

    Raises:
        EvalError: another shape, a body with other variables, a non-constant lower bound,
            no convergence, or a value too small to trust.
        TooBig: asked for more than :data:`MAX_SERIES_PREC_BITS` bits.
    """
    _, var, lo_node, _, body = node
    if ctx.prec > MAX_SERIES_PREC_BITS:
        raise TooBig("series at more than 256 bits")
    if free_vars(body) - {var} or not series_converges(body, var):
        raise EvalError("series outside the evaluated shapes")
    try:
        lo = exact_value(lo_node)
    except NotExact:
        raise EvalError("series lower bound is not a constant") from None
    if lo.denominator != 1 or abs(lo) > 10**6:
        raise EvalError("series lower bound")
    inner = dict(env)

    def term(k: Any) -> Any:
        inner[var] = ctx.mpf(k)
        return numeric_value(body, inner, ctx)

    maxterms = max(20, min(10 * ctx.dps, MAX_SERIES_TERMS))  # bounded work (see sum_work)
    try:
        value = ctx.nsum(
            term, [int(lo), ctx.inf], method="richardson", strict=True, tol=ctx.eps * 2**16, maxterms=maxterms
        )
    except (ctx.NoConvergence, ZeroDivisionError, ValueError, ArithmeticError):
        raise EvalError("series did not converge numerically") from None
    if not abs(value) > MIN_SERIES_MAGNITUDE:
        raise EvalError("series value too small to trust")
    return value

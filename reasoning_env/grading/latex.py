"""A small, bounded parser for the LaTeX (and plain-text) subset that final answers use.

It reads a normalised answer (see :mod:`reasoning_env.grading.normalize`) into the values of
:mod:`reasoning_env.grading.values`. It never executes anything: tokens are matched by one
compiled regex and turned into tuples by a recursive-descent parser whose nesting depth is
capped (:data:`MAX_DEPTH`), on input capped at :data:`MAX_PARSE_CHARS` characters, so its time
and stack use are bounded. Anything outside the subset raises :class:`ParseError`; the grader
then falls back to math-verify in a worker process.

Supported: integers, decimals (``.5``, ``1e-3``, repeating ``0.\\overline{3}``), thousands
separators (whole-answer), mixed numbers (``1\\frac{4}{5}``, ``1 1/2``, ``-1\\frac12`` = -3/2),
``+ - * / ^``, ``\\cdot``, ``\\times``, ``\\div``, implicit multiplication, ``\\frac``/``\\frac12``, ``\\sqrt``,
``\\sqrt[n]{}``, ``\\binom``, ``!``, ``%``, ``|x|``, floor/ceil, functions (``\\sin``...,
``\\sin^2 x``, ``\\sin^{-1}``, ``\\ln``, ``\\log_b``, ``\\exp``, plain ``sqrt(..)``/``exp(..)``),
``\\pi``/``pi``, ``e``, ``i``, ``\\infty``, single-letter and subscripted variables, Greek
letters, ``\\pm``/``\\mp``, tuples and intervals with any bracket pair, ``\\{..\\}`` sets, bare
comma lists, ``\\cup`` unions, ``a:b`` ratios, ``=``/``<``/``\\le``/``\\ne``/``\\in`` relations
and chains, assignments ``x = 5`` / ``f(x) = ..`` / ``x \\in [a, b]`` and to names (``PQ = 3``,
``|PQ| = 2``, ``\\frac{AM}{MB} = ..``, ``\\angle ABC = ..``, ``(a,b) = (4,1)``), chains that end in
their result (``y = 2+3 = 5``), ``;`` between groups of assignments, ``\\approx`` (kept as the
relation ``~``; :mod:`~reasoning_env.grading.compare` applies its rule), ``\\sum``/``\\prod``
with bounds, ``pmatrix``/``bmatrix`` matrices, base-``b`` numbers ``52_8``, multiple-choice
letters, word answers and spelled-out integers (``twenty-one``).
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from typing import Any

from reasoning_env.grading.text import MEANING_WORDS
from reasoning_env.grading.values import (
    APPROX_SUBJECT,
    MAX_SUM_WORK,
    POINT_EVALUATIONS,
    Assign,
    Choice,
    Matrix,
    Relation,
    Seq,
    Text,
    Union,
    expand_pm,
    free_vars,
    has_pm,
    iter_nodes,
    sum_work,
    value_free_vars,
    value_name,
)

__all__ = [
    "ParseError",
    "NotMath",
    "ChoiceJunk",
    "parse_answer",
    "answer_sum_work",
    "SUMS_TOO_LONG",
    "words_between_numbers",
    "words_after_number",
    "has_connective",
    "has_hedge_word",
    "not_for_math_verify",
    "number_from_words",
    "MAX_PARSE_CHARS",
    "MAX_DEPTH",
]

#: Why an answer whose sums cost more than ``values.MAX_SUM_WORK`` is not parsed.
SUMS_TOO_LONG = "sums too long to evaluate here"
#: Longest normalised answer the parser reads (characters); longer ones are not parsed.
MAX_PARSE_CHARS = 1000
#: Deepest nesting of brackets/operators accepted.
MAX_DEPTH = 48
#: Most tokens in one answer.
MAX_TOKENS = 600


class ParseError(ValueError):
    """The answer is outside the supported subset (or too long / too deep)."""


class NotMath(ParseError):
    """The answer is a word answer, not mathematics."""


class ChoiceJunk(ParseError):
    """A multiple-choice letter followed by something other than one plain value (``(A) or
    (B)``, ``(C)+(D)``, ``(C)^2``): decided wrong unless it matches the gold exactly."""


_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
   |(?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+(?![A-Za-z0-9]))?)
   |(?P<begin>\\begin\s*\{\s*(?P<benv>[A-Za-z]+\*?)\s*\})
   |(?P<end>\\end\s*\{\s*(?P<eenv>[A-Za-z]+\*?)\s*\})
   |(?P<cmd>\\[A-Za-z]+)
   |(?P<esc>\\[{}|\\%_&#])
   |(?P<word>[A-Za-z]+)
   |(?P<op><=|>=|!=|[-+*/^_()\[\]{},=<>!|':;&%])
   |(?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)

_FUNCS = {
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "sec": "sec",
    "csc": "csc",
    "cot": "cot",
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "asin": "asin",
    "acos": "acos",
    "atan": "atan",
    "sinh": "sinh",
    "cosh": "cosh",
    "tanh": "tanh",
    "ln": "ln",
    "log": "log",
    "lg": "lg",
    "exp": "exp",
    "sqrt": "sqrt",
    "abs": "abs",
}
_INVERSE = {"sin": "asin", "cos": "acos", "tan": "atan"}
#: Letters read as a function when followed by a number in parentheses and "=" (``f(3) = 7`` is
#: the value of f at 3; ``a(3) = 6`` stays the product 3a = 6).
_FUNCTION_LETTERS = frozenset("f g h p q F G H P Q".split())
_CONSTS = {"pi": "pi", "infty": "inf", "infinity": "inf", "inf": "inf"}
_GREEK = frozenset(
    "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi "
    "rho varrho sigma tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Sigma "
    "Upsilon Phi Psi Omega".split()
)
# Names recognised inside a plain-text letter run (longest first).
_WORD_NAMES = sorted(list(_FUNCS) + list(_CONSTS), key=len, reverse=True)
_CMD_TOKENS = {
    "cdot": ("op", "*"),
    "times": ("op", "*"),
    "ast": ("op", "*"),
    "div": ("op", "/"),
    "pm": ("pm", "+"),
    "mp": ("pm", "-"),
    "le": ("rel", "<="),
    "leq": ("rel", "<="),
    "leqslant": ("rel", "<="),
    "ge": ("rel", ">="),
    "geq": ("rel", ">="),
    "geqslant": ("rel", ">="),
    "lt": ("rel", "<"),
    "gt": ("rel", ">"),
    "ne": ("rel", "!="),
    "neq": ("rel", "!="),
    "approx": ("rel", "~"),
    "thickapprox": ("rel", "~"),
    "in": ("rel", "in"),
    "cup": ("cup", ""),
    "frac": ("frac", ""),
    "sqrt": ("sqrt", ""),
    "binom": ("binom", ""),
    "lfloor": ("lfloor", ""),
    "rfloor": ("rfloor", ""),
    "lceil": ("lceil", ""),
    "rceil": ("rceil", ""),
    "overline": ("overline", ""),
    "infty": ("const", "inf"),
    "pi": ("const", "pi"),
    "mid": ("op", "|"),
    "colon": ("op", ":"),
    "sum": ("bigop", "sum"),
    "prod": ("bigop", "prod"),
    "angle": ("angle", ""),
}
# Commands that only change how something is typeset.
_IGNORED_CMDS = frozenset(("limits", "nolimits"))
_REL_OPS = {"=": "=", "<": "<", ">": ">", "<=": "<=", ">=": ">=", "!=": "!=", "in": "in"}
_CHOICE_RE = re.compile(r"^\(?\s*([A-E])\s*\)?$")
_CHOICE_VALUE_RE = re.compile(r"^\(\s*([A-E])\s*\)\s*([^\s].*)$", re.DOTALL)
_TEXTY_RE = re.compile(r"^[A-Za-z][A-Za-z .,'\-]*$")
_EOF = ("eof", "")


def _word_tokens(word: str) -> list:
    """Tokens of a plain-text letter run: known names (``sqrt``, ``pi``, ``sin``) and single
    letters. A run of 3+ letters that is not a known name (optionally followed by at most two
    variable letters, ``sinx``) is a word: :class:`NotMath`."""
    out = []
    i = 0
    n = len(word)
    named = False
    while i < n:
        for name in _WORD_NAMES:
            if word.startswith(name, i):
                named = True
                if name in _FUNCS:
                    out.append(("fn", _FUNCS[name]))
                else:
                    out.append(("const", _CONSTS[name]))
                i += len(name)
                break
        else:
            out.append(("id", word[i]))
            i += 1
    singles = sum(1 for t in out if t[0] == "id")
    if n >= 3 and (not named or singles > 2):
        raise NotMath(word)
    return out


_NUMBER_OR_WORD_RE = re.compile(r"\\[A-Za-z]+|[A-Za-z]+|\d")
_CONNECTIVES = frozenset(("and", "or"))
_CONNECTIVE_RE = re.compile(
    r"\\(?:lor|land|vee|wedge|lnot|neg|iff|implies|impliedby|Rightarrow|Leftarrow|Leftrightarrow|"
    r"Longrightarrow|Longleftarrow|Longleftrightarrow|rightarrow|longrightarrow|leftrightarrow|"
    r"equiv|neq|ne|not|therefore|because)(?![A-Za-z])"
    r"|[\u2228\u2227\u00ac\u21d2\u21d4\u27f9\u27fa\u2192\u2194\u2261\u2260]|(?<![A-Za-z])(?:iff|implies)(?![A-Za-z])"
)


def has_connective(s: str) -> bool:
    """Whether a normalised answer holds a logic connective, implication, equivalence or
    inequation (``\\lor``, ``\\wedge``, ``\\iff``, ``\\Rightarrow``, ``\\equiv``, ``\\neq``...):
    such an answer counts only as an exact match (math-verify grades its last equation)."""
    return _CONNECTIVE_RE.search(s) is not None


_SHORT_MEANING_WORDS = frozenset(("is", "no", "be", "am", "if"))


def words_after_number(s: str) -> bool:
    """Whether a normalised answer has, after a number, a word that changes its meaning
    (``3 thousand``, ``3 is wrong``, ``3 not``) or any other word that is not mathematics
    (``and``/``or`` aside, as in :func:`words_between_numbers`). Linear time."""
    seen_number = False
    for m in _NUMBER_OR_WORD_RE.finditer(s):
        t = m.group(0)
        if t.isdigit():
            seen_number = True
        elif seen_number and t[0] != "\\":
            low = t.lower()
            if low in _CONNECTIVES:
                continue
            if (len(low) >= 3 or low in _SHORT_MEANING_WORDS) and (
                low in MEANING_WORDS or (low.endswith("s") and low[:-1] in MEANING_WORDS)
            ):
                return True  # single letters (k, m, n) are variables here: \sum_{k=1}^{3} k
            try:
                _word_tokens(t)
            except NotMath:
                return True
    return False


def words_between_numbers(s: str) -> bool:
    """Whether a normalised answer has a word between two numbers (``5 hours 30``,
    ``6 apples and 5``): several quantities, which no single value equals.

    A word is a run of 3+ letters that is not mathematics (not a command, function or constant
    name: ``2\\sin 3``, ``2xy + 3``, ``1 and 2`` and ``x = 1 or x = 2`` are not flagged).
    Linear time.
    """
    state = 0  # 0: no number yet, 1: after a number, 2: after a number and then a word
    for m in _NUMBER_OR_WORD_RE.finditer(s):
        t = m.group(0)
        if t.isdigit():
            if state == 2:
                return True
            state = 1
        elif state == 1 and t[0] != "\\" and t.lower() not in _CONNECTIVES:
            try:
                _word_tokens(t)
            except NotMath:
                state = 2
    return False


def _names_points(toks: list) -> bool:
    """Whether the next letters name points: after ``\\angle`` or ``\\overline{``."""
    return bool(toks) and (
        toks[-1][0] == "angle" or (toks[-1] == ("op", "{") and len(toks) > 1 and toks[-2][0] == "overline")
    )


_HEDGE_RE = re.compile(
    r"(?<![A-Za-z\\])(?:not|no|none|nor|neither|either|maybe|perhaps|possibly|probably|unless|except|"
    r"approximately|roughly|about|around|nearly|almost|circa|ish|isnt|wrong|incorrect|unsure|guess)(?![A-Za-z])",
    re.IGNORECASE,
)


def has_hedge_word(s: str) -> bool:
    """Whether a normalised answer holds a hedge or negation word outside any command (``not
    12``, ``either 12, 13``, ``maybe 48``): such an answer counts only as an exact match
    (math-verify may read the number alone)."""
    return _HEDGE_RE.search(s) is not None


_NOT_FOR_MATH_VERIFY = (
    (
        re.compile(r"(?<![A-Za-z\\])(?:is|are|was|were|equals|be)(?![A-Za-z])", re.IGNORECASE),
        "a sentence (is/are/was/equals): math-verify would read one of its numbers",
    ),
    (re.compile(r"\\approx(?![A-Za-z])"), "an approximation the \\approx rule could not grade"),
    (
        re.compile(r"(?:[-+*/^=<>,]|\\(?:cdot|times|div|pm|mp|le|leq|ge|geq|approx))\s*$"),
        "ends in an operator or relation (5+ is not 5)",
    ),
    (re.compile(r"\?"), "a question mark (a doubt, not an answer)"),
)


def not_for_math_verify(s: str) -> str | None:
    """Why a normalised answer the fast path could not decide must not go to math-verify, or
    ``None``. A sentence (``The result is 12 = 13``), an approximation the ``\\approx`` rule of
    :mod:`~reasoning_env.grading.compare` could not grade, an answer ending in an operator
    (``5+``: "5 or more") and one with a question mark (``3 \\text{?}``) are graded by a rule
    math-verify does not have: it reads one number or equation of them (and accepts them)."""
    for pattern, why in _NOT_FOR_MATH_VERIFY:
        if pattern.search(s) is not None:
            return why
    return None


def tokenize(s: str) -> list:
    """Tokens of a normalised answer as ``(kind, value)`` pairs.

    Raises:
        ParseError: unknown commands or characters, too many tokens.
    """
    toks: list = []
    pos = 0
    n = len(s)
    match = _TOKEN_RE.match
    while pos < n:
        m = match(s, pos)
        if m is None:  # pragma: no cover - the "other" branch matches any character
            raise ParseError(f"cannot tokenize at {pos}")
        kind = m.lastgroup  # the outer group for \begin/\end (lastgroup names the outermost)
        text = m.group(0)
        pos = m.end()
        if kind == "ws":
            continue
        if kind == "num":
            toks.append(("num", text))
        elif kind == "begin":
            toks.append(("begin", m.group("benv")))
        elif kind == "end":
            toks.append(("end", m.group("eenv")))
        elif kind == "cmd":
            name = text[1:]
            if name in _IGNORED_CMDS:
                continue
            if name in _CMD_TOKENS:
                toks.append(_CMD_TOKENS[name])
            elif name in _FUNCS:
                toks.append(("fn", _FUNCS[name]))
            elif name in _GREEK:
                toks.append(("id", name))
            elif name in ("varnothing", "emptyset"):
                toks.append(("empty", ""))
            else:
                raise ParseError(f"unsupported command \\{name}")
        elif kind == "esc":
            c = text[1]
            if c == "{":
                toks.append(("lset", ""))
            elif c == "}":
                toks.append(("rset", ""))
            elif c == "\\":
                toks.append(("rowsep", ""))
            elif c == "%":
                toks.append(("op", "%"))
            elif c == "|":
                toks.append(("op", "|"))
            else:
                raise ParseError(f"unsupported escape {text}")
        elif kind == "word":
            if text.isupper() and len(text) <= 4 and _names_points(toks):
                toks.extend(("id", c) for c in text)  # \angle ABC, \overline{ABC}: points
            else:
                toks.extend(_word_tokens(text))
        elif kind == "op":
            if text in _REL_OPS:
                toks.append(("rel", _REL_OPS[text]))
            elif text == "&":
                toks.append(("colsep", ""))
            else:
                toks.append(("op", text))
        else:
            raise ParseError(f"unsupported character {text!r}")
        if len(toks) > MAX_TOKENS:
            raise ParseError("answer too long")
    return toks


def _mul(factors: list) -> Any:
    return factors[0] if len(factors) == 1 else ("*", tuple(factors))


def _is_node(x: Any) -> bool:
    return isinstance(x, tuple)


#: Largest decimal exponent (after moving the mantissa's point) of a number literal that is
#: built as an exact rational: 10^30000 has ~99,700 bits, within ``MAX_EXACT_BITS``. A literal
#: beyond it (``1e999999999``) becomes the power node ``m * 10^k``, which exact evaluation
#: refuses and numeric evaluation bounds (never ``10**999999999`` built from model text).
MAX_LITERAL_EXP10 = 30_000


def _num_node(text: str) -> tuple:
    """A number literal node; scientific notation is bounded (see :data:`MAX_LITERAL_EXP10`)."""
    mant, sep, exp_text = text.replace("E", "e").partition("e")
    int_part, dot, frac_part = mant.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    if not (int_part or frac_part) or (sep and not exp_text.lstrip("+-")):
        raise ParseError(f"bad number {text!r}")
    exp = int(exp_text) if sep else 0  # at most MAX_PARSE_CHARS digits: a cheap conversion
    places = None
    if dot:
        places = max(0, len(frac_part) - exp)
    elif sep:
        places = max(0, -exp)
    if not digits:
        return ("n", Fraction(0), None if places is None else min(places, MAX_LITERAL_EXP10))
    k = exp - len(frac_part)  # value = int(digits) * 10^k
    if abs(k) + len(digits) <= MAX_LITERAL_EXP10:
        value = Fraction(int(digits)) * 10**k if k >= 0 else Fraction(int(digits), 10**-k)
        return ("n", value, places)
    power = ("^", ("n", Fraction(10), None), ("n", Fraction(k), None))
    m = ("n", Fraction(int(digits)), None)
    return power if digits == "1" else ("*", (m, power))


def _mixed_whole(prev: Any) -> tuple | None:
    """The integer literal of a possible mixed number's whole part (``1`` or ``-1``), or None."""
    if _is_node(prev) and prev[0] == "-":
        prev = prev[1]
    if _is_node(prev) and prev[0] == "n" and prev[2] is None:
        return prev
    return None


class _Parser:
    def __init__(self, toks: list) -> None:
        self.t = toks
        self.i = 0
        self.depth = 0
        self.abs_open = 0
        self.sum_work = 0  # evaluation cost of the sums parsed so far (values.sum_work)
        self.big_op_depth = 0  # sums being parsed around the current position

    # -- token access
    def peek(self, k: int = 0) -> tuple:
        j = self.i + k
        return self.t[j] if j < len(self.t) else _EOF

    def next(self) -> tuple:
        tok = self.peek()
        self.i += 1
        return tok

    def at(self, kind: str, value: str | None = None, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok[0] == kind and (value is None or tok[1] == value)

    def expect(self, kind: str, value: str | None = None) -> tuple:
        if not self.at(kind, value):
            raise ParseError(f"expected {value or kind}, got {self.peek()[1] or self.peek()[0]}")
        return self.next()

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ParseError("nesting too deep")

    # -- grammar
    def parse_items(self, closers: tuple) -> list:
        items = [self.parse_relation()]
        while self.at("op", ",") or self.at("op", ";"):
            self.next()
            if self.peek()[0] == "eof" or (self.peek()[0], self.peek()[1]) in closers:
                break  # trailing comma
            items.append(self.parse_relation())
        return items

    def parse_groups(self) -> list:
        """Top level: items separated by ``,``, and groups of them separated by ``;``
        (``m=2, n=3; m=5, n=3``). Returns one list of items per group."""
        groups = [[self.parse_relation()]]
        while self.at("op", ",") or self.at("op", ";"):
            sep = self.next()[1]
            if self.peek()[0] == "eof":
                break  # trailing separator
            if sep == ";":
                groups.append([])
            groups[-1].append(self.parse_relation())
        return groups

    def _function_head(self) -> str | None:
        # id '(' id (',' id)* ')' '=', or a function's value: f '(' ['-'] num ')' '=' (f(3) = 7)
        if not (self.at("id") and self.at("op", "(", 1)):
            return None
        if self.peek()[1] in _FUNCTION_LETTERS:
            j = 3 if self.at("op", "-", 2) else 2
            if self.at("num", None, j) and self.at("op", ")", j + 1) and self.at("rel", "=", j + 2):
                head = f"{self.peek()[1]}({'-' if j == 3 else ''}{self.peek(j)[1]})"
                self.i += j + 2  # up to and including ')'
                return head
        j = 2
        names = []
        while True:
            tok = self.peek(j)
            if tok[0] != "id":
                return None
            names.append(tok[1])
            j += 1
            if self.at("op", ",", j):
                j += 1
                continue
            if self.at("op", ")", j) and self.at("rel", "=", j + 1):
                break
            return None
        head = f"{self.peek()[1]}({','.join(names)})"
        self.i += j + 1  # up to and including ')'
        return head

    def parse_relation(self) -> Any:
        head = self._function_head()
        if head is not None:
            self.expect("rel", "=")
            sides = [("v", head), self.parse_union()]
            ops = ["="]
            while self.at("rel", "=") or self.at("rel", "~"):
                ops.append(self.next()[1])
                sides.append(self.parse_union())
            name, _, arg = head[:-1].partition("(")
            if arg[:1] in "-0123456789." and any(_is_node(x) and free_vars(x) for x in sides[1:]):
                # f(3) = 2x is no value of f: read it as written (3f = 2x), an equation
                number = _num_node(arg.lstrip("-"))
                sides[0] = ("*", (("v", name), ("-", number) if arg[0] == "-" else number))
                return Relation(tuple(ops), tuple(sides))
            if ops == ["="]:
                return Assign(head, sides[1])
            return Relation(tuple(ops), tuple(sides))
        if self.at("rel", "~"):  # "\approx 0.29": an approximation alone
            self.next()
            return Relation(("~",), (APPROX_SUBJECT, self.parse_union()))
        first = self.parse_union()
        if self.at("op", ":"):
            items = [first]
            while self.at("op", ":"):
                self.next()
                items.append(self.parse_union())
            return Seq("ratio", tuple(items))
        if not self.at("rel"):
            return first
        ops = []
        sides = [first]
        while self.at("rel"):
            ops.append(self.next()[1])
            sides.append(self.parse_union())
        if "in" in ops:
            if len(ops) == 1 and _is_node(first) and first[0] == "v":
                return Assign(first[1], sides[1])
            raise ParseError("membership")
        return Relation(tuple(ops), tuple(sides))

    def parse_union(self) -> Any:
        first = self.parse_sum()
        if not self.at("cup"):
            return first
        parts = [first]
        while self.at("cup"):
            self.next()
            parts.append(self.parse_sum())
        return Union(tuple(parts))

    def parse_sum(self) -> Any:
        first = self.parse_term()
        if not (self.at("op", "+") or self.at("op", "-") or self.at("pm")):
            return first
        terms = [(1, first)]
        while True:
            if self.at("op", "+"):
                self.next()
                terms.append((1, self.parse_term()))
            elif self.at("op", "-"):
                self.next()
                terms.append((-1, self.parse_term()))
            elif self.at("pm"):
                sign = self.next()[1]
                t = self.parse_term()
                terms.append((1, ("pm", t if sign == "+" else ("-", t))))
            else:
                break
        if not all(_is_node(t) for _, t in terms):
            raise ParseError("arithmetic on a non-scalar")
        return ("+", tuple(terms))

    def _starts_atom(self, tok: tuple) -> bool:
        kind = tok[0]
        if kind in (
            "num",
            "id",
            "const",
            "fn",
            "sqrt",
            "frac",
            "binom",
            "lfloor",
            "lceil",
            "lset",
            "begin",
            "bigop",
            "angle",
            "overline",
        ):
            return True
        if kind == "op":
            v = tok[1]
            if v == "(" or v == "{":
                return True
            if v == "|":
                return self.abs_open == 0
        return False

    def parse_term(self) -> Any:
        first = self.parse_unary()
        factors = [first]
        while True:
            tok = self.peek()
            if tok[0] == "op" and tok[1] == "*":
                self.next()
                factors.append(self.parse_unary())
            elif tok[0] == "op" and tok[1] == "/":
                self.next()
                den = self.parse_unary()
                if not (_is_node(den) and all(_is_node(f) for f in factors)):
                    raise ParseError("division of a non-scalar")
                factors = [("/", _mul(factors), den)]
            elif self._starts_atom(tok):
                prev = factors[-1]
                whole = _mixed_whole(prev) if len(factors) == 1 else None
                if tok[0] == "num" and whole is not None and self._slash_fraction_follows():
                    # mixed number "1 1/2" (a proper fraction after a space; "11/2" is one token)
                    num = _num_node(self.next()[1])
                    self.next()
                    den = _num_node(self.next()[1])
                    factors = [self._mixed(prev, ("/", num, den))]
                    continue
                if tok[0] == "num" and _is_node(prev) and prev[0] == "n":
                    raise ParseError("two numbers in a row")
                if tok[0] == "frac" and whole is not None:
                    frac = self.parse_power()
                    pct = frac[0] == "%"
                    inner = frac[1] if pct else frac
                    if (
                        inner[0] == "/"
                        and inner[1][0] == "n"
                        and inner[2][0] == "n"
                        and inner[1][2] is None
                        and inner[2][2] is None
                    ):
                        factors = [self._mixed(prev, inner, pct)]  # mixed number 1\frac{4}{5}
                        continue
                    factors.append(frac)
                    continue
                factors.append(self.parse_power())
            else:
                break
        if len(factors) > 1 and not all(_is_node(f) for f in factors):
            raise ParseError("product of a non-scalar")
        return _mul(factors)

    def _slash_fraction_follows(self) -> bool:
        """Tokens ``a / b`` (integers, ``0 < a < b``) next, not continued by ``^ ! _`` or a
        digit: the fraction part of a mixed number ``1 1/2``."""
        a, slash, b, after = self.peek(), self.peek(1), self.peek(2), self.peek(3)
        if not (a[0] == "num" and slash == ("op", "/") and b[0] == "num"):
            return False
        if not (a[1].isdigit() and b[1].isdigit() and len(b[1]) <= 18):
            return False
        if after[0] == "op" and after[1] in ("^", "!", "_"):
            return False
        return 0 < int(a[1]) < int(b[1])

    def _mixed(self, prev: tuple, frac: tuple, pct: bool = False) -> tuple:
        """The mixed number ``prev`` + ``frac`` (``-1\\frac12`` is -(1 + 1/2)); a ``%`` after
        the fraction applies to the whole number (``33\\frac13\\%``)."""
        negative = prev[0] == "-"
        whole = prev[1] if negative else prev
        node: tuple = ("+", ((1, whole), (1, frac)))
        if negative:
            node = ("-", node)
        if pct or self.at("op", "%"):
            if not pct:
                self.next()
            node = ("%", node)
        return node

    def parse_unary(self) -> Any:
        self.enter()
        try:
            if self.at("op", "-"):
                self.next()
                x = self.parse_unary()
                if not _is_node(x):
                    raise ParseError("negated non-scalar")
                return ("-", x)
            if self.at("op", "+"):
                self.next()
                return self.parse_unary()
            if self.at("pm"):
                sign = self.next()[1]
                x = self.parse_unary()
                if not _is_node(x):
                    raise ParseError("\\pm of a non-scalar")
                return ("pm", x if sign == "+" else ("-", x))
            return self.parse_power()
        finally:
            self.depth -= 1

    def parse_power(self) -> Any:
        base = self.parse_postfix()
        if self.at("op", "^"):
            self.next()
            exp = self.parse_exponent()
            if not _is_node(base):
                raise ParseError("power of a non-scalar")
            base = ("^", base, exp)
            while self.at("op", "!"):
                self.next()
                base = ("!", base)
        return base

    def parse_exponent(self) -> Any:
        self.enter()
        try:
            tok = self.peek()
            if tok[0] == "op" and tok[1] in "-+":
                self.next()
                e = self.parse_exponent()
                return ("-", e) if tok[1] == "-" else e
            if tok[0] == "num":
                self.next()
                e = _num_node(tok[1])
            elif tok[0] in ("id", "const"):
                e = self.parse_atom()
            elif tok[0] == "op" and tok[1] in "({":
                e = self.parse_atom()
            elif tok[0] in ("frac", "sqrt", "binom", "fn"):
                e = self.parse_atom()
            else:
                raise ParseError("bad exponent")
            if not _is_node(e):
                raise ParseError("non-scalar exponent")
            if self.at("op", "^"):
                self.next()
                e = ("^", e, self.parse_exponent())
            return e
        finally:
            self.depth -= 1

    def parse_postfix(self) -> Any:
        a = self.parse_atom()
        while True:
            if self.at("op", "!"):
                self.next()
                if not _is_node(a):
                    raise ParseError("factorial of a non-scalar")
                a = ("!", a)
            elif self.at("op", "%"):
                self.next()
                if not _is_node(a):
                    raise ParseError("percent of a non-scalar")
                a = ("%", a)
            elif self.at("op", "'"):
                raise ParseError("prime")
            else:
                return a

    def parse_arg(self) -> Any:
        """Argument of ``\\frac``/``\\sqrt``/``\\binom``: a braced group or one token
        (``\\frac12`` reads digits one at a time, as TeX does)."""
        tok = self.peek()
        if tok[0] == "op" and tok[1] == "{":
            self.next()
            self.enter()
            try:
                inner = self.parse_sum()
            finally:
                self.depth -= 1
            self.expect("op", "}")
            return inner
        if tok[0] == "num":
            text = tok[1]
            if len(text) > 1:
                self.t[self.i] = ("num", text[1:])
                return _num_node(text[0])
            self.next()
            return _num_node(text)
        if tok[0] in ("id", "const", "frac", "sqrt", "fn", "binom"):
            return self.parse_atom()
        if tok[0] == "op" and tok[1] == "(":
            return self.parse_atom()
        raise ParseError("bad argument")

    def parse_group(self, closer: tuple) -> Any:
        self.enter()
        try:
            x = self.parse_sum()
        finally:
            self.depth -= 1
        self.expect(*closer)
        if not _is_node(x):
            raise ParseError("non-scalar in a group")
        return x

    def parse_function(self, name: str) -> Any:
        power = None
        base = None
        if self.at("op", "^"):
            self.next()
            e = self.parse_exponent()
            if e in (("-", ("n", Fraction(1), None)), ("n", Fraction(-1), None)) and name in _INVERSE:
                name = _INVERSE[name]
            else:
                power = e
        if self.at("op", "_"):
            if name != "log":
                raise ParseError("subscript on a function")
            self.next()
            base = self.parse_arg()
        if self.at("op", "(") or self.at("op", "{"):
            arg = self.parse_atom()
            if not _is_node(arg):
                raise ParseError("function of a non-scalar")
        else:
            # \sin 2x: the argument is the implicit product that follows (stops at the next
            # function, operator or relation).
            factors = [self.parse_power()]
            while self._starts_atom(self.peek()) and self.peek()[0] != "fn":
                factors.append(self.parse_power())
            if not all(_is_node(f) for f in factors):
                raise ParseError("function of a non-scalar")
            arg = _mul(factors)
        if name == "log":
            node = ("log", base, arg)
        elif name == "lg":
            node = ("log", ("n", Fraction(10), None), arg)
        else:
            node = ("f", name, arg)
        if power is not None:
            node = ("^", node, power)
        return node

    def parse_bracket(self, open_: str) -> Any:
        self.enter()
        try:
            items = self.parse_items((("op", ")"), ("op", "]")))
        finally:
            self.depth -= 1
        tok = self.next()
        if tok[0] != "op" or tok[1] not in ")]":
            raise ParseError("unclosed bracket")
        close = tok[1]
        if len(items) == 1:
            if (open_, close) in (("(", ")"), ("[", "]")):
                return items[0]
            raise ParseError("mismatched brackets around one item")
        return Seq("tuple", tuple(items), open_, close)

    def parse_matrix(self, env: str) -> Matrix:
        if env not in ("pmatrix", "bmatrix", "matrix", "Bmatrix", "smallmatrix"):
            raise ParseError(f"unsupported environment {env}")
        rows = []
        row = []
        while True:
            if self.at("end"):
                tok = self.next()
                if tok[1] != env:
                    raise ParseError("mismatched environment")
                break
            if self.at("eof"):
                raise ParseError("unclosed environment")
            self.enter()
            try:
                cell = self.parse_sum()
            finally:
                self.depth -= 1
            if not _is_node(cell):
                raise ParseError("non-scalar matrix entry")
            row.append(cell)
            if self.at("colsep"):
                self.next()
            elif self.at("rowsep"):
                self.next()
                rows.append(tuple(row))
                row = []
        if row:
            rows.append(tuple(row))
        if not rows or len({len(r) for r in rows}) != 1:
            raise ParseError("ragged matrix")
        return Matrix(tuple(rows))

    def parse_atom(self) -> Any:
        tok = self.next()
        kind, val = tok[0], tok[1]
        if kind == "num":
            node = _num_node(val)
            if self.at("overline") and "." in val and "e" not in val.lower():
                self.next()
                self.expect("op", "{")
                digits = self.expect("num")[1]
                self.expect("op", "}")
                if not digits.isdigit():
                    raise ParseError("bad repeating decimal")
                head = val if not val.endswith(".") else val[:-1]
                places = len(val.split(".", 1)[1])
                base = Fraction(head) if head not in ("", ".") else Fraction(0)
                rep = Fraction(int(digits), (10 ** len(digits) - 1) * 10**places)
                return ("n", base + rep, None)
            if self.at("op", "_") and val.isdigit():
                self.next()
                if self.at("op", "{"):
                    self.next()
                    b = self.expect("num")[1]
                    self.expect("op", "}")
                else:
                    b = self.expect("num")[1]
                if not b.isdigit() or not 2 <= int(b) <= 36:
                    raise ParseError("bad base")
                try:
                    int(val, int(b))
                except ValueError:
                    raise ParseError("digit out of range for the base") from None
                return ("base", val, int(b))
            return node
        if kind == "id":
            name = val
            if self.at("op", "_"):
                self.next()
                if self.at("op", "{"):
                    self.next()
                    parts = []
                    while not self.at("op", "}"):
                        t = self.next()
                        if t[0] not in ("num", "id") or len(parts) > 4:
                            raise ParseError("bad subscript")
                        parts.append(t[1])
                    self.next()
                    sub = "".join(parts)
                else:
                    t = self.next()
                    if t[0] not in ("num", "id"):
                        raise ParseError("bad subscript")
                    sub = t[1]
                return ("v", f"{name}_{sub}")
            if name == "e":
                return ("c", "e")
            if name == "i":
                return ("c", "i")
            return ("v", name)
        if kind == "const":
            return ("c", val)
        if kind == "fn":
            return self.parse_function(val)
        if kind == "frac":
            a = self.parse_arg()
            b = self.parse_arg()
            return ("/", a, b)
        if kind == "sqrt":
            if self.at("op", "["):
                self.next()
                n = self.parse_group(("op", "]"))
                return ("root", n, self.parse_arg())
            return ("f", "sqrt", self.parse_arg())
        if kind == "binom":
            a = self.parse_arg()
            b = self.parse_arg()
            return ("binom", a, b)
        if kind == "op" and val in "([":
            return self.parse_bracket(val)
        if kind == "op" and val == "{":
            self.enter()
            try:
                items = self.parse_items((("op", "}"),))
            finally:
                self.depth -= 1
            self.expect("op", "}")
            return items[0] if len(items) == 1 else Seq("list", tuple(items))
        if kind == "lset":
            if self.at("rset"):
                self.next()
                return Seq("set", ())
            self.enter()
            try:
                items = self.parse_items((("rset", ""),))
            finally:
                self.depth -= 1
            self.expect("rset")
            return Seq("set", tuple(_expand_items(items)))
        if kind == "empty":
            return Seq("set", ())
        if kind == "op" and val == "|":
            self.abs_open += 1
            try:
                inner = self.parse_group(("op", "|"))
            finally:
                self.abs_open -= 1
            return ("f", "abs", inner)
        if kind == "lfloor":
            return ("f", "floor", self.parse_group(("rfloor", "")))
        if kind == "lceil":
            return ("f", "ceil", self.parse_group(("rceil", "")))
        if kind == "begin":
            return self.parse_matrix(val)
        if kind == "bigop":
            return self.parse_big_op(val)
        if kind == "angle":  # \angle ABC: the name of an angle
            return ("v", "angle " + self._letters())
        if kind == "overline":  # \overline{AB}: the name of a segment
            self.expect("op", "{")
            name = self._letters()
            self.expect("op", "}")
            return ("v", name)
        raise ParseError(f"unexpected {val or kind}")

    def _letters(self) -> str:
        """One to four single capital letters (the name of a point, segment or angle)."""
        letters = []
        while self.at("id") and len(self.peek()[1]) == 1 and self.peek()[1].isupper() and len(letters) < 4:
            letters.append(self.next()[1])
        if not letters:
            raise ParseError("expected the name of a point")
        return "".join(letters)

    def parse_big_op(self, kind: str) -> tuple:
        """``\\sum_{k=a}^{b} body`` / ``\\prod``: the body is the product that follows (it stops
        at ``+``, ``-`` and relations, as in ``\\sum_k a_k + c``). Only ``index = lower`` under the
        operator is read (``\\sum_{k \\ge 1}`` is outside the subset). An answer whose sums would
        cost more than :data:`~reasoning_env.grading.values.MAX_SUM_WORK` to evaluate is refused."""
        var = lo = hi = None
        for _ in range(2):
            if self.at("op", "_") and var is None:
                self.next()
                braced = self.at("op", "{")
                if braced:
                    self.next()
                tok = self.next()
                if tok[0] != "id":
                    raise ParseError("sum index")
                var = tok[1]
                self.expect("rel", "=")
                lo = self.parse_sum() if braced else self.parse_unary()
                if braced:
                    self.expect("op", "}")
            elif self.at("op", "^") and hi is None:
                self.next()
                hi = self.parse_exponent()
        if var is None or hi is None:
            raise ParseError("sum without both bounds")
        self.enter()
        self.big_op_depth += 1
        try:
            body = self.parse_term()
        finally:
            self.depth -= 1
            self.big_op_depth -= 1
        if not (_is_node(lo) and _is_node(hi) and _is_node(body)):
            raise ParseError("sum of a non-scalar")
        if var in ("i", "e"):  # the index named i or e is a variable in the body, not a constant
            body = _const_to_var(body, var)
        node = (kind, var, lo, hi, body)
        if self.big_op_depth == 0:  # a nested sum is part of the enclosing one's work
            self.sum_work += sum_work(node)
            if self.sum_work > MAX_SUM_WORK:
                raise ParseError(SUMS_TOO_LONG)
        return node


def _const_to_var(node: Any, name: str) -> Any:
    """A copy of ``node`` where the constant ``name`` (``i`` or ``e``) is the variable ``name``."""
    if not _is_node(node) or not node:
        return node
    k = node[0]
    if k == "c":
        return ("v", name) if node[1] == name else node
    if k in ("n", "v", "base"):
        return node
    if k == "+":
        return ("+", tuple((sg, _const_to_var(t, name)) for sg, t in node[1]))
    if k == "*":
        return ("*", tuple(_const_to_var(t, name) for t in node[1]))
    return (k,) + tuple(_const_to_var(c, name) if _is_node(c) else c for c in node[1:])


def _expand_items(items: list) -> list:
    """Expand ``\\pm`` inside list/set items into both readings."""
    out = []
    for it in items:
        if _is_node(it) and has_pm(it):
            out.extend(expand_pm(it))
        else:
            out.append(it)
    return out


def _finish_value(v: Any) -> Any:
    """Post-process one top-level value: ``\\pm`` expansion, assignments.

    ``lhs = rhs`` is the assignment of ``rhs`` to a name (:func:`~.values.value_name`: a
    variable, ``PQ``, ``|PQ|``, ``\\frac{AM}{MB}``, ``\\angle ABC``) or to a tuple of distinct
    variables (``(a,b) = (4,1)``) when ``rhs`` does not use the name's letters; a chain of
    equalities that opens with a name is the assignment of its last side (``y = 2+3 = 6 = 9``
    assigns 9, as a worked line ends in its result)."""
    if _is_node(v):
        if has_pm(v):
            return Seq("set", expand_pm(v))
        return v
    if isinstance(v, Relation) and v.ops and all(op == "=" for op in v.ops):
        lhs, rhs = v.sides[0], v.sides[-1]
        if len(v.sides) == 2 and _is_node(rhs) and rhs[0] == "v" and _is_node(lhs) and not free_vars(lhs):
            return Assign(rhs[1], _finish_value(lhs))  # "5 = x"
        name = _assigned_name(lhs, rhs)
        if name is not None and isinstance(lhs, Seq):
            # (a,b) = (4,1): the named values a = 4, b = 1, in this order
            return Seq("list", tuple(Assign(x[1], _finish_value(y)) for x, y in zip(lhs.items, rhs.items)))
        if name is not None:
            return Assign(name, _finish_value(rhs))
        return v
    if isinstance(v, Assign):
        return Assign(v.lhs, _finish_value(v.value))
    pm = _pm_tuple(v)
    return pm if pm is not None else v


def _assigned_name(lhs: Any, rhs: Any) -> str | None:
    """The name ``lhs`` gives to ``rhs`` in ``lhs = rhs``, or ``None``."""
    rhs_vars = free_vars(rhs) if _is_node(rhs) else _seq_vars(rhs)
    if _is_node(lhs):
        name = value_name(lhs)
        if name is not None and not (free_vars(lhs) & rhs_vars):
            return name
        return None
    if (
        isinstance(lhs, Seq)
        and lhs.kind == "tuple"
        and (lhs.open, lhs.close) == ("(", ")")
        and all(_is_node(x) and x[0] == "v" for x in lhs.items)
        and len({x[1] for x in lhs.items}) == len(lhs.items)
        and isinstance(rhs, Seq)
        and rhs.kind == "tuple"
        and (rhs.open, rhs.close) == ("(", ")")
        and len(rhs.items) == len(lhs.items)
        and not ({x[1] for x in lhs.items} & rhs_vars)
    ):
        return "(" + ",".join(x[1] for x in lhs.items) + ")"
    return None


def _seq_vars(v: Any) -> frozenset:
    """Free variables of the scalar items of a structured value (empty for other kinds)."""
    if isinstance(v, Seq):
        out: frozenset = frozenset()
        for x in v.items:
            out |= free_vars(x) if _is_node(x) else _seq_vars(x)
        return out
    return frozenset()


def _finish_items(items: list) -> Any:
    if len(items) == 1:
        return _finish_value(items[0])
    vals = [_finish_value(it) for it in items]
    # "n = 1, 2, 3": an assignment followed by bare values assigns the whole list.
    if isinstance(vals[0], Assign) and all(_is_node(v) or isinstance(v, Seq) for v in vals[1:]):
        first = vals[0]
        rest = []
        for v in vals[1:]:
            rest.extend(v.items if isinstance(v, Seq) and v.kind == "set" and len(v.items) == 2 else (v,))
        head = first.value.items if isinstance(first.value, Seq) and first.value.kind == "set" else (first.value,)
        return Assign(first.lhs, Seq("list", tuple(head) + tuple(rest)))
    # "x = 1, x = 2" (or "x = 1 or x = 2"): one variable with several values.
    if all(isinstance(v, Assign) for v in vals) and len({v.lhs for v in vals}) == 1:
        flat = []
        for v in vals:
            flat.extend(v.value.items if isinstance(v.value, Seq) and v.value.kind == "set" else (v.value,))
        return Assign(vals[0].lhs, Seq("list", tuple(flat)))
    # \pm inside a list item ("1 \pm \sqrt 2, 3", "(1, \pm 2), (3, 4)") contributes both readings.
    expanded = []
    for it, v in zip(items, vals):
        if _is_node(it) and has_pm(it):
            expanded.extend(expand_pm(it))
        elif isinstance(v, Seq) and v.kind == "list" and _pm_tuple(it) is not None:
            expanded.extend(v.items)
        else:
            expanded.append(v)
    return Seq("list", tuple(expanded))


def _pm_tuple(v: Any) -> Seq | None:
    """Both readings of a point with one ``\\pm`` (``(1, \\pm 2)`` is ``(1, 2), (1, -2)``) as a list;
    ``None`` for anything else (two ``\\pm`` in one point are ambiguous: the same sign, or all
    four combinations?)."""
    if not (isinstance(v, Seq) and v.kind == "tuple" and (v.open, v.close) == ("(", ")")):
        return None
    with_pm = [i for i, x in enumerate(v.items) if _is_node(x) and has_pm(x)]
    if len(with_pm) != 1 or sum(1 for x in iter_nodes(v.items[with_pm[0]]) if x[0] == "pm") != 1:
        return None
    i = with_pm[0]
    return Seq(
        "list", tuple(Seq("tuple", v.items[:i] + (r,) + v.items[i + 1 :], "(", ")") for r in expand_pm(v.items[i]))
    )


_CHOICE_VALUE_START_RE = re.compile(r"^(?:-\s*)?(?:\d|\.\d|\\(?:frac|sqrt|pi)(?![A-Za-z]))")


def _choice_value(rest: str) -> Any:
    """The value written after a choice letter: one plain value without variables
    (``10``, ``-\\frac{1}{2}``, ``2\\sqrt3``).

    Raises:
        ChoiceJunk: anything else (another letter, an operator, a list, words).
    """
    if _CHOICE_VALUE_START_RE.match(rest) is None:
        raise ChoiceJunk(rest[:40])
    try:
        value = parse_answer(rest)
    except ParseError:
        raise ChoiceJunk(rest[:40]) from None
    if not _is_node(value) or free_vars(value):
        raise ChoiceJunk(rest[:40])
    return value


_NUMBER_UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen"
).split()
_NUMBER_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_NUMBER_SCALES = ((10**9, "billion"), (10**6, "million"), (1000, "thousand"))
_NUMBER_WORD_VALUES = {w: i for i, w in enumerate(_NUMBER_UNITS)} | {
    w: 20 + 10 * i for i, w in enumerate(_NUMBER_TENS)
}


def _spell_number(n: int) -> str:
    """English words of ``0 <= n < 10**12`` (``21`` -> ``"twenty one"``; hyphens as spaces)."""
    if n < 20:
        return _NUMBER_UNITS[n]
    if n < 100:
        return _NUMBER_TENS[n // 10 - 2] + ("" if n % 10 == 0 else " " + _NUMBER_UNITS[n % 10])
    if n < 1000:
        return _NUMBER_UNITS[n // 100] + " hundred" + ("" if n % 100 == 0 else " " + _spell_number(n % 100))
    for scale, word in _NUMBER_SCALES:
        if n >= scale:
            rest = n % scale
            return _spell_number(n // scale) + " " + word + ("" if rest == 0 else " " + _spell_number(rest))
    raise ValueError(n)  # pragma: no cover - n < 1000 handled above


def number_from_words(text: str) -> int | None:
    """The integer a whole answer spells out in English (``"five"``, ``"twenty-one"``, ``"one
    hundred and five"``, ``"three thousand"``), or ``None``. Only the canonical spelling counts
    (``"hundred"`` alone or ``"five twenty"`` is not a number)."""
    words = [w for w in text.lower().replace("-", " ").split() if w != "and"]
    if not words or len(words) > 12:
        return None
    total = current = 0
    for w in words:
        if w in _NUMBER_WORD_VALUES:
            current += _NUMBER_WORD_VALUES[w]
        elif w == "hundred":
            current *= 100
        else:
            scale = next((sc for sc, name in _NUMBER_SCALES if name == w), None)
            if scale is None:
                return None
            total += current * scale
            current = 0
    n = total + current
    return n if n < 10**12 and _spell_number(n) == " ".join(words) else None


def _word_answer(s: str) -> Any:
    """A word answer: the number it spells (``five`` is 5), else :class:`Text`; ``None`` when
    nothing is left after canonicalising."""
    text = _canon_text(s)
    if not text:
        return None
    n = number_from_words(text)
    return ("n", Fraction(n), None) if n is not None else Text(text)


def _canon_text(s: str) -> str:
    s = s.lower()
    s = re.sub(r"[^a-z0-9 ]+", " ", s)
    words = [w for w in s.split() if w not in ("the", "a", "an")]
    return " ".join(words)


def parse_answer(s: str, as_text: bool = False) -> Any:
    """Parse a normalised answer into an answer value (see :mod:`reasoning_env.grading.values`).

    Cached (the cache holds immutable values only).

    Args:
        s: A normalised answer (output of :func:`~reasoning_env.grading.normalize.normalize_answer`).
        as_text: The raw answer was one ``\\text{...}`` of words (see
            :func:`~reasoning_env.grading.normalize.is_wrapped_text`): read it as words even when
            short (``\\text{No}`` is not ``N \\cdot o``).
    Returns:
        An expression node or a structured value (:class:`Seq`, :class:`Relation`,
        :class:`Assign`, :class:`Union`, :class:`Matrix`, :class:`Text`, :class:`Choice`).
    Raises:
        ParseError: outside the supported subset, too long or too deep.
    """
    return _parse(s, as_text)[0]


def answer_sum_work(s: str, as_text: bool = False) -> int:
    """The evaluation cost of the sums of a normalised answer (units of
    :data:`~reasoning_env.grading.values.MAX_SUM_WORK`; 0 without sums, or when it is not parsed)."""
    try:
        return _parse(s, as_text)[1]
    except ParseError:
        return 0


@lru_cache(maxsize=16384)
def _parse(s: str, as_text: bool) -> tuple:
    """``(value, sum work)`` of a normalised answer (see :func:`parse_answer`; cached)."""
    if not s:
        raise ParseError("empty answer")
    if len(s) > MAX_PARSE_CHARS:
        raise ParseError("answer too long to parse")
    m = _CHOICE_RE.match(s)
    if m is not None:
        return Choice(m.group(1)), 0
    m = _CHOICE_VALUE_RE.match(s)
    if m is not None:  # AMC: "(E) 10", the letter and its option's value
        return Choice(m.group(1), _choice_value(m.group(2))), 0
    if as_text and _TEXTY_RE.match(s):
        word = _word_answer(s)
        if word is not None:
            return word, 0
    try:
        toks = tokenize(s)
        p = _Parser(toks)
        groups = p.parse_groups()
        if p.peek()[0] != "eof":
            raise ParseError(f"unexpected {p.peek()[1] or p.peek()[0]}")
        if len(groups) == 1 or all(len(g) == 1 for g in groups):
            value = _finish_items([it for g in groups for it in g])
        else:  # "m=2, n=3; m=5, n=3": each group is one answer (here, one named pair)
            value = Seq("list", tuple(_finish_items(g) for g in groups))
    except NotMath:
        if _TEXTY_RE.match(s):
            word = _word_answer(s)
            if word is not None:
                return word, 0
        raise ParseError("words mixed with mathematics") from None
    if p.sum_work * POINT_EVALUATIONS > MAX_SUM_WORK and value_free_vars(value):
        raise ParseError(SUMS_TOO_LONG + " at several points")  # compared at random points
    return value, p.sum_work

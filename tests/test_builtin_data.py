"""Sanity checks for the offline, built-in question data.

Reads the two JSONL files under ``reasoning_env/sources/builtin_data`` directly
(no package import) and verifies schema, counts, answer formats and, for rows
that carry one, that the ``check`` expression recomputes the gold answer.
"""

from __future__ import annotations

import ast
import json
import math
import re
from fractions import Fraction
from pathlib import Path

import pytest

DATA_DIR = Path(__file__).parent.parent / "reasoning_env/sources/builtin_data"
MM_PATH = DATA_DIR / "metamathqa_style.jsonl"
TIR_PATH = DATA_DIR / "numina_tir_style.jsonl"

MM_TYPES = (
    "GSM_AnsAug",
    "GSM_Rephrased",
    "GSM_SV",
    "GSM_FOBAR",
    "MATH_AnsAug",
    "MATH_Rephrased",
    "MATH_SV",
    "MATH_FOBAR",
)
MIN_PER_TYPE = 20
MIN_TIR = 60
MIN_CHECK_FRACTION = 0.9
ANSWER_LINE = re.compile(r"^The answer is: (.+)$")


# --------------------------------------------------------------------------
# loading
# --------------------------------------------------------------------------


def _load(path: Path) -> list[dict]:
    rows = []
    with path.open(encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # trailing newline
    for lineno, line in enumerate(lines, 1):
        assert line.strip(), f"{path.name}:{lineno}: blank line"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:  # pragma: no cover - failure path
            raise AssertionError(f"{path.name}:{lineno}: invalid JSON: {exc}") from exc
        assert isinstance(row, dict), f"{path.name}:{lineno}: not an object"
        rows.append(row)
    return rows


MM_ROWS = _load(MM_PATH)
TIR_ROWS = _load(TIR_PATH)


def _ids(rows):
    return [str(r.get("id")) for r in rows]


# --------------------------------------------------------------------------
# restricted evaluator for `check`
# --------------------------------------------------------------------------

_FUNCS = {
    "Fraction": Fraction,
    "comb": math.comb,
    "perm": math.perm,
    "factorial": math.factorial,
    "gcd": math.gcd,
    "lcm": math.lcm,
    "sqrt": math.sqrt,
    "isqrt": math.isqrt,
    "abs": abs,
    "min": min,
    "max": max,
    "round": round,
}
_CONSTS = {"pi": math.pi}
_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
}
_MAX_EXPONENT = 10_000


class CheckError(ValueError):
    """Raised for a `check` expression outside the allowed subset."""


def safe_eval(expr: str):
    if not isinstance(expr, str) or len(expr) > 500:
        raise CheckError("check must be a short string")
    tree = ast.parse(expr, mode="eval")
    return _eval_node(tree.body)


def _eval_node(node):
    if isinstance(node, ast.Constant):
        if type(node.value) in (int, float):
            return node.value
        raise CheckError(f"literal {node.value!r} not allowed")
    if isinstance(node, ast.BinOp):
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise CheckError(f"operator {type(node.op).__name__} not allowed")
        left = _eval_node(node.left)
        right = _eval_node(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise CheckError("exponent too large")
        return op(left, right)
    if isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, ast.USub):
            raise CheckError(f"unary {type(node.op).__name__} not allowed")
        return -_eval_node(node.operand)
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS:
            raise CheckError(f"call to {ast.dump(node.func)} not allowed")
        if node.keywords:
            raise CheckError("keyword arguments not allowed")
        args = [_eval_node(a) for a in node.args]
        return _FUNCS[node.func.id](*args)
    if isinstance(node, ast.Name):
        if node.id in _CONSTS:
            return _CONSTS[node.id]
        raise CheckError(f"name {node.id!r} not allowed")
    raise CheckError(f"node {type(node).__name__} not allowed")


# --------------------------------------------------------------------------
# gold-answer converter (small LaTeX subset -> Fraction or float)
# --------------------------------------------------------------------------


class GoldParseError(ValueError):
    """Raised when a gold answer is outside the supported LaTeX subset."""


def _sqrt_value(v):
    if isinstance(v, Fraction) and v >= 0:
        rn, rd = math.isqrt(v.numerator), math.isqrt(v.denominator)
        if rn * rn == v.numerator and rd * rd == v.denominator:
            return Fraction(rn, rd)
    if v < 0:
        raise GoldParseError("square root of a negative number")
    return math.sqrt(v)


def _pow_value(base, exp):
    if isinstance(exp, Fraction) and exp.denominator == 1:
        e = exp.numerator
        if abs(e) > _MAX_EXPONENT:
            raise GoldParseError("exponent too large")
        if isinstance(base, Fraction):
            return base**e
        return float(base) ** e
    return float(base) ** float(exp)


class _GoldParser:
    _NUM = re.compile(r"\d+(?:\.\d+)?|\.\d+")

    def __init__(self, text: str):
        s = text.strip().strip("$").strip()
        for old, new in (
            ("\\dfrac", "\\frac"),
            ("\\tfrac", "\\frac"),
            ("\\left", ""),
            ("\\right", ""),
            ("\\!", ""),
            ("\\,", ""),
            ("\\cdot", "*"),
            ("\\times", "*"),
        ):
            s = s.replace(old, new)
        self.s = re.sub(r"\s+", "", s)
        self.i = 0

    # helpers
    def _peek(self, token: str) -> bool:
        return self.s.startswith(token, self.i)

    def _eat(self, token: str) -> None:
        if not self._peek(token):
            raise GoldParseError(f"expected {token!r} at {self.i} in {self.s!r}")
        self.i += len(token)

    def parse(self):
        if not self.s:
            raise GoldParseError("empty answer")
        value = self._expr()
        if self.i != len(self.s):
            raise GoldParseError(f"unexpected text {self.s[self.i :]!r} in {self.s!r}")
        return value

    def _expr(self):
        sign = 1
        if self._peek("-"):
            self._eat("-")
            sign = -1
        elif self._peek("+"):
            self._eat("+")
        value = sign * self._term()
        while self._peek("+") or self._peek("-"):
            if self._peek("+"):
                self._eat("+")
                value = value + self._term()
            else:
                self._eat("-")
                value = value - self._term()
        return value

    def _starts_factor(self) -> bool:
        return (self.i < len(self.s) and (self.s[self.i].isdigit() or self.s[self.i] in "({.")) or any(
            self._peek(t) for t in ("\\frac", "\\sqrt", "\\pi")
        )

    def _term(self):
        value = self._factor()
        while True:
            if self._peek("*"):
                self._eat("*")
                value = value * self._factor()
            elif self._starts_factor():
                value = value * self._factor()
            else:
                return value

    def _factor(self):
        value = self._primary()
        if self._peek("^"):
            self._eat("^")
            value = _pow_value(value, self._group())
        return value

    def _group(self):
        if self._peek("{"):
            self._eat("{")
            value = self._expr()
            self._eat("}")
            return value
        if self.i < len(self.s) and self.s[self.i].isdigit():
            self.i += 1
            return Fraction(int(self.s[self.i - 1]))
        raise GoldParseError(f"expected a group at {self.i} in {self.s!r}")

    def _primary(self):
        if self._peek("\\frac"):
            self._eat("\\frac")
            num = self._group()
            den = self._group()
            if den == 0:
                raise GoldParseError("division by zero")
            if isinstance(num, Fraction) and isinstance(den, Fraction):
                return num / den
            return float(num) / float(den)
        if self._peek("\\sqrt"):
            self._eat("\\sqrt")
            if self._peek("["):
                raise GoldParseError("n-th roots are not supported")
            return _sqrt_value(self._group())
        if self._peek("\\pi"):
            self._eat("\\pi")
            return math.pi
        if self._peek("{"):
            return self._group()
        if self._peek("("):
            self._eat("(")
            value = self._expr()
            self._eat(")")
            return value
        m = self._NUM.match(self.s, self.i)
        if m:
            self.i = m.end()
            return Fraction(m.group(0))
        raise GoldParseError(f"cannot parse {self.s[self.i :]!r} in {self.s!r}")


def parse_gold(text: str):
    """Value of a gold answer: Fraction when rational, float otherwise."""
    return _GoldParser(text).parse()


def same_value(gold, computed) -> bool:
    if isinstance(computed, bool) or not isinstance(computed, (int, float, Fraction)):
        return False
    if isinstance(gold, Fraction) and isinstance(computed, (int, Fraction)):
        return gold == Fraction(computed)
    return math.isclose(float(gold), float(computed), rel_tol=1e-9, abs_tol=1e-12)


def last_boxed(text: str):
    """Content of the last balanced ``\\boxed{...}`` in text (None if absent)."""
    found = None
    start = text.find("\\boxed{")
    while start != -1:
        i = start + len("\\boxed{")
        depth = 1
        j = i
        while j < len(text) and depth:
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
            j += 1
        if depth == 0:
            found = text[i : j - 1]
        else:
            return None  # unbalanced
        start = text.find("\\boxed{", j)
    return found


def mm_gold(row: dict) -> str:
    last = row["response"].rstrip("\n").split("\n")[-1]
    m = ANSWER_LINE.match(last)
    assert m, f"last line of response is not 'The answer is: X': {last!r}"
    return m.group(1).strip()


# --------------------------------------------------------------------------
# self-tests of the helpers
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("12", Fraction(12)),
        ("-7", Fraction(-7)),
        ("37.5", Fraction(75, 2)),
        ("-0.25", Fraction(-1, 4)),
        ("\\frac{3}{4}", Fraction(3, 4)),
        ("-\\dfrac{5}{12}", Fraction(-5, 12)),
        ("\\sqrt{16}", Fraction(4)),
        ("2\\sqrt{3}", 2 * math.sqrt(3)),
        ("\\frac{3\\sqrt{6}}{2}", 3 * math.sqrt(6) / 2),
        ("-\\frac{\\sqrt{3}}{2}", -math.sqrt(3) / 2),
        ("6\\pi", 6 * math.pi),
        ("\\frac{2\\pi}{3}", 2 * math.pi / 3),
        ("100-25\\pi", 100 - 25 * math.pi),
        ("3+2\\sqrt{2}", 3 + 2 * math.sqrt(2)),
        ("$\\frac{147}{10}$", Fraction(147, 10)),
    ],
)
def test_parse_gold(text, expected):
    assert same_value(expected, parse_gold(text))


@pytest.mark.parametrize("text", ["(-3,4)", "x^2+7x-13", "\\left(4,\\frac{2\\pi}{3}\\right)", ""])
def test_parse_gold_rejects(text):
    with pytest.raises(GoldParseError):
        parse_gold(text)


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os')",
        "math.pi",
        "x + 1",
        "[1, 2][0]",
        "'a' * 3",
        "(lambda: 1)()",
        "sum(1, 2)",
        "2 ** 100000",
        "not 1",
        "1 if 1 else 2",
        "Fraction(numerator=1)",
    ],
)
def test_safe_eval_rejects(expr):
    with pytest.raises((CheckError, SyntaxError)):
        safe_eval(expr)


def test_safe_eval_accepts():
    assert safe_eval("comb(10, 3) * 2") == 240
    assert safe_eval("Fraction(3, 4) + -1") == Fraction(-1, 4)
    assert safe_eval("(48 - 12) // 3 % 5") == 2
    assert math.isclose(safe_eval("2*sqrt(3) + 6*pi"), 2 * math.sqrt(3) + 6 * math.pi)
    assert safe_eval("max(gcd(12, 18), lcm(2, 3), isqrt(50), round(2.6))") == 7
    assert safe_eval("perm(5, 2) + factorial(4) + abs(-3) + min(1, 2)") == 48


def test_last_boxed():
    assert last_boxed("a \\boxed{1} b \\boxed{\\frac{1}{2}}.") == "\\frac{1}{2}"
    assert last_boxed("no box") is None
    assert last_boxed("\\boxed{\\frac{1}{2}") is None


# --------------------------------------------------------------------------
# file-level checks
# --------------------------------------------------------------------------


def test_ids_unique_across_files():
    ids = _ids(MM_ROWS) + _ids(TIR_ROWS)
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    assert not dupes, f"duplicate ids: {dupes}"


def test_counts_per_type():
    counts = {t: 0 for t in MM_TYPES}
    for row in MM_ROWS:
        if row.get("type") in counts:
            counts[row["type"]] += 1
    short = {t: n for t, n in counts.items() if n < MIN_PER_TYPE}
    assert not short, f"types with fewer than {MIN_PER_TYPE} rows: {short}"
    assert len(TIR_ROWS) >= MIN_TIR


def test_check_coverage():
    rows = MM_ROWS + TIR_ROWS
    with_check = sum(1 for r in rows if r.get("check") is not None)
    assert with_check / len(rows) >= MIN_CHECK_FRACTION, (with_check, len(rows))


def test_no_duplicate_questions():
    texts = [re.sub(r"\s+", " ", r["query"]).strip().lower() for r in MM_ROWS]
    texts += [re.sub(r"\s+", " ", r["problem"]).strip().lower() for r in TIR_ROWS]
    dupes = {t for t in texts if texts.count(t) > 1}
    assert not dupes, dupes


# --------------------------------------------------------------------------
# per-row checks
# --------------------------------------------------------------------------


def _check_value(row: dict, gold_text: str):
    check = row["check"]
    if check is None:
        return
    assert isinstance(check, str) and check.strip(), "check must be a non-empty string or null"
    try:
        gold = parse_gold(gold_text)
    except GoldParseError as exc:
        pytest.fail(f"gold {gold_text!r} has a check but cannot be parsed: {exc}")
    computed = safe_eval(check)
    assert same_value(gold, computed), f"check {check!r} = {computed!r} != gold {gold_text!r} ({gold!r})"


@pytest.mark.parametrize("row", MM_ROWS, ids=_ids(MM_ROWS))
def test_metamathqa_row(row):
    expected = {"query", "response", "type", "original_question", "id", "difficulty", "check"}
    assert set(row) == expected, f"fields differ: {sorted(set(row) ^ expected)}"
    for key in ("query", "response", "type", "original_question", "id"):
        assert isinstance(row[key], str) and row[key].strip(), key
    assert row["type"] in MM_TYPES
    assert type(row["difficulty"]) is int and 1 <= row["difficulty"] <= 5
    assert row["check"] is None or isinstance(row["check"], str)
    assert re.fullmatch(r"mm-[a-z0-9-]+", row["id"]), row["id"]

    kind = row["type"]
    if kind.endswith("AnsAug"):
        assert row["original_question"] == row["query"]
    else:
        assert row["original_question"] != row["query"]
    if kind == "GSM_SV" or kind == "GSM_FOBAR":
        assert "unknown variable x" in row["query"]
    if kind == "MATH_SV" or kind == "MATH_FOBAR":
        assert "unknown variable X" in row["query"]
    if kind.endswith("FOBAR"):
        assert "If we know the answer to the above question is" in row["query"]

    lines = row["response"].rstrip("\n").split("\n")
    assert len(lines) >= 2
    gold = mm_gold(row)
    if kind.startswith("GSM"):
        assert re.fullmatch(r"-?\d+(\.\d+)?", gold), f"GSM answers are plain numbers: {gold!r}"
    _check_value(row, gold)


@pytest.mark.parametrize("row", TIR_ROWS, ids=_ids(TIR_ROWS))
def test_tir_row(row):
    expected = {"problem", "solution", "messages", "id", "difficulty", "check"}
    assert set(row) == expected, f"fields differ: {sorted(set(row) ^ expected)}"
    for key in ("problem", "solution", "id"):
        assert isinstance(row[key], str) and row[key].strip(), key
    assert re.fullmatch(r"tir-\d{3}", row["id"]), row["id"]
    assert type(row["difficulty"]) is int and 2 <= row["difficulty"] <= 5
    assert row["check"] is None or isinstance(row["check"], str)

    assert row["messages"] == [
        {"role": "user", "content": row["problem"]},
        {"role": "assistant", "content": row["solution"]},
    ]

    solution = row["solution"]
    assert re.search(r"```python\n.+?\n```", solution, re.S), "missing ```python block"
    assert re.search(r"```output\n.*?\n```", solution, re.S), "missing ```output block"
    gold = last_boxed(solution)
    assert gold is not None and gold.strip(), "missing or unbalanced \\boxed{...}"
    _check_value(row, gold)

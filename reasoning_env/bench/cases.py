"""``python -m reasoning_env.bench cases``: accuracy on the labelled grading cases, ours vs
math-verify used directly.

"math-verify directly" is the common recipe: ``verify(parse("\\\\boxed{gold}"), parse(response))``
with math-verify 0.9's default extraction configs (LaTeX + expression) and its default
signal-based timeouts. It runs in a child process (one per run, restarted after a hang) in an
empty temporary directory, so a hang is reported instead of freezing the benchmark, and any file
a payload creates is detected. A case counts as right only when the verdict equals the label;
a hang (no verdict within ``--hang-s`` seconds) counts as wrong.

Output: one JSON line ``{"cases", "ours": {...}, "math_verify": {...}}`` with ``correct``,
``accuracy``, ``wrong`` (ids), ``slowest`` (our five slowest grades: id, seconds, reason), and for
math-verify ``hung`` and ``executed_code`` (ids).

``--worst-case`` instead times our grader alone on :data:`WORST_CASES`: hostile and slow-to-grade
answers (power towers, huge literals, long finite sums and products, 1 MB texts, deep nesting,
code payloads), each graded ``--repeat`` times with the default time limit. Output: one JSON line
with every case's slowest time, the ``slowest`` ten, ``over_limit`` (grades that took longer
than ``--timeout-s``) and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MARKER = "pwned_by_grader.txt"

_RUNNER = r"""
import json, sys, logging
logging.disable(logging.CRITICAL)
from math_verify import parse, verify
for line in sys.stdin:
    case = json.loads(line)
    try:
        gold = parse("\\boxed{" + case["gold"] + "}")
        pred = parse(case["response"])
        verdict = bool(verify(gold, pred))
    except BaseException as exc:
        verdict = False
    sys.stdout.write(json.dumps({"verdict": verdict}) + "\n")
    sys.stdout.flush()
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of the ``cases`` subcommand."""
    p.add_argument(
        "--cases",
        default=str(Path("..") / "shared" / "cases" / "grading_cases.jsonl"),
        help="JSONL with id, response, ground_truth, expected (default ../shared/cases/grading_cases.jsonl)",
    )
    p.add_argument("--hang-s", type=float, default=20.0, help="seconds after which math-verify counts as hung")
    p.add_argument("--timeout-s", type=float, default=2.0, help="our grader's time limit (seconds)")
    p.add_argument(
        "--worst-case",
        action="store_true",
        help="time our grader alone on the built-in hostile / slow cases (WORST_CASES) instead",
    )
    p.add_argument(
        "--repeat", type=int, default=3, help="with --worst-case: grades per case (the slowest is reported)"
    )


def _worst_cases() -> list:
    """``(id, response, gold)`` of hostile and slow-to-grade answers (built on demand: some are 1 MB)."""
    sums = [
        ("sum-1e4-inverse-squares", r"\boxed{\sum_{k=1}^{10000} \frac{1}{k^2}}", r"\frac{\pi^2}{6}"),
        ("sum-99-rationalised-roots", r"\boxed{\sum_{k=1}^{99} \frac{1}{\sqrt{k}+\sqrt{k+1}}}", "9"),
        ("sum-100-rationalised-roots", r"\boxed{\sum_{k=1}^{100} \frac{1}{\sqrt{k}+\sqrt{k+1}}}", r"\sqrt{101}-1"),
        ("sum-1000-k-to-the-1000", r"\boxed{\sum_{k=1}^{1000} k^{1000}}", "5"),
        ("sum-1000-binomial-squares", r"\boxed{\sum_{k=0}^{1000} \binom{1000}{k}^2}", r"\binom{2000}{1000}"),
        ("sum-1000-sines", r"\boxed{\sum_{k=1}^{1000} \sin(k)}", "0"),
        ("sum-3000-harmonic", r"\boxed{\sum_{k=1}^{3000} \frac{1}{k}}", "8"),
        ("sum-2000-telescoping", r"\boxed{\sum_{k=1}^{2000} \frac{1}{k(k+1)}}", r"\frac{2000}{2001}"),
        ("sum-100-by-100", r"\boxed{\sum_{i=1}^{100}\sum_{j=1}^{100} ij}", "25502500"),
        ("sum-1e10-terms", r"\boxed{\sum_{k=1}^{10^{10}} k}", "5"),
        ("sum-1e100-terms-k-to-k", r"\boxed{\sum_{k=1}^{10^{100}} k^{k}}", "5"),
        ("sum-basel-series", r"\boxed{\sum_{n=1}^{\infty} \frac{1}{n^2}}", r"\frac{\pi^2}{6}"),
        ("sum-leibniz-series", r"\boxed{\sum_{n=0}^{\infty} \frac{(-1)^n}{2n+1}}", r"\frac{\pi}{4}"),
        ("sum-symbolic-cubes", r"\boxed{\sum_{k=1}^{n} k^3}", r"\frac{n^2(n+1)^2}{4}"),
        ("prod-1000-ratios", r"\boxed{\prod_{k=1}^{1000} \frac{k+1}{k}}", "1001"),
        ("prod-100-one-minus", r"\boxed{\prod_{k=2}^{100} \left(1-\frac{1}{k^2}\right)}", r"\frac{101}{200}"),
        (
            "sum-long-body",
            r"\boxed{\sum_{k=1}^{500} \left("
            + "+".join(f"\\frac{{k^{i}}}{{{i + 1}}}" for i in range(12))
            + r"\right)}",
            "7",
        ),
    ]
    hostile = [
        ("tower-minus-tower", r"\boxed{9^{9^{9^9}} - 9^{9^{9^9}}}", "0"),
        ("tower-vs-9", r"\boxed{9^{9^{9^9}}}", "9"),
        (
            "tower-5-fraction",
            r"\boxed{\dfrac{5^{\left(5^{\left(5^{\left(5^5\right)}\right)} - 4\right)} - 5}{16}}",
            r"\frac{5^{3125}-5}{16}",
        ),
        ("factorial-googol", r"\boxed{(10^{100})!}", "5"),
        ("factorial-million", r"\boxed{1000000!}", "5"),
        ("power-1e10", r"\boxed{10^{10^{10}}}", "5"),
        ("sine-1e50", r"\boxed{\sin(10^{50})}", "5"),
        ("log-log-log", r"\boxed{\log(\log(\log(10^{10^{100}})))}", "1"),
        ("literal-1e999999999", r"\boxed{1e999999999}", "1"),
        ("literal-7e900-nines", r"\boxed{7e" + "9" * 900 + "}", "7"),
        ("one-megabyte-response", ("Let x be 1. " * 90_000)[:1_000_000] + r" so \boxed{42}", "42"),
        ("one-megabyte-box", r"\boxed{" + "1+" * 500_000 + "1}", "500001"),
        ("100k-nested-braces", r"\boxed{" + "{" * 100_000 + "1" + "}" * 100_000 + "}", "1"),
        ("300-nested-fractions", r"\boxed{" + r"\frac{1}{" * 300 + "2" + "}" * 300 + "}", "1"),
        ("100k-unclosed-boxes", "\\boxed{" * 100_000, "1"),
        ("abs-of-variable", r"\boxed{|x|}", "x"),
        (
            "payload-open",
            r"\boxed{[open('pwned_by_grader.txt','w').close()]}",
            r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}",
        ),
        ("payload-import", r"\boxed{__import__('os').system('touch pwned_by_grader.txt')}", "0"),
        ("garbage-gold", r"\boxed{92.5857658508735}", "{@Neillier 1276915 4951077 ,5_GENE"),
    ]
    # found by red-teaming issue 14 (docs/grading.md, Safety): each took 0.8 s to forever
    redteam = [
        ("prod-3000-series", r"\boxed{\prod_{k=1}^{3000} \sum_{n=1}^{\infty} \frac{1}{n^2}}", "5"),
        ("sum-5000x5000-series", r"\boxed{\sum_{a=1}^{5000}\sum_{b=1}^{5000}\sum_{n=1}^{\infty}\frac{1}{n^2}}", "5"),
        ("sum-5000-factorials", r"\boxed{\sum_{k=1}^{5000} k!}", "5"),
        ("sum-5000-k-to-the-5000", r"\boxed{\sum_{k=1}^{5000} k^{5000}}", "5"),
        ("sum-6000-binomials", r"\boxed{\sum_{k=1}^{6000} \binom{6000}{k}}", r"2^{6000}-1"),
        ("sum-30000-sines", r"\boxed{\sum_{k=1}^{30000} \sin(k)}", "0"),
        ("sum-20000-powers-of-x", r"\boxed{\sum_{k=1}^{20000} x^k}", r"\frac{x^{20001}-x}{x-1}"),
        ("series-complex-factorial", r"\boxed{\sum_{n=1}^{\infty} \frac{8}{n^4} \cdot 10^{25}(i)!}", "5"),
        (
            "boxes-of-long-sums",
            "So "
            + ", ".join(rf"\boxed{{\sum_{{{k}=1}}^{{1000}} (\sin^2 {k} + \cos^2 {k})}}" for k in "jkmnpqrs")
            + ".",
            "1000",
        ),
        ("100k-closing-sentences", "Final Answer: 12" + ". a" * 50_000 + " 5", "12"),
    ]
    return sums + hostile + redteam


def run_worst_case(args: argparse.Namespace) -> int:
    """Time our grader on :func:`_worst_cases` and print one JSON line. Returns 0."""
    from reasoning_env.grading import Grader

    load_before = os.getloadavg()
    grader = Grader(timeout_s=args.timeout_s)
    grader.warm_up(wait_s=60.0)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        cwd = os.getcwd()
        os.chdir(workdir)
        try:
            for case_id, response, gold in _worst_cases():
                times, result = [], None
                for _ in range(max(1, args.repeat)):
                    t0 = time.perf_counter()
                    result = grader.grade(response, gold)
                    times.append(time.perf_counter() - t0)
                rows.append(
                    {
                        "id": case_id,
                        "max_s": round(max(times), 4),
                        "min_s": round(min(times), 4),
                        "reason": result.reason,
                        "correct": result.correct,
                    }
                )
            executed = os.path.exists(MARKER)
        finally:
            os.chdir(cwd)
    rows.sort(key=lambda r: -r["max_s"])
    out = {
        "cases": len(rows),
        "timeout_s": args.timeout_s,
        "repeat": args.repeat,
        "slowest": rows[:10],
        "over_limit": [r["id"] for r in rows if r["max_s"] > args.timeout_s],
        "executed_code": executed,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "all": {r["id"]: [r["max_s"], r["reason"]] for r in rows},
    }
    print(json.dumps(out))
    return 0


class _MathVerifyRunner:
    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.proc = None

    def _start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _RUNNER],
            cwd=self.workdir,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )

    def verdict(self, response: str, gold: str, hang_s: float):
        """True/False, or None when it did not answer within ``hang_s`` seconds."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(json.dumps({"response": response, "gold": gold}) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], hang_s)
        if not ready:
            self.close()
            return None
        line = self.proc.stdout.readline()
        if not line:
            self.close()
            return None
        return json.loads(line)["verdict"]

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def run(args: argparse.Namespace) -> int:
    """Grade every case with both graders and print one JSON line (or, with ``--worst-case``,
    time ours on the hostile cases: :func:`run_worst_case`). Returns 0."""
    from reasoning_env.grading import Grader

    if args.worst_case:
        return run_worst_case(args)

    path = Path(args.cases)
    if not path.is_file():
        raise SystemExit(f"cases file not found: {path}")
    cases = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

    grader = Grader(timeout_s=args.timeout_s)
    grader.warm_up(wait_s=60.0)
    ours_wrong, ours_time, ours_times = [], 0.0, []
    with tempfile.TemporaryDirectory() as ours_dir:
        cwd = os.getcwd()
        os.chdir(ours_dir)
        try:
            for c in cases:
                r = grader.grade(c["response"], c["ground_truth"])
                ours_time += r.time_s
                ours_times.append((r.time_s, c["id"], r.reason))
                if r.correct is not c["expected"]:
                    ours_wrong.append(c["id"])
            ours_exec = os.path.exists(MARKER)
        finally:
            os.chdir(cwd)

    mv_wrong, mv_hung, mv_exec = [], [], []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as mv_dir:
        runner = _MathVerifyRunner(mv_dir)
        try:
            for c in cases:
                v = runner.verdict(c["response"], c["ground_truth"], args.hang_s)
                if v is None:
                    mv_hung.append(c["id"])
                if v is not c["expected"]:
                    mv_wrong.append(c["id"])
                marker = Path(mv_dir) / MARKER
                if marker.exists():
                    mv_exec.append(c["id"])
                    marker.unlink()
        finally:
            runner.close()
    mv_time = time.perf_counter() - t0
    n = len(cases)
    out = {
        "cases": n,
        "ours": {
            "correct": n - len(ours_wrong),
            "accuracy": round((n - len(ours_wrong)) / n, 4),
            "wrong": ours_wrong,
            "executed_code": ours_exec,
            "total_s": round(ours_time, 2),
            "slowest": [[cid, round(t, 4), reason] for t, cid, reason in sorted(ours_times, reverse=True)[:5]],
        },
        "math_verify": {
            "correct": n - len(mv_wrong),
            "accuracy": round((n - len(mv_wrong)) / n, 4),
            "wrong": mv_wrong,
            "hung": mv_hung,
            "executed_code": mv_exec,
            "total_s": round(mv_time, 2),
        },
    }
    print(json.dumps(out))
    return 0

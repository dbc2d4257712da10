"""``python -m reasoning_env.bench cases``: accuracy on the labelled grading cases, ours vs
math-verify used directly.

"math-verify directly" is the common recipe: ``verify(parse("\\\\boxed{gold}"), parse(response))``
with math-verify 0.9's default extraction configs (LaTeX + expression) and its default
signal-based timeouts. It runs in a child process (one per run, restarted after a hang) in an
empty temporary directory, so a hang is reported instead of freezing the benchmark, and any file
a payload creates is detected. A case counts as right only when the verdict equals the label;
a hang (no verdict within ``--hang-s`` seconds) counts as wrong.

Output: one JSON line ``{"cases", "ours": {...}, "math_verify": {...}}`` with ``correct``,
``accuracy``, ``wrong`` (ids), and for math-verify ``hung`` and ``executed_code`` (ids).
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
    p.add_argument("--cases", default=str(Path("..") / "shared" / "cases" / "grading_cases.jsonl"),
                   help="JSONL with id, response, ground_truth, expected (default ../shared/cases/grading_cases.jsonl)")
    p.add_argument("--hang-s", type=float, default=20.0, help="seconds after which math-verify counts as hung")
    p.add_argument("--timeout-s", type=float, default=2.0, help="our grader's time limit (seconds)")


class _MathVerifyRunner:
    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.proc = None

    def _start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _RUNNER], cwd=self.workdir, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1,
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
    """Grade every case with both graders and print one JSON line. Returns 0."""
    from reasoning_env.grading import Grader

    path = Path(args.cases)
    if not path.is_file():
        raise SystemExit(f"cases file not found: {path}")
    cases = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

    grader = Grader(timeout_s=args.timeout_s)
    grader.warm_up(wait_s=60.0)
    ours_wrong, ours_time = [], 0.0
    with tempfile.TemporaryDirectory() as ours_dir:
        cwd = os.getcwd()
        os.chdir(ours_dir)
        try:
            for c in cases:
                r = grader.grade(c["response"], c["ground_truth"])
                ours_time += r.time_s
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
            "correct": n - len(ours_wrong), "accuracy": round((n - len(ours_wrong)) / n, 4),
            "wrong": ours_wrong, "executed_code": ours_exec, "total_s": round(ours_time, 2),
        },
        "math_verify": {
            "correct": n - len(mv_wrong), "accuracy": round((n - len(mv_wrong)) / n, 4),
            "wrong": mv_wrong, "hung": mv_hung, "executed_code": mv_exec, "total_s": round(mv_time, 2),
        },
    }
    print(json.dumps(out))
    return 0

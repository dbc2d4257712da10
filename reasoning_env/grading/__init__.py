"""Answer grading: ``grade(response, gold) -> GradeResult``.

First version: extract the final answer (see :mod:`reasoning_env.grading.extract`), accept an
exact match after light normalisation, else compare with ``math-verify`` (the gold wrapped in
``$...$`` so it parses; LaTeX extraction only, so no model text reaches ``sympify``/``parse_expr``).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from typing import Optional

from reasoning_env.grading.extract import Extraction, extract_final_answer

__all__ = ["GradeResult", "Grader", "grade", "extract_final_answer", "Extraction"]


@dataclass(frozen=True)
class GradeResult:
    """A grading verdict.

    Attributes:
        correct: Whether the extracted answer equals the gold answer.
        extracted: The final answer found in the graded text, or ``None``.
        reason: ``"exact"``, ``"equivalent"``, ``"mismatch"``, ``"no_answer"``, ``"timeout"`` or
            ``"error"``.
        time_s: Wall-clock seconds the grade took.
        method: How the answer was extracted (``"boxed"``, ``"phrase"``, ``"gsm8k"``, ``"none"``).
    """

    correct: bool
    extracted: Optional[str]
    reason: str
    time_s: float
    method: str = "none"


_WS = re.compile(r"\s+")


def _light_normalise(s: str) -> str:
    s = s.strip().strip("$").strip()
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("\\left", "").replace("\\right", "")
    s = _WS.sub("", s)
    return s.rstrip(".")


_mv_lock = threading.Lock()


def _math_verify_equal(pred: str, gold: str) -> bool:
    from math_verify import LatexExtractionConfig, parse, verify

    cfg = [LatexExtractionConfig()]
    with _mv_lock:
        g = parse(f"${gold}$", extraction_config=cfg, parsing_timeout=None)
        p = parse(f"${pred}$", extraction_config=cfg, parsing_timeout=None)
        if not g or not p:
            return False
        return bool(verify(g, p, timeout_seconds=None))


class Grader:
    """Grades responses against gold answers.

    Args:
        timeout_s: Time limit of one grade (seconds).
    """

    def __init__(self, timeout_s: float = 2.0) -> None:
        self.timeout_s = timeout_s

    def grade(self, response: str, gold: str, *, timeout_s: Optional[float] = None) -> GradeResult:
        """Grade ``response`` (full model output) against ``gold`` (a bare answer string)."""
        t0 = time.perf_counter()
        ext = extract_final_answer(response)
        if ext.answer is None:
            return GradeResult(False, None, "no_answer", time.perf_counter() - t0, ext.method)
        if _light_normalise(ext.answer) == _light_normalise(gold):
            return GradeResult(True, ext.answer, "exact", time.perf_counter() - t0, ext.method)
        try:
            ok = _math_verify_equal(ext.answer, gold)
        except Exception:
            return GradeResult(False, ext.answer, "error", time.perf_counter() - t0, ext.method)
        return GradeResult(ok, ext.answer, "equivalent" if ok else "mismatch", time.perf_counter() - t0, ext.method)


def grade(response: str, gold: str, *, timeout_s: float = 2.0) -> GradeResult:
    """Grade one response against a gold answer (see :class:`Grader`)."""
    return Grader(timeout_s).grade(response, gold, timeout_s=timeout_s)

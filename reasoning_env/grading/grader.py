"""`Grader`: extract -> normalise -> exact match -> fast parse and compare -> math-verify worker.

Stages of :meth:`Grader.grade` (first decisive stage wins):

1. Extract the final answer (:mod:`~reasoning_env.grading.extract`); none -> ``no_answer``.
   Several boxes that end the answer together are graded joined, and else each alone: correct
   only when together, or each of them, they are the gold (one guess among several never is).
2. Normalise it and compare with the gold's cached normal form: equal -> ``exact``.
3. Parse it with the bounded fast parser and compare values (:mod:`~.compare`): numbers ->
   ``numeric``, structures/identities -> ``equivalent``, decided unequal -> ``mismatch``.
   No sympy, no processes; bounded time.
4. Undecided, and either side has several numbers separated by words (``5 hours 30
   minutes``), or the answer holds a hedge or negation word (``not 12``), or a word after a
   number: ``mismatch`` (math-verify would read only the number); the answer is the gold plus
   a nonzero number (``(2,4)+9`` for ``(2,4)``, :mod:`~.shifted`): ``mismatch``.
5. Undecided otherwise (a construct outside the fast subset, or an overflowing value): ask
   math-verify in a worker process (:mod:`~.pool`) with what is left of ``timeout_s``: equal ->
   ``symbolic``; not equal -> ``mismatch``; past the deadline -> ``timeout``; worker failure ->
   ``error``.

Reasons (``GradeResult.reason``) form this small vocabulary: :data:`REASONS`.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from reasoning_env.grading.compare import Verdict, compare, using_clock
from reasoning_env.grading.extract import extract_final_answer
from reasoning_env.grading.gold import GoldInfo, GoldReport, prepare_gold
from reasoning_env.grading.latex import (
    MAX_PARSE_CHARS,
    ChoiceJunk,
    ParseError,
    answer_sum_work,
    has_connective,
    has_hedge_word,
    not_for_math_verify,
    parse_answer,
    words_after_number,
    words_between_numbers,
)
from reasoning_env.grading.normalize import is_wrapped_text, match_key, normalize_with_unit
from reasoning_env.grading.restate import restates_question
from reasoning_env.grading.shifted import gold_plus_number
from reasoning_env.grading.values import MAX_SUM_WORK

__all__ = ["GradeResult", "Grader", "REASONS", "DEFAULT_TIMEOUT_S"]

logger = logging.getLogger(__name__)

#: Default time limit of one grade (seconds).
DEFAULT_TIMEOUT_S = 2.0
#: Seconds of the limit kept back from math-verify's worker for killing and reaping it when it
#: runs out (a grade then still returns within ``timeout_s``; at most a tenth of the limit).
KILL_MARGIN_S = 0.1

#: Every ``GradeResult.reason`` value and its meaning.
REASONS = {
    "exact": "correct: the normalised answer equals the normalised gold",
    "numeric": "correct: equal as numbers (exact rationals, 50-digit values, or a correctly rounded decimal)",
    "equivalent": "correct: equal as structures or expressions (sets, intervals, equations, identities)",
    "symbolic": "correct: math-verify (sympy) found them equal in the worker process",
    "mismatch": "wrong: decided not equal",
    "no_answer": "wrong: no final answer found (no box, answer phrase, #### marker or closing statement)",
    "timeout": "wrong: no verdict within timeout_s (the worker was killed)",
    "error": "wrong: the grader failed on this input (the worker crashed or the pool is closed)",
}


@dataclass(frozen=True)
class GradeResult:
    """A grading verdict.

    Attributes:
        correct: Whether the extracted answer equals the gold answer.
        extracted: The final answer found in the graded text, or ``None``.
        reason: One of :data:`REASONS` (``"exact"``, ``"numeric"``, ``"equivalent"``,
            ``"symbolic"``, ``"mismatch"``, ``"no_answer"``, ``"timeout"``, ``"error"``).
        time_s: Wall-clock seconds the grade took.
        method: How the answer was extracted (``"boxed"``, ``"phrase"``, ``"gsm8k"``,
            ``"statement"``, ``"none"``).
        detail: A short human-readable explanation (e.g. ``"different brackets"``).
    """

    correct: bool
    extracted: str | None
    reason: str
    time_s: float
    method: str = "none"
    detail: str = ""


_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")


def _for_math_verify(raw: str) -> str:
    """The raw answer for math-verify (its own normaliser expects raw LaTeX, e.g. keeps
    ``\\operatorname``), minus unescaped ``$`` that would break the ``$...$`` wrapper."""
    return _UNESCAPED_DOLLAR.sub("", raw).strip()


class Grader:
    """Grades responses against gold answers. Thread-safe; share one per process.

    Args:
        timeout_s: Default time limit of one grade (seconds, > 0).
        use_worker: Whether undecided pairs go to math-verify in a worker process (default
            True). With False they are graded ``mismatch`` (detail ``"undecided"``), and no
            process is ever started.
        pool: A :class:`~reasoning_env.grading.pool.WorkerPool` to use (default: the
            process-wide pool from :func:`~reasoning_env.grading.pool.get_pool`, created on
            first need).
        clock: What the time limit counts (seconds): ``time.perf_counter`` (default, wall
            time) or ``time.thread_time`` (the grading thread's CPU time: a server does not let
            a busy machine turn a right answer into ``timeout``; the pool's worker is then given
            what is left as CPU time too, see ``WorkerPool.call``).

    Raises:
        ValueError: ``timeout_s`` is not a positive number.
    """

    def __init__(
        self, timeout_s: float = DEFAULT_TIMEOUT_S, *, use_worker: bool = True, pool=None, clock=time.perf_counter
    ) -> None:
        _check_timeout(timeout_s)
        self.timeout_s = float(timeout_s)
        self.clock = clock
        self.use_worker = bool(use_worker)
        self._pool = pool
        self._issues: dict = {}
        self._issues_lock = threading.Lock()

    # ------------------------------------------------------------------ golds
    def prepare_gold(self, gold: str) -> GoldInfo:
        """Normalise and parse ``gold`` once (process-wide cache); records a parse issue.

        Raises:
            TypeError: ``gold`` is not a string.
            ValueError: ``gold`` is empty.
        """
        info = prepare_gold(gold)
        if info.issue is not None:
            with self._issues_lock:
                self._issues[info.gold] = info.issue
        return info

    def prepare_golds(self, golds: Iterable[str]) -> GoldReport:
        """Prepare many gold answers (call it when questions are loaded).

        Returns:
            A :class:`~reasoning_env.grading.gold.GoldReport` listing the golds the fast parser
            could not read (they are still graded: exact match, then math-verify).
        Raises:
            TypeError / ValueError: as :meth:`prepare_gold`, for the first bad gold.
        """
        seen = set()
        parsed = 0
        issues = []
        for gold in golds:
            if gold in seen:
                continue
            seen.add(gold)
            info = self.prepare_gold(gold)
            if info.issue is None:
                parsed += 1
            else:
                issues.append((info.gold, info.issue))
        return GoldReport(total=len(seen), parsed=parsed, issues=tuple(sorted(issues)))

    def gold_issues(self) -> dict:
        """Golds this grader prepared that the fast parser could not read: gold -> issue."""
        with self._issues_lock:
            return dict(self._issues)

    # ------------------------------------------------------------------ worker
    @property
    def pool(self):
        """The worker pool (created on first access)."""
        if self._pool is None:
            from reasoning_env.grading.pool import get_pool

            self._pool = get_pool()
        return self._pool

    def warm_up(self, wait_s: float = 0.0) -> bool:
        """Start the worker processes now (in the background) instead of at the first
        undecided answer; wait up to ``wait_s`` seconds. Returns True when they are ready
        (always True with ``use_worker=False``)."""
        if not self.use_worker:
            return True
        return self.pool.warm_up(wait_s)

    # ------------------------------------------------------------------ grading
    def grade(
        self, response: str, gold: str, *, timeout_s: float | None = None, question: str | None = None
    ) -> GradeResult:
        """Grade ``response`` (full model output) against ``gold`` (a bare answer string).

        Args:
            response: The text to grade (hostile input: any size or content).
            gold: The gold answer (LaTeX or plain; prepared once and cached).
            timeout_s: Time limit for this grade (seconds; default ``self.timeout_s``). The
                call returns within it (the worker gets it less :data:`KILL_MARGIN_S`); running out is the verdict
                ``timeout``.
            question: The question text, when known: an answer that copies one of its math
                expressions (``\\boxed{513^2 - 487^2}`` for "Compute $513^2 - 487^2$") and is not the
                gold itself is a ``mismatch`` (:mod:`~reasoning_env.grading.restate`).
        Returns:
            A :class:`GradeResult`.
        Raises:
            TypeError: ``response`` or ``gold`` is not a string.
            ValueError: ``gold`` is empty or ``timeout_s`` is not positive.
        """
        if self.clock is not time.perf_counter:
            with using_clock(self.clock):
                return self._grade(response, gold, timeout_s, question)
        return self._grade(response, gold, timeout_s, question)

    def _grade(self, response: str, gold: str, timeout_s: float | None, question: str | None) -> GradeResult:
        t0 = time.perf_counter()
        c0 = self.clock()
        if timeout_s is None:
            timeout_s = self.timeout_s
        else:
            _check_timeout(timeout_s)
        if not isinstance(response, str):
            raise TypeError(f"response must be a str, got {type(response).__name__}")
        info = self.prepare_gold(gold)
        deadline = c0 + timeout_s

        ext = extract_final_answer(response)
        if ext.answer is None:
            return GradeResult(False, None, "no_answer", time.perf_counter() - t0, ext.method)
        if ext.hedge is not None and not self._restates_answer(ext, c0 + 0.1 * timeout_s):
            # "\\boxed{12}. Or maybe 13.": two answers offered, not one
            return GradeResult(
                False,
                ext.answer,
                "mismatch",
                time.perf_counter() - t0,
                ext.method,
                f"the answer is hedged ({ext.hedge[:80]!r} follows it): one answer, not a choice",
            )
        result = self._grade_extraction(ext, info, t0, c0, deadline, timeout_s)
        if result.correct and question is not None and result.reason != "exact":
            for part in (ext.answer,) + ext.parts:
                if restates_question(part, question, info.key, lambda n, p=part: self._is_gold_expression(n, p, info)):
                    return GradeResult(
                        False,
                        ext.answer,
                        "mismatch",
                        time.perf_counter() - t0,
                        ext.method,
                        f"{part!r} restates an expression of the question (copying it is not answering it)",
                    )
        return result

    @staticmethod
    def _restates_answer(ext, deadline: float) -> bool:
        """Whether every value a hedge offers is the answer's own value written another way
        (``\\boxed{\\frac12}, or 0.5``): decided by the fast path alone, else not."""
        try:
            answer = parse_answer(normalize_with_unit(ext.answer)[0], is_wrapped_text(ext.answer))
            for offered in ext.offered:
                value = parse_answer(normalize_with_unit(offered)[0], is_wrapped_text(offered))
                if compare(value, answer, deadline).equal is not True:
                    return False
        except (ParseError, RecursionError):
            return False
        return bool(ext.offered)

    @staticmethod
    def _is_gold_expression(normalised: str, raw: str, info: GoldInfo) -> bool:
        """Whether a normalised answer parses to the gold's own expression (``\\frac{3}{4}`` is the
        gold ``\\frac34``, written with braces)."""
        try:
            return info.value is not None and parse_answer(normalised, is_wrapped_text(raw)) == info.value
        except ParseError:
            return False

    def _grade_extraction(
        self, ext, info: GoldInfo, t0: float, c0: float, deadline: float, timeout_s: float
    ) -> GradeResult:
        """Stages 2-5 for an extraction: its answer, and else each of several boxes."""
        result = self._grade_answer(ext.answer, ext.method, info, t0, c0, deadline, timeout_s)
        if result.correct or not ext.parts:
            return result
        # Several boxes end the answer: together they are not the gold; they still count when
        # each of them is the gold (one answer written twice, 15\frac{39}{40} and \frac{639}{40}).
        # One box among different guesses never counts (hedging is a reward hack).
        work = sum(answer_sum_work(normalize_with_unit(part)[0], is_wrapped_text(part)) for part in ext.parts)
        if work > MAX_SUM_WORK:  # each box's sums fit, not all of them: bounded time
            return GradeResult(
                False,
                ext.answer,
                "mismatch",
                time.perf_counter() - t0,
                ext.method,
                f"several boxed answers: together not the gold ({result.detail}), "
                "and their sums are too long to grade each",
            )
        for part in ext.parts:
            one = self._grade_answer(part, ext.method, info, t0, c0, deadline, timeout_s)
            if not one.correct:
                return GradeResult(
                    False,
                    ext.answer,
                    "timeout" if one.reason == "timeout" else "mismatch",
                    time.perf_counter() - t0,
                    ext.method,
                    f"several boxed answers: together not the gold ({result.detail}), and {part!r} is not it",
                )
        return GradeResult(
            True, ext.answer, one.reason, time.perf_counter() - t0, ext.method, "every boxed answer equals the gold"
        )

    def _grade_answer(
        self, answer: str, method: str, info: GoldInfo, t0: float, c0: float, deadline: float, timeout_s: float
    ) -> GradeResult:
        """Stages 2-5 of :meth:`grade` for one extracted answer."""
        if answer == info.gold or answer == info.normalised:  # verbatim: no normalising needed
            return GradeResult(True, answer, "exact", time.perf_counter() - t0, method)
        normalised, unit = normalize_with_unit(answer)
        if unit is not None and info.unit is not None and unit != info.unit:
            return GradeResult(
                False,
                answer,
                "mismatch",
                time.perf_counter() - t0,
                method,
                f"different units ({unit} vs {info.unit})",
            )
        if match_key(normalised) == info.key:
            return GradeResult(True, answer, "exact", time.perf_counter() - t0, method)
        if has_connective(normalised):
            # "x=3 \lor x=4", "3 \equiv 4": math-verify grades the last equation (a reward
            # hack); a logic connective, implication, equivalence or "\neq" is exact-match only.
            return GradeResult(
                False,
                answer,
                "mismatch",
                time.perf_counter() - t0,
                method,
                "logic connective or relation (only an exact match counts)",
            )

        if len(normalised) > max(MAX_PARSE_CHARS, 4 * len(info.normalised)):
            return GradeResult(
                False,
                _clip(answer),
                "mismatch",
                time.perf_counter() - t0,
                method,
                "answer too long to be the gold",
            )
        detail = ""
        if info.value is not None:
            try:
                pred_value = parse_answer(normalised, is_wrapped_text(answer))
            except ChoiceJunk as exc:
                return GradeResult(
                    False,
                    answer,
                    "mismatch",
                    time.perf_counter() - t0,
                    method,
                    f"choice letter with other text (only an exact match counts): {exc}",
                )
            except ParseError as exc:
                detail = f"prediction not parsed: {exc}"
            except RecursionError:  # pragma: no cover - depth is capped
                detail = "prediction too deep"
            except Exception as exc:  # pragma: no cover - a fast-path bug must not crash a step
                logger.exception("grading fast path failed on %r", answer[:200])
                detail = f"fast path error: {type(exc).__name__}"
            else:
                try:
                    verdict = compare(pred_value, info.value, c0 + min(timeout_s, 0.5 * timeout_s + 0.05))
                except Exception as exc:  # pragma: no cover - see above
                    logger.exception("grading comparison failed on %r vs %r", answer[:200], info.gold[:200])
                    verdict = Verdict(None, "undecided", f"fast path error: {type(exc).__name__}")
                if verdict.equal is not None:
                    reason = verdict.reason if verdict.equal else "mismatch"
                    return GradeResult(verdict.equal, answer, reason, time.perf_counter() - t0, method, verdict.detail)
                detail = verdict.detail
        else:
            detail = "gold not parsed"

        if words_between_numbers(normalised) or words_between_numbers(info.normalised):
            # "5 hours 30 minutes" vs 5: math-verify would read the first number only (a reward
            # hack). Several quantities separated by words count only as an exact match.
            return GradeResult(
                False,
                answer,
                "mismatch",
                time.perf_counter() - t0,
                method,
                "several numbers separated by words (only an exact match counts)",
            )
        if has_hedge_word(normalised):
            # "not 12", "either 12, 13", "maybe 48": math-verify may read the number alone.
            return GradeResult(
                False,
                answer,
                "mismatch",
                time.perf_counter() - t0,
                method,
                "a hedge or negation word (only an exact match counts)",
            )
        if words_after_number(normalised):
            # "3 thousand", "3 is wrong", "3 not": words that were not dropped as units change
            # what the number means; math-verify may read the number alone.
            return GradeResult(
                False,
                answer,
                "mismatch",
                time.perf_counter() - t0,
                method,
                "a number followed by words (only an exact match counts)",
            )
        refused = not_for_math_verify(normalised)
        if refused is not None:
            # "The result is 12 = 13", "x \approx 3 \pm 1", "5+": math-verify reads one number.
            return GradeResult(
                False, answer, "mismatch", time.perf_counter() - t0, method, f"{refused} (only an exact match counts)"
            )
        shifted = gold_plus_number(normalised, info, deadline)
        if shifted is not None:
            # "(2,4)+9" for "(2,4)": certain without sympy (math-verify spent 20-300 ms on each)
            return GradeResult(False, answer, "mismatch", time.perf_counter() - t0, method, shifted)
        if not self.use_worker:
            return GradeResult(False, answer, "mismatch", time.perf_counter() - t0, method, f"undecided: {detail}")
        # the worker is killed at its deadline and reaped before verify() returns: keep that
        # latency (tens of ms on a loaded machine) inside timeout_s
        remaining = deadline - self.clock() - min(KILL_MARGIN_S, 0.1 * timeout_s)
        if remaining <= 0:
            return GradeResult(False, answer, "timeout", time.perf_counter() - t0, method, detail)
        if self.clock is time.perf_counter:
            status, value = self.pool.verify(_for_math_verify(answer), _for_math_verify(info.gold), remaining)
        else:  # the worker gets what is left as its own CPU time (a pool that can count it)
            status, value = self.pool.verify(
                _for_math_verify(answer), _for_math_verify(info.gold), remaining, cpu_time=True
            )
        elapsed = time.perf_counter() - t0
        if status == "ok":
            ok = bool(value)
            return GradeResult(ok, answer, "symbolic" if ok else "mismatch", elapsed, method, "math-verify")
        if status == "timeout":
            return GradeResult(False, answer, "timeout", elapsed, method, f"math-verify: {value}")
        return GradeResult(False, answer, "error", elapsed, method, f"math-verify: {value}")


def _clip(s: str, n: int = 200) -> str:
    return s if len(s) <= n else s[:n] + "..."


def _check_timeout(timeout_s: object) -> None:
    if (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, (int, float))
        or not timeout_s > 0
        or not math.isfinite(timeout_s)
    ):
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")

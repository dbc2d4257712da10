"""A calibration sweep's answers graded per cap, and its table: accuracy with Wilson 95% intervals, boxed share.

Each answer (token ids, as the model wrote them) is graded on its first ``k`` tokens for every cap ``k``
(``reasoning_env.grading.grade`` with the question). One row per (answer, cap); the table has one line per
(cell, mode, cap), where the mode is ``greedy`` or ``T=<temperature>`` (several samples per question).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from workbench.stats import wilson

__all__ = ["BOX", "grade_rows", "mode_name", "summarise", "to_markdown", "wilson"]

#: What counts as a boxed answer: the text holds LaTeX's ``\boxed``.
BOX = "\\boxed"


def mode_name(temperature: float) -> str:
    """``"greedy"`` for temperature 0, else ``"T=<t>"`` (``T=0.7``)."""
    return "greedy" if temperature == 0 else f"T={temperature:g}"


def grade_rows(
    answers: Iterable[dict], caps: Sequence[int], decode: Callable[[list[int]], str], grade: Callable[..., Any]
) -> list[dict]:
    """One row per answer and cap.

    Args:
        answers: Records with ``question_id``, ``question``, ``gold``, ``cell``, ``source``, ``problem_type``,
            ``difficulty``, ``temperature``, ``sample``, ``split``, ``ids`` (the answer's token ids without
            the stop token) and ``stopped`` (the model ended it itself).
        caps: The caps to grade at.
        decode: Token ids -> text.
        grade: ``reasoning_env.grading.grade`` (``grade(text, gold, question=...)`` with ``.correct``).

    Returns:
        Rows with the answer's keys (not ``ids``/``question``/``gold``) and ``mode``, ``token_cap``,
        ``correct``, ``boxed`` (the first ``cap`` tokens hold ``\\boxed``), ``tokens`` (spent within the cap),
        ``finished`` (the model ended the answer within the cap).
    """
    rows = []
    for a in answers:
        ids = list(a["ids"])
        base = {k: v for k, v in a.items() if k not in ("ids", "question", "gold", "text")}
        base["mode"] = mode_name(float(a["temperature"]))
        for cap in caps:
            text = decode(ids[:cap])
            rows.append(
                base
                | {
                    "token_cap": int(cap),
                    "correct": bool(grade(text, a["gold"], question=a["question"]).correct),
                    "boxed": BOX in text,
                    "tokens": min(len(ids), int(cap)),
                    "finished": bool(a["stopped"]) and len(ids) <= cap,
                }
            )
    return rows


def summarise(rows: Iterable[dict]) -> list[dict]:
    """The table: one record per (cell, mode, cap) in first-seen cell order, greedy first, caps ascending.

    Each record: ``cell``, ``problem_type``, ``difficulty``, ``mode``, ``token_cap``, ``n`` (answers),
    ``questions``, ``samples_per_question``, ``correct``, ``accuracy``, ``ci95`` (Wilson, over the ``n``
    answers: with several samples per question they are not independent, so it is narrower than a
    question-clustered interval), ``boxed``, ``finished`` (shares; ``boxed`` None for rows of a sweep that did not
    record it), ``median_tokens`` (within the cap).
    """
    groups: dict[tuple, list[dict]] = {}
    order: list[str] = []
    for r in rows:
        if r["cell"] not in order:
            order.append(r["cell"])
        groups.setdefault((r["cell"], r["mode"], int(r["token_cap"])), []).append(r)

    def mode_key(m: str) -> float:
        return -1.0 if m == "greedy" else float(m.split("=", 1)[1])

    out = []
    for cell, mode, cap in sorted(groups, key=lambda g: (order.index(g[0]), mode_key(g[1]), g[2])):
        grp = groups[(cell, mode, cap)]
        n = len(grp)
        k = sum(bool(r["correct"]) for r in grp)
        qs = {r["question_id"] for r in grp}
        lo, hi = wilson(k, n)
        toks = sorted(int(r["tokens"]) for r in grp)
        mid = n // 2
        median = toks[mid] if n % 2 else (toks[mid - 1] + toks[mid]) / 2
        out.append(
            {
                "cell": cell,
                "problem_type": grp[0]["problem_type"],
                "difficulty": grp[0]["difficulty"],
                "mode": mode,
                "token_cap": cap,
                "n": n,
                "questions": len(qs),
                "samples_per_question": round(n / len(qs), 2),
                "correct": k,
                "accuracy": round(k / n, 4),
                "ci95": [round(lo, 4), round(hi, 4)],
                "boxed": round(sum(bool(r["boxed"]) for r in grp) / n, 4) if "boxed" in grp[0] else None,
                "finished": round(sum(bool(r["finished"]) for r in grp) / n, 4),
                "median_tokens": median,
            }
        )
    return out


def to_markdown(table: Sequence[dict]) -> str:
    """The table as Markdown, one line per (cell, mode, cap)."""
    head = (
        "| cell | mode | cap | n (questions x samples) | accuracy [Wilson 95%] | boxed | finished "
        "| median tokens within the cap |\n"
        "|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['cell']} | {r['mode']} | {r['token_cap']} "
        f"| {r['n']} ({r['questions']} x {r['samples_per_question']:g}) "
        f"| {r['accuracy']:.2f} [{r['ci95'][0]:.2f}-{r['ci95'][1]:.2f}] "
        f"| {'-' if r['boxed'] is None else format(r['boxed'], '.2f')} | {r['finished']:.2f} "
        f"| {r['median_tokens']:g} |"
        for r in table
    ]
    return head + "\n".join(lines) + "\n"

"""Gold answers are parsed once, cached, and reported at load time; the environment uses it."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from reasoning_env.grading import Grader, prepare_gold
from reasoning_env.grading.extract import gold_from_gsm8k

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared"
DATA = SHARED / "data"
UNPARSEABLE = r"\operatorname{lcm}(4, 6)"


def test_prepare_gold_is_cached() -> None:
    assert prepare_gold(r"\frac{1}{2}") is prepare_gold(r"\frac{1}{2}")


def test_prepared_gold_has_value_and_kind() -> None:
    info = prepare_gold(r"\left( 3, \frac{\pi}{2} \right)")
    assert info.kind == "tuple" and info.issue is None and info.value is not None


def test_unparseable_gold_is_reported_once_at_load() -> None:
    grader = Grader(use_worker=False)
    report = grader.prepare_golds(["5", UNPARSEABLE, "5", UNPARSEABLE])
    assert report.total == 2 and report.parsed == 1
    assert [g for g, _ in report.issues] == [UNPARSEABLE]
    assert not report.ok
    assert UNPARSEABLE in grader.gold_issues()


def test_unparseable_gold_is_still_graded_by_exact_match() -> None:
    grader = Grader(use_worker=False)
    assert grader.grade(r"\boxed{\operatorname{lcm}(4,6)}", UNPARSEABLE).correct


def test_unparseable_gold_goes_to_math_verify() -> None:
    grader = Grader(timeout_s=20.0)
    assert grader.warm_up(wait_s=90.0)
    result = grader.grade(r"\boxed{12}", UNPARSEABLE)
    assert result.correct and result.reason == "symbolic", result


@pytest.mark.parametrize("bad", ["", "   "])
def test_empty_gold_is_a_clear_error(bad: str) -> None:
    with pytest.raises(ValueError, match="empty"):
        Grader(use_worker=False).prepare_golds([bad])


def test_non_string_gold_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        prepare_gold(5)  # type: ignore[arg-type]


def test_every_math500_and_gsm8k_gold_parses() -> None:
    if not DATA.is_dir():
        pytest.skip(f"shared data not found at {DATA} (../shared is absent)")
    golds = [json.loads(line)["answer"] for line in (DATA / "math500_test.jsonl").read_text().splitlines()]
    golds += [
        gold_from_gsm8k(json.loads(line)["answer"]) for line in (DATA / "gsm8k_test.jsonl").read_text().splitlines()
    ]
    report = Grader(use_worker=False).prepare_golds(golds)
    assert report.ok, report.issues[:5]


def test_every_math500_and_gsm8k_gold_matches_itself_when_boxed() -> None:
    """The stricter unit / connective / choice / rounding rules must never reject a real gold
    written back as the answer (500 MATH-500 + 1,319 GSM8K golds, bare and inside a sentence)."""
    if not DATA.is_dir():
        pytest.skip(f"shared data not found at {DATA} (../shared is absent)")
    golds = [json.loads(line)["answer"] for line in (DATA / "math500_test.jsonl").read_text().splitlines()]
    golds += [
        gold_from_gsm8k(json.loads(line)["answer"]) for line in (DATA / "gsm8k_test.jsonl").read_text().splitlines()
    ]
    grader = Grader(use_worker=False)
    failures = [
        (gold, v.reason)
        for gold in golds
        for resp in ("\\boxed{" + gold + "}", "The answer is $\\boxed{" + gold + "}$.")
        if not (v := grader.grade(resp, gold)).correct
    ]
    assert len(golds) == 1819 and failures == []


def test_environment_prepares_golds_when_pools_load(caplog) -> None:
    from reasoning_env.config import EnvConfig
    from reasoning_env.env import ReasoningEconomicsEnv
    from reasoning_env.questions import Question
    from reasoning_env.sources import PoolSet

    questions = (
        Question(id="t/1", text="1+1?", gold_answer="2", problem_type="t", source="test"),
        Question(id="t/2", text="lcm?", gold_answer=UNPARSEABLE, problem_type="t", source="test"),
    )
    grader = Grader(use_worker=False)
    env = ReasoningEconomicsEnv(EnvConfig(num_questions=2), pools=PoolSet(pools={"t": questions}), grader=grader)
    with caplog.at_level(logging.WARNING, logger="reasoning_env.grading.gold"):
        _ = env.pools
    assert UNPARSEABLE in grader.gold_issues()
    assert any("outside the fast grader" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="reasoning_env.grading.gold"):
        _ = env.pools  # prepared once per environment, not at every access
    assert not caplog.records
    other = ReasoningEconomicsEnv(
        EnvConfig(num_questions=2), pools=PoolSet(pools={"t": questions}), grader=Grader(use_worker=False)
    )
    with caplog.at_level(logging.WARNING, logger="reasoning_env.grading.gold"):
        _ = other.pools  # a second environment (e.g. the next server session): no repeated warning
    assert not caplog.records


def test_environment_step_grades_with_the_grader() -> None:
    from reasoning_env.config import EnvConfig
    from reasoning_env.env import ReasoningEconomicsEnv
    from reasoning_env.questions import Question
    from reasoning_env.sources import PoolSet

    tok = DATA / "qwen2.5_tokenizer"
    questions = (Question(id="t/1", text="half of 1?", gold_answer=r"\frac{1}{2}", problem_type="t", source="test"),)
    config = EnvConfig(num_questions=1, **({"tokenizer_name": str(tok)} if tok.is_dir() else {}))
    env = ReasoningEconomicsEnv(config, pools=PoolSet(pools={"t": questions}), grader=Grader(use_worker=False))
    env.reset(seed=0)
    obs = env.step(r"It is $\boxed{0.5}$.")
    assert obs.last_step.correct is True
    assert obs.last_step.grade_reason == "numeric"

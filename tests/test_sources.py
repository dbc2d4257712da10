"""Question sources: loaders on the exact dataset schemas, gold extraction per dataset card,
the registry, offline stand-ins."""

from __future__ import annotations

import json
import logging

import pytest

from conftest import FIXTURES
from reasoning_env.sources import LoadContext, SourceError, SourceUnavailable, available, load_pools, load_source
from reasoning_env.sources.metamathqa import METAMATHQA_TYPES

OFFLINE = LoadContext(hub=False)


def test_registry_lists_every_source():
    assert set(available()) >= {"metamathqa", "numina_tir", "gsm8k", "math500", "hf", "jsonl", "reasoning_gym", "builtin"}


def test_metamathqa_fixture_rows_in_the_exact_schema():
    qs = load_source("metamathqa", {"data_files": str(FIXTURES / "metamathqa_rows.jsonl")}, OFFLINE)
    # 9 rows, one without "The answer is:" is skipped
    assert len(qs) == 8
    assert {q.problem_type for q in qs} == set(METAMATHQA_TYPES)
    by_type = {q.problem_type: q for q in qs}
    assert by_type["MATH_AnsAug"].gold_answer == "\\frac{5}{6}"
    assert by_type["GSM_SV"].gold_answer == "12"
    assert by_type["GSM_Rephrased"].text.startswith("If a shirt costs")
    assert all(q.source == "metamathqa" and q.difficulty is None for q in qs)


def test_metamathqa_type_filter():
    qs = load_source("metamathqa", {"data_files": str(FIXTURES / "metamathqa_rows.jsonl"), "types": ["GSM_SV", "MATH_SV"]}, OFFLINE)
    assert sorted(q.problem_type for q in qs) == ["GSM_SV", "MATH_SV"]


def test_numina_tir_fixture_rows_take_the_last_boxed_with_matched_braces():
    qs = load_source("numina_tir", {"data_files": str(FIXTURES / "numina_tir_rows.jsonl")}, OFFLINE)
    assert [q.gold_answer for q in qs] == ["15", "\\frac{1}{2}", "\\left( 3, \\frac{\\pi}{2} \\right)"]
    assert {q.problem_type for q in qs} == {"NuminaMath-TIR"}


def test_gsm8k_from_shared_data_removes_thousands_separators(shared_data):
    qs = load_source("gsm8k", {}, LoadContext(data_dir=str(shared_data)))
    assert len(qs) == 1319
    assert qs[0].gold_answer == "18" and qs[0].text.startswith("Janet")
    rows = [json.loads(line) for line in (shared_data / "gsm8k_test.jsonl").open()]
    with_commas = [i for i, r in enumerate(rows) if "," in r["answer"].split("####")[-1]]
    assert with_commas, "GSM8K test has answers with thousands separators"
    for i in with_commas:
        assert "," not in qs[i].gold_answer
        assert qs[i].gold_answer == rows[i]["answer"].split("####")[-1].strip().replace(",", "")


def test_math500_from_shared_data_has_levels_and_subjects(shared_data):
    qs = load_source("math500", {}, LoadContext(data_dir=str(shared_data)))
    assert len(qs) == 500
    assert {q.difficulty for q in qs} == {1, 2, 3, 4, 5}
    assert len({q.subject for q in qs}) == 7
    first = qs[0]
    assert first.id == "test/precalculus/807.json" and first.gold_answer == "\\left( 3, \\frac{\\pi}{2} \\right)"


def test_math500_answer_equals_the_last_box_of_its_solution(shared_data):
    from reasoning_env.grading.extract import gold_from_boxed

    for q in load_source("math500", {}, LoadContext(data_dir=str(shared_data))):
        assert gold_from_boxed(q.metadata["solution"]) == q.gold_answer


def test_jsonl_source_with_a_field_mapping(tmp_path):
    f = tmp_path / "rows.jsonl"
    f.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"uid": "a", "prompt": "1+1?", "sol": "It is \\boxed{2}.", "lvl": "Level 2"},
                {"uid": "b", "prompt": "2+2?", "sol": "It is \\boxed{4}.", "lvl": "Level 4"},
            ]
        )
    )
    opts = {"data_files": str(f), "prompt_field": "prompt", "answer_field": "sol", "answer_extraction": "boxed",
            "problem_type": "Mine", "difficulty_field": "lvl", "id_field": "uid"}
    qs = load_source("jsonl", opts, OFFLINE)
    assert [(q.id, q.text, q.gold_answer, q.problem_type, q.difficulty) for q in qs] == [
        ("a", "1+1?", "2", "Mine", 2), ("b", "2+2?", "4", "Mine", 4)]


def test_jsonl_source_names_missing_fields(tmp_path):
    f = tmp_path / "rows.jsonl"
    f.write_text(json.dumps({"q": "x"}) + "\n")
    with pytest.raises(SourceError, match="lack field"):
        load_source("jsonl", {"data_files": str(f)}, OFFLINE)


def test_jsonl_needs_files_and_hf_needs_an_id():
    with pytest.raises(SourceError, match="data_files"):
        load_source("jsonl", {}, OFFLINE)
    with pytest.raises(SourceError, match="hf_id"):
        load_source("hf", {}, OFFLINE)


def test_reasoning_gym_is_offline_deterministic_and_takes_difficulty_options():
    opts = {"datasets": ["basic_arithmetic"], "size": 5, "seed": 3, "config": {"basic_arithmetic": {"min_terms": 4, "max_terms": 4}}}
    a = load_source("reasoning_gym", opts, OFFLINE)
    b = load_source("reasoning_gym", dict(opts), OFFLINE)
    assert [q.text for q in a] == [q.text for q in b] and len(a) == 5
    assert a[0].problem_type == "reasoning_gym/basic_arithmetic" and a[0].difficulty == 1
    # four terms -> three operators in the expression
    assert all(sum(q.text.count(op) for op in " + , - , * , / ".split(",")) >= 1 for q in a)
    with pytest.raises(SourceError, match="unknown generator"):
        load_source("reasoning_gym", {"datasets": ["not_a_generator"]}, OFFLINE)


def test_unreachable_source_without_standin_says_how_to_fix():
    with pytest.raises(SourceUnavailable, match="data_files"):
        load_source("gsm8k", {}, OFFLINE)


def test_offline_default_mix_uses_builtin_standins_with_one_log_line(caplog):
    from reasoning_env import EnvConfig

    cfg = EnvConfig()
    with caplog.at_level(logging.WARNING, logger="reasoning_env.sources"):
        ps = load_pools(cfg.sources, offline_fallback=True, hub=False)
    assert [u["used"] for u in ps.sources_used] == ["builtin:metamathqa", "builtin:numina_tir"]
    assert all(u["reason"] for u in ps.sources_used)
    assert ps.problem_types == sorted(list(METAMATHQA_TYPES) + ["NuminaMath-TIR"])
    assert all(len(v) >= 20 for v in ps.pools.values())
    assert len(ps.pools["NuminaMath-TIR"]) >= 60
    lines = [r for r in caplog.records if "builtin stand-ins" in r.getMessage()]
    assert len(lines) == 1


def test_offline_without_fallback_is_an_error():
    from reasoning_env import EnvConfig

    with pytest.raises(SourceUnavailable):
        load_pools(EnvConfig().sources, offline_fallback=False, hub=False)


def test_builtin_questions_have_difficulty_and_gold():
    qs = load_source("builtin", {}, OFFLINE)
    assert len(qs) >= 8 * 20 + 60
    assert all(q.gold_answer and q.difficulty in (1, 2, 3, 4, 5) for q in qs)
    assert len({q.id for q in qs}) == len(qs)


def test_env_reports_sources_used_offline():
    from reasoning_env import ReasoningEconomicsEnv

    obs = ReasoningEconomicsEnv().reset(seed=1)
    assert {u["used"] for u in obs.metadata["sources_used"]} == {"builtin:metamathqa", "builtin:numina_tir"}
    assert len(set(obs.metadata["problem_types"])) == 9  # 10 questions over 9 types: every type present

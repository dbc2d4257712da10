"""Question sources: loaders on the exact dataset schemas, gold extraction per dataset card,
the registry, offline stand-ins."""

from __future__ import annotations

import json
import logging

import pytest
from conftest import FIXTURES, REPO, shared_data_or_skip

from reasoning_env.sources import LoadContext, SourceError, SourceUnavailable, available, load_pools, load_source
from reasoning_env.sources.hf_dataset import detect_gold_format
from reasoning_env.sources.metamathqa import METAMATHQA_TYPES

OFFLINE = LoadContext(hub=False)


def test_registry_lists_every_source():
    assert set(available()) >= {
        "metamathqa",
        "numina_tir",
        "gsm8k",
        "math500",
        "hf",
        "jsonl",
        "reasoning_gym",
        "builtin",
    }


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
    qs = load_source(
        "metamathqa", {"data_files": str(FIXTURES / "metamathqa_rows.jsonl"), "types": ["GSM_SV", "MATH_SV"]}, OFFLINE
    )
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
    opts = {
        "data_files": str(f),
        "prompt_field": "prompt",
        "answer_field": "sol",
        "answer_extraction": "boxed",
        "problem_type": "Mine",
        "difficulty_field": "lvl",
        "id_field": "uid",
    }
    qs = load_source("jsonl", opts, OFFLINE)
    assert [(q.id, q.text, q.gold_answer, q.problem_type, q.difficulty) for q in qs] == [
        ("a", "1+1?", "2", "Mine", 2),
        ("b", "2+2?", "4", "Mine", 4),
    ]


def test_jsonl_source_names_missing_fields(tmp_path):
    f = tmp_path / "rows.jsonl"
    f.write_text(json.dumps({"q": "x"}) + "\n")
    with pytest.raises(SourceError, match="lack field"):
        load_source("jsonl", {"data_files": str(f)}, OFFLINE)


def test_a_malformed_jsonl_line_is_a_source_error_naming_the_file_and_line(tmp_path):
    f = tmp_path / "rows.jsonl"
    f.write_text(json.dumps({"question": "1+1?", "answer": "#### 2"}) + '\n{"question": "2+2?", "answer": \n')
    with pytest.raises(SourceError, match=r"rows\.jsonl.*line 2") as err:
        load_source("jsonl", {"data_files": str(f), "answer_extraction": "gsm8k"}, OFFLINE)
    assert "one JSON object per line" in str(err.value)


def test_an_empty_data_file_is_a_source_error_saying_so(tmp_path):
    f = tmp_path / "rows.jsonl"
    f.write_text("")
    with pytest.raises(SourceError, match=r"rows\.jsonl.*is empty"):
        load_source("jsonl", {"data_files": str(f), "answer_extraction": "gsm8k"}, OFFLINE)


def test_an_unreadable_csv_or_parquet_file_is_a_source_error_with_the_reader_s_reason(tmp_path):
    csv = tmp_path / "rows.csv"
    csv.write_text('question,answer\n1+1?,"#### 2\n')
    with pytest.raises(SourceError, match=r"cannot read .*rows\.csv: .*EOF inside string"):
        load_source("jsonl", {"data_files": str(csv), "answer_extraction": "gsm8k"}, OFFLINE)
    parquet = tmp_path / "rows.parquet"
    parquet.write_bytes(b"not a parquet file")
    with pytest.raises(SourceError, match=r"cannot read .*rows\.parquet: .*[Pp]arquet"):
        load_source("jsonl", {"data_files": str(parquet), "answer_extraction": "gsm8k"}, OFFLINE)


def test_jsonl_needs_files_and_hf_needs_an_id():
    with pytest.raises(SourceError, match="data_files"):
        load_source("jsonl", {}, OFFLINE)
    with pytest.raises(SourceError, match="hf_id"):
        load_source("hf", {}, OFFLINE)


def _rows(tmp_path, answers, name="rows.jsonl"):
    f = tmp_path / name
    f.write_text("".join(json.dumps({"question": f"Q{i}?", "answer": a}) + "\n" for i, a in enumerate(answers)))
    return str(f)


#: One worked solution per common gold format: (answer_extraction, answer field, gold).
GOLD_FORMATS = [
    ("gsm8k", "She has 2 + 3 = <<2+3=5>>5 boxes of 260.\nSo 5 * 260 = <<5*260=1300>>1300.\n#### 1,300", "1300"),
    ("boxed", "Halve it: the probability is $\\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}"),
    ("metamathqa", "We have $x = \\boxed{7}$ from the first line.\nThe answer is: 7", "7"),
]


@pytest.mark.parametrize("source", ["hf", "jsonl"])
@pytest.mark.parametrize("fmt, solution, gold", GOLD_FORMATS, ids=[f[0] for f in GOLD_FORMATS])
def test_worked_solutions_with_answer_extraction_unset_stop_with_one_line_naming_it(
    tmp_path, source, fmt, solution, gold
):
    files = _rows(tmp_path, [solution, solution])
    with pytest.raises(SourceError) as err:
        load_source(source, {"data_files": files}, OFFLINE)
    message = str(err.value)
    assert "\n" not in message
    assert f"Set answer_extraction: {fmt} " in message and "2 of 2 values of field 'answer'" in message


@pytest.mark.parametrize("source", ["hf", "jsonl"])
@pytest.mark.parametrize("fmt, solution, gold", GOLD_FORMATS, ids=[f[0] for f in GOLD_FORMATS])
def test_the_answer_extraction_the_message_names_reads_the_gold(tmp_path, source, fmt, solution, gold):
    qs = load_source(source, {"data_files": _rows(tmp_path, [solution]), "answer_extraction": fmt}, OFFLINE)
    assert [q.gold_answer for q in qs] == [gold]


def test_plain_answers_load_as_they_are_without_answer_extraction(tmp_path):
    answers = ["18", "\\frac{1}{2}", "\\left( 3, \\frac{\\pi}{2} \\right)", "x^2 + 1"]
    qs = load_source("jsonl", {"data_files": _rows(tmp_path, answers)}, OFFLINE)
    assert [q.gold_answer for q in qs] == answers


def test_answer_extraction_none_keeps_a_worked_solution_as_the_gold(tmp_path):
    solution = GOLD_FORMATS[0][1]
    qs = load_source("jsonl", {"data_files": _rows(tmp_path, [solution]), "answer_extraction": "none"}, OFFLINE)
    assert [q.gold_answer for q in qs] == [solution]


def test_an_extraction_that_finds_no_gold_names_the_format_the_field_holds(tmp_path):
    files = _rows(tmp_path, ["It is \\boxed{4}.", "It is \\boxed{5}."])
    with pytest.raises(SourceError, match="found no gold answer in any of the 2 values.*set answer_extraction: boxed"):
        load_source("jsonl", {"data_files": files, "answer_extraction": "gsm8k"}, OFFLINE)


def test_rows_without_a_gold_are_skipped_with_one_warning(tmp_path, caplog):
    files = _rows(tmp_path, ["1 + 1 = 2\n#### 2", "no marker here", "2 + 2 = 4\n#### 4"])
    with caplog.at_level(logging.WARNING, logger="reasoning_env.sources"):
        qs = load_source("jsonl", {"data_files": files, "answer_extraction": "gsm8k"}, OFFLINE)
    assert [q.gold_answer for q in qs] == ["2", "4"]
    assert [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()] == [
        "source 'jsonl': answer_extraction 'gsm8k' found no gold answer in 1 of 3 rows "
        f"of files:{files} (field 'answer'); they are skipped"
    ]


def test_detect_gold_format_takes_the_most_common_and_the_last_marker():
    assert detect_gold_format(["18", "\\frac{1}{2}"]) is None
    fmt, matched, total, _ = detect_gold_format(["a\n#### 1", "b\n#### 2", "c \\boxed{3}", "4"])
    assert (fmt, matched, total) == ("gsm8k", 2, 4)
    # MetaMathQA boxes a value, then states the answer: the later marker is the gold's format
    assert detect_gold_format(["\\boxed{5} so The answer is: 5"])[0] == "metamathqa"
    assert detect_gold_format(["The answer is 5, i.e. \\boxed{5}"])[0] == "boxed"


def test_real_gsm8k_through_the_hf_source_needs_answer_extraction_gsm8k(shared_data):
    files = str(shared_data / "gsm8k_test.jsonl")
    with pytest.raises(SourceError, match="1319 of 1319 values of field 'answer'.*Set answer_extraction: gsm8k"):
        load_source("hf", {"data_files": files}, OFFLINE)
    via_hf = load_source("hf", {"data_files": files, "answer_extraction": "gsm8k"}, OFFLINE)
    native = load_source("gsm8k", {}, LoadContext(data_dir=str(shared_data)))
    assert [q.gold_answer for q in via_hf] == [q.gold_answer for q in native]


def test_a_right_answer_grades_right_on_a_gsm8k_style_file(tmp_path):
    from reasoning_env import EnvConfig, ReasoningEconomicsEnv

    files = _rows(tmp_path, ["3 + 4 = <<3+4=7>>7\n#### 7"] * 3)
    config = EnvConfig(
        sources=[{"name": "jsonl", "options": {"data_files": files, "answer_extraction": "gsm8k"}}],
        num_questions=2,
        total_budget=400,
    )
    env = ReasoningEconomicsEnv(config)
    env.reset(seed=0)
    obs = env.step("3 + 4 = 7, so the answer is \\boxed{7}.")
    assert obs.last_step.correct, obs.last_step


EXAMPLES = REPO / "examples" / "sources"
EXAMPLE_CONFIGS = sorted(EXAMPLES.glob("*.yaml"))


def test_every_source_has_an_example_config():
    assert sorted(p.stem for p in EXAMPLE_CONFIGS) == sorted(available())


@pytest.mark.parametrize("path", EXAMPLE_CONFIGS, ids=[p.stem for p in EXAMPLE_CONFIGS])
def test_example_config_loads_answers_not_solutions(path, monkeypatch):
    """Each ``examples/sources/<name>.yaml`` is a valid config for that source that loads offline
    from the repository root (gsm8k / math500 from ``../shared/data``; metamathqa / numina_tir from
    their builtin stand-ins), and its golds are answers, not worked solutions."""
    from reasoning_env import EnvConfig

    monkeypatch.chdir(REPO)
    config = EnvConfig.from_yaml(path)
    assert [s.name for s in config.sources] == [path.stem]
    if path.stem in ("gsm8k", "math500"):
        config = config.replace(data_dir=str(shared_data_or_skip()))
    pools = load_pools(config.sources, data_dir=config.data_dir, offline_fallback=config.offline_fallback, hub=False)
    golds = [q.gold_answer for qs in pools.pools.values() for q in qs]
    assert len(golds) >= config.num_questions
    assert detect_gold_format(golds) is None


def test_reasoning_gym_is_offline_deterministic_and_takes_difficulty_options():
    opts = {
        "datasets": ["basic_arithmetic"],
        "size": 5,
        "seed": 3,
        "config": {"basic_arithmetic": {"min_terms": 4, "max_terms": 4}},
    }
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


def test_unreachable_source_names_itself_what_was_tried_and_the_files_it_looks_for():
    with pytest.raises(SourceUnavailable) as err:
        load_source("gsm8k", {}, OFFLINE)
    assert err.value.source == "gsm8k" and err.value.local_patterns[0] == "gsm8k_test.jsonl"
    assert any("Hub is unreachable" in t for t in err.value.tried)


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

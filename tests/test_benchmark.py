"""The standard benchmark (``python -m workbench.evaluate --benchmark``): published splits, every measure with its
95% interval for the oracle, the even split, a simulated policy and a real model (an OpenAI-compatible stub on
loopback), and a real model's regret only against curves calibrated to it."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.openai_stub import start
from workbench import benchmark as bench

ROOT = Path(__file__).resolve().parents[1]
MEASURES = ("exam_score", "accuracy", "regret", "gap_closed")


def test_the_published_splits_are_the_seeds_the_protocol_plays():
    published = json.loads((ROOT / "examples/benchmark/splits.json").read_text())["splits"]
    for name, split in bench.SPLITS.items():
        assert published[name] == {"base_seed": split.base_seed, "exams": split.n, "seeds": bench.split_seeds(split)}
    assert not set(published["dev"]["seeds"]) & set(published["held-out"]["seeds"])


def test_the_benchmark_config_is_three_ordered_questions_under_a_hard_cap():
    from reasoning_env.config import EnvConfig

    cfg = EnvConfig.from_yaml(bench.benchmark_config_path())
    assert cfg.num_questions == 3 and cfg.hard_cap_mode and cfg.max_tokens_per_step >= max(bench.BUDGETS)
    assert [s.name for s in cfg.sources] == ["gsm8k", "math500"]


def _episodes(rows: dict[str, list[tuple[int, float]]], oracle: list[float]) -> pd.DataFrame:
    """Exams: per policy ``(right answers, expected right answers)``; ``oracle``: the oracle's expectation."""
    return pd.DataFrame(
        [
            {
                "policy": pol,
                "episode": i,
                "num_correct": c,
                "num_questions": 3,
                "expected_correct": e,
                "oracle_expected_correct": oracle[i],
            }
            for pol, scores in rows.items()
            for i, (c, e) in enumerate(scores)
        ]
    )


ORACLE_EXPECTED = [2.0, 1.8, 2.2, 1.0]
EXAMS = {
    "oracle_allocation": [(3, 2.0), (2, 1.8), (2, 2.2), (1, 1.0)],
    "uniform": [(1, 1.5), (1, 1.6), (2, 1.7), (0, 1.0)],
    "sim_greedy": [(2, 1.9), (2, 1.6), (2, 2.0), (0, 1.0)],
}


def test_scores_count_right_answers_and_regret_and_gap_compare_expectations():
    m = bench.measures(_episodes(EXAMS, ORACLE_EXPECTED), modelled=list(EXAMS), against=None, n_resamples=200)
    g = m["sim_greedy"]
    assert g["exam_score"]["value"] == 1.5 and g["accuracy"]["value"] == 0.5
    assert g["regret"]["value"] == pytest.approx((7.0 - 6.5) / 4, abs=1e-4)  # oracle 7.0 expected, sim_greedy 6.5
    assert g["gap_closed"]["value"] == pytest.approx((6.5 - 5.8) / (7.0 - 5.8), abs=1e-4)  # JSON: 4 decimals
    assert (m["oracle_allocation"]["gap_closed"]["value"], m["uniform"]["gap_closed"]["value"]) == (1.0, 0.0)
    lo, hi = g["exam_score"]["ci95"]
    assert lo <= 1.5 <= hi


def test_a_real_models_regret_is_not_taken_from_curves_that_do_not_model_it():
    exams = {**EXAMS, "llm_local": [(0, 9.9), (1, 9.9), (0, 9.9), (1, 9.9)]}  # its curve expectation is ignored
    refs = ["oracle_allocation", "uniform"]
    m = bench.measures(_episodes(exams, ORACLE_EXPECTED), modelled=refs, against=None, n_resamples=200)
    assert m["llm_local"]["regret"]["value"] is None and "--curves calibrated" in m["llm_local"]["regret"]["why"]
    assert m["llm_local"]["exam_score"]["value"] == 0.5  # model-free measures stay
    m = bench.measures(_episodes(exams, ORACLE_EXPECTED), modelled=refs, against="curves X", n_resamples=200)
    assert m["llm_local"]["regret"]["value"] == pytest.approx(7.0 / 4 - 0.5)  # against its right answers
    assert m["llm_local"]["regret"]["against"] == "curves X"


def test_the_table_says_why_a_number_is_missing():
    result = {
        "results": {
            "dev": {
                "512": {
                    "llm_local": {
                        "exam_score": {"value": 0.5, "ci95": [0.0, 1.0]},
                        "accuracy": {"value": 0.1667, "ci95": [0.0, 0.33]},
                        "regret": {"value": None, "ci95": [None, None], "why": "not given: the references ..."},
                        "gap_closed": {"value": None, "ci95": [None, None], "why": "not given: the references ..."},
                    }
                }
            }
        }
    }
    assert "| dev | 512 | llm_local | 0.50 [0.00, 1.00] | 0.167 [0.000, 0.330] | n/a (not given) |" in (
        bench.to_markdown(result)
    )


def _bench_argv(cfg: Path, stub_url: str, out: Path) -> list[str]:
    """The benchmark's command on 6 dev exams of ``cfg``'s questions, a real-model policy on the stub."""
    return [
        "--benchmark",
        "--config",
        str(cfg),
        "--policies",
        "sim_greedy,llm_local",
        "--llm-base-url",
        stub_url,
        "--llm-model",
        "stub",
        "--llm-api-key",
        "x",
        "--llm-tokenizer",
        "Qwen/Qwen2.5-0.5B-Instruct",
        "--curves",
        "qwen2.5-coder-0.5b",
        "--benchmark-splits",
        "dev",
        "--benchmark-exams",
        "6",
        "--resamples",
        "200",
        "--no-progress",
        "--no-report",
        "--out",
        str(out),
    ]


def _builtin_stub():
    from reasoning_env.sources import load_source
    from reasoning_env.sources.base import LoadContext

    qs = load_source("builtin", {}, LoadContext(data_dir=None, hub=False))
    return start({q.text: q.gold_answer for q in qs})


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    """The benchmark's command on 6 dev exams of builtin questions, with a real-model policy on the stub;
    ``(exit status, benchmark folder, the exams' config)``."""
    from workbench.evaluate import main

    tmp = tmp_path_factory.mktemp("bench")
    cfg = tmp / "exam3-builtin.yaml"
    cfg.write_text("num_questions: 3\nmax_tokens_per_step: 2048\nhard_cap_mode: true\nsources: [builtin]\n")
    stub, server = _builtin_stub()
    try:
        rc = main(_bench_argv(cfg, stub.url, tmp / "out"))
    finally:
        server.shutdown()
    return rc, tmp / "out", cfg


def test_the_command_writes_every_measure_with_its_interval_for_each_budget(bench_run):
    rc, out, _ = bench_run
    assert rc == 0
    result = json.loads((out / "benchmark.json").read_text())
    assert result["partial"] and result["splits"]["dev"] == {"base_seed": 2601, "exams": 6, "of": 50}
    for budget in map(str, bench.BUDGETS):
        rows = result["results"]["dev"][budget]
        assert set(rows) == {"oracle_allocation", "uniform", "sim_greedy", "llm_local"}
        for pol, m in rows.items():
            for name in MEASURES:
                got = m[name]
                assert got["value"] is not None or got["why"], (budget, pol, name)
                assert None not in got["ci95"] or got.get("why"), (budget, pol, name)
            for name in ("exam_score", "accuracy", "regret"):
                lo, hi = m[name]["ci95"]
                assert lo <= m[name]["value"] <= hi, (budget, pol, name)
    assert (out / "dev-512" / "episodes.parquet").is_file() and "| dev | 2048 | llm_local |" in (
        out / "benchmark.md"
    ).read_text()


def test_a_real_models_regret_names_the_curves_it_is_measured_against(bench_run):
    _, out, _ = bench_run
    result = json.loads((out / "benchmark.json").read_text())
    llm = result["results"]["dev"]["1024"]["llm_local"]
    assert "qwen2.5-coder-0.5b" in llm["regret"]["against"] and "real model" in llm["regret"]["against"]
    assert "against" not in result["results"]["dev"]["1024"]["sim_greedy"]["regret"]


def test_every_benchmark_row_the_readme_shows_is_a_row_of_a_shipped_benchmark():
    """The README's benchmark tables quote the shipped records (``examples/benchmark/*/benchmark.md``, held-out
    split) cell for cell: a number re-typed or left over from an earlier run fails here."""
    shipped = set()
    for md in (ROOT / "examples/benchmark").glob("*/benchmark.md"):
        for line in md.read_text().splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 7 and cells[0] == "held-out":
                shipped.add((cells[2], cells[1].replace(",", ""), *cells[3:]))
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### The benchmark", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[1].replace(",", "").isdigit():
            rows.append((cells[0], cells[1].replace(",", ""), *cells[2:]))
    assert len(rows) >= 21, "the README's benchmark table was not found"
    missing = [r for r in rows if r not in shipped]
    assert not missing, f"README rows not in any shipped benchmark.md (held-out): {missing}"


def test_a_resumed_benchmark_reads_back_finished_budgets_and_plays_only_the_rest(bench_run, tmp_path):
    """``--resume`` on a benchmark folder: the budgets it holds finished are read back as they were (their run
    folders untouched), a missing one is played against the model, and the table is the one a whole run writes."""
    import shutil

    from workbench.evaluate import main

    _, first, cfg = bench_run
    out = tmp_path / "out"
    shutil.copytree(first, out)
    shutil.rmtree(out / "dev-2048")  # as if the run had been stopped while playing its last budget
    (out / "benchmark.json").unlink()
    kept = {b: (out / f"dev-{b}" / "run.json").read_bytes() for b in (512, 1024)}
    stub, server = _builtin_stub()
    try:
        assert main(_bench_argv(cfg, stub.url, out) + ["--resume"]) == 0
    finally:
        server.shutdown()
    assert stub.chat_requests or stub.requests, "the missing budget was played against the model"
    assert all((out / f"dev-{b}" / "run.json").read_bytes() == kept[b] for b in kept), "finished budgets not replayed"
    before = json.loads((first / "benchmark.json").read_text())["results"]["dev"]
    after = json.loads((out / "benchmark.json").read_text())["results"]["dev"]
    assert after["512"] == before["512"] and after["1024"] == before["1024"]
    assert set(after["2048"]) == set(before["2048"]) and (out / "dev-2048" / "episodes.parquet").is_file()
    assert "| dev | 2048 | llm_local |" in (out / "benchmark.md").read_text()


def test_resume_without_a_benchmark_folder_is_refused_with_the_fix(capsys):
    from workbench.evaluate import main

    assert main(["--resume", "--policies", "sim_greedy"]) == 2
    assert "--benchmark and --out FOLDER" in capsys.readouterr().err

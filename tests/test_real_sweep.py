"""``python -m workbench.real_sweep`` against the OpenAI-compatible stub on loopback: configured sources with their
options, the served name apart from the local model, sampled rows, and the table's intervals."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from tests.openai_stub import _kind, start
from workbench.sweep_cells import build_cells, load_specs
from workbench.sweep_table import summarise, wilson

ROOT = Path(__file__).resolve().parents[1]
CHAIN = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}
SPEC = [
    {
        "name": "reasoning_gym",
        "options": {
            "datasets": ["chain_sum"],
            "size": 12,
            "seed": 3,
            "config": {"chain_sum": CHAIN},
            "difficulty": {"chain_sum": 2},
        },
    }
]


@pytest.fixture(scope="module")
def tokenizer_dir() -> Path:
    from training.models import tiny_tokenizer_dir

    return tiny_tokenizer_dir()


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, tokenizer_dir):
    """One sweep of the spec: 6 questions greedy, 2 of them 3 times at T=0.7, caps 8 and 200."""
    from transformers import AutoTokenizer

    from reasoning_env.sources import load_source
    from reasoning_env.sources.base import LoadContext
    from workbench.real_sweep import main

    qs = load_source("reasoning_gym", SPEC[0]["options"], LoadContext(data_dir=None, hub=False))
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    stub, server = start({q.text: q.gold_answer for q in qs}, tokenizer=tok)
    out = tmp_path_factory.mktemp("sweep")
    argv = ["--model", str(tokenizer_dir), "--base-url", stub.url, "--served-model", "served-elsewhere"]
    argv += ["--spec", json.dumps(SPEC), "--n", "6", "--temperatures", "0.7", "--samples", "3", "--n-sampled", "2"]
    argv += ["--caps", "8,200", "--holdout", "0", "--in-flight", "4", "--out", str(out)]
    try:
        rc = main(argv)
    finally:
        server.shutdown()
    return {"rc": rc, "out": out, "stub": stub, "questions": {q.text: q for q in qs}}


def test_options_reach_the_source(sweep):
    assert sweep["rc"] == 0
    meta = json.loads((sweep["out"] / "sweep.json").read_text())
    assert [c["cell"] for c in meta["cells"]] == ["reasoning_gym/chain_sum@d2"]
    assert meta["cells"][0]["options"]["config"]["chain_sum"] == CHAIN
    asked = [q for text, q in sweep["questions"].items() if any(text in r[0] for r in sweep["stub"].replies)]
    # 2 terms of 1 digit each, as configured (reasoning-gym's default chain_sum has 2-6 terms of 1-4 digits)
    assert asked and all(re.fullmatch(r"\d [+-] \d =", q.text.split(": ")[-1].strip()) for q in asked)


def test_the_served_name_is_sent_and_the_local_model_only_tokenizes(sweep):
    assert {r["model"] for r in sweep["stub"].requests} == {"served-elsewhere"}
    meta = json.loads((sweep["out"] / "sweep.json").read_text())
    assert meta["engine"]["served_name"] == "served-elsewhere"


def test_sampled_requests_carry_the_temperature_and_no_seed(sweep):
    temps = sorted(r["temperature"] for r in sweep["stub"].requests)
    assert temps == [0.0] * 6 + [0.7] * 6
    assert not any("seed" in r for r in sweep["stub"].requests)


def test_the_table_has_greedy_and_temperature_rows_per_cap(sweep):
    table = json.loads((sweep["out"] / "table.json").read_text())
    got = [(r["mode"], r["token_cap"], r["n"], r["questions"]) for r in table]
    assert got == [("greedy", 8, 6, 6), ("greedy", 200, 6, 6), ("T=0.7", 8, 6, 2), ("T=0.7", 200, 6, 2)]
    assert "| T=0.7 | 200 | 6 (2 x 3) |" in (sweep["out"] / "table.md").read_text()


def test_accuracy_boxed_share_and_interval_follow_the_answers(sweep):
    """The stub's answer to each question is fixed by its text (right / long / wrong / unboxed): within 200
    tokens 'right' and 'long' answers are right and every answer but 'unboxed' has a box."""
    table = {(r["mode"], r["token_cap"]): r for r in json.loads((sweep["out"] / "table.json").read_text())}
    asked = {q for q, _, _ in sweep["stub"].replies}  # the 6 greedy questions (the sampled 2 are among them)
    kinds = [_kind(q) for q in asked]
    right = sum(k in ("right", "long") for k in kinds)
    row = table[("greedy", 200)]
    assert (row["n"], row["correct"]) == (6, right)
    assert row["ci95"] == [round(x, 4) for x in wilson(right, 6)]
    assert row["boxed"] == round(sum(k != "unboxed" for k in kinds) / 6, 4)


def test_wilson_matches_the_closed_form():
    lo, hi = wilson(15, 20)
    assert (round(lo, 4), round(hi, 4)) == (0.5313, 0.8881)
    assert wilson(0, 20)[0] == 0.0 and math.isclose(wilson(0, 20)[1], 0.1611, abs_tol=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)


def test_summarise_counts_answers_not_questions():
    rows = [
        {
            "cell": "c",
            "problem_type": "t",
            "difficulty": 1,
            "mode": "T=0.7",
            "token_cap": 64,
            "question_id": q,
            "correct": ok,
            "boxed": True,
            "tokens": 10,
            "finished": True,
        }
        for q, ok in [("a", True), ("a", True), ("a", False), ("b", False)]
    ]
    (r,) = summarise(rows)
    assert (r["n"], r["questions"], r["correct"], r["accuracy"]) == (4, 2, 2, 0.5)
    assert r["ci95"] == [round(x, 4) for x in wilson(2, 4)]


def test_same_generator_at_two_difficulties_makes_two_cells():
    entry = SPEC[0]["options"]
    hard = {
        **entry,
        "config": {"chain_sum": {**CHAIN, "min_digits": 3, "max_digits": 3}},
        "difficulty": {"chain_sum": 4},
    }
    specs, _ = load_specs(
        spec=json.dumps([{"name": "reasoning_gym", "options": entry}, {"name": "reasoning_gym", "options": hard}])
    )
    from reasoning_env.sources.base import LoadContext

    cells = build_cells(specs, LoadContext(data_dir=None, hub=False))
    assert [(c.name, len(c.questions)) for c in cells] == [
        ("reasoning_gym/chain_sum@d2", 12),
        ("reasoning_gym/chain_sum@d4", 12),
    ]


def test_a_config_names_the_sources_with_their_options():
    specs, _ = load_specs(config=str(ROOT / "examples/training/cpu_allocation.yaml"))
    from reasoning_env.sources.base import LoadContext

    cells = build_cells(specs, LoadContext(data_dir=None, hub=False))
    assert [c.name for c in cells] == ["reasoning_gym/chain_sum@d1", "reasoning_gym/simple_equations@d3"]


def test_regrade_grades_the_saved_answers_again(sweep, tmp_path, tokenizer_dir):
    """A stopped sweep keeps its answers in generations.jsonl: --regrade tabulates them without a server."""
    from workbench.real_sweep import main

    (tmp_path / "generations.jsonl").write_text((sweep["out"] / "generations.jsonl").read_text())
    assert main(["--model", str(tokenizer_dir), "--regrade", "--caps", "200", "--out", str(tmp_path)]) == 0
    before = [r for r in json.loads((sweep["out"] / "table.json").read_text()) if r["token_cap"] == 200]
    assert json.loads((tmp_path / "table.json").read_text()) == before


def test_a_type_whose_ceiling_estimate_sits_at_one_is_refitted_with_the_ceiling_held_at_one():
    """On the curriculum sweep's greedy rows, simple equations (0.04 / 0.62 / 0.83 / 0.88 at 128 / 192 / 256 / 320)
    drive the free ceiling to its bound 1; the fit would keep the pooled prior's 0.57, far below what was measured."""
    import pandas as pd

    from reasoning_env.policies import SolverCurves
    from workbench.real_sweep import _ceiling_at_one

    rows = pd.read_parquet(ROOT / "examples/calibration/qwen2.5-coder-0.5b-curriculum/rows.parquet")
    fit = rows[(rows["mode"] == "greedy") & (rows["split"] == "fit")]
    curves = SolverCurves.fit(fit, x="token_cap", cluster="question_id", min_rows=60, per="type")
    eq = "reasoning_gym/simple_equations"
    assert curves.types[eq].ceiling < 0.7
    _ceiling_at_one(curves, fit)
    assert curves.types[eq].ceiling == 1.0 and "held at 1" in curves.fits[f"type:{eq}"]["note"]
    measured = rows[(rows["mode"] == "greedy") & (rows["problem_type"] == eq) & (rows["token_cap"] == 256)]
    lo, hi = wilson(int(measured["correct"].sum()), len(measured))
    assert lo <= float(curves.p(256, eq, 3)) <= hi


def test_the_sweep_says_what_its_question_count_buys(sweep):
    meta = json.loads((sweep["out"] / "sweep.json").read_text())
    assert meta["precision"].startswith("6 questions a cell: an accuracy near 0.5 is measured to +-0.")

"""The curve set measured on the curriculum config (qwen2.5-coder-0.5b-curriculum): it loads, carries the measured
table with n and intervals, and its curves follow that table."""

from __future__ import annotations

import json

import pytest

from reasoning_env.policies.curves import CURVE_SETS_DIR, load_curves
from workbench.sweep_table import wilson

NAME = "qwen2.5-coder-0.5b-curriculum"
CHAIN, EQUATIONS = "reasoning_gym/chain_sum", "reasoning_gym/simple_equations"


@pytest.fixture(scope="module")
def shipped() -> dict:
    return json.loads((CURVE_SETS_DIR / f"{NAME}.json").read_text())


def test_it_loads_by_name_with_a_curve_per_type_and_says_where_it_comes_from():
    curves = load_curves(NAME)
    assert {CHAIN, EQUATIONS} <= set(curves.types)
    assert "embedded:qwen2.5-coder-0.5b" in curves.provenance and "python -m workbench.real_sweep" in curves.provenance


def test_its_table_has_n_and_wilson_intervals_per_cell_mode_and_cap(shipped):
    table = shipped["table"]
    cells = {r["cell"] for r in table}
    assert {f"{CHAIN}@d1", f"{EQUATIONS}@d3"} <= cells
    assert {"greedy", "T=0.7"} <= {r["mode"] for r in table}
    for r in table:
        assert r["ci95"] == [round(x, 4) for x in wilson(r["correct"], r["n"])]
        assert r["accuracy"] == round(r["correct"] / r["n"], 4)
    greedy = [r for r in table if r["mode"] == "greedy" and r["cell"] in (f"{CHAIN}@d1", f"{EQUATIONS}@d3")]
    assert all(r["n"] >= 20 for r in greedy)


def test_the_curves_follow_the_measured_greedy_accuracy(shipped):
    """Fitted on the greedy rows: at every cap the curve's prediction lies within the cell's 95% interval."""
    curves = load_curves(NAME)
    for r in shipped["table"]:
        if r["mode"] != "greedy" or r["cell"] not in (f"{CHAIN}@d1", f"{EQUATIONS}@d3"):
            continue
        pred = float(curves.p(r["token_cap"], r["problem_type"], r["difficulty"]))
        assert r["ci95"][0] <= pred <= r["ci95"][1], (r["cell"], r["token_cap"], pred, r["ci95"])

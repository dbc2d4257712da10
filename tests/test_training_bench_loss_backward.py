"""The loss_backward benchmark: its settings parse, bad ones are refused with the fix, and it measures on a model."""

from __future__ import annotations

import json

import pytest

from training.bench import main
from training.bench.loss_backward import parse_settings


def test_settings_are_micro_batch_and_checkpointing_pairs():
    assert parse_settings("4:gc, 1:nogc") == [(4, True), (1, False)]


@pytest.mark.parametrize("bad", ["4", "0:gc", "x:gc", "2:on"])
def test_a_malformed_setting_is_refused_with_an_example(bad, capsys):
    assert parse_settings(bad) is None and "1:nogc" in capsys.readouterr().err


def test_it_times_every_setting_on_a_model(capsys):
    argv = ["loss_backward", "--model", "tiny", "--length", "16", "--settings", "2:gc,1:nogc", "--rounds", "1"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["settings"]) == {"2:gc", "1:nogc"} and out["length"] == 16
    assert all(s["seconds_per_episode"] > 0 for s in out["settings"].values())

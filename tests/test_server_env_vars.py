"""``REE_*`` variables a server operator gets wrong: one error line naming the variable (never a
traceback), a blank secret that would silently switch authentication off is refused, and a
misspelt variable (which would be ignored) is reported with the name it most likely meant."""

from __future__ import annotations

from pathlib import Path

import pytest

from reasoning_env.server.app import main
from reasoning_env.server.settings import ServerConfigError, settings_from_env, unknown_env_vars


@pytest.mark.parametrize(("var", "value"), [("REE_WORKERS", "abc"), ("REE_WORKERS", "2.5"), ("PORT", "http")])
def test_a_malformed_start_variable_is_one_error_line(monkeypatch, capsys, var, value) -> None:
    monkeypatch.setenv(var, value)
    assert main(["--host", "127.0.0.1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"reasoning_env.server: {var}={value!r} is not an integer") and err.count("\n") == 1


@pytest.mark.parametrize("blank", ["", "   "])
def test_a_blank_api_token_is_refused_not_taken_as_no_authentication(blank) -> None:
    with pytest.raises(ServerConfigError, match=r"REE_API_TOKEN is set but blank.*unset it"):
        settings_from_env({"REE_API_TOKEN": blank})


def test_an_unset_api_token_still_means_no_authentication() -> None:
    assert settings_from_env({}).api_token is None


def test_a_misspelt_variable_is_reported_with_its_likely_name() -> None:
    notes = unknown_env_vars({"REE_MAX_SESSION": "3", "REE_SOURCES": "gsm8k", "HOME": "/root", "REE_ZZZ": "1"})
    assert notes == [
        "REE_MAX_SESSION is not a variable of this project (ignored); did you mean REE_MAX_SESSIONS?",
        "REE_ZZZ is not a variable of this project (ignored)",
    ]


def test_every_ree_variable_the_code_reads_is_known_to_the_misspelling_check():
    import re
    import subprocess

    from reasoning_env.server.settings import ENV_VARS, OTHER_VARS

    repo = Path(__file__).resolve().parents[1]
    files = subprocess.run(
        ["git", "ls-files", "*.py", "*.sh", "Dockerfile", ".ci/*"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    read = set()
    for f in files:
        if not f.startswith("tests/"):
            read |= set(re.findall(r"\bREE_[A-Z0-9_]*[A-Z0-9]\b", (repo / f).read_text(encoding="utf-8")))
    assert read - set(ENV_VARS) - set(OTHER_VARS) == set()

"""Benchmarks of the workbench: ``python -m workbench.bench <command> [options]``.

- ``play``: the Play tab's typed-answer latency, in the handler, through the API and in a
  headless browser (:mod:`.play`).
- ``app``: the app's slow paths (Reward-lab slider, opening Runs, a 6-run compare, Play's *Run to
  the end*, start-up) as ratios against the work itself, as JSON (:mod:`.app`).

Same protocol as :mod:`reasoning_env.bench` (one module per benchmark with ``add_arguments`` and
``run``).
"""

from __future__ import annotations

from collections.abc import Sequence

from reasoning_env.bench import main as _main

__all__ = ["SUBCOMMANDS", "main"]

#: Command -> (module path, one-line help).
SUBCOMMANDS = {
    "play": ("workbench.bench.play", "typed-answer latency in the Play tab: handler, API and browser"),
    "app": ("workbench.bench.app", "the app's slow paths as ratios against their work (JSON)"),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one workbench benchmark (``[command, options...]``); returns its exit status."""
    return _main(argv, prog="python -m workbench.bench", subcommands=SUBCOMMANDS, description=__doc__.splitlines()[0])

"""Benchmarks of the environment: ``python -m reasoning_env.bench <subcommand> [options]``.

Subcommands live in their own modules and are imported only when run. To add one, write a
module with ``add_arguments(parser)`` and ``run(args) -> int`` (exit status) and register it in
:data:`SUBCOMMANDS` below.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Optional, Sequence

#: Subcommand name -> (module path, one-line help). Register new benchmarks here.
SUBCOMMANDS = {
    "steps": ("reasoning_env.bench_steps", "time env.step() (token count + grading + reward) on worked solutions"),
    "cases": ("reasoning_env.bench_cases", "accuracy on the labelled grading cases: ours vs math-verify directly"),
    "server": ("reasoning_env.bench_server", "load test of the OpenEnv server: many WebSocket sessions, steps/s, latency, RSS"),
}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the chosen subcommand, return its status."""
    parser = argparse.ArgumentParser(prog="python -m reasoning_env.bench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    modules = {}
    for name, (module_path, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        try:
            module = importlib.import_module(module_path)
        except ImportError as exc:  # a registered module that is not there yet
            p.set_defaults(_missing=f"{module_path} could not be imported: {exc}")
            continue
        module.add_arguments(p)
        modules[name] = module
    args = parser.parse_args(argv)
    missing = getattr(args, "_missing", None)
    if missing:
        parser.error(missing)
    return int(modules[args.command].run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())

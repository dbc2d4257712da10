"""Benchmarks of the environment: ``python -m reasoning_env.bench <command> [options]``.

======== ================================================================================
command  what it measures
======== ================================================================================
steps    ``env.step()`` throughput and latency on worked solutions (:mod:`.steps`)
cases    accuracy on the labelled grading cases, ours vs math-verify directly (:mod:`.cases`)
server   a load test of the OpenEnv server over many WebSocket sessions (:mod:`.server`)
======== ================================================================================

Each benchmark is one module with ``add_arguments(parser)`` and ``run(args) -> int`` (the exit
status), imported only when it runs. The other groups keep theirs the same way:
``python -m workbench.bench play`` (:mod:`workbench.bench`) and ``python -m training.bench
rollout`` (:mod:`training.bench`), through :func:`main`. Benchmarks print figures; speed targets
live here, never in timed tests.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Mapping, Sequence

__all__ = ["SUBCOMMANDS", "main"]

#: Command -> (module path, one-line help). Register new benchmarks here.
SUBCOMMANDS = {
    "steps": ("reasoning_env.bench.steps", "time env.step() (token count + grading + reward) on worked solutions"),
    "cases": ("reasoning_env.bench.cases", "accuracy on the labelled grading cases: ours vs math-verify directly"),
    "server": (
        "reasoning_env.bench.server",
        "load test of the OpenEnv server: many WebSocket sessions, steps/s, latency, RSS",
    ),
}


def main(
    argv: Sequence[str] | None = None,
    *,
    prog: str = "python -m reasoning_env.bench",
    subcommands: Mapping[str, tuple[str, str]] = SUBCOMMANDS,
    description: str | None = None,
) -> int:
    """Run one benchmark of ``subcommands`` (default: the environment's) and return its exit status.

    Args:
        argv: ``[command, options...]`` (default ``sys.argv[1:]``).
        prog: The command as the user types it (for ``--help`` and errors).
        subcommands: Command -> (module path, one-line help); the module has ``add_arguments``
            and ``run``. Only the chosen module is imported.
        description: The first line of ``--help`` (default: this module's).

    Returns:
        The benchmark's exit status (2 for a usage error, printed by argparse).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = "\n".join(f"  {name:8s} {help_text}" for name, (_, help_text) in subcommands.items())
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(description or __doc__).splitlines()[0].split(": ``")[0] + ".",
        epilog=f"commands:\n{commands}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "command", choices=list(subcommands), metavar="COMMAND", help=f"one of: {', '.join(subcommands)}"
    )
    if not argv or argv[0].startswith("-") or argv[0] not in subcommands:
        parser.parse_args(argv[:1])  # --help, or the usage error naming the commands (exits)
        return 2
    name, rest = argv[0], argv[1:]
    module_path, help_text = subcommands[name]
    module = importlib.import_module(module_path)
    sub = argparse.ArgumentParser(
        prog=f"{prog} {name}", description=(module.__doc__ or help_text).strip().splitlines()[0]
    )
    module.add_arguments(sub)
    return int(module.run(sub.parse_args(rest)) or 0)

"""Benchmarks: ``python -m reasoning_env.bench <name> [options]``.

- ``server``: load test of the OpenEnv server (:mod:`reasoning_env.bench_server`).
- ``steps``: in-process step throughput (:mod:`reasoning_env.bench_steps`).

Each benchmark module is imported only when it is run.
"""

from __future__ import annotations

import importlib
import sys
from typing import Optional, Sequence

BENCHMARKS = {"server": "reasoning_env.bench_server", "steps": "reasoning_env.bench_steps"}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the benchmark named by ``argv[0]`` with the rest of ``argv``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in BENCHMARKS:
        print(f"usage: python -m reasoning_env.bench {{{','.join(BENCHMARKS)}}} [options]", file=sys.stderr)
        return 2
    module = importlib.import_module(BENCHMARKS[argv[0]])
    return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())

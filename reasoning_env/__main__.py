"""Command line of the core package.

python -m reasoning_env prepare     # build and cache the embedded offline tokenizers
python -m reasoning_env sources     # list the registered question sources
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    parser = argparse.ArgumentParser(prog="python -m reasoning_env", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("prepare", help="build and cache the embedded offline tokenizers")
    sub.add_parser("sources", help="list the registered question sources")
    args = parser.parse_args(argv)
    if args.cmd == "prepare":
        from reasoning_env.tokenization import QWEN3, QWEN25, embedded_tokenizer_dir

        for spec in (QWEN25, QWEN3):
            print(f"embedded tokenizer {spec.key}: {embedded_tokenizer_dir(spec)}")
    elif args.cmd == "sources":
        from reasoning_env.sources import describe

        for name, meta in describe().items():
            print(f"{name:15s} {meta['summary']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The ``astjax`` command line (``astjax demo``...)."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="astjax", description="JAX-style transformations of NumPy code by source rewriting")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="the seeds' MLP: generated gradient source and training")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from astjax.demo import main as demo
        return demo()
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())

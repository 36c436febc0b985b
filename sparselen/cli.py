"""``sparselen``: the command-line entry every workflow rule calls (one subcommand per step)."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

# Each experiment module contributes ``add_commands(subparsers)``.
EXPERIMENTS = ("sparselen.experiments.parity", "sparselen.experiments.language", "sparselen.experiments.ppc",
               "sparselen.experiments.theory", "sparselen.experiments.report")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sparselen", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="experiment", required=True)
    for name in EXPERIMENTS:
        importlib.import_module(name).add_commands(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

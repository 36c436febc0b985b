"""``sparselen``: the command-line entry every workflow rule calls (one subcommand per step)."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

# Each experiment module contributes ``add_commands(subparsers)`` for these commands.
COMMANDS = {"parity": "sparselen.experiments.parity", "language": "sparselen.experiments.language",
            "ppc": "sparselen.experiments.ppc", "theory": "sparselen.experiments.theory",
            "report": "sparselen.experiments.report", "estimate": "sparselen.experiments.report"}


def build_parser(argv=None) -> argparse.ArgumentParser:
    """The parser of every command, or, when ``argv`` names one, of that command's module only:
    a job then imports what it runs and not, say, the plotting and statistics of the others
    (a second of CPU per job, ~100 jobs per pipeline run)."""
    parser = argparse.ArgumentParser(prog="sparselen", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="experiment", required=True)
    named = [a for a in (argv or []) if not a.startswith("-")][:1]
    modules = [COMMANDS[named[0]]] if named and named[0] in COMMANDS else COMMANDS.values()
    for name in dict.fromkeys(modules):
        importlib.import_module(name).add_commands(sub)
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``sparselen``: commands a user runs by hand (the workflow's steps run through
``sparselen.jobs``, not through this CLI)."""

from __future__ import annotations

import argparse
import logging
import sys


def estimate(args) -> None:
    from sparselen.config import load
    from sparselen.report import ledger

    est = ledger.estimate(load(args.configfile), ledger.throughput(args.results))
    print(est.to_markdown(index=False, floatfmt=".3g"))
    print(f"\ntotal training: {est['train_hours'].sum():.3g} h one job at a time (measured throughput from "
          f"{args.results}; training only, no evaluation; slices without a sizing rule are not listed)")


def export_hf(args) -> None:
    from sparselen.hf_export import export_hf

    print(export_hf(args.model, args.dir, args.tokenizer))


def clean_checkpoints(args) -> None:
    from sparselen.resumable import clean

    for path in clean(args.root, dry_run=args.dry_run):
        print(path)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sparselen", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("estimate", help="estimate a config's training time before launching it")
    s.add_argument("--configfile", nargs="+", required=True,
                   help="config files as given to snakemake --configfile (the first complete, the rest overlays)")
    s.add_argument("--results", default="results", help="where measured train_log.csv files are")
    s.set_defaults(func=estimate)
    s = sub.add_parser("export-hf", help="write a trained model as a transformers GPTNeoXForCausalLM directory")
    s.add_argument("model", help="a model file written by training (model.pt)")
    s.add_argument("dir", help="output directory")
    s.add_argument("--tokenizer", default=None, help="tokenizer.json to include (language models)")
    s.set_defaults(func=export_hf)
    s = sub.add_parser("clean-checkpoints", help="remove the checkpoints of finished trainings (the workflow "
                       "does this when it succeeds)")
    s.add_argument("--root", default="results")
    s.add_argument("-n", "--dry-run", action="store_true")
    s.set_defaults(func=clean_checkpoints)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The reproduction report (issue 7): claims check, hyperparameter tables, compute ledger and
the Markdown/HTML report, each a ``sparselen report <step>`` command called by one rule of
workflow/rules/report.smk; plus ``sparselen estimate`` (a config's training time before launch)."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from sparselen import io
from sparselen.aggregate import read_tables
from sparselen.provenance import provenance
from sparselen.report import claims as cl
from sparselen.report import hyperparams, ledger, render
from sparselen.settings import parse_json_arg

log = logging.getLogger(__name__)

# Slices whose claims read per-run evaluation tables (one row per seed and cell, with n).
RUN_SLICES = ("parity", "ppc", "theory")
# Aggregated tables some claims read instead (claims.Claim.data).
TABLES = ("language_table", "language_generalization")


def make_claims(cfg: dict, runs: dict[str, list[str]], tables: dict[str, str | None], out_csv, out_md,
                out_html) -> pd.DataFrame:
    """``cfg`` = report settings + facts of the experiments run; ``runs`` = per slice, its
    per-run evaluation CSVs; ``tables`` = aggregated tables by name (empty, absent or None:
    not run)."""
    data = {s: read_tables(paths) for s, paths in runs.items() if paths}
    data.update({"language" if name == "language_table" else name: pd.read_csv(path)
                 for name, path in tables.items() if path})
    settings = cl.Settings(n_boot=cfg.get("bootstrap", 2000), seed=cfg.get("seed", 0), level=cfg.get("level", 0.95),
                           parity_train_max_length=cfg.get("parity_train_max_length"))
    table = cl.check(data, settings)
    io.write_csv(table, out_csv)
    md = "\n".join([f"# {render.TITLE}: claims", ""] + render.claims_section(table)[2:]
                   + ["## Per group", "", render.md_table(table[table["group"] != "all"].drop(
                       columns=["statement", "source", "criterion"])), "",
                      "Provenance:", "", "```json", io.json_dumps(provenance(cfg, cfg.get("seed"))), "```", ""])
    io.write_text(out_md, md)
    io.write_text(out_html, render.to_html(md))
    for h in table[table["group"] == "all"].itertuples():
        log.info("claim %s: %s", h.claim, h.verdict)
    return table


def make_hyperparams(config: dict, experiment: str, out_csv, out_md) -> None:
    if experiment not in config:
        raise SystemExit(f"--config has no section {experiment!r} (sections: {sorted(config)})")
    hyperparams.write(config, experiment, out_csv, out_md)


def make_ledger(benchmarks, out_rules, out_figures) -> None:
    ledger.write(ledger.read_benchmarks(benchmarks), out_rules, out_figures)


def make_report(a) -> None:
    text = render.build(a.claims, a.hyperparams, a.ledger_rules, a.ledger_figures, a.figures, a.tables,
                        a.runs, a.md)
    io.write_text(a.html, render.to_html(text, Path(a.md).parent))
    log.info("reproduction report: %s", Path(a.html).resolve())


def run_estimate(configfile, results, base=None) -> pd.DataFrame:
    cfg = ledger.load_config(configfile, base)
    est = ledger.estimate(cfg, ledger.throughput(results))
    print(est.to_markdown(index=False, floatfmt=".3g"))
    print(f"\ntotal training: {est['train_hours'].sum():.3g} h one job at a time (measured throughput from "
          f"{results}; training only, no evaluation; slices without a sizing rule are not listed)")
    return est


def add_commands(sub) -> None:
    p = sub.add_parser("report", help="reproduction report (claims, hyperparameters, ledger, document)")
    steps = p.add_subparsers(dest="step", required=True)

    s = steps.add_parser("claims", help="check the paper's claims on the measured tables")
    s.add_argument("--config", required=True, type=parse_json_arg, help="report settings as JSON")
    for name in RUN_SLICES:
        s.add_argument(f"--{name}-runs", nargs="*", default=[], help=f"per-run eval CSVs of {name}")
    for name in TABLES:
        s.add_argument(f"--{name.replace('_', '-')}", default=None, help=f"{name} CSV")
    s.add_argument("--csv", required=True)
    s.add_argument("--md", required=True)
    s.add_argument("--html", required=True)
    s.set_defaults(func=lambda a: make_claims(a.config, {n: getattr(a, f"{n}_runs") for n in RUN_SLICES},
                                              {n: getattr(a, n) for n in TABLES}, a.csv, a.md, a.html))

    s = steps.add_parser("hyperparams", help="one experiment's hyperparameter table (CSV and Markdown)")
    s.add_argument("--config", required=True, type=parse_json_arg, help="{experiment: section} as JSON")
    s.add_argument("--experiment", required=True)
    s.add_argument("--csv", required=True)
    s.add_argument("--md", required=True)
    s.set_defaults(func=lambda a: make_hyperparams(a.config, a.experiment, a.csv, a.md))

    s = steps.add_parser("ledger", help="wall time and peak memory per rule and per figure")
    s.add_argument("--benchmarks", required=True, help="directory of the rules' benchmark TSVs")
    s.add_argument("--rules-csv", required=True)
    s.add_argument("--figures-csv", required=True)
    s.set_defaults(func=lambda a: make_ledger(a.benchmarks, a.rules_csv, a.figures_csv))

    s = steps.add_parser("render", help="the Markdown and HTML reproduction report")
    s.add_argument("--claims", required=True)
    s.add_argument("--hyperparams", nargs="+", required=True)
    s.add_argument("--ledger-rules", required=True)
    s.add_argument("--ledger-figures", required=True)
    s.add_argument("--figures", nargs="*", default=[])
    s.add_argument("--tables", nargs="*", default=[])
    s.add_argument("--runs", nargs="*", default=[], help="per-run files; their directories' train_summary.json "
                   "give the provenance")
    s.add_argument("--md", required=True)
    s.add_argument("--html", required=True)
    s.set_defaults(func=make_report)

    s = sub.add_parser("estimate", help="estimate a config's training time before launching it")
    s.add_argument("--configfile", required=True, help="merged over config.yaml, as with snakemake --configfile")
    s.add_argument("--results", default="results", help="where measured train_log.csv files are")
    s.add_argument("--base", default=None, help="base config (default: the repository's config.yaml)")
    s.set_defaults(func=lambda a: run_estimate(a.configfile, a.results, a.base))

"""The steps of the ``report_*`` rules (workflow/rules/report.smk): claims check,
hyperparameter tables, compute ledger and the Markdown/HTML reproduction report; every
function receives the rule's named inputs, outputs, params and wildcards (sparselen/jobs.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from sparselen import io
from sparselen.ppc.tasks import TASKS
from sparselen.provenance import provenance
from sparselen.report import claims as cl
from sparselen.report import hyperparams as hp
from sparselen.report import ledger as ledgers
from sparselen.report import render as renderer
from sparselen.tables import read_tables

log = logging.getLogger(__name__)

# Named inputs of report_claims: per-run evaluation tables of these slices, and the language
# slice's per-token tables (screened tokens, dependency, each model's losses on them).
RUN_SLICES = ("parity", "ppc", "theory")
LANGUAGE_TABLES = ("screen", "deps", "transfer")


def claims(job) -> pd.DataFrame:
    """Check every claim on the tables of the slices that ran (an absent input: not run);
    params report (the report section), parity_train_lengths, ppc_train_sizes, theory_floor."""
    i, p = job.input, job.params
    data = {s: read_tables(getattr(i, s)) for s in RUN_SLICES if hasattr(i, s)}
    if hasattr(i, "language_screen"):
        data["language"] = {t: read_tables(getattr(i, f"language_{t}")) for t in LANGUAGE_TABLES}
    r = p.report
    settings = cl.Settings(n_boot=r["bootstrap"], seed=r["seed"], level=r["level"],
                           parity_train_lengths=tuple(p.parity_train_lengths), ppc_train_sizes=p.ppc_train_sizes,
                           ppc_input_dependent=tuple(name for name, task in TASKS.items() if task.IDS_DEPEND_ON_INPUT),
                           theory_floor=p.theory_floor)
    table = cl.check(data, settings)
    io.write_csv(table, job.output.csv)
    out_dir = Path(job.output.md).parent
    md = "\n".join([f"# {renderer.TITLE}: claims", ""] + renderer.claims_section(table, out_dir)[2:]
                    + ["Provenance:", "", "```json", io.json_dumps(provenance(r, r["seed"])), "```", ""])
    io.write_text(job.output.md, md)
    io.write_text(job.output.html, renderer.to_html(md))
    for h in table[table["group"] == "all"].itertuples():
        log.info("claim %s: %s", h.claim, h.verdict)
    return table


def hyperparams(job) -> None:
    """One experiment's table (wildcard experiment; params.section = its config section)."""
    hp.write({job.wildcards.experiment: job.params.section}, job.wildcards.experiment, job.output.csv,
             job.output.md)


def ledger(job) -> None:
    bench = ledgers.read_benchmarks(job.params.benchmarks, job.params.files)
    ledgers.write(bench, job.output.per_rule, job.output.per_figure)


def render(job) -> None:
    i = job.input
    figures = [f for f in i.slices if f.endswith(".png")]
    tables = [f for f in i.slices if f.endswith((".md", ".csv"))]
    text = renderer.build(i.claims, i.hyperparams, i.ledger_rules, i.ledger_figures, figures, tables, i.runs,
                          job.output.md)
    io.write_text(job.output.html, renderer.to_html(text, Path(job.output.md).parent))
    log.info("reproduction report: %s", Path(job.output.html).resolve())

"""The steps of the ``report_*`` rules (workflow/rules/report.smk): claims check,
hyperparameter tables, compute ledger and the Markdown/HTML reproduction report; every
function receives the rule's named inputs, outputs, params and wildcards (sparselen/interface/job.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from sparselen.interface.config import load as load_config
from sparselen.presentation.tables import read_tables
from sparselen.report import claims as cl
from sparselen.report import decides
from sparselen.report import hyperparams as hp
from sparselen.report import ledger as ledgers
from sparselen.report import registration
from sparselen.report import render as renderer
from sparselen.report import rounds as rounds_
from sparselen.runtime import io
from sparselen.runtime.provenance import provenance
from sparselen.statistics.stats import Resampling

log = logging.getLogger(__name__)

def claims(job) -> pd.DataFrame:
    """Check every claim on the tables of the slices that ran: input ``<slice>_<table>`` for each
    table its claims module READS (a slice without inputs: not run) and the shipped configs
    (``shipped``: which of them can decide each claim, also written as the table of what each
    decides, output ``decides``) and paper.yaml's registered criteria (``registration``: whether
    these criteria are the registered ones, a line the report opens with); params report (the report section), facts (per slice, its
    claims module's facts of the config run), gaps (per claim, what the config run's design
    lacks to decide it), rates (per claim, its error rates at the config's sizes) and criteria
    (the criteria's version)."""
    i, p = job.input, job.params
    data = {name: {t: read_tables(getattr(i, f"{name}_{t}")) for t in cl.slice_claims(name).READS}
            for name in p.facts}
    r = p.report
    found = decides.reaches({Path(f).name: load_config([f]) for f in i.shipped})
    table = cl.check(data, Resampling(n_boot=r["bootstrap"], seed=r["seed"], level=r["level"]), p.facts,
                     designs=decides.deciders(found), gaps=p.gaps, rates=p.rates)
    io.write_text(job.output.decides, "\n".join(decides.matrix(found)) + "\n")
    table["rounds"] = table["claim"].map(rounds_taken(getattr(i, "rounds", []), p.caps)).fillna("")
    table["criteria"] = p.criteria
    table["registration"] = registration.report_line(i.registration)
    io.write_csv(table, job.output.csv)
    md = "\n".join([f"# {renderer.TITLE}: claims", ""] + renderer.answer_section(table)[2:]
                    + renderer.details_section(table)
                    + ["Provenance:", "", "```json", io.json_dumps(provenance(r, r["seed"])), "```", ""])
    io.write_text(job.output.md, md)
    io.write_text(job.output.html, renderer.to_html(md))
    for h in table[table["group"] == "all"].itertuples():
        log.info("claim %s: %s", h.claim, h.state)
    return table


def rounds_taken(files, caps: dict) -> dict[str, str]:
    """Per claim of a slice in rounds, how many rounds it took and why it stopped, from the
    slice's decision files (``caps``: slice -> rounds.max)."""
    by_slice = {}
    for d in sorted((rounds_.read(f) for f in files), key=lambda d: d["round"]):
        by_slice.setdefault(d["slice"], []).append(d)
    return {cid: text for name, ds in by_slice.items() for cid, text in rounds_.summary(ds, caps[name]).items()}


def rounds(job) -> None:
    """One round's decision of a slice (wildcards ``slice``, ``round``): its claims decided on the
    per-run tables of the runs so far (inputs named as its claims module READS); params facts,
    gaps (with seeds to spare), seeds (through this round, per seed list) and report (resampling)."""
    name, p = job.wildcards.slice, job.params
    r = p.report
    tables = {t: read_tables(getattr(job.input, t)) for t in cl.slice_claims(name).READS}
    decision = rounds_.decide(name, int(job.wildcards.round), tables,
                              Resampling(n_boot=r["bootstrap"], seed=r["seed"], level=r["level"]), p.facts, p.gaps,
                              p.seeds)
    rounds_.write(job.output.decision, decision)
    for cid, c in decision["claims"].items():
        log.info("round %s, claim %s: %s", job.wildcards.round, cid, c["verdict"])


def rounds_cap(job) -> None:
    """The cap a rounded slice's tables were made under (wildcards ``slice``, ``max``)."""
    io.write_json(Path(job.output.cap), {"slice": job.wildcards.slice, "max": int(job.wildcards.max)})


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
                          job.output.md, decides=getattr(i, "decides", None))
    io.write_text(job.output.html, renderer.to_html(text, Path(job.output.md).parent))
    log.info("reproduction report: %s", Path(job.output.html).resolve())

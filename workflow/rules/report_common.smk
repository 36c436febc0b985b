# Helpers of workflow/rules/report.smk (kept apart: a rule file holds rules only). Input
# functions run after every include, so they see every slice the workflow defines.
import os
from pathlib import Path

import pandas as pd

import sparselen.provenance
import sparselen.report.claims
from sparselen.report.claims import verdicts

REPORT = config.get("report", {})
REPORT_SLICES = ("parity", "ppc", "language", "theory")
HYPERPARAM_EXPERIMENTS = [name for name in REPORT_SLICES if name in config]
CLAIMS_CSV = "results/report/claims.csv"

# Figure captions (workflow/report/*.rst, rendered by `snakemake --report` with Jinja2, which
# sees only `snakemake.config`) show the verdicts of the last claims check through this key.
# No rule reads it, so it changes no job's params.
if os.path.exists(CLAIMS_CSV):
    config["_report_claims"] = verdicts(pd.read_csv(CLAIMS_CSV))


def slice_present(name):
    return rules.has(f"fig_{name}")


def claims_inputs(wildcards):
    """Per slice, the per-run evaluation CSVs its table aggregates, or its aggregated tables
    (files `all` builds anyway: no extra jobs)."""
    out = {
        f"{name}_runs": list(getattr(rules, f"{name}_table").input)
        for name in ("parity", "ppc", "theory")
        if slice_present(name)
    }
    if slice_present("language"):
        out["language_table"] = rules.language_tables.output.table_csv
        out["language_generalization"] = rules.language_tables.output.generalization_csv
    return out


def slice_outputs(wildcards):
    """Every figure and table of the slices the workflow defines."""
    return [
        f
        for name in REPORT_SLICES
        if slice_present(name)
        for f in getattr(rules, f"fig_{name}").input
    ]


def run_files(wildcards):
    """The per-run files behind each present slice's tables (for the provenance section)."""
    tables = {
        "parity": "parity_table",
        "ppc": "ppc_table",
        "language": "language_tables",
        "theory": "theory_table",
    }
    return [
        f
        for name, rule_name in tables.items()
        if slice_present(name)
        for f in getattr(rules, rule_name).input
    ]


def runs_args(wildcards, input):
    """The claims command's input options: --<name> FILE... per named input."""
    files = {name: input[name] for name in input.keys()}
    return " ".join(
        f"--{name.replace('_', '-')} " + (f if isinstance(f, str) else " ".join(f))
        for name, f in files.items()
    )


# The criteria's source as a params value: editing a criterion reruns the claims check.
CLAIMS_SOURCE_HASH = sparselen.provenance.config_hash(
    Path(sparselen.report.claims.__file__).read_text()
)

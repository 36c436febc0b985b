"""The report's place in the DAG: it needs nothing `all` does not build, and a slice the
workflow does not define is simply absent (its claims "not run"), never an error."""

import collections

from conftest import ROOT, SMOKE_CONFIG, dry_run_jobs, snakemake


def test_report_needs_nothing_beyond_all(tmp_path):
    report = collections.Counter(rule for rule, _ in dry_run_jobs(tmp_path, "report"))
    everything = collections.Counter(rule for rule, _ in dry_run_jobs(tmp_path, "all"))
    del report["report"]  # the target rule itself (`all` lists its inputs)
    assert report - everything == collections.Counter()  # no job `all` would not run too
    for rule in ("claims", "ledger", "reproduction_report", "hyperparams"):
        assert report[rule] >= 1


def test_report_without_other_slices(tmp_path):
    """A workflow with the parity slice only: the report builds on parity and nothing else."""
    snakefile = tmp_path / "Snakefile"
    rules = ROOT / "workflow/rules"
    snakefile.write_text(
        f'configfile: "{ROOT / "config.yaml"}"\n'
        + "".join(f'include: "{rules / name}.smk"\n' for name in ("common", "parity", "report"))
        + "rule all:\n    input:\n        rules.report.input,\n")
    out = snakemake(tmp_path, "-n", "-s", str(snakefile), "report", configfile=SMOKE_CONFIG)  # the last -s wins
    text = out.stdout + out.stderr
    assert "rule claims:" in text and "rule parity_train:" in text
    assert "ppc_" not in text and "language_" not in text and "theory_" not in text

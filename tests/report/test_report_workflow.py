"""The report's place in the DAG: it needs nothing `all` does not build."""

import collections

from conftest import dry_run_jobs


def test_report_needs_nothing_beyond_all(tmp_path):
    report = collections.Counter(rule for rule, _ in dry_run_jobs(tmp_path, "report"))
    everything = collections.Counter(rule for rule, _ in dry_run_jobs(tmp_path, "all"))
    del report["report"]  # the target rule itself (`all` lists its inputs)
    assert report - everything == collections.Counter()  # no job `all` would not run too
    for rule in ("report_claims", "report_ledger", "report_render", "report_hyperparams"):
        assert report[rule] >= 1

"""The theory slice of the DAG (smoke config): exactly the needed jobs, targeted reruns."""

import collections

import pytest
import yaml

from conftest import DEFAULT_CONFIG, SMOKE_CONFIG, dry_run_jobs, smoke_config


def counts(jobs):
    return collections.Counter(rule for rule, _ in jobs)


def test_fig_theory_lists_exactly_the_needed_jobs(tmp_path):
    t = smoke_config()["theory"]
    n_dist, n_seeds = len(t["distributions"]), len(t["seeds"])
    assert counts(dry_run_jobs(tmp_path, "fig_theory")) == {
        "theory_run_sfa": n_dist * len(t["k"]) * n_seeds, "theory_run_gpt": n_dist * len(t["gpt"]["k"]) * n_seeds,
        "theory_table": 1, "theory_figure": 1, "fig_theory": 1}


def test_a_bad_theory_value_stops_the_workflow_naming_the_key(tmp_path):
    cfg = yaml.safe_load(SMOKE_CONFIG.read_text())
    cfg["theory"]["eval"]["ratios"] = [2, 4]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(AssertionError, match="theory.eval.ratios"):
        dry_run_jobs(tmp_path, "fig_theory", configfile=(DEFAULT_CONFIG, path))

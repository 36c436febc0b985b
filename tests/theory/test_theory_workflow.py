"""The theory slice of the DAG (smoke config): exactly the needed jobs, targeted reruns."""

import collections
import re

import pytest
import yaml
from conftest import DEFAULT_CONFIG, ROOT, SMOKE_CONFIG, dry_run_jobs, smoke_config, snakemake


def counts(jobs):
    return collections.Counter(rule for rule, _ in jobs)


def test_fig_theory_lists_exactly_the_needed_jobs(tmp_path):
    """One GPT job per run; the SFA runs one job per chunk of theory.sfa_stack seeds."""
    t = smoke_config()["theory"]
    n_dist, n_seeds = len(t["distributions"]), len(t["seeds"])
    assert t["sfa_stack"] > 1 and n_seeds == 1
    assert counts(dry_run_jobs(tmp_path, "fig_theory")) == {
        "theory_run_sfa_stack0": n_dist * len(t["k"]), "theory_run_gpt": n_dist * len(t["gpt"]["k"]) * n_seeds,
        "theory_table": 1, "theory_figure": 1, "fig_theory": 1}


def test_a_bad_theory_value_stops_the_workflow_naming_the_key(tmp_path):
    cfg = yaml.safe_load(SMOKE_CONFIG.read_text())
    cfg["theory"]["eval"]["ratios"] = [2, 4]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(AssertionError, match="theory.eval.ratios"):
        dry_run_jobs(tmp_path, "fig_theory", configfile=(DEFAULT_CONFIG, path))


@pytest.mark.parametrize("sfa_seeds, expected", [(2, {0, 1}), ([3, 5], {3, 5})])
def test_the_sfa_runs_follow_their_own_seeds(tmp_path, sfa_seeds, expected):
    """theory.sfa_seeds (a count or a list) sets the SFA runs' seeds; the GPT runs keep
    theory.seeds."""
    t = smoke_config()["theory"]
    overlay = tmp_path / "sfa.yaml"
    overlay.write_text(yaml.safe_dump({"theory": {"sfa_seeds": sfa_seeds, "sfa_stack": 1}}))
    jobs = dry_run_jobs(tmp_path, "fig_theory", configfile=(DEFAULT_CONFIG, SMOKE_CONFIG, overlay))
    sfa = [w for rule, w in jobs if rule == "theory_run_sfa"]
    gpt = [w for rule, w in jobs if rule == "theory_run_gpt"]
    assert {int(w["seed"]) for w in sfa} == expected != set(t["seeds"])
    assert len(sfa) == len(t["distributions"]) * len(t["k"]) * len(expected)
    assert {int(w["seed"]) for w in gpt} == set(t["seeds"])


def test_sfa_stacks_chunk_the_seeds_and_change_no_result(tmp_path):
    """theory.sfa_stack: N cuts the SFA seeds into chunks of N, one job each, whose runs give
    the very files of one job per run; switching between the two reruns nothing."""
    runs = [f"results/theory/sfa/local/k2/seed{s}/eval.csv" for s in range(3)]

    def overlay(stack):
        path = tmp_path / f"stack{stack}.yaml"
        path.write_text(yaml.safe_dump({"theory": {"sfa_seeds": 3, "sfa_stack": stack}}))
        return (DEFAULT_CONFIG, SMOKE_CONFIG, path)

    first = snakemake(tmp_path, "--cores", "1", *runs, configfile=overlay(2))
    assert sorted(re.findall(r"rule (theory_run_sfa\w*):", first.stdout + first.stderr)) == [
        "theory_run_sfa_stack0", "theory_run_sfa_stack1"]
    second = (tmp_path / runs[1]).read_bytes()
    assert (tmp_path / "logs/theory/sfa/local_k2_seeds0-1.log").exists()
    assert "Nothing to be done" in snakemake(tmp_path, "-n", *runs, configfile=overlay(1)).stdout
    # the second run of a stack, trained after the first in its process, as if alone
    rerun = snakemake(tmp_path, "--cores", "1", runs[1], "--forcerun", "theory_run_sfa", configfile=overlay(1))
    assert (rerun.stdout + rerun.stderr).count("rule theory_run_sfa:") == 1
    assert (tmp_path / runs[1]).read_bytes() == second


def test_the_theory_claims_power_counts_each_models_seeds():
    """T2's groups are the SFA's k (theory.sfa_seeds) and the GPT's (theory.seeds): too few SFA
    seeds leave it undecidable, naming both counts, however many GPT seeds; T1 reads the GPT's
    alone. paper.yaml decides both."""
    from sparselen.interface.config import load
    from sparselen.theory.claims import CLAIMS

    t1, t2 = CLAIMS
    paper = load([ROOT / "configs/paper.yaml"])["theory"]
    assert paper["sfa_seeds"] < len(paper["seeds"]) and not t1.design(paper) and not t2.design(paper)
    few = {**paper, "sfa_seeds": 3}
    assert re.fullmatch(r"needs about \d+ seeds per \(model, k\) for 80% power; this config runs 3 SFA, "
                        rf"{len(paper['seeds'])} GPT \(0% power\)", t2.design(few)), t2.design(few)
    assert t2.power(few) < 0.8 <= t2.power(paper) and not t1.design(few) and t1.power(few) == t1.power(paper)
    assert t2.power({**paper, "sfa_seeds": list(range(3))}) == t2.power(few)

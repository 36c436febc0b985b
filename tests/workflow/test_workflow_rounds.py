"""Seeds in rounds through the workflow (workflow/rules/rounds.smk), on a tiny PPC config: C1's
task copy_repeat with coupled ids and one baseline, 2 seeds a round. Its 5-step models fit
nothing, so C1 stays open; C2 has no task of its kind and is settled in the first round. Run as
if killed after the first round, then resumed; then with a raised cap."""

import json

import pandas as pd
import pytest
import yaml
from conftest import dry_run_jobs, smoke_config, snakemake

from sparselen.interface.config import SLICES

pytestmark = pytest.mark.xdist_group("rounds")


def ppc_section(max_rounds: int) -> dict:
    return {"ppc": {"tasks": ["copy_repeat"], "schemes": ["nope", "coupled"], "seeds": list(range(2 * max_rounds)),
                    "rounds": {"size": 2, "max": max_rounds}, "max_position_id": 40,
                    "model": {"n_layer": 1, "n_head": 2, "d_model": 16, "d_ff": 32},
                    "train": {"steps": 5, "batch_size": 8, "checkpoint_every": 5, "log_every": 5,
                              "optimizer": {"warmup_steps": 2}},
                    "copy_repeat": {"train_sizes": [2, 4], "eval_sizes": [4, 8], "alphabet": 4, "steps": 5},
                    "eval": {"seed": 7, "n": 8, "batch_size": 8}}}


def configs(tmp_path, max_rounds: int):
    """One complete config: the smoke config with the PPC slice alone (the report then needs no
    other slice's runs)."""
    cfg = {k: v for k, v in smoke_config().items() if k not in SLICES} | ppc_section(max_rounds)
    path = tmp_path / f"rounds{max_rounds}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def decision(workdir, r: int) -> dict:
    return json.loads((workdir / f"results/rounds/ppc/round{r}.json").read_text())


def trained(jobs) -> set:
    return {(w["run"], int(w["seed"])) for rule, w in jobs if rule == "ppc_train"}


def test_rounds_stop_per_claim_resume_and_grow_with_the_cap(tmp_path):
    work = tmp_path / "work"
    two = configs(tmp_path, 2)
    # killed after the first round: only its decision is there
    snakemake(work, "--cores", "2", "results/rounds/ppc/round0.json", configfile=two)
    first = decision(work, 0)
    assert first["claims"]["C2"]["decided"] and first["claims"]["C2"]["verdict"] == "not decidable on this config"
    assert first["open"] == ["C1"] and first["seeds"] == {"ppc.seeds": 2}
    # the same command continues: the second round trains seeds 2 and 3 only
    jobs = dry_run_jobs(work, "fig_ppc", configfile=two)
    assert trained(jobs) == {(run, seed) for run in ("nope", "coupled") for seed in (2, 3)}
    snakemake(work, "--cores", "2", "fig_ppc", "report", configfile=two)
    assert decision(work, 1)["open"] == ["C1"] and not (work / "results/rounds/ppc/round2.json").exists()
    claims = (work / "results/report/claims.csv").read_text()
    assert "undecided after 2 rounds, the cap (4 seeds)" in claims and "would decide it at the spread now measured" in claims
    assert "decided in round 1 of at most 2 (2 seeds): not decidable on this config" in claims
    assert dry_run_jobs(work, "fig_ppc", configfile=two) == []  # nothing left: decided rounds rerun nothing
    # a raised cap adds a round and retrains nothing
    three = configs(tmp_path, 3)
    jobs = dry_run_jobs(work, "fig_ppc", configfile=three)
    assert trained(jobs) == {(run, seed) for run in ("nope", "coupled") for seed in (4, 5)}
    snakemake(work, "--cores", "2", "fig_ppc", configfile=three)
    assert decision(work, 2)["seeds"] == {"ppc.seeds": 6} and decision(work, 2)["open"] == ["C1"]
    seeds = pd.read_csv(work / "results/ppc/largest_size_per_seed.csv")["seed"]
    assert sorted(set(seeds)) == [0, 1, 2, 3, 4, 5]  # the table is made again on every round's runs

"""Every SLURM submission of configs/paper.yaml fits the node the SLURM profile states.

Snakemake submits a group's connected jobs as one sbatch and asks for the sum of what the jobs
that run side by side ask for; the profile's ``cores`` and ``resources: mem_mb`` are limits
of one submission (Snakemake's resource scopes), under which jobs that do not fit run in turn.
The check forms the submissions of the paper's DAG as a SLURM run does (the profile's
``group-components``, ``default-resources`` and limits; a group's resources as the SLURM
executor computes them, not as a local or dry run sums them) and asks that each fits the node
and that none had to run its jobs in turn to fit (which would stretch its time limit).
"""

from __future__ import annotations

import contextlib
import logging

import pytest
import yaml

from conftest import ROOT, SMOKE

PROFILE = ROOT / "workflow" / "profiles" / "slurm" / "config.yaml"
PAPER = (ROOT / "configs" / "paper.yaml",)


def node(profile: dict) -> dict:
    """The per-submission limits the profile states."""
    return {"mem_mb": int(profile["resources"]["mem_mb"]), "cores": int(profile["cores"])}


def submissions(configfiles, profile: dict) -> list[dict]:
    """One record per SLURM submission of ``all`` from scratch (run in the working directory,
    as ``snakemake -n``): its group (or rule), jobs, mem_mb, CPUs, time limit, and the time
    limit it would have if its jobs of each level ran side by side."""
    from snakemake.api import SnakemakeApi
    from snakemake.resources import GroupResources
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import (ConfigSettings, DAGSettings, ExecutionSettings, GroupSettings,
                                          OutputSettings, ResourceSettings)

    quiet = logging.getLogger("snakemake")
    propagate, quiet.propagate = quiet.propagate, False
    try:
        with SnakemakeApi(OutputSettings(quiet={Quietness.ALL}, enable_file_logging=False)) as api:
            wf = api.workflow(ResourceSettings(nodes=profile["jobs"], cores=profile["cores"],
                                               resources=profile["resources"],
                                               default_resources=profile["default-resources"]),
                              ConfigSettings(configfiles=list(configfiles)), snakefile=ROOT / "Snakefile")
            wf.dag(DAGSettings(targets={"all"}, forceall=True)).execute_workflow(
                executor=profile["executor"], pseudo_executor="dryrun",
                execution_settings=ExecutionSettings(no_hooks=True),
                group_settings=GroupSettings(group_components=profile["group-components"]))
            workflow = wf._workflow
            out, groups = [], {}
            for job in workflow.dag.jobs:
                group = workflow.dag._group.get(job)
                if group is None:
                    r = job.resources
                    out.append({"name": job.rule.name, "jobs": 1, "mem_mb": r["mem_mb"],
                                "cpus": r.get("cpus_per_task", r["_cores"]),  # as the executor asks
                                "runtime": r["runtime"], "side_by_side": r["runtime"]})
                else:
                    groups[group.jobid] = group
            for group in groups.values():
                # as the SLURM executor computes it (a dry run sums them as if run locally)
                r = GroupResources.basic_layered(toposorted_jobs=group.toposorted,
                                                 constraints=workflow.global_resources, run_local=False,
                                                 additive_resources=["runtime"], sortby=["runtime"])
                levels = sum(max(j.resources["runtime"] for j in level) for level in group.toposorted)
                out.append({"name": group.groupid, "jobs": len(group.jobs), "mem_mb": r["mem_mb"],
                            "cpus": r.get("cpus_per_task", r["_cores"]), "runtime": r["runtime"],
                            "side_by_side": levels})
            return out
    finally:
        quiet.propagate = propagate


def profile_submissions(tmp_path, configfiles, **changes):
    profile = {**yaml.safe_load(PROFILE.read_text()), **changes}
    with contextlib.chdir(tmp_path):
        return profile, submissions(configfiles, profile)


def test_every_paper_submission_fits_the_profiles_node(tmp_path):
    """paper.yaml at the cap of its rounds, every round's jobs in one DAG (its largest)."""
    cap = tmp_path / "cap.yaml"
    cap.write_text("parity: {rounds: null}\nppc: {rounds: null}\n")
    profile, subs = profile_submissions(tmp_path, (*PAPER, cap))
    limits = node(profile)
    names = {s["name"] for s in subs}
    assert {"data", "cpu_train", "model", "aggregate", "language_analyze"} <= names
    assert "packed_model" not in names  # the small models train and evaluate in stacks, a GPU each
    for s in subs:
        assert s["mem_mb"] <= limits["mem_mb"] and s["cpus"] <= limits["cores"], s
        assert s["runtime"] == s["side_by_side"], f"{s}: its jobs run in turn to fit the node"
    sfa = [s for s in subs if s["name"] == "cpu_train"]
    assert len(sfa) > 1 and max(s["jobs"] for s in sfa) == 1  # a submission per run
    # a stack job on its GPU asks for resources.gpu_job_cpus: its kernel launches and its batch
    # worker each on a core; the SFA runs (CPU) for their threads
    stacks = [s for s in subs if "_stack" in s["name"]]
    sfa_threads = yaml.safe_load((ROOT / "configs" / "paper.yaml").read_text())["theory"]["sfa_threads"]
    # parity 5 K_train x 5 stacks, PPC 44 (task, run) x 4 stacks, trained and evaluated; the GPT's 9 cells
    assert len(stacks) == 411 and {s["cpus"] for s in stacks} == {4} and {s["cpus"] for s in sfa} == {sfa_threads}


def test_jobs_sharing_a_gpu_ask_for_their_threads(tmp_path):
    """paper.yaml with one run per job: 8 small models' jobs share a GPU in one submission,
    side by side, each with its torch threads (not resources.gpu_job_cpus: 8 x 4 would not fit
    the node); a language training holds its GPU and asks for resources.gpu_job_cpus."""
    overlay = tmp_path / "per_run.yaml"
    overlay.write_text("".join(f"{name}: {{stack: 1, seeds: [0, 1]{rounds}}}\n" for name, rounds in
                               (("parity", ", rounds: null"), ("ppc", ", rounds: null"), ("theory", ""))))
    profile, subs = profile_submissions(tmp_path, (*PAPER, overlay))
    packed = [s for s in subs if s["name"] == "packed_model"]
    assert packed and max(s["jobs"] for s in packed) == 16  # 8 trainings, then their 8 evaluations
    assert {s["cpus"] for s in packed if s["jobs"] == 16} == {8}
    model = [s for s in subs if s["name"] == "model"]  # a language training and its loss by position
    assert model and {s["cpus"] for s in model} == {4}


def test_jobs_that_do_not_fit_side_by_side_run_in_turn_within_the_node(tmp_path):
    """The profile's limits hold whatever the config and the group sizes: on a node with room
    for one SFA run, a submission of two runs them one after the other."""
    two = {"group-components": {**yaml.safe_load(PROFILE.read_text())["group-components"], "cpu_train": 2}}
    sfa_mem = next(s["mem_mb"] for s in profile_submissions(tmp_path, SMOKE, **two)[1] if s["name"] == "cpu_train") // 2
    profile, subs = profile_submissions(tmp_path, SMOKE, resources={"mem_mb": sfa_mem * 3 // 2}, **two)
    (sfa,) = [s for s in subs if s["name"] == "cpu_train"]
    assert sfa["jobs"] == 2 and sfa["mem_mb"] == sfa_mem and sfa["runtime"] == 2 * sfa["side_by_side"]

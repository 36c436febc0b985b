"""The workflow's jobs for a config as Snakemake's own DAG has them: each job's rule, wildcards,
params, benchmark file and time limit, and the SLURM submission it belongs to.

The DAG is that of a dry run of ``all`` with every job forced, under the SLURM profile's
executor, ``default-resources`` and ``group-components`` (workflow/profiles/slurm/config.yaml),
so groups are cut into submissions and a submission's time limit is summed as that profile
would have them. It runs in the working directory, as ``snakemake -n`` would (relative paths
in the config resolve there), and writes only what ``snakemake -n`` writes (``.snakemake/``).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "workflow" / "profiles" / "slurm" / "config.yaml"
BENCHMARKS = "results/benchmarks/"


@dataclass
class DagJob:
    rule: str
    wildcards: SimpleNamespace  # numbers as ints (sparselen.interface.run.typed_wildcards)
    params: SimpleNamespace
    bench: str  # the benchmark file, relative to results/benchmarks, without .tsv ("" if none)
    runtime_min: float  # resources.runtime of attempt 1
    group: str | None  # the rule's group
    submission: str  # the SLURM submission: its group job, or the job alone (a name)
    level: int  # its place in the submission: jobs of one level run side by side, levels in turn
    limit_min: float  # the submission's time limit at attempt 1 (Snakemake's runtime of its group job)
    log: str = ""  # its log file
    jobid: int = -1  # Snakemake's id of the job in this DAG
    deps: tuple[int, ...] = ()  # the ids of the jobs whose outputs it reads
    priority: float = 0  # Snakemake's priority of the job (rules' ``priority:``)
    threads: int = 1  # the cores it takes

    @property
    def slice(self) -> str:
        return self.rule.partition("_")[0]

    @property
    def name(self) -> str:
        return " ".join(f"{k}={v}" for k, v in vars(self.wildcards).items())


def workflow_jobs(configfiles=(), profile: Path = PROFILE, targets=("all",)) -> list[DagJob]:
    """Every job ``snakemake --profile workflow/profiles/slurm --configfile configfiles...``
    would run for ``targets`` (``all``) from scratch (``config.yaml`` when no file is given, as
    ``load``); a config whose seeds come in rounds at its cap, every round's jobs (the rounds'
    decisions, checkpoints, exist only once rounds have run)."""
    import yaml

    from sparselen.interface import rounds
    from sparselen.interface.config import DEFAULT_CONFIG, load

    files = [Path(f).absolute() for f in list(configfiles) or [DEFAULT_CONFIG]]
    cfg = load(files)
    if rounds.rounded(cfg):
        return config_jobs(rounds.at_cap(cfg), profile, targets)
    settings = yaml.safe_load(Path(profile).read_text())
    log = logging.getLogger("snakemake")  # quiet: none of its records through the caller's handlers
    propagate, log.propagate = log.propagate, False
    try:
        records = _dry_run(files, settings, set(targets))
    finally:
        log.propagate = propagate
    jobs = [DagJob(r["rule"], SimpleNamespace(**r["wildcards"]), SimpleNamespace(**r["params"]), r["bench"],
                   r["runtime"], r["group"], r["group_job"], r["level"], r["limit"], r["log"], r["jobid"],
                   r["deps"], r["priority"], r["threads"]) for r in records]
    _name_submissions(jobs)  # submission: the group job's id until then
    return jobs


def config_jobs(config: dict, *args) -> list[DagJob]:
    """``workflow_jobs`` (with its other arguments, ``args``) of a config given as a dict
    (merged and validated): written to a temporary file for Snakemake to read."""
    import tempfile

    import yaml

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return workflow_jobs([path], *args)


def _name_submissions(jobs: list[DagJob]) -> None:
    """Name each group job after its group and the run its jobs share
    (``model:parity/K_train=4 seed=0``), else after its group alone, numbered when the group is
    cut into several; an ungrouped job is ``rule:wildcards``."""
    members = defaultdict(list)
    for j in jobs:
        if j.submission is None:
            j.submission = f"{j.rule}:{j.name}"
        else:
            members[j.submission].append(j)
    names = {}
    for key, group in members.items():
        runs = {f"{j.slice}/{j.name}" for j in group}
        names[key] = f"{group[0].group}:{runs.pop()}" if len(runs) == 1 else group[0].group
    for name in set(names.values()):
        keys = sorted((k for k, n in names.items() if n == name), key=lambda k: min(j.bench for j in members[k]))
        if len(keys) > 1:
            names.update({k: f"{name} {i + 1}/{len(keys)}" for i, k in enumerate(keys)})
    for key, group in members.items():
        for j in group:
            j.submission = names[key]


def _dry_run(configfiles: list[Path], profile: dict, targets: set) -> list[dict]:
    """Every job of the DAG after a dry run, rules in the order the workflow defines them: rule,
    typed wildcards, params, benchmark file, runtime (attempt 1), group, and its group job (one
    submission): an id, the job's level in it, the group job's runtime; its id, the ids of the
    jobs it depends on, its priority and threads. Snakemake's API runs or
    prints a DAG but returns no job list, and groups exist only once a dry or cluster run has
    formed them, so this reads the workflow's DAG (``_workflow.dag``, ``dag._group``): the one
    place that touches Snakemake's internals."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import (ConfigSettings, DAGSettings, ExecutionSettings, GroupSettings, OutputSettings,
                                          ResourceSettings)

    from sparselen.interface.run import typed_wildcards

    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL}, enable_file_logging=False)) as api:
        wf = api.workflow(ResourceSettings(nodes=profile["jobs"], default_resources=profile["default-resources"]),
                          ConfigSettings(configfiles=configfiles), snakefile=ROOT / "Snakefile")
        wf.dag(DAGSettings(targets=targets, forceall=True)).execute_workflow(
            executor=profile["executor"], pseudo_executor="dryrun", execution_settings=ExecutionSettings(no_hooks=True),
            group_settings=GroupSettings(group_components=profile["group-components"]))
        dag, rules = wf._workflow.dag, [r.name for r in wf._workflow.rules]
        records = []
        for job in dag.jobs:
            g = dag._group.get(job)
            bench = str(job.benchmark or "").removeprefix(BENCHMARKS).removesuffix(".tsv")
            records.append({
                "rule": job.rule.name, "wildcards": typed_wildcards(job), "params": dict(job.params.items()),
                "bench": bench, "log": str(job.log[0]) if job.log else "", "runtime": job.resources.get("runtime"),
                "group": job.group,
                "group_job": g.jobid if g else None,
                "limit": g.resources["runtime"] if g else job.resources.get("runtime"),
                "level": next(i for i, level in enumerate(g.toposorted) if job in level) if g else 0,
                "jobid": job.jobid, "deps": tuple(sorted(d.jobid for d in dag.dependencies[job])),
                "priority": dag.priority(job), "threads": job.threads})
        return sorted(records, key=lambda r: rules.index(r["rule"]))  # rules in workflow order

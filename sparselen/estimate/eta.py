"""Each rule's predicted seconds per job for the jobs a run is about to start, for its time left
(``sparselen.report.terminal``): the jobs of Snakemake's live DAG priced as ``sparselen
estimate`` prices them (each by its slice's cost function, on the CPU profile, or on the
measured profile ``sparselen estimate --calibrate`` cached for this machine).

The Snakefile hands ``rule_seconds`` to the terminal (the report layer does not import the
estimate). A job the estimate cannot price (a target rule, a cost function that fails on a
partial config) is left out: the terminal falls back on what finished jobs took.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

from sparselen.estimate.dag import DagJob
from sparselen.estimate.machine import cached_cpu_profile
from sparselen.estimate.plan import cost_function
from sparselen.estimate.profiles import CPU_DEFAULT, Profile, seconds
from sparselen.estimate.stacks import price
from sparselen.interface.run import typed_wildcards

log = logging.getLogger(__name__)


def rule_seconds(workflow, profile: Profile | None = None) -> dict[str, float]:
    """Per rule of the jobs the live DAG still has to run: the mean predicted seconds of one job
    (on ``profile``; default this machine's cached profile, else the built-in one)."""
    profile = profile or cached_cpu_profile() or CPU_DEFAULT
    dag, config = workflow.dag, workflow.config
    out: dict[str, list[float]] = {}
    for job in dag.needrun_jobs():
        try:
            fn = cost_function(job.rule.name)
            if fn is None:
                continue
            d = DagJob(job.rule.name, SimpleNamespace(**typed_wildcards(job)), SimpleNamespace(**dict(job.params.items())),
                       "", 0.0, None, "", 0, 0.0, threads=job.threads)
            out.setdefault(d.rule, []).append(seconds(price(d, fn(d, config)), profile)["seconds"])
        except Exception as e:  # noqa: BLE001 - the time left falls back on finished jobs; the run goes on
            log.debug("no prediction for %s: %s", job.rule.name, e)
    return {rule: sum(s) / len(s) for rule, s in out.items()}

"""A rule's step, found by its name and run: rule ``<slice>_<step>`` runs the function
``sparselen.<slice>.jobs.<step>(job)``; a stack rule ``<rule>_stack<i>`` runs its runs through
``sparselen.jobs.stacks.run_stack``.

Every rule runs ``workflow/scripts/job.py`` through Snakemake's ``script:`` directive; that
script calls ``run(snakemake)``. The rule's name is the registry: a slice's step is found by
convention, so the slices never register themselves and this layer names none of them.
"""

from __future__ import annotations

from sparselen.interface.job import log_to, per_run_rule
from sparselen.jobs.slices import slice_step
from sparselen.jobs.stacks import run_stack
from sparselen.runtime import simulated_cuda
from sparselen.runtime.device import configure_cpu, expandable_segments, raise_open_file_limit, share_compile_cache


def step_function(rule: str):
    """``parity_train`` -> ``sparselen.parity.jobs.train``; a stack rule's ->
    ``sparselen.jobs.stacks.run_stack``, which trains its runs as one model or evaluates them one
    after another."""
    if per_run_rule(rule) != rule:
        return run_stack
    return slice_step(rule)


def run(job) -> None:
    """Run the step function of ``job.rule`` with the job's threads and log, its open-file soft
    limit at the hard one, and CUDA's allocator with expandable segments where the job may use
    a GPU (config ``device`` not ``cpu``; on simulated GPUs when ``SPARSELEN_SIMULATE_CUDA`` asks
    for them: ``sparselen.runtime.simulated_cuda``)."""
    with log_to(list(job.log)), simulated_cuda.from_env():
        configure_cpu(job.threads)
        raise_open_file_limit()
        if str(job.config.get("device", "cpu")) != "cpu":
            expandable_segments()
        if job.config.get("compile"):
            share_compile_cache()
        step_function(job.rule)(job)

"""A stack rule's job (a slice's ``stack`` knob, workflow/rules/common.smk): its runs' jobs,
each as its own rule would hand it over, run in one process on one device.

A training stack trains its runs as one model (``sparselen.training.stacked.train_stack``), then
runs each run's own after-training step where its slice declares one (``STACKED``); an
evaluation stack evaluates its runs as one stacked model where its slice declares a function
for it (``STACKED_EVALUATIONS``: parity's), else one after another with their rule's step (PPC's
generation): one start-up for all.
"""

from __future__ import annotations

import dataclasses
import importlib
from types import SimpleNamespace

from sparselen.interface.job import Job, Runtime, named, per_run_rule, runtime
from sparselen.interface.run import Run
from sparselen.jobs.slices import slice_of, slice_step, stacked_evaluations, stacked_trainings
from sparselen.training.stacked import train_stack


def run_stack(job) -> list[dict] | None:
    """A stack rule's job: its runs' jobs (``run_jobs``) on the stack job's device and GPU
    share. A training stack trains its runs as one stack, then runs each run's after-training
    step; an evaluation stack evaluates its runs as one stacked model where its slice declares
    how, else each run with its rule's step."""
    jobs, shared = run_jobs(job), runtime(job)
    rule = jobs[0].rule
    trainings = stacked_trainings()
    together = stacked_evaluations().get(rule)
    if together is not None:
        together(jobs, shared.device)
        return None
    if rule not in trainings:
        evaluate = slice_step(rule)
        for run_job in jobs:
            evaluate(run_job, shared.device)
        return None
    summaries = train_jobs(jobs, shared)
    slice_name, after = trainings[rule]
    if after is not None:
        evaluate = getattr(importlib.import_module(f"sparselen.{slice_name}.jobs"), after)
        for run_job in jobs:
            evaluate(run_job, shared.device)
    return summaries


def run_jobs(job) -> list[Job]:
    """The jobs of a stack job's runs, as their own rule (``sparselen.interface.job.per_run_rule``)
    would hand them over: run i of param ``stack_seeds`` gets the i-th file of each named
    output, of each named input that lists one file per run (the others are every run's) and
    of param ``checkpoint`` (a training stack's), the other params, and the stack's wildcards
    plus its ``seed``; the stack's log, resources, threads and config."""
    params, outputs = named(job.params), {k: list(v) for k, v in named(job.output).items()}
    inputs = named(job.input)
    seeds = list(params.pop("stack_seeds"))
    per_run = {**outputs, **{k: list(v) for k, v in inputs.items() if not isinstance(v, str)}}
    if "checkpoint" in params:
        per_run["checkpoint"] = list(params.pop("checkpoint"))
    sizes = {name: len(files) for name, files in per_run.items()}
    if any(n != len(seeds) for n in sizes.values()):
        raise ValueError(f"rule {job.rule}: {len(seeds)} stack_seeds {seeds} but files per run {sizes}")
    shared = {k: v for k, v in inputs.items() if isinstance(v, str)}
    wildcards = named(job.wildcards)

    def files(names, i):
        return {name: per_run[name][i] for name in names if name in per_run}

    return [Job(per_run_rule(job.rule), SimpleNamespace(**shared, **files(inputs, i)),
                SimpleNamespace(**files(outputs, i)), SimpleNamespace(**params, **files(["checkpoint"], i)),
                SimpleNamespace(**wildcards, seed=str(seed)), list(job.log), named(getattr(job, "resources", {})),
                job.threads, job.config)
            for i, seed in enumerate(seeds)]


def train_jobs(jobs, shared: Runtime | None = None) -> list[dict]:
    """Train the runs of ``jobs`` (``*_train`` jobs of one slice, or the theory's ``run_gpt``)
    as one stack: each job's slice builds its (model config, trainer settings, batch function)
    with its ``training(job)``, as the per-run path does. ``shared``: the runtime every run
    uses (a stack job's), else the first job's."""
    trainings = [importlib.import_module(f"sparselen.{job.rule.partition('_')[0]}.jobs").training(job) for job in jobs]
    model_cfgs, cfgs, batch_fns = zip(*trainings)
    if any(mc != model_cfgs[0] for mc in model_cfgs):
        raise ValueError("the runs of a stack must share one model config")
    runs = [Run.of(job, slice_of(job.rule).TRAINING_CODE) for job in jobs]
    shared = runs[0].runtime if shared is None else shared
    runs = [dataclasses.replace(run, runtime=shared) for run in runs]
    return train_stack(model_cfgs[0], list(cfgs), list(batch_fns), runs)

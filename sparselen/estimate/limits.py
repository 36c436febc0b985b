"""SLURM time limits from the estimate's prediction, computed when the workflow is read.

A stack job (a slice's ``stack`` > 1: tens of runs trained or evaluated in one job) asks for
``resources.runtime_margin`` times its predicted time, at least ``MIN_MINUTES`` and at most
``resources.max_runtime`` (the partition's maximum); attempt a asks for a times that, capped
too. Long limits are refused by partitions that cap jobs at 24-48 h and lose the scheduler's
backfill; a limit near the prediction keeps both, and a stack that outlasts it resumes from its
runs' checkpoints in the next attempt.

The prediction is ``sparselen estimate``'s for the same job: its runs' rule's cost
(``plan.cost_function``) at the rule's params and the job's wildcards, the stack as one job of
its runs (``stacks.stack_work``), in seconds on the profile ``resources.runtime_gpu`` names (a
datasheet GPU at the estimate's default utilization, or a profile file), or on the CPU profile
where the job runs on a CPU. The workflow calls ``stack_limit`` from each stack job's
``runtime`` resource (workflow/rules/common.smk ``job_resources``); jobs of one shape share a
price (cached), and the slices' costs cache what they sample (PPC's evaluation sets: most of
the time it takes). ``sparselen estimate --gpu`` on another device then shows which
submissions would outlast these limits.
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

from sparselen.estimate import profiles, stacks
from sparselen.estimate.plan import cost_function
from sparselen.interface.run import typed_wildcards

# The shortest limit a stack job asks for: start-up on a busy shared file system (imports,
# compiled kernels from the cache) is not in the prediction and varies by minutes.
MIN_MINUTES = 30

_SECONDS: dict[str, float] = {}


def limit_profile(config: dict, work) -> profiles.Profile:
    """The device a job of ``work`` runs on, as the estimate prices it: the GPU of
    ``resources.runtime_gpu`` for a model job of a config with GPUs, else the CPU profile."""
    gpu, cpu = profiles.resolve(config["resources"]["runtime_gpu"] if config.get("gpus_per_job", 0) > 0 else None,
                                profiles.UTILIZATION, None, compile=bool(config.get("compile")), cpu_memory_gb=0)
    return gpu if gpu is not None and work.model_job and not work.cpu_only else cpu


def predicted_seconds(config: dict, rule: str, wildcards: dict, params: dict, runs: int) -> float:
    """Predicted seconds of the job of stack rule ``rule`` of ``runs`` runs at ``wildcards`` and
    its runs' rule's ``params``: the estimate's price of the same job (``plan.priced``)."""
    key = json.dumps([rule, wildcards, params, runs, config], sort_keys=True, default=str)
    if key not in _SECONDS:
        typed = typed_wildcards(SimpleNamespace(wildcards=SimpleNamespace(**wildcards)))
        job = SimpleNamespace(rule=rule, wildcards=SimpleNamespace(**typed), params=SimpleNamespace(**params),
                              threads=config.get("threads", 1))
        work = stacks.stack_work([cost_function(rule)(job, config)] * runs, rule.partition("_")[0])
        _SECONDS[key] = profiles.seconds(work, limit_profile(config, work))["seconds"]
    return _SECONDS[key]


def limit_minutes(config: dict, seconds: float) -> int:
    """Attempt 1's limit of a job predicted at ``seconds``: ``resources.runtime_margin`` times it
    in whole minutes, at least ``MIN_MINUTES``, at most ``resources.max_runtime``."""
    res = config["resources"]
    return min(res["max_runtime"], max(MIN_MINUTES, math.ceil(res["runtime_margin"] * seconds / 60)))


def attempt_minutes(config: dict, minutes: float, attempt: int, reserve: float = 0) -> int:
    """Attempt ``attempt``'s limit of a job whose first attempt gets ``minutes``: ``attempt``
    times them, at most ``resources.max_runtime`` less ``attempt`` times ``reserve`` (minutes
    per attempt of the jobs after it in its SLURM submission, which adds their limits up)."""
    cap = config["resources"]["max_runtime"] - math.ceil(reserve * attempt)
    return max(1, min(cap, math.ceil(minutes * attempt)))


def stack_limit(config: dict, rule: str, wildcards: dict, params: dict, runs: int, attempt: int = 1) -> int:
    """Minutes a stack job asks for at ``attempt`` (see the module docstring)."""
    first = limit_minutes(config, predicted_seconds(config, rule, wildcards, params, runs))
    return attempt_minutes(config, first, attempt)

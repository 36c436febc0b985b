"""One training run as a training step sees it: its identity, its files and its runtime,
derived from the job once.

A run's **identity** is everything that defines its numbers: the rule's params (the config
subtree the job depends on) and its wildcards, minus the paths among the params. It is what
Snakemake already compares to decide a rerun, so the resume guard and the provenance hash can
never miss a value the rule passes: a param added to a rule changes the identity, and a
checkpoint written without it no longer resumes. Runtime knobs are never params
(``sparselen.interface.job.runtime``), so they are not part of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sparselen.interface.job import Runtime, named, runtime

PATH_PARAMS = ("checkpoint",)  # params that name files, not settings


@dataclass(frozen=True)
class RunFiles:
    """What one training run writes, and its resume file (kept until the run is done)."""

    model: Path
    log_csv: Path
    summary: Path
    checkpoint: Path

    @classmethod
    def of(cls, job) -> "RunFiles":
        """The files a ``*_train`` rule names: outputs model, log_csv, summary; param checkpoint
        (``sparselen.training.resumable``: removed by the workflow, not the job)."""
        o = job.output
        return cls(Path(o.model), Path(o.log_csv), Path(o.summary), Path(job.params.checkpoint))


def typed_wildcards(job) -> dict:
    """The job's wildcards, numbers as ints (``seed``, ``K_train``, ``context``, ``k``)."""
    return {k: int(v) if str(v).isdigit() else str(v) for k, v in named(job.wildcards).items()}


def identity(job) -> dict:
    """The rule's params without paths, and its wildcards; a name used by both is an error
    (the rule would hide one value behind the other)."""
    params = {k: v for k, v in named(job.params).items() if k not in PATH_PARAMS}
    wildcards = typed_wildcards(job)
    clash = sorted(set(params) & set(wildcards))
    if clash:
        raise ValueError(f"rule {job.rule}: {clash} name both a param and a wildcard; rename one")
    return {**params, **wildcards}


@dataclass(frozen=True)
class Run:
    identity: dict
    wildcards: dict  # the run's labels (part of the identity), written to its summary
    files: RunFiles
    runtime: Runtime
    code: tuple[str, ...] = ()  # its slice's training modules (``TRAINING_CODE`` of ``sparselen.<slice>``)
    log_name: str = ""  # the job's name in its log and benchmark files (``log_name``): the ledger's key

    @classmethod
    def of(cls, job, code: tuple[str, ...] = ()) -> "Run":
        """The run of a training job; ``code``: its slice's ``TRAINING_CODE``, what its
        checkpoints' code fingerprint covers besides the trainer."""
        return cls(identity(job), typed_wildcards(job), RunFiles.of(job), runtime(job), tuple(code), log_name(job))


def log_name(job) -> str:
    """``<slice>/<step>/<job>`` of a rule's log ``logs/<slice>/<step>/<job>.log``, which its
    benchmark file ``results/benchmarks/<slice>/<step>/<job>.tsv`` repeats (tests/estimate/test_estimate.py
    checks every rule's); "" for a job without a log."""
    logs = list(job.log)
    if not logs:
        return ""
    path = Path(logs[0])
    return str(path.relative_to("logs").with_suffix("")) if path.parts[0] == "logs" else ""

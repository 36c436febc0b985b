"""Checkpoints outlive their job: the workflow removes them once it has recorded every job.

A checkpoint is not a Snakemake output (Snakemake deletes a failed job's outputs; the
checkpoint must survive), and a job that removed its own would lose the whole training to a
kill after the removal but before Snakemake records the job: during the theory slice's
evaluation, which follows training in the same job, or at a SLURM time limit while the job
wraps up (Snakemake then deletes the outputs and reruns the job). So ``train`` writes a
checkpoint at its last step too and never removes it: a rerun resumes with nothing left to
train. ``clean`` removes the checkpoints beside finished outputs; the Snakefile's
``onsuccess`` calls it (``sparselen clean-checkpoints`` by hand).

A checkpoint records the code that wrote it (``code_fingerprint``): a rerun Snakemake
triggers because the code changed must not resume the old code's, least of all a finished one.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from pathlib import Path

log = logging.getLogger(__name__)
PACKAGE = Path(__file__).resolve().parent
CHECKPOINT = "checkpoint.pt"
FINISHED = ("model.pt", "train_summary.json")  # a run's outputs that say its training is done


@functools.cache
def code_fingerprint() -> str:
    """Hash of the package's Python sources."""
    return source_fingerprint(*(f.relative_to(PACKAGE) for f in PACKAGE.rglob("*.py")))


def source_fingerprint(*modules) -> str:
    """Hash of the package's source files ``modules`` (paths relative to the package)."""
    h = hashlib.sha256()
    for f in sorted(map(str, modules)):
        h.update(f.encode() + b"\0" + (PACKAGE / f).read_bytes() + b"\0")
    return h.hexdigest()[:16]


def finished(checkpoint: Path) -> bool:
    return all((checkpoint.parent / name).exists() for name in FINISHED)


def clean(root="results", dry_run: bool = False) -> list[Path]:
    """Remove the checkpoints under ``root`` whose trainings finished; unfinished ones stay
    for resuming. Only when no workflow is running (``onsuccess``)."""
    removed = [c for c in sorted(Path(root).rglob(CHECKPOINT)) if finished(c)]
    if not dry_run:
        for c in removed:
            c.unlink(missing_ok=True)
    if removed:
        log.info("removed %d checkpoint(s) of finished trainings under %s", len(removed), root)
    return removed

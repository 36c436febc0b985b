"""Checkpoints outlive their job: the workflow removes them once it has recorded every job.

A checkpoint is not a Snakemake output (Snakemake deletes a failed job's outputs; the
checkpoint must survive), and a job that removed its own would lose the whole training to a
kill after the removal but before Snakemake records the job: during the theory slice's
evaluation, which follows training in the same job, or at a SLURM time limit while the job
wraps up (Snakemake then deletes the outputs and reruns the job). So ``train`` writes a
checkpoint at its last step too and never removes it: a rerun resumes with nothing left to
train. That checkpoint keeps the weights and drops AdamW's moments (``train.without_moments``),
which nothing needs after the last step: a finished run's files on disk are its model file and
a checkpoint of its weights, half of what they were with the moments kept, and a workflow that
never reaches ``onsuccess`` (a partial failure) leaves no more. ``clean`` removes the
checkpoints beside finished outputs; the Snakefile's ``onsuccess`` calls it (``sparselen
clean-checkpoints`` by hand). The language analysis keeps
its progress the same way (``sparselen.language.progress``), and ``clean`` removes it too.

A checkpoint records the code that computes its run (``code_fingerprint``): the trainer and
model (``TRAINER``) and the slice's own task and data code (``TRAINING_CODE`` in
``sparselen/<slice>/__init__.py``). A rerun after an edit of that code must not resume the old
code's checkpoint, least of all a finished one; an edit anywhere else (the report, the
estimate, another slice, an evaluation) keeps every in-flight training's checkpoint.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import logging
import re
from pathlib import Path

log = logging.getLogger(__name__)
PACKAGE = Path(__file__).resolve().parents[1]
CHECKPOINT = "checkpoint.pt"
FINISHED = ("model.pt", "train_summary.json")  # a run's outputs that say its training is done
ANALYSIS_PROGRESS = "analysis_progress.json"  # the language analysis' (sparselen.language.progress)
# every resume file, and the outputs beside it that say its job is done
RESUME_FILES = {CHECKPOINT: FINISHED, ANALYSIS_PROGRESS: ("screen.csv", "dependency.csv", "planted.csv")}


# What every training runs: the trainer, the models, position ids, batches, seeds, the device
# path and data parallelism (paths relative to the package).
TRAINER = ("training/train.py", "training/distributed.py", "training/stacked.py", "nn/model.py", "nn/olmo.py",
           "nn/architectures.py", "nn/positions.py", "nn/batch.py", "nn/stacked_model.py", "runtime/rng.py",
           "runtime/device.py")


@functools.cache
def code_fingerprint(*modules: str) -> str:
    """Hash of the trainer's sources and ``modules`` (a slice's ``TRAINING_CODE``; a folder
    stands for every ``.py`` file under it)."""
    return source_fingerprint(*TRAINER, *modules)


def source_fingerprint(*modules) -> str:
    """Hash of what the package's source files ``modules`` compute (paths relative to the
    package; a folder stands for every ``.py`` file under it): ``canonical_source`` of each, so
    comments, docstrings, layout and the folders modules live in change no fingerprint, and an
    edit of what a file computes does."""
    files = set()
    for m in map(str, modules):
        path = PACKAGE / m
        files |= set(path.rglob("*.py")) if path.is_dir() else {path}
    h = hashlib.sha256()
    for digest in sorted(hashlib.sha256(canonical_source(f)).digest() for f in files):
        h.update(digest)
    return h.hexdigest()[:16]


def canonical_source(path: Path) -> bytes:
    """A Python file as its syntax tree without docstrings, its imports as a sorted set of
    (module's last name, imported name) apart from the statements (where an import stands, and
    which folder its module lives in, change nothing it computes); any other file as its text
    with the package's and the tests' paths cut to their file names."""
    text = path.read_text()
    if path.suffix != ".py":
        return re.sub(r"(?:sparselen|tests)/(?:\w+/)*(\w+\.py)", r"\1", text).encode()
    tree = ast.parse(text)
    imports = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports |= {_imported(node, alias, path) for alias in node.names}
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if isinstance(statements, list):
                setattr(node, field, [n for n in statements if not isinstance(n, (ast.Import, ast.ImportFrom))
                                      and not _docstring(n)])
    return (ast.dump(tree) + repr(sorted(imports))).encode()


def _docstring(node) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _imported(node, alias, path: Path) -> tuple:
    """(module, name, alias) of one imported name, a module of this package by its last name."""
    if isinstance(node, ast.Import):
        module, name = alias.name, ""
    else:
        module, name = node.module or "", alias.name
        if node.level:
            base = ("sparselen", *path.relative_to(PACKAGE).parent.parts)
            module = ".".join(base[: len(base) - node.level + 1] + ((module,) if module else ()))
    parts = module.split(".")
    if parts[0] == "sparselen":
        target = PACKAGE.joinpath(*parts[1:], name)
        if name and (target.with_suffix(".py").exists() or (target / "__init__.py").exists()):
            parts, name = [name], ""  # ``from sparselen.x import module``: the module itself
        module = parts[-1]
    return module, name, alias.asname or ""


def finished(checkpoint: Path) -> bool:
    return all((checkpoint.parent / name).exists() for name in RESUME_FILES[checkpoint.name])


def clean(root="results", dry_run: bool = False) -> list[Path]:
    """Remove the resume files under ``root`` whose jobs finished; unfinished ones stay for
    resuming. Only when no workflow is running (``onsuccess``)."""
    removed = sorted(c for name in RESUME_FILES for c in Path(root).rglob(name) if finished(c))
    if not dry_run:
        for c in removed:
            c.unlink(missing_ok=True)
    if removed:
        log.info("removed %d checkpoint(s) of finished jobs under %s", len(removed), root)
    return removed

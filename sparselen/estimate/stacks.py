"""Stacks in the estimate: the runs of one cell (the seeds of one (K_train), (task, run) or
(law, k) of the small models) trained as one model (``sparselen.stacked``) priced as one job.

A slice's ``stack: S`` (``config[slice].get("stack", 1)``) cuts each cell's seeds, in order, into
consecutive chunks of S; each chunk is one training job and one evaluation job (the theory's GPT
runs train and evaluate in one), one SLURM submission on one GPU, never packed. Such a job pays
start-up, compilation and the trainer once; its training step is one step of all S runs:

- time: the step's overheads once (``Profile.step_s``, the per-layer launches), each further
  run's batch drawn on the host (``Profile.batch_s``), and the FLOPs of S runs at the
  profile's rate, each run's batch padded to the longest of the step's (the expected longest of
  S draws from the run's equally likely lengths);
- memory: S times a run's training step (``memory.stacked``); its evaluations run one run at a
  time, each as alone.

``largest_fit`` is the largest S whose every pass fits a device: what the estimate offers when a
config stacks fewer.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from sparselen.estimate.flops import Term, Work
from sparselen.estimate.memory import DEVICES, Peak, stacked
from sparselen.estimate.plan import Job

TRAINING = {"parity_train": "parity", "ppc_train": "ppc", "theory_run_gpt": "theory"}
EVALUATION = {"parity_evaluate": "parity", "ppc_evaluate": "ppc"}
GROUP = "model"  # a stack's submission: its own, on one GPU (workflow/rules/common.smk's GROUP_MODEL)


def configured(config: dict) -> dict[str, int]:
    """Each stacking slice's ``stack`` (1: one run per job)."""
    return {s: int(config[s].get("stack", 1)) for s in dict.fromkeys(TRAINING.values()) if s in config}


def key(slice_: str) -> str:
    return f"{slice_}.stack"


def stackable(job: Job) -> bool:
    return job.dag.rule in TRAINING or job.dag.rule in EVALUATION


def slice_of(rule: str) -> str:
    return TRAINING.get(rule) or EVALUATION[rule]


def cells(jobs: list[Job]) -> dict[tuple, list[Job]]:
    """The per-run jobs of each (rule, cell), in seed order."""
    out: dict[tuple, list[Job]] = {}
    for j in jobs:
        if stackable(j) and hasattr(j.dag.wildcards, "seed"):
            cell = tuple((k, v) for k, v in vars(j.dag.wildcards).items() if k != "seed")
            out.setdefault((j.dag.rule, cell), []).append(j)
    return {k: sorted(v, key=lambda j: j.dag.wildcards.seed) for k, v in out.items()}


def padded_flops(term: Term, stack: int) -> float:
    """A training term's FLOPs for ``stack`` runs whose batches are padded to the longest of the
    step's: each length weighted by the chance that it is the longest of S draws."""
    if not term.lengths or term.shape is None:
        return stack * term.flops
    lengths, n = sorted(term.lengths), len(term.lengths)
    expected = sum((((i + 1) / n) ** stack - (i / n) ** stack) * 3 * term.shape.forward(term.rows, T)
                   for i, T in enumerate(lengths))
    return stack * term.calls * expected


def stacked_peak(work: Work, stack: int, kind: str, slice_: str) -> Peak | None:
    """The largest pass of a job of ``stack`` runs like ``work``: its training step S times."""
    best = None
    for what, key_, bytes_, training_step in work.passes:
        b = bytes_[kind]
        if training_step and stack > 1:
            b, what, key_ = stacked(b, stack, kind), f"{what} for each of {stack} runs", key(slice_)
        if best is None or b > best.bytes:
            best = Peak(b, what, key_)
    return best


def stack_work(works: list[Work], slice_: str) -> Work:
    """One job of the runs ``works`` (one cell's, same shapes): one training step for all, their
    evaluations one after another, their non-model units (and each run's trainer and files) summed."""
    first, stack = works[0], len(works)
    terms = [replace(t, flops=padded_flops(t, stack), runs=stack) for t in first.terms if t.kind == "train"]
    terms += [t for w in works for t in w.terms if t.kind != "train"]
    units: dict = {}
    for w in works:
        for name, amount in w.units.items():
            units[name] = units.get(name, 0.0) + amount
    if first.model_job:
        units["model_job"] = units.get("model_job", 0.0) + stack - 1  # seconds() adds the first
    memory = {kind: stacked_peak(first, stack, kind, slice_) for kind in DEVICES}
    return replace(first, terms=terms, units=units, runs=stack,
                   memory={k: v for k, v in memory.items() if v is not None})


def seeds_label(seeds: list[int]) -> str:
    """``0-31`` for consecutive seeds, else ``0,2,5``."""
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))) and len(seeds) > 1:
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(map(str, seeds))


def stack(config: dict, jobs: list[Job], sizes: dict[str, int] | None = None) -> list[Job]:
    """``jobs`` (``plan``) with each stacking slice's per-run jobs replaced by stacks of
    ``sizes[slice]`` (default: the config's ``stack``) consecutive seeds of a cell; a stack's
    DAG job carries the cell's wildcards and ``seeds``, its first run's id, the union of its
    runs' dependencies, and its own submission, whose limit is Snakemake's for a group (its
    levels' runtimes added up)."""
    sizes = configured(config) if sizes is None else sizes
    merged: dict[int, Job] = {}  # a run's job id -> its stack
    for (rule, cell), runs in cells(jobs).items():
        slice_ = slice_of(rule)
        size = sizes.get(slice_, 1)
        if size <= 1:
            continue
        for i in range(0, len(runs), size):
            chunk = runs[i:i + size]
            seeds = seeds_label([j.dag.wildcards.seed for j in chunk])
            wildcards = SimpleNamespace(**dict(cell), seeds=seeds)
            name = " ".join(f"{k}={v}" for k, v in vars(wildcards).items())
            d = replace(chunk[0].dag, wildcards=wildcards, bench="", log="", group=GROUP,
                        submission=f"stack:{slice_}/{name}")
            job = Job(d, stack_work([j.work for j in chunk], slice_))
            merged.update({j.dag.jobid: job for j in chunk})
    if not merged:
        return jobs
    out, seen = [], set()
    for j in jobs:
        if j.dag.jobid in merged:
            j = merged[j.dag.jobid]
            if id(j) in seen:
                continue
            seen.add(id(j))
        out.append(j)
    new_id = {old: j.dag.jobid for old, j in merged.items()}
    limits: dict[str, dict[int, float]] = {}
    for j in out:
        if id(j) in seen:
            level = limits.setdefault(j.dag.submission, {})
            level[j.dag.level] = max(level.get(j.dag.level, 0.0), j.dag.runtime_min)
    for i, j in enumerate(out):
        deps = tuple(sorted({new_id.get(d, d) for d in j.dag.deps} - {j.dag.jobid}))
        limit = sum(limits[j.dag.submission].values()) if j.dag.submission in limits else j.dag.limit_min
        out[i] = Job(replace(j.dag, deps=deps, limit_min=limit), j.work)
    return out


def largest_fit(config: dict, jobs: list[Job], usable_bytes: float, kind: str = "gpu") -> dict[str, tuple]:
    """Per stacking slice, (the largest S up to its largest cell's runs whose every job's
    passes fit ``usable_bytes`` on ``kind``, that S's largest peak): at least 1."""
    per_slice: dict[str, list] = {}
    for (rule, _), runs in cells(jobs).items():
        per_slice.setdefault(slice_of(rule), []).append(runs)
    out = {}
    for slice_, groups in per_slice.items():
        works = [runs[0].work for runs in groups]  # a cell's runs share their shapes
        for size in range(max(len(runs) for runs in groups), 0, -1):
            peak = max((stacked_peak(w, size, kind, slice_) for w in works), key=lambda p: p.bytes if p else 0)
            if size == 1 or (peak is not None and peak.bytes <= usable_bytes):
                out[slice_] = (size, peak)
                break
    return out

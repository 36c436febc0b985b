"""How large a stack each slice could take: the largest S whose every pass fits a device
(``largest_fit``), as many stacks of even size (``even_fit``: what the estimate offers when a
config stacks another number, within ``SHARE`` of the GPU's usable memory), the configured
stacks' peaks (``stack_peaks``), and the training hours of each slice's cells at given stack
sizes (``training_hours``). Which rules' runs stack is each slice's declaration
(``sparselen.jobs.slices.stacked_trainings``).
"""

from __future__ import annotations

import math

from sparselen.estimate.plan import Job
from sparselen.estimate.profiles import Profile, seconds
from sparselen.estimate.stacks import seeds, stack_work, stacked_peak
from sparselen.interface.job import per_run_rule
from sparselen.jobs.slices import stacked_trainings
from sparselen.nn.flops import Work

# Share of a GPU's usable memory a stack may take: a stack's training step is S times a run's,
# so the memory model's error (within 6% on an H200, docs/gpu.md) and what it leaves out
# (torch.compile's buffers, the allocator's fragmentation at S x the tensors) grow with S.
SHARE = 0.6


def configured(config: dict) -> dict[str, int]:
    """Each stacking slice's ``stack`` (1: one run per job)."""
    stacking = dict.fromkeys(name for name, _ in stacked_trainings().values())
    return {s: int(config[s].get("stack", 1)) for s in stacking if s in config}


def cells(jobs: list[Job]) -> dict[tuple, tuple[Work, int]]:
    """Per (slice, cell) of the training jobs of the slices that stack, per run or in stacks:
    (one run's work, the cell's number of runs)."""
    out: dict[tuple, tuple[Work, int]] = {}
    trainings = stacked_trainings()
    for j in jobs:
        rule = per_run_rule(j.dag.rule)
        if rule in trainings:
            cell = tuple((k, v) for k, v in vars(j.dag.wildcards).items() if k not in ("seed", "seeds"))
            slice_ = trainings[rule][0]
            _, n = out.get((slice_, cell), (None, 0))
            out[(slice_, cell)] = (j.run, n + len(seeds(j.dag) or [0]))
    return out


def stack_peaks(jobs: list[Job], kind: str = "gpu") -> dict:
    """Per stacking slice, the largest predicted peak on ``kind`` of its stack jobs (those of
    more than one run) as configured (``memory.Peak``)."""
    out = {}
    trainings = stacked_trainings()
    for j in jobs:
        rule, peak = per_run_rule(j.dag.rule), j.work.memory.get(kind)
        if rule in trainings and j.work.runs > 1 and peak is not None:
            slice_ = trainings[rule][0]
            if slice_ not in out or peak.bytes > out[slice_].bytes:
                out[slice_] = peak
    return out


def largest_fit(jobs: list[Job], usable_bytes: float, kind: str = "gpu") -> dict[str, tuple]:
    """Per stacking slice, (the largest S up to its largest cell's runs whose every job's
    passes fit ``usable_bytes`` on ``kind``, that S's largest peak): at least 1."""
    per_slice: dict[str, list] = {}
    for (slice_, _), (run, n) in cells(jobs).items():
        per_slice.setdefault(slice_, []).append((run, n))
    out = {}
    for slice_, groups in per_slice.items():
        for size in range(max(n for _, n in groups), 0, -1):
            peak = max((stacked_peak(run, size, kind, slice_) for run, _ in groups), key=lambda p: p.bytes if p else 0)
            if size == 1 or (peak is not None and peak.bytes <= usable_bytes):
                out[slice_] = (size, peak)
                break
    return out


def even_fit(jobs: list[Job], usable_bytes: float, kind: str = "gpu") -> dict[str, tuple]:
    """Per stacking slice, (S, its largest peak) for as few stacks per cell as ``largest_fit``
    allows, of even size: a cell of n runs in ceil(n / largest) stacks of ceil(n / stacks) runs
    (no larger, so it fits too), which take the hours of the largest stacks at a smaller peak."""
    n = {}
    for (slice_, _), (run, runs) in cells(jobs).items():
        n[slice_] = max(n.get(slice_, 0), runs)
    out = {}
    for slice_, (largest, _) in largest_fit(jobs, usable_bytes, kind).items():
        size = math.ceil(n[slice_] / math.ceil(n[slice_] / largest))
        peaks = [stacked_peak(run, size, kind, slice_) for (s, _), (run, _) in cells(jobs).items() if s == slice_]
        out[slice_] = (size, max(peaks, key=lambda p: p.bytes if p else 0))
    return out


def training_hours(jobs: list[Job], sizes: dict[str, int], profile: Profile) -> float:
    """Device-hours on ``profile`` of the training jobs of the slices of ``sizes`` with each
    cell's runs in chunks of ``sizes[slice]``, every chunk priced as a stack job (``stack_work``)."""
    total = 0.0
    for (slice_, _), (run, n) in cells(jobs).items():
        if slice_ not in sizes:
            continue
        size = sizes[slice_]
        for first in range(0, n, size):
            total += seconds(stack_work([run] * min(size, n - first), slice_), profile)["seconds"]
    return total / 3600

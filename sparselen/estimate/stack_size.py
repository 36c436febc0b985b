"""How large a stack each slice could take: the largest S whose every pass fits a device
(``largest_fit``), and the training hours of each slice's cells at given stack sizes
(``training_hours``), what the estimate offers when a config stacks another number. Which
rules' runs stack is each slice's declaration (``sparselen.jobs.slices.stacked_trainings``).
"""

from __future__ import annotations

from sparselen.estimate.plan import Job
from sparselen.estimate.profiles import Profile, seconds
from sparselen.estimate.stacks import seeds, stack_work, stacked_peak
from sparselen.interface.job import per_run_rule
from sparselen.jobs.slices import stacked_trainings
from sparselen.nn.flops import Work


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

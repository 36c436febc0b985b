"""How many small trainings share one GPU (config ``packing``; docs/gpu.md, "Packing").

A parity, PPC or theory GPT run (a training and its evaluations: one model group) uses a GB or
two of a GPU and a few percent of its arithmetic, so ``jobs_per_gpu`` of them run side by side
on one GPU: ``packing.jobs_per_gpu``, or when it is 0 as many copies of the largest predicted
peak among those slices' model jobs (``sparselen.nn.memory``, through each slice's
``cost.gpu_peak``) as fit ``packing.gpu_memory_gib`` (``profiles.USABLE`` of it), at most
``packing.max_jobs_per_gpu``. The language slice's models fill a GPU's arithmetic and are never
packed (``PACKED``). Without GPUs, or with more than one per job, nothing is packed (1).

The workflow (workflow/rules/common.smk) turns the number into a submission per group of
model groups under SLURM and into GPU slots locally (``sparselen.runtime.gpu_slots``); ``sparselen
estimate`` prices both ways.
"""

from __future__ import annotations

import importlib
import math

PACKED = ("parity", "ppc", "theory")  # slices whose model groups share GPUs


def gpu_peaks(config: dict) -> dict[str, float]:
    """Per packed slice the config runs with a model job on the GPU, the largest predicted GPU
    peak (bytes) of those jobs."""
    peaks = {name: importlib.import_module(f"sparselen.{name}.cost").gpu_peak(config) for name in PACKED if name in config}
    return {name: peak for name, peak in peaks.items() if peak > 0}


def jobs_per_gpu(config: dict) -> int:
    """Model groups that share one GPU under ``config`` (validated): 1 without packing."""
    from sparselen.estimate.profiles import USABLE

    if config.get("gpus_per_job", 0) != 1:
        return 1
    p = config["packing"]
    if p["jobs_per_gpu"]:
        return p["jobs_per_gpu"]
    peaks = gpu_peaks(config)
    if not peaks:
        return 1
    fit = math.floor(USABLE * p["gpu_memory_gib"] * 2**30 / max(peaks.values()))
    return max(1, min(p["max_jobs_per_gpu"], fit))

"""A config's cross-key checks, before any job starts: each slice checks its own section
(``sparselen/<slice>/checks.py``, ``config_errors``), and the keys no slice owns are checked here."""

from __future__ import annotations

import importlib
from pathlib import Path

from sparselen.interface import rounds
from sparselen.interface.config import SLICES
from sparselen.runtime.datasheets import GPU_ALIASES, GPUS


def semantic_errors(config: dict) -> list[str]:
    """Cross-key checks of every slice section present in ``config``, of packing and of the GPU
    the time limits are predicted on."""
    out = []
    gpu = str(config.get("resources", {}).get("runtime_gpu", "h100"))
    if config.get("gpus_per_job", 0) > 0 and gpu.lower() not in {*GPUS, *GPU_ALIASES} and not Path(gpu).exists():
        out.append(f"resources.runtime_gpu = {gpu!r}: neither a GPU of the datasheets ({', '.join(sorted(GPUS))}) "
                   "nor a profile file here")
    packing, gpus = config.get("packing", {}).get("jobs_per_gpu", 0), config.get("gpus_per_job", 0)
    if packing > 1 and gpus > 1:
        out.append(f"packing.jobs_per_gpu = {packing}: jobs share one GPU, but gpus_per_job = {gpus} gives each "
                   "job several; set gpus_per_job: 1 or packing.jobs_per_gpu: 0")
    for name in SLICES:
        if name in config:
            out.extend(importlib.import_module(f"sparselen.{name}.checks").config_errors(config[name]))
    for name in rounds.ROUNDED_SLICES:
        if name in config:
            out.extend(rounds.errors(name, config[name], rounds.seed_lists(name, config[name])))
    return out


def check(config: dict, source: str) -> None:
    """Raise ``ValueError`` listing all semantic errors, naming where the config came from."""
    errors = semantic_errors(config)
    if errors:
        raise ValueError(f"invalid configuration (from {source}):\n  " + "\n  ".join(errors))

"""One GPU per job on a multi-GPU machine (the local-gpus profile).

Snakemake's ``--resources gpu=N`` caps how many GPU jobs run at once, but it does not say
which GPU a job should use and sets no ``CUDA_VISIBLE_DEVICES``. So each job claims the first
free GPU itself: one lock file per GPU, locked with ``flock`` for the life of the process, so
a job that crashes frees its GPU too. With at most N GPU jobs at once, a free GPU always
exists; otherwise (more GPU jobs than GPUs) the job waits for one.

Under SLURM each job sees only its own GPU (SLURM sets ``CUDA_VISIBLE_DEVICES``), so
``resolve_device`` does not claim anything when one device is visible.
"""

from __future__ import annotations

import fcntl
import logging
import os
import tempfile
import time
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_DIR = Path(os.environ.get("SPARSELEN_GPU_LOCKS", Path(tempfile.gettempdir()) / "sparselen-gpu-locks"))
_held: dict[str, tuple[int, object]] = {}  # lock dir -> (index, open lock file), kept until exit


def physical_ids(n_devices: int) -> list[str]:
    """Names of the visible GPUs that are the same in every process: the entries of
    ``CUDA_VISIBLE_DEVICES`` when set (device i is then its i-th entry), else the indices."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [v.strip() for v in visible.split(",")] if visible else [str(i) for i in range(n_devices)]
    return ids[:n_devices]


def try_acquire(names: list[str], lock_dir) -> tuple[int, object] | None:
    """Lock the first free name; return (its index, the open lock file) or None if all are held."""
    Path(lock_dir).mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(names):
        f = open(Path(lock_dir) / f"gpu-{name}.lock", "w")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            continue
        return i, f
    return None


def claim(n_devices: int, lock_dir=LOCK_DIR, poll: float = 5.0) -> int:
    """Index of a visible GPU that no other process holds, waiting until one is free; the same
    index on later calls in this process."""
    key = str(lock_dir)
    if key not in _held:
        names = physical_ids(n_devices)
        waited = False
        while (got := try_acquire(names, lock_dir)) is None:
            if not waited:
                log.warning("all %d GPUs are held by other jobs (%s); waiting for one", len(names), lock_dir)
                waited = True
            time.sleep(poll)
        _held[key] = got
        log.info("using GPU %d (CUDA id %s)", got[0], names[got[0]])
    return _held[key][0]

"""GPU slots: which GPU, and which share of it, a job uses.

A GPU has ``slots`` slots (``packing.jobs_per_gpu``: 1 without packing, sparselen/estimate/packing.py).
A small training that shares its GPU (a packed job) holds one slot; a job that needs a whole
GPU holds all of them. Each slot is a lock file (``gpu-<id>-slot<j>.lock``) locked with
``flock`` for the life of the process, so a job that crashes frees its slot too; the file
names its holder (process id and job).

Snakemake caps how many GPU jobs run at once (``resources: gpu``, and the ``gpu_slots`` pool of
packed jobs: workflow/rules/common.smk) but does not say which GPU a job should use and sets no
``CUDA_VISIBLE_DEVICES``. So each job claims its slots itself: a packed job the first free slot
(slot 0 of every GPU first, so jobs spread over the GPUs), a whole-GPU job every slot of one
GPU, taken in order and kept while it waits for the rest, so packed jobs cannot starve it.

Under SLURM a job sees only its allocation's GPU: with one slot per GPU nothing is claimed;
with several, the locks live in a directory of the allocation (``SLURM_JOB_ID``), so the jobs of
one packed submission share its GPU slot by slot and never wait on another allocation's locks.
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
_held: dict[str, tuple[int, list]] = {}  # lock dir -> (GPU index, open lock files), kept until exit


def physical_ids(n_devices: int) -> list[str]:
    """Names of the visible GPUs that are the same in every process: the entries of
    ``CUDA_VISIBLE_DEVICES`` when set (device i is then its i-th entry), else the indices."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [v.strip() for v in visible.split(",")] if visible else [str(i) for i in range(n_devices)]
    return ids[:n_devices]


def lock_dir(base=None) -> Path:
    """``base`` (default ``LOCK_DIR``), or inside a SLURM job its allocation's directory under it."""
    base = Path(base or LOCK_DIR)
    job = os.environ.get("SLURM_JOB_ID")
    return base / f"slurm-{job}" if job else base


def _lock(path: Path, holder: str, block: bool = False):
    """The open, locked file at ``path`` (its holder written in it), or None if another process
    holds it and ``block`` is False."""
    f = open(path, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
    except BlockingIOError:
        f.close()
        return None
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()} {holder}\n")
    f.flush()
    return f


def slot_path(directory, name: str, slot: int) -> Path:
    return Path(directory) / f"gpu-{name}-slot{slot}.lock"


def try_acquire(names: list[str], directory, slots: int = 1, take: int = 1, holder: str = ""):
    """Lock ``take`` slots of one GPU without waiting: one slot (``take`` 1), slot-major so jobs
    spread over the GPUs, or all ``slots`` of the first GPU whose slots are all free. Returns
    (GPU index, open lock files) or None."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    if take == 1:
        for slot in range(slots):
            for i, name in enumerate(names):
                if (f := _lock(slot_path(directory, name, slot), holder)) is not None:
                    return i, [f]
        return None
    for i, name in enumerate(names):
        files = []
        for slot in range(slots):
            if (f := _lock(slot_path(directory, name, slot), holder)) is None:
                break
            files.append(f)
        if len(files) == slots:
            return i, files
        for f in files:
            f.close()
    return None


def held_slots(names: list[str], directory, slots: int) -> list[int]:
    """Per GPU, how many of its slots other processes hold now (probed without waiting)."""
    counts = []
    for name in names:
        held = 0
        for slot in range(slots):
            f = _lock(slot_path(directory, name, slot), "probe")
            if f is None:
                held += 1
            else:
                f.close()
        counts.append(held)
    return counts


def claim(n_devices: int, lock_dir_base=None, poll: float = 5.0, slots: int = 1, whole: bool = True,
          holder: str = "") -> int:
    """Index of a visible GPU on which this process now holds a slot (``whole``: all ``slots``
    of it), waiting until there is one; the same index on later calls in this process."""
    directory = lock_dir(lock_dir_base)
    key = str(directory)
    if key in _held:
        return _held[key][0]
    names = physical_ids(n_devices)
    take = slots if whole else 1
    got = try_acquire(names, directory, slots, take, holder)
    if got is None and take > 1:  # queue on the least held GPU: take its slots in order as they free
        held = held_slots(names, directory, slots)
        i = held.index(min(held))
        log.warning("no GPU has all %d slots free (%s); waiting for those of GPU %d", slots, directory, i)
        got = i, [_lock(slot_path(directory, names[i], slot), holder, block=True) for slot in range(slots)]
    elif got is None:
        log.warning("all %d slots of %d GPU(s) are held by other jobs (%s); waiting for one", slots, len(names),
                    directory)
        while (got := try_acquire(names, directory, slots, take, holder)) is None:
            time.sleep(poll)
    _held[key] = got
    i, files = got
    share = f"all {slots} slots" if take == slots else f"slot {Path(files[0].name).stem.rsplit('slot', 1)[1]} of {slots}"
    log.info("using GPU %d (CUDA id %s), %s (%s)", i, names[i], share, directory)
    return i

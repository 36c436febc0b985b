"""This machine's CPU profile, measured once and cached, so that ``sparselen estimate`` and a
run's time left price jobs on the machine in front of the user rather than on the development
machine's built-in profile (``profiles.CPU_DEFAULT``, which can be several times off).

The profile is ``calibrate.calibrate`` (about two minutes), kept under ``.cache/sparselen/`` of
the checkout, keyed by what it depends on: the CPU's model, its usable cores, torch's version
and its CPU capability. The measurement is quiet (its trainings' log lines are not shown) and
stops on SIGTERM as on Ctrl-C, leaving no file behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import signal
from pathlib import Path

from sparselen.estimate.profiles import Profile, load_profile

CACHE = Path(__file__).resolve().parents[2] / ".cache" / "sparselen"


def machine_key() -> str:
    """What a CPU profile depends on, hashed: the CPU, its usable cores, torch and its kernels."""
    import torch

    from sparselen.runtime.hardware import cpu_info

    cpu = cpu_info()
    parts = [cpu.get("model"), cpu.get("usable_cpus"), cpu.get("torch_capability"), torch.__version__]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:12]


def cached_path() -> Path:
    return CACHE / f"cpu-profile-{machine_key()}.json"


def cached_cpu_profile() -> Profile | None:
    """This machine's measured profile, where it was measured before; None otherwise."""
    path = cached_path()
    return load_profile(path) if path.exists() else None


def measure_cpu_profile(say=print) -> Profile:
    """This machine's profile: the cached one, else measured now (quietly, about two minutes;
    interruptible) and cached."""
    cached = cached_cpu_profile()
    if cached is not None:
        return cached
    from sparselen.estimate.calibrate import calibrate
    from sparselen.runtime import io

    path = cached_path()
    say(f"Measuring this machine's CPU once (about 2 minutes; cached in {path}; --cpu-profile builtin skips it)...")
    with quiet(), sigterm_interrupts():
        prof = calibrate()
    io.write_text(path, prof.to_json() + "\n")
    say(f"  {prof.peak_flops / 1e9:.0f} GFLOP/s per core at large widths (the built-in profile's machine: 84)")
    return prof


@contextlib.contextmanager
def quiet():
    """No log records below warnings while measuring (the trainer logs every few steps)."""
    root = logging.getLogger()
    level, root.level = root.level, logging.WARNING
    try:
        yield
    finally:
        root.setLevel(level)


@contextlib.contextmanager
def sigterm_interrupts():
    """SIGTERM raises KeyboardInterrupt (``timeout``, a scheduler's kill), as Ctrl-C does."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals as they are
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

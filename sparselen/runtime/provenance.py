"""What produced a result: config hash, seed, package versions, device and hardware, git commit.

Every result file of the pipeline carries ``provenance(...)`` so a number can be traced back
to the exact settings and software that made it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import torch

PACKAGES = ("sparselen", "torch", "numpy", "pandas", "matplotlib", "snakemake", "tokenizers")


def config_hash(cfg) -> str:
    """Short, stable hash of a (JSON-able) config subtree."""
    blob = json.dumps(cfg, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


@functools.cache
def package_versions() -> dict:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


@functools.cache
def git_commit() -> str | None:
    """Commit of the checkout the package runs from (None outside a git tree)."""
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=10).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    from sparselen.runtime.hardware import cpu_info

    return cpu_info()["model"] or platform.machine() or "cpu"


def provenance(cfg=None, seed=None, device: torch.device | None = None, **extra) -> dict:
    """Provenance of one result; aggregates pass ``cfg=None`` and list ``config_hashes`` instead."""
    out = {"seed": seed, "versions": package_versions(), "git_commit": git_commit()}
    if cfg is not None:
        out["config_hash"] = config_hash(cfg)
    if device is not None:
        out["device"] = str(device)
        out["device_name"] = device_name(device)
        from sparselen.runtime.hardware import hardware

        out["hardware"] = hardware(device)
    out.update(extra)
    return out

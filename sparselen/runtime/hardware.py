"""What hardware and which torch build produced a result (part of every result's provenance).

Throughput, and even the last bits of a trained model, depend on the CPU's instruction sets
(torch dispatches to AVX2/AVX-512/AMX kernels), the BLAS, the GPU and its driver, so a result
names them. ``hardware(device)`` is a small JSON-able dict: the CPU (model, vendor, the flags
that select torch kernels, CPUs usable, torch's kernel level), the GPU (name, compute
capability, memory, driver from ``nvidia-smi`` when present, CUDA runtime) and the torch build
(version, commit, CUDA/cuDNN, BLAS, MKL/oneDNN/OpenMP) plus the thread counts in use.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import subprocess
from pathlib import Path

import torch

# Flags that select torch kernels (x86: cpuinfo names; Arm: "Features" names).
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
             "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve", "sve2", "bf16", "i8mm")


def _cpuinfo(text: str | None = None) -> dict:
    """Model name, vendor and ISA flags from ``/proc/cpuinfo`` text (the first processor)."""
    if text is None:
        try:
            text = Path("/proc/cpuinfo").read_text()
        except OSError:
            return {}
    fields = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # first processor only
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    model = fields.get("model name") or fields.get("Model") or fields.get("cpu model") or fields.get("Hardware")
    return {"model": model, "vendor": fields.get("vendor_id") or fields.get("CPU implementer"),
            "isa": [f for f in ISA_FLAGS if f in flags]}


def _sysctl(name: str) -> str | None:
    try:
        out = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def cpu_info() -> dict:
    info = _cpuinfo() if platform.system() == "Linux" else {}
    if not info.get("model") and platform.system() == "Darwin":
        info["model"] = _sysctl("machdep.cpu.brand_string")
    info.setdefault("model", None)
    info["model"] = info["model"] or platform.processor() or platform.machine()
    info["machine"] = platform.machine()
    info["logical_cpus"] = os.cpu_count()
    try:
        info["usable_cpus"] = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        info["usable_cpus"] = os.cpu_count()
    try:
        info["torch_capability"] = torch.backends.cpu.get_cpu_capability()
    except AttributeError:
        info["torch_capability"] = None
    return info


def _nvidia_smi(index: int) -> dict:
    try:
        out = subprocess.run(["nvidia-smi", f"--id={index}", "--query-gpu=driver_version,name,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {}
    if out.returncode != 0 or not out.stdout.strip():
        return {}
    driver, *_ = [x.strip() for x in out.stdout.strip().splitlines()[0].split(",")]
    return {"driver": driver}


def gpu_info(device: torch.device) -> dict:
    index = device.index if device.index is not None else torch.cuda.current_device()
    p = torch.cuda.get_device_properties(index)
    out = {"name": p.name, "index": index, "capability": f"{p.major}.{p.minor}",
           "memory_gib": round(p.total_memory / 2**30, 1), "multiprocessors": p.multi_processor_count,
           "cuda_runtime": torch.version.cuda}
    out.update(_nvidia_smi(index))
    out.setdefault("driver", None)
    return out


def _blas() -> str | None:
    m = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    return m.group(1) if m else None


@functools.cache
def torch_build() -> dict:
    return {"version": torch.__version__, "git": torch.version.git_version, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
            "hip": getattr(torch.version, "hip", None), "blas": _blas(), "mkl": torch.backends.mkl.is_available(),
            "mkldnn": torch.backends.mkldnn.is_available(), "openmp": torch.backends.openmp.is_available(),
            "debug": bool(torch.version.debug)}


@functools.cache
def _hardware(device_type: str, index: int | None) -> dict:
    out = {"cpu": cpu_info(), "torch": torch_build(), "os": f"{platform.system()} {platform.release()}"}
    if device_type == "cuda":
        out["gpu"] = gpu_info(torch.device("cuda", index) if index is not None else torch.device("cuda"))
    return out


def hardware(device: torch.device | str | None = None) -> dict:
    """The hardware of ``device`` (default CPU) and the torch build, plus the thread counts
    in use now (not cached: a job sets them after start-up)."""
    device = torch.device(device or "cpu")
    out = dict(_hardware(device.type, device.index))
    out["threads"] = {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}
    return out

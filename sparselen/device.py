"""Device choice and the standard CUDA fast path (bf16 autocast, optional torch.compile)."""

from __future__ import annotations

import contextlib

import torch

from sparselen import gpu_slots


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` picks CUDA when present; asking for CUDA without one is an error, not a fallback.
    ``auto``/``cuda`` with several visible GPUs claims a free one (``gpu_slots``), so parallel
    jobs on one machine do not all land on GPU 0."""
    if name == "auto":
        if not torch.cuda.is_available():
            return torch.device("cpu")
        name = "cuda"
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device={name!r} was requested but CUDA is not available on this machine")
    if device.type == "cuda" and device.index is None and torch.cuda.device_count() > 1:
        return torch.device("cuda", gpu_slots.claim(torch.cuda.device_count()))
    return device


def autocast(device: torch.device):
    """bf16 autocast on CUDA; plain float32 on CPU (bf16 matmuls are slow on most CPUs)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def configure_cpu(threads: int | None) -> None:
    """CPU set-up of every compute command: the torch thread count, and flushing denormal
    floats to zero. Trained models push tiny values (near-one-hot attention, decayed Adam
    moments) into the denormal range, where x86 matrix kernels run several times slower:
    a parity training fell from 20k to 9k tokens/s by step 400 without the flush."""
    torch.set_flush_denormal(True)
    if threads:
        torch.set_num_threads(int(threads))

"""Device choice and the standard CUDA fast path (bf16 autocast, optional torch.compile)."""

from __future__ import annotations

import contextlib

import torch


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` picks CUDA when present; asking for CUDA without one is an error, not a fallback."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device={name!r} was requested but CUDA is not available on this machine")
    return device


def autocast(device: torch.device):
    """bf16 autocast on CUDA; plain float32 on CPU (bf16 matmuls are slow on most CPUs)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def set_threads(threads: int | None) -> None:
    if threads:
        torch.set_num_threads(int(threads))

"""Peak tensor memory of CPU code, measured: what the memory model (``memory``) is checked
against (benchmarks/memory.py, tests/estimate/test_estimate.py).

A ``TorchDispatchMode`` sees every tensor an op returns, forward and backward (the autograd
engine runs CPU backward ops on the calling thread, under the mode). Bytes are counted per
storage, from the op that creates it until a weakref finalizer sees the storage die, so views
cost nothing extra and a tensor autograd saves for backward counts for as long as it is kept:
the CPU analogue of ``torch.cuda.max_memory_allocated`` (without the CUDA allocator's rounding
and cache). Storages made before the mode (weights) are counted with ``track``.
"""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class PeakTensorMemory(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.live: dict[int, int] = {}  # storage id -> bytes
        self.now = 0
        self.peak = 0

    def track(self, *tensors: torch.Tensor) -> "PeakTensorMemory":
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                self._count(t.untyped_storage())
        return self

    def reset_peak(self) -> None:
        self.peak = self.now

    def _count(self, storage) -> None:
        key, nbytes = storage._cdata, storage.nbytes()
        if key not in self.live:
            weakref.finalize(storage, self._free, key)
            self.live[key] = 0
        self.now += nbytes - self.live[key]  # a storage resized in place (out= ops) counts its new size
        self.live[key] = nbytes
        self.peak = max(self.peak, self.now)

    def _free(self, key: int) -> None:
        self.now -= self.live.pop(key, 0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.track(*(t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)))
        return out

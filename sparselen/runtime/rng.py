"""Seeds derived from names, so every sample is a pure function of (seed, what, step), and the
random draws the tasks share.

That is what makes resumed training bit-identical to an uninterrupted run, and what lets an
evaluation cell keep its samples when other cells are added to the grid.
"""

from __future__ import annotations

import hashlib

import torch


def derive_seed(*parts) -> int:
    """A 63-bit seed from any printable parts, stable across runs and platforms."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def generator(*parts) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded from ``parts``."""
    g = torch.Generator()
    g.manual_seed(derive_seed(*parts))
    return g


def uniform_subsets(l: torch.Tensor, k: torch.Tensor, max_l: int, g: torch.Generator) -> torch.Tensor:
    """A uniform k_i-subset of {0..l_i-1} per row, as a (n, max_l) bool mask."""
    n = l.shape[0]
    scores = torch.rand(n, max_l, generator=g)
    scores[torch.arange(max_l)[None, :] >= l[:, None]] = 2.0  # never chosen
    ranks = scores.argsort(dim=1).argsort(dim=1)
    return ranks < k[:, None]

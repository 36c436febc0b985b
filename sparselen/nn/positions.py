"""Position ids for training: PoSE (Zhu et al. 2024) as docs/reconstruction.md, "Model" reconstructs it.

A training sequence of length T is cut into ``chunks`` contiguous pieces at random points;
the first piece keeps ids 0..; each later piece is shifted by a random skip, the skips
non-decreasing, so that the last id stays below ``target_length``. The model thereby sees
relative distances of up to ``target_length`` while only ever processing T tokens.
Evaluation always uses the unshifted ids.
"""

from __future__ import annotations

import torch


def pose_position_ids(
    base_ids: torch.Tensor, chunks: int, target_length: int, generator: torch.Generator
) -> torch.Tensor:
    """PoSE-shift ``base_ids`` (B, T), one independent draw per row.

    ``base_ids`` are the ids the sample would have unshifted (0..T-1, or coupled ids); each
    row gets ``chunks - 1`` cut points in 1..T-1 and offsets, sorted, in
    [0, target_length - 1 - max(base_ids)].
    """
    B, T = base_ids.shape
    if chunks < 1:
        raise ValueError(f"pose.chunks={chunks} must be >= 1")
    max_skip = target_length - 1 - int(base_ids.max())
    if chunks == 1 or max_skip <= 0 or T < 2:
        return base_ids.clone()
    cuts = torch.randint(1, T, (B, chunks - 1), generator=generator).sort(dim=1).values
    offsets = torch.randint(0, max_skip + 1, (B, chunks - 1), generator=generator).sort(dim=1).values
    t = torch.arange(T)
    # chunk index of each position = number of cuts at or before it
    piece = (t[None, None, :] >= cuts[:, :, None]).sum(dim=1)  # (B, T) in 0..chunks-1
    offsets = torch.cat((torch.zeros(B, 1, dtype=offsets.dtype), offsets), dim=1)
    return base_ids + offsets.gather(1, piece).to(base_ids.device)

"""The one batch format every task hands to the trainer."""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

IGNORE = -100  # label value that carries no loss (PyTorch's cross-entropy default)


@dataclass
class Batch:
    """Tokens and targets, already aligned: ``labels[:, t]`` is what position t must predict.

    ``position_ids`` are the task's own (e.g. coupled) ids, None for 0..T-1;
    ``position_labels`` are the next position ids a PPC head must predict (IGNORE elsewhere).
    """

    input_ids: torch.Tensor
    labels: torch.Tensor
    position_ids: torch.Tensor | None = None
    position_labels: torch.Tensor | None = None

    def to(self, device) -> "Batch":
        return Batch(**{f.name: None if getattr(self, f.name) is None else getattr(self, f.name).to(device)
                        for f in fields(self)})

    @property
    def num_tokens(self) -> int:
        return self.input_ids.numel()

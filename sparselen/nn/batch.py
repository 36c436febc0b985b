"""The one batch format every task hands to the trainer, and the positions its loss reads."""

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
        """On ``device``; to a GPU from pinned memory without blocking (``device.to_device``)."""
        from sparselen.runtime.device import to_device

        device = torch.device(device)
        return Batch(**{f.name: None if getattr(self, f.name) is None else to_device(getattr(self, f.name), device)
                        for f in fields(self)})

    @property
    def num_tokens(self) -> int:
        return self.input_ids.numel()


def labelled_positions(batch: Batch) -> torch.Tensor | None:
    """Flat indices (into rows x positions) of the positions that carry a token or position
    label, when they are at most half of them (parity and the theory's GPT runs label the
    last token only); None when most positions are labelled. Computed from the host batch, so
    selecting them on a GPU costs no synchronisation."""
    labelled = batch.labels != IGNORE
    if batch.position_labels is not None:
        labelled = labelled | (batch.position_labels != IGNORE)
    labelled = labelled.flatten()
    if 2 * int(labelled.sum()) > labelled.numel():
        return None
    return labelled.nonzero().squeeze(1)


def flat_labels(labels: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
    """``labels`` (rows, positions) as one per unembedded position: all, or ``positions``."""
    return labels.flatten() if positions is None else labels.flatten().index_select(0, positions)


def summed_token_loss(model, batch: Batch, positions: torch.Tensor | None = None) -> torch.Tensor:
    """The token cross-entropy summed over the labelled positions, computed inside the model's
    forward (``labels=``; ``Decoder.loss_in_forward``): under ``torch.compile`` the loss is part
    of the compiled graph, whose kernels fuse the logits' fp32 upcast into the loss instead of
    storing a (tokens x vocabulary) fp32 copy as an eager cross-entropy does."""
    loss, _ = model(batch.input_ids, batch.position_ids, positions=positions,
                    labels=flat_labels(batch.labels, positions))
    return loss


def unembedded(model, batch: Batch, positions: torch.Tensor | None = None):
    """(token logits, position logits or None, token labels, position labels or None), one row
    per unembedded position: every position, or only ``positions`` (``labelled_positions``,
    on the batch's device), whose hidden states alone go through the output heads."""
    if positions is None:
        logits, pos_logits = model(batch.input_ids, batch.position_ids)
        logits, pos_logits = logits.flatten(0, 1), None if pos_logits is None else pos_logits.flatten(0, 1)
    else:
        logits, pos_logits = model(batch.input_ids, batch.position_ids, positions=positions)
    return logits, pos_logits, flat_labels(batch.labels, positions), None if batch.position_labels is None else (
        flat_labels(batch.position_labels, positions))

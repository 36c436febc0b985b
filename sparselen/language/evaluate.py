"""Language-model losses: by position in the context (the length-generalization curve), and
of single target tokens given a chosen set of context tokens at their original position ids."""

from __future__ import annotations

import functools

import numpy as np
import torch
import torch.nn.functional as F

from sparselen.nn.model import GPTNeoX
from sparselen.runtime.device import autocast


def position_bins(length: int) -> list[tuple[int, int]]:
    """Log-spaced [lo, hi) bins of context sizes 1..length (a quarter octave each)."""
    edges = sorted({int(round(2 ** (i / 4))) for i in range(int(4 * np.log2(length)) + 1)} | {length + 1})
    return [(lo, hi) for lo, hi in zip(edges[:-1], edges[1:])]


@torch.no_grad()
def loss_by_position(model: GPTNeoX, windows: torch.Tensor, batch_size: int, device) -> torch.Tensor:
    """(n, T) next-token losses of ``windows`` (n, T + 1) with plain ids 0..T-1: column j is
    the loss of a prediction made with j + 1 tokens of context."""
    out = []
    for i in range(0, len(windows), batch_size):
        w = windows[i:i + batch_size].to(device)
        with autocast(device):
            logits, _ = model(w[:, :-1])
        out.append(F.cross_entropy(logits.float().transpose(1, 2), w[:, 1:], reduction="none").cpu())
    return torch.cat(out)


def last_position_logits(model: GPTNeoX, ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
    """Logits (n, vocabulary) at the last position of ``ids`` (n, T): the one forward pass of
    every L_k, L_short and L_long of the analysis."""
    return model.lm_head(model.hidden_states(ids, position_ids, last_only=True)[:, -1])


def compile_analysis(model: GPTNeoX, **options) -> None:
    """Run ``last_token_loss``'s forward passes of ``model`` through ``torch.compile`` (no grad;
    dynamic shapes, since each greedy step and subset size is another length and the last
    chunk another batch): the analysis' bulk. The attention and saliency selectors, which
    hook into the model, stay eager. ``options``: more ``torch.compile`` arguments."""
    model.compiled_last_position_logits = torch.compile(functools.partial(last_position_logits, model),
                                                        dynamic=True, **options)


@torch.no_grad()
def last_token_loss(model: GPTNeoX, ids: torch.Tensor, position_ids: torch.Tensor, targets: torch.Tensor,
                    batch_size: int, device) -> torch.Tensor:
    """Loss of ``targets`` (n,) predicted at the last position of ``ids`` (n, T) run with
    ``position_ids`` (n, T); only the last position is unembedded (compiled after
    ``compile_analysis``)."""
    logits_of = getattr(model, "compiled_last_position_logits", None) or functools.partial(last_position_logits,
                                                                                          model)
    out = []
    for i in range(0, len(ids), batch_size):
        sl = slice(i, i + batch_size)
        with autocast(device):
            logits = logits_of(ids[sl].to(device), position_ids[sl].to(device))
        out.append(F.cross_entropy(logits.float(), targets[sl].to(device), reduction="none").cpu())
    return torch.cat(out)


def subset_loss(model: GPTNeoX, contexts: torch.Tensor, targets: torch.Tensor, far: torch.Tensor, short: int,
                batch_size: int, device) -> torch.Tensor:
    """L_k per row: the loss given the last ``short`` tokens of each context plus the far
    tokens at indices ``far`` (n, k) (each index < L_long - short), all at their original
    position ids (index in the long context). ``far`` with k = 0 gives L_short."""
    n, long = contexts.shape
    window = torch.arange(long - short, long).expand(n, short)
    pos = torch.cat((far.sort(dim=1).values, window), dim=1)
    return last_token_loss(model, contexts.gather(1, pos), pos, targets, batch_size, device)

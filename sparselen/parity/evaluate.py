"""Sparse parity evaluation over the k_test x length grid, in batched no-grad passes."""

from __future__ import annotations

import sys

import pandas as pd
import torch
from tqdm import tqdm

from sparselen.nn.model import GPTNeoX
from sparselen.runtime.device import autocast


def rows_per_pass(batch_tokens: int, length: int) -> int:
    """Samples of ``length`` tokens in one evaluation pass of ``batch_tokens`` (at least one)."""
    return max(1, batch_tokens // length)


@torch.no_grad()
def cell_accuracy(model: GPTNeoX, tokens: torch.Tensor, target: torch.Tensor, batch_tokens: int,
                  device: torch.device) -> int:
    """Number of samples whose answer (predicted at the last, ``=``, position) is right.

    Every sample of a cell has the same length, so no padding is involved and the plain
    ids 0..T-1 are used (also for PoSE-trained models). Only the last position is computed
    in the last layer (``last_only``); a pass takes ``batch_tokens // T`` samples (on a CPU
    a few thousand tokens per pass is fastest at every length).
    """
    correct, batch_size = 0, rows_per_pass(batch_tokens, tokens.shape[1])
    for i in range(0, len(tokens), batch_size):
        x = tokens[i:i + batch_size].to(device).long()
        with autocast(device):
            logits, _ = model(x, last_only=True)
        correct += int((logits[:, -1].argmax(-1).cpu() == target[i:i + batch_size]).sum())
    return correct


def evaluate_grid(model: GPTNeoX, cells: dict, batch_tokens: int, device: torch.device, **labels) -> pd.DataFrame:
    """A tidy table, one row per possible (k_test, length) cell; ``labels`` become columns."""
    rows = []
    for (k, length), cell in tqdm(sorted(cells.items()), desc="evaluate", file=sys.stderr,
                                  mininterval=1.0 if sys.stderr.isatty() else 30.0):
        n = len(cell["target"])
        correct = cell_accuracy(model, cell["tokens"], cell["target"], batch_tokens, device)
        rows.append({**labels, "k_test": k, "length": length, "n": n, "correct": correct, "accuracy": correct / n})
    return pd.DataFrame(rows)

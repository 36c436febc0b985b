"""Sparse parity evaluation over the k_test x length grid, in batched no-grad passes: one
model's, or every run of a stacked model's in one pass per batch (an evaluation stack's)."""

from __future__ import annotations

import sys

import pandas as pd
import torch
from tqdm import tqdm

from sparselen.nn.model import GPTNeoX
from sparselen.runtime.device import autocast


def rows_per_pass(batch_tokens: int, length: int, runs: int = 1) -> int:
    """Samples of ``length`` tokens of each of ``runs`` models in one evaluation pass of
    ``batch_tokens`` tokens in all (at least one): a stack of runs shares a pass's tokens, so
    its pass holds what one run's does."""
    return max(1, batch_tokens // (runs * length))


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


@torch.no_grad()
def cell_accuracies(model: GPTNeoX, runs: int, tokens: torch.Tensor, target: torch.Tensor, batch_tokens: int,
                    device: torch.device) -> list[int]:
    """``cell_accuracy`` of each run of a stack of ``runs`` (``sparselen.nn.stacked_model``), all
    in one pass per batch: each pass holds the same samples for every run (run s's rows
    s*b..(s+1)*b-1), ``batch_tokens`` tokens in all (``rows_per_pass``)."""
    correct, batch_size = torch.zeros(runs, dtype=torch.long), rows_per_pass(batch_tokens, tokens.shape[1], runs)
    for i in range(0, len(tokens), batch_size):
        x = tokens[i:i + batch_size].to(device).long()
        with autocast(device):
            logits, _ = model(x.repeat(runs, 1), last_only=True)
        predicted = logits[:, -1].argmax(-1).cpu().view(runs, -1)
        correct += (predicted == target[i:i + batch_size]).sum(1)
    return correct.tolist()


def evaluate_grid(model: GPTNeoX, cells: dict, batch_tokens: int, device: torch.device, **labels) -> pd.DataFrame:
    """A tidy table, one row per possible (k_test, length) cell; ``labels`` become columns."""
    return _grid(cells, lambda cell: [cell_accuracy(model, cell["tokens"], cell["target"], batch_tokens, device)],
                 [labels])[0]


def evaluate_stack(model: GPTNeoX, labels: list[dict], cells: dict, batch_tokens: int,
                   device: torch.device) -> list[pd.DataFrame]:
    """``evaluate_grid`` of each run of a stacked model (one per entry of ``labels``, its
    columns), every batch in one pass for all (``cell_accuracies``)."""
    return _grid(cells, lambda cell: cell_accuracies(model, len(labels), cell["tokens"], cell["target"], batch_tokens,
                                                     device), labels)


def _grid(cells: dict, correct_of, labels: list[dict]) -> list[pd.DataFrame]:
    """One table per run (``labels``), one row per cell, from ``correct_of(cell)``: each run's
    count of right answers."""
    rows = [[] for _ in labels]
    for (k, length), cell in tqdm(sorted(cells.items()), desc="evaluate", file=sys.stderr,
                                  mininterval=1.0 if sys.stderr.isatty() else 30.0):
        n = len(cell["target"])
        for out, run_labels, correct in zip(rows, labels, correct_of(cell)):
            out.append({**run_labels, "k_test": k, "length": length, "n": n, "correct": correct,
                        "accuracy": correct / n})
    return [pd.DataFrame(r) for r in rows]

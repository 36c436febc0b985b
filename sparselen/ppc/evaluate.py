"""Generation-based evaluation: a response counts as correct only if every token (and, for
``ppc``, every predicted position id) is right."""

from __future__ import annotations

import logging

import torch

from sparselen.device import autocast
from sparselen.ppc.generate import generate
from sparselen.ppc.samples import Samples

log = logging.getLogger(__name__)


@torch.no_grad()
def cell_scores(model, s: Samples, batch_size: int, device) -> dict:
    """Exact-match counts for one cell (all prompts of one size): tokens, ids, both.

    Generation runs on batches of prompts of one length (no padding, so no attention mask);
    a task whose prompts vary in length within a size is run one prompt length at a time;
    under training's autocast (bf16 on a GPU)."""
    device = torch.device(device)
    counts = {"tokens": 0, "ids": 0, "both": 0}
    for P in s.prompt_len.unique().tolist():
        group = s.select(torch.nonzero(s.prompt_len == P).flatten())
        R = int((group.length - P).max())
        for i in range(0, len(group), batch_size):
            b = group.select(slice(i, i + batch_size))
            truth, truth_ids = b.tokens[:, P:P + R], b.position_ids[:, P:P + R]
            mask = b.response_mask[:, P:P + R]
            with autocast(device):
                tokens, ids = generate(model, b.tokens[:, :P].to(device), b.position_ids[:, :P].to(device), R,
                                       oracle_ids=truth_ids.to(device))
            ok_tokens = ((tokens.cpu() == truth) | ~mask).all(dim=1)
            ok_ids = ((ids.cpu() == truth_ids) | ~mask).all(dim=1) if ids is not None else torch.ones_like(ok_tokens)
            counts["tokens"] += int(ok_tokens.sum())
            counts["ids"] += int(ok_ids.sum())
            counts["both"] += int((ok_tokens & ok_ids).sum())
    return counts


def evaluate_cells(model, cells: dict, batch_size: int, device, **labels) -> list[dict]:
    """One row per evaluated size: ``accuracy`` (whole response right; for ppc the predicted
    ids too), ``token_accuracy`` and, for ppc, ``position_accuracy``; ``labels`` become columns
    (``scheme``: the run's name, by default the model's scheme)."""
    scheme, rows = model.cfg.scheme, []
    labels = {"scheme": scheme, **labels}
    for size, cell in sorted(cells.items()):
        s = Samples(**cell)
        c, n = cell_scores(model, s, batch_size, device), len(s)
        rows.append({**labels, "size": size,
                     "prompt_tokens": round(float(s.prompt_len.float().mean()), 1),  # the mean, if lengths vary
                     "n": n, "correct": c["both"], "accuracy": c["both"] / n, "token_accuracy": c["tokens"] / n,
                     "position_accuracy": c["ids"] / n if scheme == "ppc" else float("nan")})
        log.info("%s size %d: accuracy %.3f", labels["scheme"], size, c["both"] / n)
    return rows

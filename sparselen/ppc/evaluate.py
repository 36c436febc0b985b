"""Generation-based evaluation: a response counts as correct only if every token (and, for
``ppc``, every predicted position id) is right; with per-step diagnostics of the ids.

The diagnostics say where a ``ppc`` run's errors are: the first response id (the one the last
prompt token predicts: for input-dependent ids a lookup in the prompt) against the later ones,
and the first id split by its lookup distance, the id distance from the last prompt token to
it, within the longest such distance of the training sizes or beyond it. Exact match is split
the same way for every run."""

from __future__ import annotations

import logging

import torch

from sparselen.device import autocast
from sparselen.ppc.generate import generate
from sparselen.ppc.samples import Samples

log = logging.getLogger(__name__)
COUNTS = ("tokens", "ids", "both", "first_id", "beyond", "both_beyond", "first_id_beyond")


def first_lookup_distance(s: Samples) -> torch.Tensor:
    """(n,): the id distance from the last prompt token to the first response token's id."""
    rows = torch.arange(len(s))
    return (s.position_ids[rows, s.prompt_len - 1] - s.position_ids[rows, s.prompt_len]).abs()


@torch.no_grad()
def cell_scores(model, s: Samples, batch_size: int, device, lookup_limit: int | None = None) -> dict:
    """Counts of one cell (all prompts of one size): exact match of the tokens, of the scored
    ids and of both; the first response id right (``first_id``); samples whose first lookup is
    longer than ``lookup_limit`` (``beyond``), and among them exact matches and right first ids.

    Generation runs on batches of prompts of one length (no padding, so no attention mask);
    a task whose prompts vary in length within a size is run one prompt length at a time;
    under training's autocast (bf16 on a GPU)."""
    device = torch.device(device)
    counts = dict.fromkeys(COUNTS, 0)
    far = first_lookup_distance(s) > (lookup_limit if lookup_limit is not None else float("inf"))
    for P in s.prompt_len.unique().tolist():
        at = torch.nonzero(s.prompt_len == P).flatten()
        group = s.select(at)
        R = int((group.length - P).max())
        for i in range(0, len(group), batch_size):
            b = group.select(slice(i, i + batch_size))
            truth, truth_ids = b.tokens[:, P:P + R], b.position_ids[:, P:P + R]
            mask, id_mask = b.response_mask[:, P:P + R], b.scored_ids[:, P:P + R]
            with autocast(device):
                tokens, ids = generate(model, b.tokens[:, :P].to(device), b.position_ids[:, :P].to(device), R,
                                       oracle_ids=truth_ids.to(device))
            ok_tokens = ((tokens.cpu() == truth) | ~mask).all(dim=1)
            id_right = (ids.cpu() == truth_ids) | ~id_mask if ids is not None else torch.ones_like(mask)
            ok_ids, first_id = id_right.all(dim=1), id_right[:, 0]
            both, beyond = ok_tokens & ok_ids, far[at[i:i + batch_size]]
            for key, hits in (("tokens", ok_tokens), ("ids", ok_ids), ("both", both), ("first_id", first_id),
                              ("beyond", beyond), ("both_beyond", both & beyond),
                              ("first_id_beyond", first_id & beyond)):
                counts[key] += int(hits.sum())
    return counts


def _share(hits: int, n: int) -> float:
    return hits / n if n else float("nan")


def evaluate_cells(model, cells: dict, batch_size: int, device, lookup_limit: int | None = None,
                   **labels) -> list[dict]:
    """One row per evaluated size: ``accuracy`` (whole response right; for ppc the predicted
    ids too), ``token_accuracy``; for ppc ``position_accuracy`` (every id right),
    ``first_id_accuracy`` and ``later_id_accuracy`` (every later id right, of the samples
    whose first id is right); ``n_beyond``, the samples whose first lookup is longer than
    ``lookup_limit``, and the exact match and (ppc) first-id accuracy within and beyond it.
    ``labels`` become columns (``scheme``: the run's name, by default the model's scheme)."""
    scheme, rows = model.cfg.scheme, []
    labels = {"scheme": scheme, **labels}
    ppc = scheme == "ppc"
    for size, cell in sorted(cells.items()):
        s = Samples(**cell)
        c, n = cell_scores(model, s, batch_size, device, lookup_limit), len(s)
        within = n - c["beyond"]
        ids = {"position_accuracy": c["ids"] / n, "first_id_accuracy": c["first_id"] / n,
               "later_id_accuracy": _share(c["ids"], c["first_id"]),  # every id right, of the right first ids
               "first_id_accuracy_within": _share(c["first_id"] - c["first_id_beyond"], within),
               "first_id_accuracy_beyond": _share(c["first_id_beyond"], c["beyond"])}
        rows.append({**labels, "size": size,
                     "prompt_tokens": round(float(s.prompt_len.float().mean()), 1),  # the mean, if lengths vary
                     "n": n, "correct": c["both"], "accuracy": c["both"] / n, "token_accuracy": c["tokens"] / n,
                     **{k: v if ppc else float("nan") for k, v in ids.items()},
                     "first_lookup_limit": lookup_limit, "n_beyond": c["beyond"],
                     "accuracy_within": _share(c["both"] - c["both_beyond"], within),
                     "accuracy_beyond": _share(c["both_beyond"], c["beyond"])})
        log.info("%s size %d: accuracy %.3f", labels["scheme"], size, c["both"] / n)
    return rows

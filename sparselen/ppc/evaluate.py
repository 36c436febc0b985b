"""Generation-based evaluation: the model decides where its response ends, and a response
counts as correct only if it ends where the target ends and every token (and, for ``ppc``,
every predicted position id, the last one's included) is right; with per-step diagnostics of
the ids.

Greedy generation runs until a sample emits the task's end-of-response token or has as many
tokens as its target (the cap: a sample not ended by then is wrong whatever follows, so a
margin beyond it could not change a score); samples that have ended are masked, not removed.
A generated response is its tokens up to its first end token.

The diagnostics say where a ``ppc`` run's errors are: the first response id (the one the last
prompt token predicts: for input-dependent ids a lookup in the prompt) against the later ones,
where each response's first wrong id is (the first, a later one, or one that ends the
response), the tokens it gets right when fed the oracle's ids (so a failure of the id head
tells apart from one of the task's lookups), and the first id split by its lookup distance, the id distance from the last prompt token to
it, within the longest such distance of the training sizes or beyond it. Exact match is split
the same way for every run."""

from __future__ import annotations

import logging

import torch

from sparselen.ppc.generate import generate
from sparselen.ppc.samples import Samples
from sparselen.runtime.device import autocast

log = logging.getLogger(__name__)
COUNTS = ("tokens", "ids", "both", "ended", "first_id", "beyond", "both_beyond", "first_id_beyond",
          "error_first", "error_later", "error_end", "forced_tokens")
# Where a ppc response's first wrong id is: at the first response id (the first lookup), at an
# id that ends the response (the target's last id: the answer's and the end token's where they
# share it), or at one in between (a later lookup).
ERROR_AT = ("first", "later", "end")


def first_lookup_distance(s: Samples) -> torch.Tensor:
    """(n,): the id distance from the last prompt token to the first response token's id."""
    rows = torch.arange(len(s))
    return (s.position_ids[rows, s.prompt_len - 1] - s.position_ids[rows, s.prompt_len]).abs()


def end_token(s: Samples) -> int:
    """The token every target response of ``s`` ends with."""
    last = s.tokens[torch.arange(len(s)), s.length - 1].unique()
    if len(last) != 1:
        raise ValueError(f"the samples' responses end with different tokens {last.tolist()}: pass eos")
    return int(last[0])


def response_scores(tokens, ids, truth, truth_ids, lengths, eos: int):
    """Per sample (ended, tokens right, ids right, first id right) of generated ``tokens`` and
    ``ids`` (B, S) against targets ``truth``, ``truth_ids`` (B, >= S) of ``lengths`` tokens: ended
    means the first ``eos`` is the target's last token; tokens and ids right, that the generated
    response ends there and each of its tokens (ids) equals the target's. ``ids`` None: no ids
    (every id counts as right)."""
    S = tokens.shape[1]
    t = torch.arange(S)[None, :]
    is_end = tokens == eos
    first_end = torch.where(is_end.any(dim=1), is_end.int().argmax(dim=1), S)
    ended = first_end == lengths - 1
    inside = t < lengths[:, None]
    ok_tokens = ended & ((tokens == truth[:, :S]) | ~inside).all(dim=1)
    if ids is None:
        return ended, ok_tokens, ended.clone(), torch.ones_like(ended)
    id_right = (ids == truth_ids[:, :S]) | ~inside
    return ended, ok_tokens, ended & id_right.all(dim=1), id_right[:, 0]


def first_error(ids, truth_ids, lengths) -> torch.Tensor:
    """(B,) where each response's first wrong id is: an index of ``ERROR_AT``, or -1 where every
    id it generated before its target's end is right."""
    S = ids.shape[1]
    t = torch.arange(S)[None, :]
    wrong = (ids != truth_ids[:, :S]) & (t < lengths[:, None])
    at = torch.where(wrong.any(dim=1), wrong.int().argmax(dim=1), -1)
    rows = torch.arange(len(ids))
    end_id = truth_ids[rows, (lengths - 1).clamp(max=truth_ids.shape[1] - 1)]
    closes = truth_ids[rows, at.clamp(min=0)] == end_id
    where = torch.where(at == 0, 0, torch.where(closes, 2, 1))
    return torch.where(at < 0, -1, where)


@torch.no_grad()
def cell_scores(model, s: Samples, batch_size: int, device, lookup_limit: int | None = None,
                eos: int | None = None) -> dict:
    """Counts of one cell (all prompts of one size): responses that end where the target ends
    (``ended``), exact match of the tokens, of the ids (both with the right end) and of both; the
    first response id right (``first_id``); samples whose first lookup is longer than
    ``lookup_limit`` (``beyond``), and among them exact matches and right first ids. ``eos``: the
    end-of-response token (default: the one the targets end with).

    Generation runs on batches of prompts of one length (no padding, so no attention mask);
    a task whose prompts vary in length within a size is run one prompt length at a time;
    under training's autocast (bf16 on a GPU)."""
    device = torch.device(device)
    eos = end_token(s) if eos is None else eos
    counts = dict.fromkeys(COUNTS, 0)
    far = first_lookup_distance(s) > (lookup_limit if lookup_limit is not None else float("inf"))
    for P in s.prompt_len.unique().tolist():
        at = torch.nonzero(s.prompt_len == P).flatten()
        group = s.select(at)
        R = int((group.length - P).max())
        for i in range(0, len(group), batch_size):
            b = group.select(slice(i, i + batch_size))
            truth, truth_ids, lengths = b.tokens[:, P:P + R], b.position_ids[:, P:P + R], b.length - P
            with autocast(device):
                tokens, ids = generate(model, b.tokens[:, :P].to(device), b.position_ids[:, :P].to(device), R,
                                       oracle_ids=truth_ids.to(device), eos=eos, caps=lengths)
            ended, ok_tokens, ok_ids, first_id = response_scores(
                tokens.cpu(), None if ids is None else ids.cpu(), truth, truth_ids, lengths, eos)
            both, beyond = ok_tokens & ok_ids, far[at[i:i + batch_size]]
            for key, hits in (("tokens", ok_tokens), ("ids", ok_ids), ("both", both), ("ended", ended),
                              ("first_id", first_id), ("beyond", beyond), ("both_beyond", both & beyond),
                              ("first_id_beyond", first_id & beyond)):
                counts[key] += int(hits.sum())
            if model.cfg.scheme == "ppc":
                error = first_error(ids.cpu(), truth_ids, lengths)
                for k, where in enumerate(ERROR_AT):
                    counts[f"error_{where}"] += int((error == k).sum())
                with autocast(device):
                    forced, _ = generate(model, b.tokens[:, :P].to(device), b.position_ids[:, :P].to(device), R,
                                         oracle_ids=truth_ids.to(device), eos=eos, caps=lengths, forced=True)
                counts["forced_tokens"] += int(response_scores(forced.cpu(), None, truth, truth_ids, lengths,
                                                               eos)[1].sum())
    return counts


def _share(hits: int, n: int) -> float:
    return hits / n if n else float("nan")


def evaluate_cells(model, cells: dict, batch_size: int, device, lookup_limit: int | None = None,
                   eos: int | None = None, **labels) -> list[dict]:
    """One row per evaluated size: ``accuracy`` (whole response right, ended where the target
    ends; for ppc the predicted ids too, the last one's included), ``token_accuracy`` (the
    tokens right, ended there), ``end_accuracy`` (ended there, whatever the tokens); for ppc
    ``position_accuracy`` (every id right, ended there), ``first_id_accuracy`` and
    ``later_id_accuracy`` (every later id right and ended there, of the samples whose first id is
    right), ``first_error_at_<first|later|end>_id`` (the share of responses whose first wrong id
    is there: ``ERROR_AT``) and ``forced_token_accuracy`` (the tokens right and ended there when
    the oracle's ids are fed instead of the predicted ones: what the model gets right given the
    right ids); ``n_beyond``, the samples whose first lookup is longer than ``lookup_limit``, and
    the exact match and (ppc) first-id accuracy within and beyond it. ``eos``: the task's
    end-of-response token. ``labels`` become columns (``scheme``: the run's name, by default the
    model's scheme)."""
    scheme, rows = model.cfg.scheme, []
    labels = {"scheme": scheme, **labels}
    ppc = scheme == "ppc"
    for size, cell in sorted(cells.items()):
        s = Samples(**cell)
        c, n = cell_scores(model, s, batch_size, device, lookup_limit, eos), len(s)
        within = n - c["beyond"]
        ids = {"position_accuracy": c["ids"] / n, "first_id_accuracy": c["first_id"] / n,
               **{f"first_error_at_{where}_id": c[f"error_{where}"] / n for where in ERROR_AT},
               "forced_token_accuracy": c["forced_tokens"] / n,
               "later_id_accuracy": _share(c["ids"], c["first_id"]),  # every id right, of the right first ids
               "first_id_accuracy_within": _share(c["first_id"] - c["first_id_beyond"], within),
               "first_id_accuracy_beyond": _share(c["first_id_beyond"], c["beyond"])}
        rows.append({**labels, "size": size,
                     "prompt_tokens": round(float(s.prompt_len.float().mean()), 1),  # the mean, if lengths vary
                     "n": n, "correct": c["both"], "accuracy": c["both"] / n, "token_accuracy": c["tokens"] / n,
                     "end_accuracy": c["ended"] / n,
                     **{k: v if ppc else float("nan") for k, v in ids.items()},
                     "first_lookup_limit": lookup_limit, "n_beyond": c["beyond"],
                     "accuracy_within": _share(c["both"] - c["both_beyond"], within),
                     "accuracy_beyond": _share(c["both_beyond"], c["beyond"])})
        log.info("%s size %d: accuracy %.3f", labels["scheme"], size, c["both"] / n)
    return rows

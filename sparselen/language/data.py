"""Token data: the packed training stream, and (document, position) samples for evaluation.

Training reads the training documents as one stream (EOS after each document), a token file
read in place (``sparselen.language.token_files``), and cuts random windows from it, a pure
function of (seed, step) as the trainer requires. Evaluation draws from held-out documents
only, and only where the whole requested context lies inside one document, so that "long
context" means context from the same text.
"""

from __future__ import annotations

from pathlib import Path

import torch

from sparselen.nn.batch import Batch
from sparselen.runtime.rng import generator


def load_tokens(path) -> dict:
    """The ``tokens.json`` of OLMo-format token files (the ``language_tokens`` and
    ``language_token_files`` outputs), or a torch file of the same (tests): training stream and
    held-out documents as int64."""
    if str(path).endswith(".json"):
        from sparselen.language.token_files import load_tokens as load_token_files
        from sparselen.runtime import io

        return load_token_files(io.read_json(path), root=Path(path).parent)
    t = torch.load(path, weights_only=True)
    t["train"] = t["train"].long()
    t["eval"] = [d.long() for d in t["eval"]]
    return t


def pack(docs: list[list[int]], eos: int) -> torch.Tensor:
    """Documents joined into one int64 stream in memory, each followed by EOS (a small corpus;
    the workflow writes token files)."""
    out = []
    for d in docs:
        out.extend(d)
        out.append(eos)
    return torch.tensor(out, dtype=torch.long)


def training_batches(stream: torch.Tensor, context: int, batch_size: int, seed: int):
    """``batch_fn(step)``: ``batch_size`` windows of ``context`` tokens, next-token labels."""
    if len(stream) < context + 2:
        raise ValueError(f"training stream has {len(stream)} tokens; a context of {context} needs more")

    def batch_fn(step: int) -> Batch:
        starts = torch.randint(0, len(stream) - context, (batch_size,), generator=generator("language-batch", seed, step))
        rows = stream[starts[:, None] + torch.arange(context + 1)]
        return Batch(input_ids=rows[:, :-1], labels=rows[:, 1:])

    return batch_fn


def check_held_out_lengths(lengths: list[int], lang: dict) -> None:
    """Fail at the data step, before any model trains, when no held-out document (of token
    counts ``lengths``) is longer than what the evaluation steps read: the loss-by-position
    windows (``language.eval.length``) and the analysis' long context (``language.contexts.long``)."""
    longest = max(lengths, default=0)
    needs = {"language.eval.length": lang["eval"]["length"], "language.contexts.long": lang["contexts"]["long"]}
    for key, need in needs.items():
        if longest <= need:
            raise ValueError(f"{key} = {need}: no held-out document is longer (the longest of {len(lengths)} has "
                             f"{longest} tokens); lower it, or use a corpus with longer documents or a larger "
                             f"language.corpus.eval_fraction")


def sample_positions(docs: list[torch.Tensor], before: int, n: int, g: torch.Generator) -> list[tuple[int, int]]:
    """``n`` distinct (doc, t) pairs, uniform over all t with at least ``before`` tokens before
    them in the same document, in draw order (so any prefix is a uniform sample too)."""
    counts = torch.tensor([max(0, len(d) - before) for d in docs])
    total = int(counts.sum())
    if total == 0:
        raise ValueError(f"no evaluation document has more than {before} tokens; use a shorter context "
                         f"(longest has {max(len(d) for d in docs)})")
    flat = torch.randperm(total, generator=g)[:n] if total <= 5_000_000 else torch.randint(0, total, (n,), generator=g)
    ends = counts.cumsum(0)
    doc = torch.searchsorted(ends, flat, right=True)
    offset = flat - (ends[doc] - counts[doc])
    return list(dict.fromkeys((int(d), int(o) + before) for d, o in zip(doc, offset)))


def contexts(docs: list[torch.Tensor], positions, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(contexts (n, length), targets (n,)): the ``length`` tokens before each position, and
    the token at it."""
    ctx = torch.stack([docs[d][t - length:t] for d, t in positions])
    tgt = torch.tensor([int(docs[d][t]) for d, t in positions])
    return ctx, tgt

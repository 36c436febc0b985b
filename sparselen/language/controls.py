"""Controls for the sparse-dependency analysis, where the answer is known without the model.

- ``planted_contexts``: a positive control. The ``span`` tokens ending at the target are a
  copy of the span ending ``distance`` tokens earlier in the same document window, so the
  target is the token at that distance: a model that uses its long context can predict it
  from one far token, and greedy k = 1 should pick that token.
- ``null_contexts``: a null control for greedy selection. The far context (all but the last
  ``short`` tokens) comes from another held-out document, so whatever greedy "recovers" there
  is what a search over unrelated tokens finds by chance.
- ``induction_sequences`` / ``induction_probe``: a real span of held-out text, filler from
  another document, then the span again beyond the short window: the loss on the second copy
  against the first says whether the model copies from far context (induction).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from sparselen.language.evaluate import last_token_loss
from sparselen.runtime.device import autocast
from sparselen.runtime.rng import generator


def planted_contexts(docs: list[torch.Tensor], positions, long: int, span: int,
                     distances: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(contexts (n, long), targets (n,), distance (n,)): the window of ``long`` tokens before
    each position and its token, with the last ``span`` tokens (target included) overwritten
    by the tokens ``distance`` earlier; distances cycle through ``distances``. Copied token by
    token, so a distance shorter than the span repeats a period."""
    top = long + 1 - span
    if span < 1 or any(not 1 <= d <= top for d in distances):
        raise ValueError(f"planted repeats: distances {distances} must be in [1, {top}] (long {long}, span {span})")
    ctx, tgt, dist = [], [], []
    for i, (doc, t) in enumerate(positions):
        seq = docs[doc][t - long:t + 1].clone()
        d = distances[i % len(distances)]
        for j in range(long + 1 - span, long + 1):
            seq[j] = seq[j - d]
        ctx.append(seq[:long])
        tgt.append(int(seq[long]))
        dist.append(d)
    return torch.stack(ctx), torch.tensor(tgt), torch.tensor(dist)


def other_document(doc: int, n_docs: int, eligible: list[int], g: torch.Generator) -> int:
    """A random document of ``eligible`` other than ``doc``."""
    choices = [e for e in eligible if e != doc]
    if not choices:
        raise ValueError(f"no other held-out document is long enough for a null far context (of {n_docs})")
    return choices[int(torch.randint(len(choices), (1,), generator=g))]


def null_contexts(docs: list[torch.Tensor], positions, short: int, long: int,
                  g: torch.Generator) -> tuple[torch.Tensor, list[int]]:
    """(contexts (n, long), source documents): each position's last ``short`` tokens after a
    far context of ``long - short`` tokens cut from a random window of another document."""
    far = long - short
    eligible = [i for i, d in enumerate(docs) if len(d) >= far]
    out, sources = [], []
    for doc, t in positions:
        other = other_document(doc, len(docs), eligible, g)
        start = int(torch.randint(0, len(docs[other]) - far + 1, (1,), generator=g))
        out.append(torch.cat((docs[other][start:start + far], docs[doc][t - short:t])))
        sources.append(other)
    return torch.stack(out), sources


def induction_sequences(docs: list[torch.Tensor], n: int, prefix: int, span: int, filler: int,
                        seed: int) -> torch.Tensor:
    """(n, prefix + 2 span + filler): document A's ``prefix`` + ``span`` tokens, ``filler``
    tokens of another document, then A's span again."""
    g = generator("induction-probe", seed)
    ok = [i for i, d in enumerate(docs) if len(d) > prefix + span + 1]
    long_ok = [i for i, d in enumerate(docs) if len(d) > filler + 1]
    seqs = []
    for _ in range(n):
        a = ok[int(torch.randint(len(ok), (1,), generator=g))]
        b = other_document(a, len(docs), long_ok, g)
        t = int(torch.randint(prefix, len(docs[a]) - span, (1,), generator=g))
        u = int(torch.randint(0, len(docs[b]) - filler, (1,), generator=g))
        s = docs[a][t:t + span]
        seqs.append(torch.cat((docs[a][t - prefix:t], s, docs[b][u:u + filler], s)))
    return torch.stack(seqs)


@torch.no_grad()
def induction_probe(model, seqs: torch.Tensor, prefix: int, span: int, short: int, batch_size: int,
                    device) -> dict:
    """Mean loss (nats) per sequence on copy 1 and copy 2 (the first token of each excluded:
    it cannot be predicted from the copy), with the full context; and copy 2 with only the
    last ``short`` tokens visible (the first copy out of reach). Returns per-sequence tensors."""
    filler = seqs.shape[1] - prefix - 2 * span
    losses = []
    for i in range(0, len(seqs), batch_size):
        x = seqs[i:i + batch_size].to(device)
        with autocast(device):
            logits, _ = model(x[:, :-1])
        losses.append(F.cross_entropy(logits.float().transpose(1, 2), x[:, 1:], reduction="none").cpu())
    losses = torch.cat(losses)  # column j: loss of token j + 1
    c1 = list(range(prefix + 1, prefix + span))
    c2 = [j + span + filler for j in c1]
    ctx = torch.stack([seqs[:, j - short:j] for j in c2], 1).flatten(0, 1)
    tgt = torch.stack([seqs[:, j] for j in c2], 1).flatten()
    short_loss = last_token_loss(model, ctx, torch.arange(short).expand_as(ctx), tgt, batch_size, device)
    return {"copy1": losses[:, [j - 1 for j in c1]].mean(1), "copy2": losses[:, [j - 1 for j in c2]].mean(1),
            "copy2_short": short_loss.view(len(seqs), len(c2)).mean(1)}

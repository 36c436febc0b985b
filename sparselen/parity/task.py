"""Sparse parity D^sp_{l,k}: a k-sparse planted correlation task (docs/reconstruction.md, "Sparse parity").

Format [ours, a reconstruction; the paper's is not available]: l interleaved (bit, marker)
pairs ``x_1 m_1 ... x_l m_l`` and a query token ``=``. Bits are uniform in {0, 1}; the marker
is ``+`` on a uniform k-subset S of 1..l and ``-`` elsewhere; the answer after ``=`` is the
parity of the bits at S. The sample *length* is 2l (bits and markers, without ``=``).
The label depends on the 2k tokens at S and on nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sparselen.nn.batch import Batch
from sparselen.runtime.rng import generator, uniform_subsets

VOCAB = ("0", "1", "-", "+", "=", "<pad>")
ZERO, ONE, MINUS, PLUS, QUERY, PAD = range(len(VOCAB))


@dataclass
class ParitySamples:
    """``tokens`` (n, 2*max_l + 1), right-padded with PAD; ``support`` (n, max_l) marks S."""

    tokens: torch.Tensor
    target: torch.Tensor  # (n,) token id ZERO or ONE
    support: torch.Tensor  # (n, max_l) bool
    l: torch.Tensor  # (n,)
    k: torch.Tensor  # (n,)

    @property
    def query_index(self) -> torch.Tensor:
        """Index of the ``=`` token, where the answer is predicted."""
        return 2 * self.l


def sample(l: torch.Tensor, k: torch.Tensor, g: torch.Generator) -> ParitySamples:
    """Samples with per-row half-length ``l`` and sparsity ``k`` (requires 1 <= k <= l)."""
    if bool((k < 1).any() or (k > l).any()):
        bad = int(((k < 1) | (k > l)).nonzero()[0])
        raise ValueError(f"sparse parity needs 1 <= k <= l; got k={int(k[bad])}, l={int(l[bad])}")
    n, max_l = l.shape[0], int(l.max())
    bits = torch.randint(0, 2, (n, max_l), generator=g)
    support = uniform_subsets(l, k, max_l, g)
    valid = torch.arange(max_l)[None, :] < l[:, None]
    markers = torch.where(support, PLUS, MINUS)
    pairs = torch.stack((bits + ZERO, markers), dim=2).reshape(n, 2 * max_l)
    pairs[~valid.repeat_interleave(2, dim=1)] = PAD
    tokens = torch.cat((pairs, torch.full((n, 1), PAD)), dim=1)
    tokens[torch.arange(n), 2 * l] = QUERY
    target = ((bits * support).sum(dim=1) % 2) + ZERO
    return ParitySamples(tokens, target, support & valid, l, k)


def sample_training_mix(
    n: int, length_range: tuple[int, int], k_max: int, g: torch.Generator, one_length: bool = True
) -> ParitySamples:
    """The training distribution: 2l uniform over the even lengths in ``length_range`` and
    k ~ Unif{1..k_max}, conditioned on k <= l [ours].

    With ``one_length`` (the default, [ours]) the n samples share one l, so a batch needs no
    padding (about 30% less compute at lengths 20-50); over batches l is still uniform.
    Otherwise each sample draws its own l and pairs with k > l are redrawn.
    """
    lo, hi = (length_range[0] + 1) // 2, length_range[1] // 2
    l = torch.randint(lo, hi + 1, (1 if one_length else n,), generator=g).expand(n).clone()
    k = torch.randint(1, k_max + 1, (n,), generator=g)
    bad = k > l
    while bool(bad.any()):
        m = int(bad.sum())
        if not one_length:
            l[bad] = torch.randint(lo, hi + 1, (m,), generator=g)
        k[bad] = torch.randint(1, k_max + 1, (m,), generator=g)
        bad = k > l
    return sample(l, k, g)


def to_batch(s: ParitySamples) -> Batch:
    """Loss on the answer only: label at the ``=`` position is the parity token."""
    labels = torch.full_like(s.tokens, -100)
    labels[torch.arange(len(s.l)), s.query_index] = s.target
    return Batch(input_ids=s.tokens, labels=labels)


def training_batches(seed: int, batch_size: int, length_range, k_max: int, one_length: bool = True):
    """``step -> Batch``: each step's batch is a pure function of (seed, step)."""

    def batch_fn(step: int) -> Batch:
        g = generator("parity-train", seed, step)
        return to_batch(sample_training_mix(batch_size, tuple(length_range), k_max, g, one_length))

    return batch_fn


def evaluation_set(seed: int, k_values, lengths, n: int) -> dict:
    """The shared evaluation set: for each possible cell (k, 2l), ``n`` samples from a
    generator seeded by (seed, k, 2l) so a cell's samples do not depend on the rest of the
    grid. Impossible cells (k > l) are left out. Tokens are stored as uint8 (a vocabulary of
    six): the default grid up to 2l = 500 takes 5 MB instead of 37."""
    cells = {}
    for length in lengths:
        for k in k_values:
            l = length // 2
            if k > l:
                continue
            g = generator("parity-eval", seed, k, length)
            s = sample(torch.full((n,), l), torch.full((n,), k), g)
            cells[(k, length)] = {"tokens": s.tokens.to(torch.uint8), "target": s.target}
    return cells

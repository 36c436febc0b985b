"""Sparse parity with a scratchpad: the running parity over the marked bits (docs/reconstruction.md, "Position coupling and PPC").

Format [ours; the paper's task]: the sparse-parity sample of ``sparselen.parity.task``,
``x_1 m_1 .. x_l m_l =`` (bits x_i, markers m_i ``+`` on k pairs S = {s_1 < .. < s_k} and ``-``
elsewhere), then the scratchpad ``p_0 p_1 .. p_k``: p_0 = even (the parity of no bits), p_j the
parity of p_{j-1} and x_{s_j}, so p_k is the answer; then ``$`` ends the response. The scratchpad's symbols
``even`` / ``odd`` are not the bits' ``0`` / ``1``: a lookup of a bit never finds one. The size
is l (the sample length is 2l); k is uniform in ``k``, or every pair is marked with ``dense``.

Coupled ids, shifted as in Cho et al. 2024: each response token that predicts an entry carries
the id of the bit it must read next. Prompt: ``=`` 0, x_i 2i - 1, m_i 2i. Response: p_j
(j < k) the id of x_{s_{j+1}}, so predicting p_{j+1} needs only p_j and the bit at p_j's own
id (a local lookup at any length). p_k's id is 2l + 1, past the last pair: "no marked bit
after mine", which is what ends the response (at its own id p_k finds no bit, so it predicts
``$``, whose id stays 2l + 1). The next id, "the next marked bit after mine, or the end",
depends on the input: oracle coupling is handed it, PPC must predict it (the first one at
``=``, where the first ``+`` is; the last one, that no ``+`` follows, a scan to the prompt's
end). Dense, the ids are 1, 3, 5, .., 2l + 1: each the previous plus 2, the first one more
than ``=``'s, whatever the bits: the reference on which PPC must match oracle coupling.
"""

from __future__ import annotations

import torch

from sparselen.ppc.samples import PAD, Samples, assemble
from sparselen.runtime.rng import uniform_subsets

VOCAB = ("<pad>", "0", "1", "-", "+", "=", "even", "odd", "$")
ZERO, ONE, MINUS, PLUS, QUERY, EVEN, EOS = 1, 2, 3, 4, 5, 6, 8
SIZE = "pairs l (sample length 2l)"
FORMAT = 2  # the response ends with "$", whose position id is scored (the package docstring)
ORIGIN = "paper"  # "the efficacy of PPC is tested for parity (with scratchpad)" (a reviewer's summary)


def ids_depend_on_input(dense: bool = False, **params) -> bool:
    """Sparse: the next id is the next marked bit, wherever it is; dense: the previous id plus 2."""
    return not dense


def control(**params) -> str:
    """Never a control: which bit comes next is found by its marker and its order, not by content alone."""
    return ""


def form(k=(1, 4), dense: bool = False, **params) -> str:
    """The form run, in words (C2's verdict line)."""
    return "parity with a scratchpad, every pair marked" if dense else f"parity with a scratchpad, k {k[0]}-{k[1]}"


def max_coupled_id(size: int, **params) -> int:
    """Largest coupled id of a sample of this size (before any training offset): the answer's and ``$``'s."""
    return 2 * size + 1


def max_first_lookup(size: int, dense: bool = False, **params) -> int:
    """Longest id distance from ``=`` to the first marked bit (the last pair's, at k = 1)."""
    return 1 if dense else 2 * size - 1


def chance_exact_match(size: int, k=(1, 4), dense: bool = False, **params) -> float:
    """Exact match of a model that gets the format and ids right and guesses every scratchpad
    entry after ``even`` (each a fresh bit) and ends after the answer: 2^-k, averaged over k uniform in ``k`` (every pair
    marked with ``dense``). At k in [1, 2] 0.375, in [1, 4] 0.234."""
    if dense:
        return 0.5**size
    ks = range(k[0], k[1] + 1)
    return sum(0.5**m for m in ks) / len(ks)


def unit_starts(s: Samples) -> torch.Tensor:
    """Prompt tokens before which id skips may fall: each bit after the first (a pair keeps its
    bit and marker adjacent)."""
    t = torch.arange(s.tokens.shape[1])[None, :]
    return (t >= 2) & (t % 2 == 0) & (t < s.prompt_len[:, None] - 1)  # bits of pairs 2..l


def sample(sizes: torch.Tensor, g: torch.Generator, k=(1, 4), dense: bool = False) -> Samples:
    """One sample per row with ``sizes[i]`` pairs and k uniform in ``k`` (every pair with ``dense``)."""
    lo, hi = k
    if not 1 <= lo <= hi:
        raise ValueError(f"parity_scratchpad.k = {list(k)}: need 1 <= first <= second")
    if not dense and hi > int(sizes.min()):
        raise ValueError(f"parity_scratchpad.k = {list(k)}: a sample of {int(sizes.min())} pairs cannot hold "
                         f"{hi} marked bits")
    n, L = len(sizes), int(sizes.max())
    rows = torch.arange(n)
    marked = sizes.clone() if dense else torch.randint(lo, hi + 1, (n,), generator=g)
    bits = torch.randint(0, 2, (n, L), generator=g)
    support = uniform_subsets(sizes, marked, L, g)
    i = torch.arange(L)[None, :]
    t = torch.arange(2 * L + 1)[None, :]
    pairs = torch.stack((bits + ZERO, torch.where(support, PLUS, MINUS)), dim=2).reshape(n, 2 * L)
    prompt = torch.cat((pairs, torch.full((n, 1), PAD)), dim=1).masked_fill(t >= 2 * sizes[:, None], PAD)
    prompt[rows, 2 * sizes] = QUERY
    prompt_ids = torch.where(t < 2 * sizes[:, None], t + 1, 0)

    K = int(marked.max())
    order = torch.where(support, i, L).sort(dim=1).values[:, :K]  # marked pairs (0-based), in order
    j = torch.arange(K + 2)[None, :]  # p_0 .. p_k, then $
    read = bits.gather(1, order.clamp(max=L - 1)) * (j[:, :K] < marked[:, None])
    zero = torch.zeros(n, 1, dtype=torch.long)
    running = torch.cat((zero, read.cumsum(dim=1) % 2, zero), dim=1)
    response = torch.where(j <= marked[:, None], running + EVEN, torch.where(j == marked[:, None] + 1, EOS, PAD))
    next_bit = torch.cat((2 * order + 1, torch.zeros(n, 2, dtype=torch.long)), dim=1)  # x_i's id is 2i - 1
    past_end = torch.where(j <= marked[:, None] + 1, 2 * sizes[:, None] + 1, 0)  # the answer's and $'s
    response_ids = torch.where(j < marked[:, None], next_bit, past_end)
    return assemble(prompt, prompt_ids, 2 * sizes + 1, response, response_ids, marked + 2)

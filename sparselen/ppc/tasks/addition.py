"""Multi-digit addition with the position coupling of Cho et al. 2024 (docs/reconstruction.md, "Position coupling and PPC").

Format [ours, after Cho et al.]: prompt ``a_n a_{n-1} .. a_0 + b_n .. b_0 =``, both operands
of n digits written most significant first with one leading zero (``a_n = b_n = 0``), so that
every digit of the sum has operand digits of its own significance; response the n+1 digits of
the sum least significant first, then ``$``.
Coupled ids: digits of significance k get id k+1 in both operands and in the sum; ``=`` gets 0
and ``+`` gets n+2, the id just above the operands' top digit, as does ``$``. So every response
id is the previous one plus 1, and the token predicting sum digit k finds the operand digits it
needs one id ahead (and the carry's digits at its own id); the token predicting ``$`` finds
``+`` one id ahead, never an empty id.
"""

from __future__ import annotations

import torch

from sparselen.ppc.samples import Samples, assemble

VOCAB = ("<pad>", "+", "=", "$") + tuple("0123456789")
PLUS, EQUALS, EOS = 1, 2, 3
ZERO = 4
SIZE = "operand digits n"
ORIGIN = "ours"  # the coupling of Cho et al. 2024: a known-good reference


def ids_depend_on_input(**params) -> bool:
    """The ids follow from the operand length alone."""
    return False


def control(**params) -> str:
    """Never a control: digits of equal significance are found by position (the coupling's job)."""
    return ""


def max_coupled_id(size: int, **params) -> int:
    """Largest coupled id of a sample of this size (before any training offset): ``+`` and ``$``."""
    return size + 2


def max_first_lookup(size: int, **params) -> int:
    """The first response id (digit 0's, 1) is one more than ``=``'s (0)."""
    return 1


def chance_exact_match(size: int, **params) -> float:
    """Exact match of a model that gets the format and ids right and guesses the sum's digits:
    each of its ``size`` low digits is uniform (the top one, a carry, is a better guess; this
    bound ignores it)."""
    return 10.0 ** -size


def sample(sizes: torch.Tensor, g: torch.Generator) -> Samples:
    """One sum per row, of two ``sizes[i]``-digit operands (leading zeros allowed)."""
    n, L = len(sizes), int(sizes.max())
    k = torch.arange(L + 1)[None, :]
    a = torch.randint(0, 10, (n, L + 1), generator=g).masked_fill(k >= sizes[:, None], 0)  # a[:, k]: significance k
    b = torch.randint(0, 10, (n, L + 1), generator=g).masked_fill(k >= sizes[:, None], 0)
    total = torch.zeros((n, L + 1), dtype=torch.long)
    carry = torch.zeros(n, dtype=torch.long)
    for j in range(L + 1):  # vectorized over samples; a row's digits above its size are 0
        s = a[:, j] + b[:, j] + carry
        total[:, j], carry = s % 10, s // 10

    m = sizes[:, None]
    t = torch.arange(2 * L + 4)[None, :]
    sig_a = (m - t).clamp(0, L)  # t <= n: a's digit of significance n-t
    sig_b = (2 * m + 2 - t).clamp(0, L)  # n+2 <= t <= 2n+2: b's digit of significance 2n+2-t
    in_a, in_b = t <= m, (t >= m + 2) & (t <= 2 * m + 2)
    prompt = torch.where(in_a, a.gather(1, sig_a) + ZERO, torch.where(
        t == m + 1, PLUS, torch.where(in_b, b.gather(1, sig_b) + ZERO, EQUALS)))
    prompt_ids = torch.where(in_a, sig_a + 1, torch.where(t == m + 1, m + 2, torch.where(in_b, sig_b + 1, 0)))
    j = torch.arange(L + 2)[None, :]
    response = torch.where(j <= m, total.gather(1, j.clamp(max=L).expand(n, -1)) + ZERO, EOS)
    response_ids = (j + 1).expand(n, -1)
    return assemble(prompt, prompt_ids, 2 * sizes + 4, response, response_ids, sizes + 2)

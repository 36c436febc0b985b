"""Multi-digit addition with the position coupling of Cho et al. 2024 (SPEC.md section 4).

Prompt ``a_{n-1} .. a_0 + b_{n-1} .. b_0 =`` (both operands n digits, most significant first,
leading zeros allowed), response the n+1 digits of the sum least significant first, then ``$``.
Coupled ids [ours, after Cho et al.]: digits of significance k get id k+1 in both operands and
in the sum; ``+`` and ``=`` get 0; ``$`` gets n+2. So every response id is the previous one
plus 1, and the token predicting sum digit k sits next (in id) to the digits it needs.
"""

from __future__ import annotations

import torch

from sparselen.tasks.seq2seq import Samples, assemble

VOCAB = ("<pad>", "+", "=", "$") + tuple("0123456789")
PLUS, EQUALS, EOS = 1, 2, 3
ZERO = 4
SIZE = "operand digits n"


def sample(sizes: torch.Tensor, g: torch.Generator) -> Samples:
    """One sum per row, of two ``sizes[i]``-digit operands."""
    n, L = len(sizes), int(sizes.max())
    k = torch.arange(L)[None, :]
    a = torch.randint(0, 10, (n, L), generator=g).masked_fill(k >= sizes[:, None], 0)  # a[:, k]: significance k
    b = torch.randint(0, 10, (n, L), generator=g).masked_fill(k >= sizes[:, None], 0)
    total = torch.zeros((n, L + 1), dtype=torch.long)
    carry = torch.zeros(n, dtype=torch.long)
    for j in range(L):  # vectorized over samples
        s = a[:, j] + b[:, j] + carry
        total[:, j], carry = s % 10, s // 10
    total[:, L] = carry  # digits above a row's size are 0, so its top (carry) digit sits at significance n

    m = sizes[:, None]
    t = torch.arange(2 * L + 2)[None, :]
    sig_a = (m - 1 - t).clamp(0, L - 1)  # t < n: a's digit of significance n-1-t
    sig_b = (2 * m - t).clamp(0, L - 1)  # n < t <= 2n: b's digit of significance 2n-t
    prompt = torch.where(t < m, a.gather(1, sig_a) + ZERO,
             torch.where(t == m, PLUS, torch.where(t <= 2 * m, b.gather(1, sig_b) + ZERO, EQUALS)))
    prompt_ids = torch.where(t < m, m - t, torch.where((t > m) & (t <= 2 * m), 2 * m - t + 1, 0))
    j = torch.arange(L + 2)[None, :]
    response = torch.where(j <= m, total.gather(1, j.clamp(max=L).expand(n, -1)) + ZERO, EOS)
    response_ids = j + 1
    return assemble(prompt, prompt_ids, 2 * sizes + 2, response, response_ids.expand(n, -1), sizes + 2)

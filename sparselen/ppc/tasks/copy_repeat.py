"""Copy a string over a small alphabet (docs/reconstruction.md, "Position coupling and PPC"; the format is our reconstruction).

Prompt ``x_1 .. x_n . >``, response ``x_1 .. x_n $``. Symbols repeat (small alphabet), so a
model cannot find "the next symbol" by content; it must know where it is in the string.
Coupled ids: ``x_j`` j, the end mark ``.`` n+1, the separator ``>`` 0; response token ``x_j``
gets j (the id of the prompt token it copies) and ``$`` gets n+1 (coupled to ``.``). So every
step reads the prompt token whose id is one more than its own, and every next id is the
current one plus 1; the ids depend on the length alone.
"""

from __future__ import annotations

import torch

from sparselen.ppc.samples import PAD, Samples, assemble

SYMBOLS = tuple("abcdefghij")
VOCAB = ("<pad>", ".", ">", "$") + SYMBOLS
END, SEP, EOS = 1, 2, 3
FIRST_SYMBOL = 4
SIZE = "string length n"
ORIGIN = "ours"


def ids_depend_on_input(**params) -> bool:
    """The ids follow from the length alone."""
    return False


def control(**params) -> str:
    """Never a control: symbols repeat, so the next one cannot be found by content."""
    return ""


def max_coupled_id(size: int, **params) -> int:
    """Largest coupled id of a sample of this size (before any training offset): the end mark."""
    return size + 1


def max_first_lookup(size: int, **params) -> int:
    """The first response id is one more than the separator's (0)."""
    return 1


def chance_exact_match(size: int, alphabet: int = 4, **params) -> float:
    """Exact match of a model that gets the format and ids right and guesses every copied symbol."""
    return float(alphabet) ** -size


def sample(sizes: torch.Tensor, g: torch.Generator, alphabet: int = 4) -> Samples:
    """One string per row, of length ``sizes[i]``, over the first ``alphabet`` symbols."""
    if not 2 <= alphabet <= len(SYMBOLS):
        raise ValueError(f"copy_repeat.alphabet = {alphabet}: must be in 2..{len(SYMBOLS)}")
    n, L = len(sizes), int(sizes.max())
    rows, t = torch.arange(n), torch.arange(L + 2)[None, :]
    x = torch.randint(0, alphabet, (n, L), generator=g) + FIRST_SYMBOL
    x[torch.arange(L)[None, :] >= sizes[:, None]] = PAD
    prompt = torch.cat((x, torch.full((n, 2), PAD)), dim=1)
    prompt[rows, sizes], prompt[rows, sizes + 1] = END, SEP
    prompt_ids = torch.where(t <= sizes[:, None], t + 1, 0)
    response = torch.cat((x, torch.full((n, 1), PAD)), dim=1)
    response[rows, sizes] = EOS
    response_ids = torch.arange(1, L + 2).expand(n, -1)
    return assemble(prompt, prompt_ids, sizes + 2, response, response_ids, sizes + 1)

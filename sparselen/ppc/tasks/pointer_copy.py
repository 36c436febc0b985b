"""Pointer copy: restate the line a query points to (docs/reconstruction.md, "Position coupling and PPC").

Format [ours]: N lines ``k x_1 .. x_m ;`` (k a key, distinct per line; x_i symbols of a small
alphabet, so they repeat and a symbol cannot be found by content; m uniform in
``line_length``), then one query token ``?k`` that names a key. The response restates the
queried line, ``k x_1 .. x_m ;`` (its ``;`` ends the response). The query is its own token, not
the key, so the key occurs once before the response.

Coupled ids: the prompt is numbered 0, 1, 2, ... in order. Each response token gets the id of
the token it restates, so the ids run on by 1 from the queried line's key. Given them, every step
reads the prompt token one id ahead of its own: a local lookup at any prompt length. The first
response id is that of the queried line: it depends on the input (where the line is), so plain
coupling needs it from an oracle and PPC must predict it, a lookup by content of the named key.
Without ids every step of the copy reads a token at a distance that grows with the prompt (the
line can be anywhere) and that content alone identifies only as long as the symbols before it
do not recur elsewhere in the prompt, which they do more often the longer the prompt.
"""

from __future__ import annotations

import torch

from sparselen.ppc.samples import PAD, Samples, assemble

MAX_KEYS = 64
SYMBOLS = tuple("abcdefghij")
VOCAB = ("<pad>", ";") + SYMBOLS + tuple(f"k{i}" for i in range(MAX_KEYS)) + tuple(f"?k{i}" for i in range(MAX_KEYS))
SEMI = 1
EOS = SEMI  # the restated line's ``;`` ends the response
FIRST_SYMBOL = 2
FIRST_KEY = FIRST_SYMBOL + len(SYMBOLS)
FIRST_QUERY = FIRST_KEY + MAX_KEYS  # ``?k`` asks for the line of key k
SIZE = "lines N"
ORIGIN = "ours"


def ids_depend_on_input(**params) -> bool:
    """The first response id is that of the queried line."""
    return True


def max_prompt_len(lines: int, line_length=(3, 3)) -> int:
    """Longest prompt of this many lines (every line a longest one), its query included."""
    return lines * (line_length[1] + 2) + 1


def control(**params) -> str:
    """Never a control: the restated line's symbols repeat elsewhere, so the copy needs positions."""
    return ""


def max_coupled_id(size: int, line_length=(3, 3), **params) -> int:
    """Largest coupled id of a sample of this size (before any training offset): the prompt's
    last token, the query."""
    return max_prompt_len(size, line_length) - 1


def max_first_lookup(size: int, line_length=(3, 3), **params) -> int:
    """From the query back to the first line's key."""
    return max_prompt_len(size, line_length) - 1


def chance_exact_match(size: int, alphabet: int = 4, line_length=(3, 3), **params) -> float:
    """Exact match of a model that gets the format and ids right and guesses every restated
    symbol (the key is in the query)."""
    lengths = range(line_length[0], line_length[1] + 1)
    return sum(float(alphabet) ** -m for m in lengths) / len(lengths)


def unit_starts(s: Samples) -> torch.Tensor:
    """Prompt tokens before which id skips may fall: each line's key after the first, and the
    query (a restated line keeps its ids consecutive)."""
    keys = (s.tokens >= FIRST_KEY) & (s.tokens < FIRST_QUERY)
    query = s.tokens >= FIRST_QUERY
    t = torch.arange(s.tokens.shape[1])[None, :]
    return (keys | query) & (t > 0) & (t < s.prompt_len[:, None])


def sample(sizes: torch.Tensor, g: torch.Generator, num_keys: int = 32, alphabet: int = 4,
           line_length=(3, 3)) -> Samples:
    """One prompt per row with ``sizes[i]`` lines; the queried line uniform among them."""
    if not 1 <= num_keys <= MAX_KEYS:
        raise ValueError(f"pointer_copy.num_keys = {num_keys}: must be in 1..{MAX_KEYS}")
    if int(sizes.max()) > num_keys:
        raise ValueError(f"pointer_copy: {int(sizes.max())} lines need as many keys, but num_keys = {num_keys}")
    if not 2 <= alphabet <= len(SYMBOLS):
        raise ValueError(f"pointer_copy.alphabet = {alphabet}: must be in 2..{len(SYMBOLS)}")
    lo, hi = line_length
    if not 1 <= lo <= hi:
        raise ValueError(f"pointer_copy.line_length = {list(line_length)}: need 1 <= first <= second")
    n, L = len(sizes), int(sizes.max())
    rows, j = torch.arange(n), torch.arange(L)[None, :]
    keys = torch.rand(n, num_keys, generator=g).argsort(dim=1)[:, :L] + FIRST_KEY  # line j's key
    m = torch.randint(lo, hi + 1, (n, L), generator=g).masked_fill(j >= sizes[:, None], 0)
    x = torch.randint(0, alphabet, (n, L, hi), generator=g) + FIRST_SYMBOL
    width = (m + 2).masked_fill(j >= sizes[:, None], 0)  # unused lines (j >= N) take no room
    start = width.cumsum(dim=1) - width  # first token (the key) of line j
    body = width.sum(dim=1)
    T = int(body.max()) + 1

    # each line as a row of width hi + 2: key, symbols, ";", padding
    W = hi + 2
    c = torch.arange(W)[None, None, :]
    sym = torch.cat((x, torch.full((n, L, 2), PAD)), dim=2).gather(2, (c - 1).clamp(0, W - 1).expand(n, L, W))
    grid = torch.where(c == 0, keys[..., None], torch.where(c == 1 + m[..., None], SEMI, sym))
    valid = (c <= 1 + m[..., None]) & (j < sizes[:, None])[..., None]
    prompt = torch.full((n, T), PAD)
    at = (start[..., None] + c).clamp(max=T - 1)
    prompt[rows[:, None, None].expand(n, L, W)[valid], at[valid]] = grid[valid]
    q = (torch.rand(n, generator=g) * sizes).long()[:, None]  # the queried line
    key = keys.gather(1, q)[:, 0]
    prompt[rows, body] = key - FIRST_KEY + FIRST_QUERY
    prompt_ids = torch.arange(T).expand(n, -1)

    mq, sq = m.gather(1, q), start.gather(1, q)
    i = torch.arange(hi + 2)[None, :]  # response token i restates line token i (0: the key)
    line = torch.cat((key[:, None], x.gather(1, q[..., None].expand(n, 1, hi))[:, 0]), dim=1)
    response = torch.where(i <= mq, line.gather(1, i.clamp(max=hi).expand(n, -1)), torch.where(i == mq + 1, SEMI, PAD))
    response_ids = sq + i
    return assemble(prompt, prompt_ids, body + 1, response, response_ids, mq[:, 0] + 2)

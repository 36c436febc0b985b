"""Variable assignment: follow a chain of assignments in a shuffled program (docs/reconstruction.md, "Position coupling and PPC").

Format [ours, a reconstruction]: N program lines (every line defines a distinct variable), then
the query ``? q >``. A line is ``v = w ;`` (w another variable) or ``v = d_1 .. d_m ;`` (a
constant of m digits, m uniform in ``value_digits``; the one-digit ``a = 7 ;`` is m = 1). The lines
form chains ``u_0 = u_1 ; u_1 = u_2 ; .. u_{d-1} = c ;`` (shuffled together with other chains);
the query asks for the chain of depth d starting at q = u_0, and the response walks it from the
queried variable to its constant, one variable per step, then copies the constant's digits:
``u_0 u_1 .. u_{d-1} d_1 .. d_m $``.

Coupled ids: the prompt is numbered 0, 1, 2, ... in order. Response token u_j gets the id of
the program line that defines it (its left-hand side token), each digit of c the id of that
digit in the program, ``$`` the id of the ``;`` after it. So with the ids known, each next token
is read at a fixed offset from its own id (a local lookup); the next id is the previous one
plus 1 inside the constant, but at a variable step it is that of the line defining the token
just read: it depends on the input, so plain coupling needs the ids from an oracle and PPC must
predict them. Without ids, copying a constant of several digits needs the position of its line,
which can be anywhere in the program: a non-local dependency.
"""

from __future__ import annotations

import torch

from sparselen.ppc.samples import PAD, Samples, assemble

MAX_VARIABLES = 64
VOCAB = ("<pad>", "=", ";", "?", ">", "$") + tuple("0123456789") + tuple(f"v{i}" for i in range(MAX_VARIABLES))
EQ, SEMI, QUERY, SEP, EOS = 1, 2, 3, 4, 5
ZERO = 6
FIRST_VAR = 16
SIZE = "program lines N"
ORIGIN = "paper"  # "the efficacy of PPC is tested for ... variable assignment task" (a reviewer's summary)


def max_prompt_len(lines: int, value_digits=(1, 1)) -> int:
    """Longest prompt of a program with this many lines (every line a longest constant)."""
    return lines * (3 + value_digits[1]) + 3


def ids_depend_on_input(**params) -> bool:
    """A response token's id is that of the line defining it, wherever the line is."""
    return True


def found_by_content(value_digits=(1, 1), **params) -> bool:
    """Whether every response token is found by content alone: the queried variable from the
    query, each next token as the one after ``v =`` on the line defining the current variable
    v, which holds as long as no constant has a second digit (a digit after a digit is found
    by its place, not its content: copying it needs positions)."""
    return value_digits[1] == 1


def control(**params) -> str:
    """A control when every response token is found by content (``found_by_content``): coupling is then not needed."""
    if not found_by_content(**params):
        return ""
    return "one-digit constants: every lookup is by content, coupling is not needed"


def form(value_digits=(1, 1), max_depth: int = 3, **params) -> str:
    """The form run, in words (C2's verdict line)."""
    lo, hi = value_digits
    digits = f"{lo}-digit" if lo == hi else f"{lo}-{hi}-digit"
    return f"variable assignment, chains of depth <= {max_depth}, {digits} constants"


def max_coupled_id(size: int, value_digits=(1, 1), **params) -> int:
    """Largest coupled id of a sample of this size (before any training offset): the prompt's
    last token, ``>``."""
    return max_prompt_len(size, value_digits) - 1


def max_first_lookup(size: int, value_digits=(1, 1), **params) -> int:
    """From ``>`` back to the first line of the program."""
    return max_prompt_len(size, value_digits) - 1


def chance_exact_match(size: int, max_depth: int = 3, value_digits=(1, 1), **params) -> float:
    """Exact match of a model that gets the format and ids right and guesses what it looks up:
    the queried variable is in the query, each further variable of the chain one of the
    ``size - 1`` others, each digit of the constant one of 10 (depth and digits uniform, as
    sampled)."""
    depths = range(1, min(max_depth, size) + 1)
    walk = sum((1 / max(size - 1, 1)) ** (d - 1) for d in depths) / len(depths)
    digits = range(value_digits[0], value_digits[1] + 1)
    return walk * sum(10.0 ** -m for m in digits) / len(digits)


def unit_starts(s: Samples) -> torch.Tensor:
    """Prompt tokens before which id skips may fall: each line's first token (its variable)
    after the first line, and ``?`` (the response reads within one line at a time)."""
    prev = torch.cat((torch.full_like(s.tokens[:, :1], SEMI), s.tokens[:, :-1]), dim=1)
    t = torch.arange(s.tokens.shape[1])[None, :]
    return (prev == SEMI) & (t > 0) & (t < s.prompt_len[:, None])


def sample(sizes: torch.Tensor, g: torch.Generator, num_variables: int = 32, max_depth: int = 3,
           value_digits=(1, 1)) -> Samples:
    """One program per row with ``sizes[i]`` lines; query depth uniform in 1..min(max_depth, N)."""
    if not 1 <= num_variables <= MAX_VARIABLES:
        raise ValueError(f"variable_assignment.num_variables = {num_variables}: must be in 1..{MAX_VARIABLES}")
    if int(sizes.max()) > num_variables:
        raise ValueError(f"variable_assignment: {int(sizes.max())} lines need as many variables, "
                         f"but num_variables = {num_variables}")
    lo, hi = value_digits
    if not 1 <= lo <= hi:
        raise ValueError(f"variable_assignment.value_digits = {list(value_digits)}: need 1 <= first <= second")
    n, L = len(sizes), int(sizes.max())
    rows, j = torch.arange(n), torch.arange(L)[None, :]
    u = torch.rand(n, num_variables, generator=g).argsort(dim=1)[:, :L]  # line j defines u_j
    depth = (torch.rand(n, generator=g) * sizes.clamp(max=max_depth)).long() + 1
    # ends[:, j]: line j assigns a constant (ends its chain); the query chain is lines 0..d-1
    ends = torch.rand(n, L, generator=g) < 1.0 / max_depth
    ends = torch.where(j < depth[:, None] - 1, False, ends)
    ends[rows, depth - 1] = True
    ends[rows, sizes - 1] = True
    next_var = torch.cat((u[:, 1:], u[:, :1]), dim=1)
    digits = torch.randint(0, 10, (n, L, hi), generator=g) + ZERO
    m = torch.randint(lo, hi + 1, (n, L), generator=g)  # digits of line j's constant (if it has one)
    rhs_len = torch.where(ends, m, 1)

    # each line as a row of width 3 + hi: lhs, =, right-hand side, ;, padding
    W = 3 + hi
    c = torch.arange(W)[None, None, :]
    rhs = torch.where(ends[..., None], digits, (next_var + FIRST_VAR)[..., None])
    rhs = torch.cat((rhs, torch.full((n, L, 3), PAD)), dim=2).gather(2, (c - 2).clamp(0, W - 1).expand(n, L, W))
    grid = torch.where(c == 0, (u + FIRST_VAR)[..., None], torch.where(c == 1, EQ, torch.where(
        c == 2 + rhs_len[..., None], SEMI, rhs)))
    used = (j < sizes[:, None])[..., None]
    valid = (c <= 2 + rhs_len[..., None]) & used

    # shuffle the lines: slot s holds line order[:, s]; unused lines (j >= N) go last
    order = torch.rand(n, L, generator=g).masked_fill(j >= sizes[:, None], 2.0).argsort(dim=1)
    slot = order.argsort(dim=1)
    slot_len = (3 + rhs_len).gather(1, order).masked_fill(j >= sizes[:, None], 0)
    start = (slot_len.cumsum(dim=1) - slot_len).gather(1, slot)  # first token of line j
    body = slot_len.sum(dim=1)
    T = int(body.max()) + 3
    prompt = torch.full((n, T), PAD)
    at = (start[..., None] + c).clamp(max=T - 1)
    prompt[rows[:, None, None].expand(n, L, W)[valid], at[valid]] = grid[valid]
    prompt[rows, body], prompt[rows, body + 1], prompt[rows, body + 2] = QUERY, u[:, 0] + FIRST_VAR, SEP
    prompt_ids = torch.arange(T).expand(n, -1)

    # response step k < d: u_k at the id of its defining line; then the constant of line d-1
    # digit by digit at the ids of its digits, and "$" at the id of the ";" after it
    last = (depth - 1)[:, None]
    m_last = m.gather(1, last)
    k = torch.arange(int(depth.max()) + hi + 1)[None, :]
    i = (k - depth[:, None]).clamp(min=0)  # digit index once past the variables
    line = k.clamp(max=L - 1).expand(n, -1)
    const = digits.gather(1, last[..., None].expand(n, 1, hi))[:, 0]
    response = torch.where(k < depth[:, None], (u + FIRST_VAR).gather(1, line),
               torch.where(i < m_last, const.gather(1, i.clamp(max=hi - 1)),
               torch.where(i == m_last, EOS, PAD)))
    response_ids = torch.where(k < depth[:, None], start.gather(1, line), start.gather(1, last) + 2 + i)
    return assemble(prompt, prompt_ids, body + 3, response, response_ids, depth + m_last[:, 0] + 1)

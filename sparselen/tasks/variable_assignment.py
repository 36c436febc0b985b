"""Variable assignment: follow a chain of assignments in a shuffled program (SPEC.md section 4).

Format [ours, a reconstruction]: N program lines ``v = x ;`` (4 tokens each; every line defines
a distinct variable; x is another variable or a digit constant), then the query ``? q >``. The
lines form chains ``u_0 = u_1 ; u_1 = u_2 ; .. u_{d-1} = c ;`` (shuffled together with other
chains); the query asks for the chain of depth d starting at q = u_0, and the response walks
it from the queried variable to its constant, one variable per step: ``u_0 u_1 .. u_{d-1} c $``.

Coupled ids: the prompt is numbered 0, 1, 2, ... in order. Response token u_j gets the id of
the program line that defines it (its left-hand side token), the constant c the id of the
right-hand side it is read from, ``$`` the id of the ``;`` after it. So with the ids known,
each next token is read from the line its own id points to (a local lookup), and the next id
is that of the line defining the token just read: it depends on the input, so plain coupling
needs the ids from an oracle and PPC must predict them.
"""

from __future__ import annotations

import torch

from sparselen.tasks.seq2seq import PAD, Samples, assemble

MAX_VARIABLES = 64
VOCAB = ("<pad>", "=", ";", "?", ">", "$") + tuple("0123456789") + tuple(f"v{i}" for i in range(MAX_VARIABLES))
EQ, SEMI, QUERY, SEP, EOS = 1, 2, 3, 4, 5
ZERO = 6
FIRST_VAR = 16
LINE = 4  # tokens per program line
SIZE = "program lines N"


def sample(sizes: torch.Tensor, g: torch.Generator, num_variables: int = 32, max_depth: int = 3) -> Samples:
    """One program per row with ``sizes[i]`` lines; query depth uniform in 1..min(max_depth, N)."""
    if not 1 <= num_variables <= MAX_VARIABLES:
        raise ValueError(f"variable_assignment.num_variables = {num_variables}: must be in 1..{MAX_VARIABLES}")
    if int(sizes.max()) > num_variables:
        raise ValueError(f"variable_assignment: {int(sizes.max())} lines need as many variables, "
                         f"but num_variables = {num_variables}")
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
    const = torch.randint(0, 10, (n, L), generator=g)
    lhs = u + FIRST_VAR
    rhs = torch.where(ends, const + ZERO, next_var + FIRST_VAR)

    # shuffle the lines: slot s holds line order[:, s]; unused lines (j >= N) go last
    score = torch.rand(n, L, generator=g).masked_fill(j >= sizes[:, None], 2.0)
    order = score.argsort(dim=1)
    slot = order.argsort(dim=1)
    lines = torch.stack((lhs.gather(1, order), torch.full((n, L), EQ), rhs.gather(1, order),
                         torch.full((n, L), SEMI)), dim=2).reshape(n, LINE * L)
    lines[torch.arange(LINE * L)[None, :] >= LINE * sizes[:, None]] = PAD
    prompt = torch.cat((lines, torch.full((n, 3), PAD)), dim=1)
    q = LINE * sizes
    prompt[rows, q], prompt[rows, q + 1], prompt[rows, q + 2] = QUERY, u[:, 0] + FIRST_VAR, SEP
    prompt_ids = torch.arange(LINE * L + 3).expand(n, -1)

    # response step j < d: u_j at the id of its defining line's left-hand side; then the
    # constant at the id of its right-hand side, and "$" at the id of the ";" after it
    step = torch.arange(int(depth.max()) + 2)[None, :]
    line = step.clamp(max=L - 1).expand(n, -1)
    last = (depth - 1)[:, None]
    last_id = LINE * slot.gather(1, last)
    response = torch.where(step < depth[:, None], lhs.gather(1, line),
               torch.where(step == depth[:, None], rhs.gather(1, last),
               torch.where(step == depth[:, None] + 1, EOS, PAD)))
    response_ids = torch.where(step < depth[:, None], LINE * slot.gather(1, line),
                               last_id + 2 + (step > depth[:, None]).long())
    return assemble(prompt, prompt_ids, q + 3, response, response_ids, depth + 2)

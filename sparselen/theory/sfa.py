"""Sparse functional attention (the paper's Definition 3.3), as a PyTorch module.

[paper] An attention head attends to single tokens; the sparse functional attention class
attends to k-tuples: the output at a query is a softmax-weighted average, over k-tuples of
earlier positions, of a value function of the tuple, with weights from a key (score)
function of the tuple; both are functions of the k tokens and their positions, and
"relativity" makes them depend on positions only through their differences. The length
generalization theorem restricts tuples to spread at most L_local.

[ours, a reconstruction] Tuples are ordered by position id (ties: by index) and restricted to
spread <= ``window`` in the given position ids (absolute or coupled), so a length-T sequence
has at most T * C(R, k-1) tuples (R: the most tokens within one window) instead of C(T, k).
A tuple t = (i_1, ..., i_k) is represented by the concatenation u_t of its k token vectors
and the offsets delta_j = p(i_j) - p(i_1), j >= 2, each with its own learned embedding:

    key(t)   = K u_t + sum_j E^K_j[delta_j]     (then a GELU MLP if ``mlp``)
    value(t) = V u_t + sum_j E^V_j[delta_j]     (then a GELU MLP if ``mlp``)
    out(q)   = sum_t softmax_t(<Q x_q, key(t)> / sqrt(d_head)) value(t)

over tuples whose tokens all sit at or before the query. With k = 1 there are no offsets and
no MLP is needed: this is exactly one causal softmax attention head (``tests/theory/test_theory_sfa.py``
checks it against ``torch.nn.functional.scaled_dot_product_attention``).

K u_t is a sum over the tuple's members, sum_j K_j x_{i_j} (K_j: K's columns of member j), so
each token is projected once per member slot (T k products instead of N) and each tuple sums
its members' projected vectors: the same products up to float summation order, without the
(N, k d_in) tuple vectors (the test keeps the gather-then-project form as its reference).
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from sparselen.runtime.rng import generator
from sparselen.theory import TRAINING_CODE
from sparselen.theory.task import PlantedConfig, sample, spread_in_ids
from sparselen.training import modelfile

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=64)
def _tuples(ids: tuple, k: int, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """All k-tuples of sequence indices with spread <= ``window`` in the position ids ``ids``.

    Returns (index (N, k), offsets (N, k-1)); members are ordered by (id, index).
    """
    p = torch.tensor(ids)
    order = torch.argsort(p, stable=True)
    sp = p[order]
    T = len(ids)
    if k == 1:
        return order[:, None], torch.zeros(T, 0, dtype=torch.long)
    # R: how many later-ranked tokens can share a window with a token
    reach = torch.searchsorted(sp, sp + window, right=True) - 1 - torch.arange(T)
    R = int(reach.max())
    if R < k - 1:
        return torch.zeros(0, k, dtype=torch.long), torch.zeros(0, k - 1, dtype=torch.long)
    combos = torch.tensor(list(itertools.combinations(range(1, R + 1), k - 1)))  # (C, k-1)
    ranks = torch.cat((torch.zeros(len(combos), 1, dtype=torch.long), combos), dim=1)  # (C, k)
    ranks = torch.arange(T)[:, None, None] + ranks[None]  # (T, C, k)
    ok = ranks[..., -1] < T
    ranks = ranks[ok]  # (N', k)
    spread = sp[ranks[:, -1]] - sp[ranks[:, 0]]
    ranks = ranks[spread <= window]
    index = order[ranks]
    pos = sp[ranks]
    return index, pos[:, 1:] - pos[:, :1]


def tuples(position_ids: torch.Tensor, k: int, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``_tuples`` for a 1-d tensor of position ids (cached per distinct id sequence)."""
    return _tuples(tuple(position_ids.tolist()), k, window)


class SparseFunctionalAttention(nn.Module):
    """One sparse functional attention head over k-tuples of spread <= ``window``."""

    def __init__(self, d_in: int, d_out: int, k: int, window: int, d_head: int = 32, mlp: bool = True):
        super().__init__()
        self.k, self.window, self.d_head, self.mlp = k, window, d_head, mlp
        d_val = d_head if mlp else d_out
        self.query = nn.Linear(d_in, d_head)
        self.key = nn.Linear(k * d_in, d_head)
        self.value = nn.Linear(k * d_in, d_val)
        # one offset embedding per later tuple member (j = 2..k), offsets 0..window
        self.key_offsets = nn.Parameter(torch.zeros(k - 1, window + 1, d_head))
        self.value_offsets = nn.Parameter(torch.zeros(k - 1, window + 1, d_val))
        if k > 1:
            nn.init.normal_(self.key_offsets, std=0.02)
            nn.init.normal_(self.value_offsets, std=0.02)
        if mlp:
            self.key_mlp = nn.Linear(d_head, d_head)
            self.value_mlp = nn.Linear(d_head, d_out)

    def _embed_offsets(self, table: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        if self.k == 1:
            return 0.0
        j = torch.arange(self.k - 1, device=offsets.device)
        return table[j, offsets].sum(dim=1)  # (N, d)

    def _per_tuple(self, linear: nn.Linear, table: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """The bias plus the offset embeddings, (N, 1, d) (k = 1: (1, d)): the same for every row,
        so added once per tuple."""
        return (linear.bias + self._embed_offsets(table, offsets)).unsqueeze(-2)

    def _tuple_linear(self, linear: nn.Linear, x: torch.Tensor, members: torch.Tensor) -> torch.Tensor:
        """``linear``'s weight applied to every tuple's concatenated token vectors, (N, B, d):
        each token projected by each member's block of columns (row t k + j: token t as member
        j), then summed over the tuple's members (``members``: (N, k) such rows). A sum of
        rows is an embedding bag, whose kernels split the tuples over the threads."""
        B, T, d_in = x.shape
        w = linear.weight.view(-1, self.k, d_in)  # (d, k, d_in): member j's columns
        projected = torch.einsum("btd,hjd->tjbh", x, w).reshape(T * self.k, -1)
        return F.embedding_bag(members, projected, mode="sum").view(len(members), B, linear.out_features)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor, queries: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, T, d_in); position_ids (T,) shared by the batch; ``queries``: the sequence
        indices to compute outputs at (default: all). Returns (B, len(queries), d_out)."""
        B, T, _ = x.shape
        index, off = tuples(position_ids.cpu(), self.k, self.window)
        index, off = index.to(x.device), off.to(x.device)
        members = index * self.k + torch.arange(self.k, device=x.device)  # (N, k) rows of the projections
        if queries is None:
            queries = torch.arange(T, device=x.device)
        key = self._tuple_linear(self.key, x, members) + self._per_tuple(self.key, self.key_offsets, off)
        value = self._tuple_linear(self.value, x, members) + self._per_tuple(self.value, self.value_offsets, off)
        if self.mlp:
            key = self.key_mlp(F.gelu(key))
            value = self.value_mlp(F.gelu(value))
        q = self.query(x[:, queries])  # (B, Q, d_head)
        scores = torch.einsum("bqh,nbh->bqn", q, key) / math.sqrt(self.d_head)  # (B, Q, N)
        visible = index.max(dim=1).values[None, :] <= queries[:, None]  # (Q, N)
        has = visible.any(dim=1, keepdim=True)  # a query with no whole tuple before it outputs 0
        scores = scores.masked_fill(~visible, float("-inf")).masked_fill(~has, 0.0)
        return torch.einsum("bqn,nbo->bqo", torch.softmax(scores, dim=-1) * has, value)


class SFAModel(nn.Module):
    """The idealized model of the theory: token embeddings, one sparse functional attention
    head, read at the last (query) position; returns label logits (B, n_labels)."""

    def __init__(self, vocab_size: int, n_labels: int, k: int, window: int, d_embed: int = 16, d_head: int = 32):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_embed)
        self.attention = SparseFunctionalAttention(d_embed, n_labels, k, window, d_head, mlp=True)

    def forward(self, tokens: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        last = torch.tensor([tokens.shape[1] - 1], device=tokens.device)
        return self.attention(self.embed(tokens), position_ids, last)[:, 0]


def sfa_window(pc: PlantedConfig, floor: int, train_lengths) -> int:
    """The SFA's locality bound: at least ``floor``, and wide enough for every planted tuple of
    the training lengths (for the nonlocal law this grows with L, which is the point)."""
    widest = max(int(spread_in_ids(sample(pc, n, 64, generator("theory-window", n))).max()) for n in train_lengths)
    return max(floor, widest)


def train_sfa(pc: PlantedConfig, cfg: dict, lengths: list[int], seed: int, window: int, checkpoint=None,
              checkpoint_minutes: float = 0.0, run_key: str = ""):
    """AdamW (linear decay) on the log loss, one length per step (drawn from ``lengths``); a pure function of
    (config, seed). Returns (model, per-step log rows).

    With ``checkpoint`` (a path) the run is resumable, as the trainer's: hours at paper scale on
    one thread, so a time limit costs at most ``checkpoint_minutes`` of it. It saves model,
    optimizer, schedule and log at least that many minutes apart and at the last step, and
    resumes a checkpoint of the same ``run_key`` (the run's config hash) and training code; each
    step's batch depends on (seed, step) only, so a resumed run ends as an unbroken one."""
    torch.manual_seed(seed)
    model = SFAModel(pc.vocab_size, pc.n_values, pc.k, window, cfg["d_embed"], cfg["d_head"])
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1 - step / cfg["steps"])  # linear decay
    rows, start = [], 0
    key = {"run_key": run_key, "code": _training_code(), "window": window}
    if checkpoint is not None:
        start, rows = _resume(checkpoint, key, model, opt, sched)
    t_saved = time.perf_counter()
    for step in tqdm(range(start, cfg["steps"]), desc=f"train sfa k={pc.k} {pc.positions}", file=sys.stderr,
                     mininterval=30.0, initial=start, total=cfg["steps"]):
        g = generator("theory-train", seed, step)
        n = lengths[int(torch.randint(len(lengths), (1,), generator=g))]
        s = sample(pc, n, cfg["batch_size"], g)
        loss = F.cross_entropy(model(s.tokens, s.position_ids), s.label)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if (step + 1) % cfg["log_every"] == 0 or step + 1 == cfg["steps"]:
            rows.append({"step": step + 1, "loss": loss.item(), "length": n})
            log.info("step %d loss %.5f", step + 1, rows[-1]["loss"])
        if checkpoint is not None and (step + 1 == cfg["steps"]
                                       or time.perf_counter() - t_saved >= 60 * checkpoint_minutes):
            modelfile.save_state(checkpoint, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                                              "scheduler": sched.state_dict(), "step": step + 1, "log": rows, **key})
            t_saved = time.perf_counter()
    model.eval()
    return model, rows


def _training_code() -> str:
    from sparselen.training.resumable import code_fingerprint

    return code_fingerprint(*TRAINING_CODE)


def _resume(checkpoint, key: dict, model, opt, sched) -> tuple[int, list]:
    """(step, log rows) of a checkpoint of this run, loaded into model, optimizer and schedule;
    (0, []) when there is none or it is another run's (another config, code or window)."""
    from pathlib import Path

    if not Path(checkpoint).exists():
        return 0, []
    state = modelfile.load_state(checkpoint)
    differ = [k for k, v in key.items() if state.get(k) != v]
    if differ:
        log.warning("ignoring checkpoint %s: another run's (its %s differ)", checkpoint, " and ".join(differ))
        return 0, []
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    sched.load_state_dict(state["scheduler"])
    log.info("resumed from %s at step %d", checkpoint, state["step"])
    return int(state["step"]), list(state["log"])

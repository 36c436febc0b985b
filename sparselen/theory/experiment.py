"""The theory experiment (SPEC.md section 6): train on lengths <= L, measure the error at
Lbar = r * L, for the idealized sparse-functional-attention model and a small GPT-NeoX.

"Error" is the risk under the log loss (cross-entropy of the label, in nats, over the q
values), the quantity the paper's bound controls; the 0-1 error is reported beside it.
Labels are a deterministic function of the planted tokens, so the Bayes risk is 0 and every
nat of it is excess risk.
"""

from __future__ import annotations

import logging
import math
import sys

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm import tqdm

from sparselen.batch import IGNORE, Batch
from sparselen.rng import generator
from sparselen.theory.planted import PlantedConfig, sample, spread_in_ids
from sparselen.theory.sfa import SFAModel

log = logging.getLogger(__name__)


def planted_config(task: dict, distribution: str, k: int) -> PlantedConfig:
    """``task`` = theory.task (everything but k and the law of S)."""
    t = dict(task)
    for key in ("background", "planted"):
        if t.get(key) is not None:
            t[key] = tuple(t[key])
    return PlantedConfig(k=k, positions=distribution, **t)


def valid_lengths(pc: PlantedConfig, lo: int, hi: int) -> list[int]:
    """The lengths in [lo, hi] the law accepts (multiples of k for the block laws)."""
    return [n for n in range(lo, hi + 1) if n % pc.blocks() == 0 and n >= pc.min_length()]


def eval_lengths(L: int, ratios) -> dict:
    """{ratio: Lbar}: Lbar = ratio * L (L is the longest training length)."""
    return {r: int(round(r * L)) for r in ratios}


def sfa_window(pc: PlantedConfig, floor: int, train_lengths) -> int:
    """The SFA's locality bound: at least ``floor``, and wide enough for every planted tuple of
    the training lengths (for the nonlocal law this grows with L, which is the point)."""
    widest = max(int(spread_in_ids(sample(pc, n, 64, generator("theory-window", n))).max()) for n in train_lengths)
    return max(floor, widest)


def train_sfa(pc: PlantedConfig, cfg: dict, lengths: list[int], seed: int, window: int):
    """AdamW (linear decay) on the log loss, one length per step (drawn from ``lengths``); a pure function of
    (config, seed). Returns (model, per-step log rows)."""
    torch.manual_seed(seed)
    model = SFAModel(pc.vocab_size, pc.n_values, pc.k, window, cfg["d_embed"], cfg["d_head"])
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], weight_decay=cfg.get("weight_decay", 0.0))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1 - step / cfg["steps"])  # linear decay
    rows = []
    for step in tqdm(range(cfg["steps"]), desc=f"train sfa k={pc.k} {pc.positions}", file=sys.stderr,
                     mininterval=30.0):
        g = generator("theory-train", seed, step)
        n = lengths[int(torch.randint(len(lengths), (1,), generator=g))]
        s = sample(pc, n, cfg["batch_size"], g)
        loss = F.cross_entropy(model(s.tokens, s.position_ids), s.label)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if (step + 1) % cfg.get("log_every", 50) == 0 or step + 1 == cfg["steps"]:
            rows.append({"step": step + 1, "loss": loss.item(), "length": n})
            log.info("step %d loss %.5f", step + 1, rows[-1]["loss"])
    model.eval()
    return model, rows


def gpt_batches(pc: PlantedConfig, lengths: list[int], batch_size: int, seed: int, coupled: bool, max_id: int):
    """``batch_fn(step) -> Batch`` for ``sparselen.train.train``: loss on the query position only.

    For coupled ids [ours: PoSE (Zhu et al. 2024) carried over to coupled ids]: every id of a
    sample is shifted by a random start, the in-block ids from a random cut on by a random skip
    (the same in every block, so coupled tokens keep equal ids), and the query by a further
    skip, all keeping ids <= ``max_id``: in-block distances and query distances of the longest
    evaluated lengths are seen in training. Evaluation uses the unshifted ids.
    """

    def uniform(upper: torch.Tensor, g) -> torch.Tensor:  # integers in 0..upper, per row
        return (torch.rand(upper.shape, generator=g) * (upper + 1)).long()

    def batch_fn(step: int) -> Batch:
        g = generator("theory-train", seed, step)
        n = lengths[int(torch.randint(len(lengths), (1,), generator=g))]
        s = sample(pc, n, batch_size, g)
        labels = torch.full_like(s.tokens, IGNORE)
        labels[:, -1] = s.label  # value v is token id v
        ids = None
        if coupled:
            within, m = s.position_ids[:-1], int(s.position_ids[-1])
            room = torch.full((batch_size,), max(0, max_id - m))
            skip = uniform(room, g)
            start = uniform(room - skip, g)
            query_skip = uniform(room - skip - start, g)
            cut = 1 + (torch.rand(batch_size, generator=g) * max(1, m - 1)).long()
            content = within[None, :] + start[:, None] + skip[:, None] * (within[None, :] >= cut[:, None])
            query = (m + start + skip + query_skip)[:, None]
            ids = torch.cat((content, query), dim=1)
        return Batch(s.tokens, labels, ids)

    return batch_fn


def sfa_predict(model: SFAModel):
    def predict(tokens, position_ids):
        return model(tokens, position_ids)

    return predict


def gpt_predict(model, pc: PlantedConfig, coupled: bool):
    """Label logits of a GPT-NeoX: its next-token logits at the query, restricted to the q values."""

    def predict(tokens, position_ids):
        ids = position_ids.expand(tokens.shape[0], -1) if coupled else None
        logits, _ = model(tokens, ids)
        return logits[:, -1, : pc.n_values].float()

    return predict


@torch.no_grad()
def evaluate(predict, pc: PlantedConfig, lengths: dict, n: int, eval_seed: int, batch_size: int) -> pd.DataFrame:
    """Log loss and 0-1 error at each {ratio: length}, on samples shared by every model
    (drawn from ``eval_seed``, the law and the length only)."""
    rows = []
    for ratio, length in lengths.items():
        s = sample(pc, length, n, generator("theory-eval", eval_seed, pc.positions, pc.k, length))
        nll, wrong = 0.0, 0
        for i in range(0, n, batch_size):
            logits = predict(s.tokens[i:i + batch_size], s.position_ids)
            y = s.label[i:i + batch_size]
            nll += float(F.cross_entropy(logits, y, reduction="sum"))
            wrong += int((logits.argmax(-1) != y).sum())
        rows.append({"ratio": ratio, "length": length, "n": n, "log_loss": nll / n, "error": wrong / n})
    return pd.DataFrame(rows)


def fit_slopes(table: pd.DataFrame, floor: float) -> pd.DataFrame:
    """Per (model, distribution, k): the least-squares slope of log(log loss) on log(Lbar/L),
    and the ratio of the error at the largest Lbar/L to the error at Lbar = L, beside the
    bound's (Lbar/L)^2. ``table`` has the seed means in ``mean`` (log loss) per ratio."""
    rows = []
    for (model, dist, k), g in table.groupby(["model", "distribution", "k"], sort=True):
        g = g.sort_values("ratio")
        r = g["ratio"].to_numpy(float)
        e = np.maximum(g["mean"].to_numpy(float), floor)
        slope = float(np.polyfit(np.log(r), np.log(e), 1)[0]) if len(r) > 1 else float("nan")
        at_L = e[r == 1][0] if (r == 1).any() else float("nan")
        rmax = r.max()
        rows.append({"model": model, "distribution": dist, "k": k, "log_loss_at_L": at_L,
                     "log_loss_at_max": e[-1], "max_ratio": rmax, "slope": slope,
                     "error_ratio": e[-1] / at_L, "bound_ratio": rmax ** 2,
                     "within_bound_shape": bool(np.all(e <= at_L * r ** 2 * (1 + 1e-9))),
                     "zero_one_error_at_L": float(g.loc[g["ratio"] == 1, "error_mean"].iloc[0])
                     if (r == 1).any() else float("nan"),
                     "zero_one_error_at_max": float(g["error_mean"].iloc[-1]),
                     "chance_log_loss": math.log(int(g["n_values"].iloc[0]))})
    return pd.DataFrame(rows)

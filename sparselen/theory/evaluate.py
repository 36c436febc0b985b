"""Evaluation of a trained theory model at Lbar = ratio * L: log loss of the label (the risk
the paper's bound controls), the spread of its per-sample values, and 0-1 error, on samples
shared by every model."""

from __future__ import annotations

import pandas as pd
import torch
import torch.nn.functional as F

from sparselen.runtime.device import autocast
from sparselen.runtime.rng import generator
from sparselen.theory.sfa import SFAModel
from sparselen.theory.task import PlantedConfig, sample


def sfa_predict(model: SFAModel):
    def predict(tokens, position_ids):
        return model(tokens, position_ids)

    return predict


def gpt_predict(model, pc: PlantedConfig, coupled: bool):
    """Label logits of a GPT-NeoX on the host: its next-token logits at the query, restricted to
    the q values; the samples go to the model's device and run under training's autocast."""
    device = next(model.parameters()).device

    def predict(tokens, position_ids):
        ids = position_ids.expand(tokens.shape[0], -1).to(device) if coupled else None
        with autocast(device):
            logits, _ = model(tokens.to(device), ids, last_only=True)
        return logits[:, -1, : pc.n_values].float().cpu()

    return predict


@torch.no_grad()
def evaluate(predict, pc: PlantedConfig, lengths: dict, n: int, eval_seed: int, batch_size: int) -> pd.DataFrame:
    """Log loss, the standard deviation of its per-sample values (``log_loss_sd``) and 0-1 error
    at each {ratio: length}, on samples shared by every model (drawn from ``eval_seed``, the law
    and the length only). Every run's mean loss at a ratio carries the draw of that one sample
    set, which no number of runs averages away; the per-sample spread is what measures it (T2's
    interval carries it: ``sparselen.theory.claims.exponent_noise``)."""
    rows = []
    for ratio, length in lengths.items():
        s = sample(pc, length, n, generator("theory-eval", eval_seed, pc.positions, pc.k, length))
        losses, wrong = [], 0
        for i in range(0, n, batch_size):
            logits = predict(s.tokens[i:i + batch_size], s.position_ids)
            y = s.label[i:i + batch_size]
            losses.append(F.cross_entropy(logits, y, reduction="none").double())
            wrong += int((logits.argmax(-1) != y).sum())
        nll = torch.cat(losses)
        rows.append({"ratio": ratio, "length": length, "n": n, "log_loss": float(nll.mean()),
                     "log_loss_sd": float(nll.std()) if n > 1 else 0.0, "error": wrong / n})
    return pd.DataFrame(rows)

"""The sparse-dependency analysis of one model, and the per-token losses that relate it to
length generalization; each returns tidy tables (one row per token and method/k)."""

from __future__ import annotations

import sys

import pandas as pd
import torch
from tqdm import tqdm

from sparselen.language.data import contexts, sample_positions
from sparselen.language.dependency import greedy, selector_ranking
from sparselen.language.evaluate import last_token_loss, subset_loss
from sparselen.rng import generator


def context_losses(model, docs, positions, lengths, batch_size: int, device) -> dict[int, torch.Tensor]:
    """Loss of each target given its previous ``length`` tokens (plain ids 0..length-1)."""
    out = {}
    for length in lengths:
        ctx, tgt = contexts(docs, positions, length)
        out[length] = last_token_loss(model, ctx, torch.arange(length).expand_as(ctx), tgt, batch_size, device)
    return out


def screen(model, docs, cfg: dict, short: int, long: int, device) -> pd.DataFrame:
    """``cfg`` = language.analysis. L_short, L_long and the benefit of ``candidates`` random
    evaluation tokens; ``analysed`` marks the first ``tokens`` with benefit >= min_benefit."""
    positions = sample_positions(docs, long, cfg["candidates"], generator("language-analysis", cfg["seed"]))
    ctx, tgt = contexts(docs, positions, long)
    l_long = last_token_loss(model, ctx, torch.arange(long).expand_as(ctx), tgt, cfg["batch_size"], device)
    l_short = subset_loss(model, ctx, tgt, torch.zeros(len(ctx), 0, dtype=torch.long), short, cfg["batch_size"], device)
    df = pd.DataFrame({"doc": [d for d, _ in positions], "t": [t for _, t in positions], "target": tgt.numpy(),
                       "L_short": l_short.numpy(), "L_long": l_long.numpy()})
    df["benefit"] = df["L_short"] - df["L_long"]
    real = df["benefit"] >= cfg["min_benefit"]
    df["analysed"] = real & (real.cumsum() <= cfg["tokens"])
    return df


def sparse_dependency(model, docs, screened: pd.DataFrame, cfg: dict, short: int, long: int,
                      device) -> pd.DataFrame:
    """L_k for k in cfg["k"] by greedy and by each cheap selector, on the analysed tokens.

    Columns: doc, t, method, k, L_k, L_short, L_long, recovered = (L_short - L_k) /
    (L_short - L_long), overlap (share of the selector's k tokens that greedy also chose)
    and, for greedy, the distances t - position of the chosen tokens in choice order."""
    tokens = screened[screened["analysed"]].reset_index(drop=True)
    positions = list(zip(tokens["doc"], tokens["t"]))
    ctx, tgt = contexts(docs, positions, long)
    ks, kmax = sorted(cfg["k"]), max(cfg["k"])
    rows, greedy_sets = [], []
    for i in tqdm(range(len(tokens)), desc="greedy", file=sys.stderr, mininterval=1.0 if sys.stderr.isatty() else 30.0):
        chosen, losses = greedy(model, ctx[i], int(tgt[i]), short, kmax, cfg["batch_size"], device)
        greedy_sets.append(chosen)
        for k in ks:
            rows.append({"i": i, "method": "greedy", "k": k, "L_k": losses[k - 1], "overlap": 1.0,
                         "distances": " ".join(str(long - c) for c in chosen[:k])})
    for name in cfg["selectors"]:
        ranking = selector_ranking(name, model, ctx, tgt, short, cfg["batch_size"], device, cfg["seed"])
        for k in ks:
            loss = subset_loss(model, ctx, tgt, ranking[:, :k], short, cfg["batch_size"], device)
            for i in range(len(tokens)):
                overlap = len(set(ranking[i, :k].tolist()) & set(greedy_sets[i][:k])) / k
                rows.append({"i": i, "method": name, "k": k, "L_k": float(loss[i]), "overlap": overlap,
                             "distances": ""})
    df = pd.DataFrame(rows).merge(tokens[["doc", "t", "target", "L_short", "L_long"]], left_on="i", right_index=True)
    df["recovered"] = (df["L_short"] - df["L_k"]) / (df["L_short"] - df["L_long"])
    return df.drop(columns="i")


def sparsity_level(deps: pd.DataFrame, fraction: float) -> pd.DataFrame:
    """Per analysed token, the smallest greedy k recovering ``fraction`` of the benefit
    (as a label: "1", "2", ..., or ">kmax")."""
    g = deps[deps["method"] == "greedy"]
    kmax = int(g["k"].max())
    out = []
    for (doc, t), tok in g.groupby(["doc", "t"], sort=True):
        hit = tok[tok["recovered"] >= fraction]["k"]
        out.append({"doc": doc, "t": t, "sparsity": str(int(hit.min())) if len(hit) else f">{kmax}"})
    return pd.DataFrame(out)

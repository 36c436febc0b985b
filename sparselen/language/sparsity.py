"""What makes a token's dependency sparse: the one definition the tables and the claims share.

A token is **sparse** when greedy selection of at most ``SPARSE_K`` far tokens recovers at
least ``share`` of its long-context benefit, ``share`` being ``language.analysis.sparse_fraction``
(docs/reconstruction.md, "Natural language"); its **sparsity level** is the smallest greedy k
that recovers ``share``. The share recovered is divided by the benefit, so a token with a small
benefit is likelier to be labelled sparse: a comparison of sparse and dense tokens of a
quantity also divided by the benefit is made at equal benefit (``sparselen.language.adjusted``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SPARSE_K = 2  # a token is sparse when greedy k <= this recovers the share

TOKEN = ["doc", "t", "seed"]  # an analysed token of one analysed model


def token_sparsity(deps: pd.DataFrame, share: float) -> pd.DataFrame:
    """Per analysed token (doc, t, seed): ``sparse`` (greedy k <= SPARSE_K recovers ``share``)
    and the analysed model's benefit ``ref_benefit`` = L_short - L_long."""
    g = deps[deps["method"] == "greedy"]
    sparse = g[g["k"] <= SPARSE_K].groupby(TOKEN)["recovered"].max().ge(share).rename("sparse")
    first = g.groupby(TOKEN)[["L_short", "L_long"]].first()
    return pd.concat([sparse, (first["L_short"] - first["L_long"]).rename("ref_benefit")], axis=1).reset_index()


def sparsity_level(deps: pd.DataFrame, share: float) -> pd.DataFrame:
    """Per analysed token (doc, t), the smallest greedy k recovering ``share`` of the benefit
    (as a label: "1", "2", ..., or ">kmax")."""
    g = deps[deps["method"] == "greedy"]
    kmax = int(g["k"].max())
    out = []
    for (doc, t), tok in g.groupby(["doc", "t"], sort=True):
        hit = tok[tok["recovered"] >= share]["k"]
        out.append({"doc": doc, "t": t, "sparsity": str(int(hit.min())) if len(hit) else f">{kmax}"})
    return pd.DataFrame(out)


"""Hyperparameter tables (the analogue of the paper's Tables 1-4), one per experiment,
generated from the configuration actually run (the validated config, defaults filled in).

Each value is tagged ``[paper]`` when it equals what the paper states (``PAPER`` below, the
only place these tags live, each citing docs/reconstruction.md) and ``[ours]`` otherwise: our
reconstruction or a compute-sized choice. The keys the paper states a value for come first,
the paper's value beside this run's, with the section of docs/reconstruction.md that quotes it.
"""

from __future__ import annotations

import fnmatch
import json

import numpy as np
import pandas as pd

from sparselen.runtime import io
from sparselen.runtime.provenance import config_hash

EXPERIMENTS = ("parity", "ppc", "language", "theory")


def _span(v):
    return [min(v), max(v)] if isinstance(v, list) and v else v


# Config key pattern -> (what the paper states, where docs/reconstruction.md says so, view of the config value
# compared with it). Everything not listed here is [ours].
PAPER: dict[str, tuple[object, str, object]] = {
    "*.train.optimizer.lr": (5e-5, "Model", None),
    "*.train.optimizer.weight_decay": (0.1, "Model", None),
    "*.train.optimizer.warmup_steps": (300, "Model", None),
    "*.train.optimizer.schedule": ("linear", "Model", None),
    "parity.scheme": ("pose", "RoPE combined with PoSE", None),
    "parity.K_train": ([4, 6, 8, 10, 12], "Sparse parity", None),
    "parity.train.lengths": ([20, 50], "Sparse parity (2l in [20, 50])", None),
    "parity.eval.k_test": ([4, 6, 8, 10, 12, 14, 16], "Sparse parity", None),
    "parity.eval.lengths": ([20, 500], "Sparse parity (2l in [20, 500]; the grid is ours)", _span),
    "language.corpus.source": ("C4", "Natural language (OLMo models on C4)", None),
    "language.model.architecture": ("olmo", "Natural language (the OLMo codebase)", None),
}


def flatten(tree: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in tree.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict) and v:
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


OURS = "ours"  # the source of a value the paper does not state


def tag(key: str, value) -> tuple[str, object, str]:
    """(tag, the paper's value or None, source: the docs/reconstruction.md section or "ours") of
    one flattened config key."""
    for pattern, (paper, cite, view) in PAPER.items():
        if fnmatch.fnmatchcase(key, pattern):
            seen = view(value) if view else value
            return ("[paper]" if seen == paper else "[ours]"), paper, cite
    return "[ours]", None, OURS


def table(config: dict, experiment: str) -> pd.DataFrame:
    """One experiment's hyperparameters, one row per config key; the keys the paper states a
    value for first."""
    rows = []
    for key, value in flatten(config[experiment], experiment).items():
        t, paper, cite = tag(key, value)
        rows.append({"parameter": key, "paper": "" if paper is None else json.dumps(paper),
                     "value": json.dumps(value), "tag": t, "source": cite})
    t = pd.DataFrame(rows, columns=["parameter", "paper", "value", "tag", "source"])
    return t.iloc[np.argsort(t["paper"].eq("").to_numpy(), kind="stable")].reset_index(drop=True)


def write(config: dict, experiment: str, csv_path, md_path) -> pd.DataFrame:
    t = table(config, experiment)
    io.write_csv(t, csv_path)
    n_paper = int((t["tag"] == "[paper]").sum())
    shown = t[["parameter", "paper", "value", "source"]].rename(columns={"value": "this run"})
    md = [f"# Hyperparameters: {experiment}", "",
          f"From the configuration actually run (config hash {config_hash(config[experiment])}). "
          f"{n_paper} of {len(t)} values are the paper's; the rest are our reconstruction or a compute-sized "
          "choice (source: ours). Source: the section of docs/reconstruction.md that quotes the paper's value.", "",
          shown.to_markdown(index=False), ""]
    io.write_text(md_path, "\n".join(md))
    return t

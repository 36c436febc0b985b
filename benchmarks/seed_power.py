"""Seed power: how often each claim tested over training seeds reaches a decisive verdict
(holds or fails) with n seeds, and how often that verdict agrees with the one on all seeds.

Runs of one or more results directories are pooled (e.g. the default run and its
``seed_offset: 10`` rerun); for every n from 2 to the pooled seed count, ``--draws`` random
subsets of n seeds are checked with the report's own claims code. This is what the seed counts
of config.yaml were chosen from: the smallest n whose decisive share is high within the
default's time budget.

    python benchmarks/seed_power.py results other/results --configfile config.yaml --draws 20
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from sparselen import config
from sparselen import verdicts as v
from sparselen.report import claims as cl
from sparselen.tables import read_tables

EVALS = {"parity": "parity/K*/seed*/eval.csv", "ppc": "ppc/*/*/seed*/eval.csv",
         "theory": "theory/*/*/k*/seed*/eval.csv"}


def in_config(name: str, t: pd.DataFrame, cfg: dict) -> pd.DataFrame:
    """The rows of runs the config trains (any seed): a results directory may also hold runs of
    another configuration."""
    c = cfg[name]
    if name == "parity":
        return t[t["K_train"].isin(c["K_train"])]
    if name == "ppc":
        return t[t["task"].isin(c["tasks"]) & t["scheme"].isin(c["schemes"])]
    k = t["model"].map({"sfa": c["k"], "gpt": c["gpt"]["k"]})
    keep = np.array([kk in ks for kk, ks in zip(t["k"], k)], dtype=bool)
    return t[keep & t["distribution"].isin(c["distributions"])]


def pooled(dirs: list[Path], cfg: dict) -> dict[str, pd.DataFrame]:
    """Every slice's per-run evaluation rows from ``dirs`` for the runs ``cfg`` names; a seed
    seen twice is read once."""
    out = {}
    for name, pattern in EVALS.items():
        paths = {p.relative_to(d): p for d in dirs for p in sorted(d.glob(pattern))}
        if paths and name in cfg:
            out[name] = in_config(name, read_tables(sorted(paths.values())), cfg)
    return out


def settings(cfg: dict, name: str, n_boot: int) -> v.Settings:
    r = cfg["report"]
    return v.Settings(n_boot=n_boot, seed=r["seed"], level=r["level"], facts=cl.slice_claims(name).facts(cfg[name]))


def power(claim: v.Claim, table: pd.DataFrame, s: v.Settings, draws: int) -> pd.DataFrame:
    seeds = v.units_of(table, "seed")
    full = v.combine(claim.test({"evals": table}, s)).verdict
    rng = s.rng("power", claim.id)
    rows = []
    for n in range(2, len(seeds) + 1):
        picks = [rng.choice(seeds, n, replace=False) for _ in range(draws if n < len(seeds) else 1)]
        verdicts = [v.combine(claim.test({"evals": table[table["seed"].isin(p)]}, s)).verdict for p in picks]
        decisive = [x for x in verdicts if x in (v.HOLDS, v.FAILS)]
        rows.append({"claim": claim.id, "seeds": n, "draws": len(picks), "all_seeds": full,
                     "decisive": len(decisive) / len(picks),
                     "agrees": float(np.mean([x == full for x in decisive])) if decisive else np.nan})
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", type=Path, help="results directories to pool")
    ap.add_argument("--configfile", nargs="+", default=["config.yaml"])
    ap.add_argument("--draws", type=int, default=20, help="random seed subsets per n")
    ap.add_argument("--bootstrap", type=int, default=200, help="bootstrap replicates per check")
    a = ap.parse_args()
    cfg = config.load(a.configfile)
    data = pooled(a.results, cfg)
    parts = [power(c, data[c.slice], settings(cfg, c.slice, a.bootstrap), a.draws) for c in cl.CLAIMS
             if c.unit == "seed" and c.slice in data]
    table = pd.concat(parts, ignore_index=True)
    for name, t in data.items():
        print(f"{name}: seeds {sorted(t['seed'].unique().tolist())}")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.2f}"))


if __name__ == "__main__":
    main()

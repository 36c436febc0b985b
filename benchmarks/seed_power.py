"""Seed power: with n training seeds, how often each claim tested over seeds reaches a decisive
and stable verdict, and whether it agrees with the verdict on every seed available.

Runs of one or more results directories are pooled (e.g. the default run and its
``seed_offset: 10`` rerun, or pilot runs of more seeds); for every n from 2 to the pooled seed
count, ``--draws`` random sets of n seeds are checked with the claims' own code, stability
included (as the report computes it). This is what the seed counts of the shipped
configs are chosen from (configs/README.md, "Seed power"): the smallest n whose decisive share
is high within the config's time budget.

    python benchmarks/seed_power.py results other/results --configfile config.yaml --draws 20
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from sparselen.interface import config
from sparselen.ppc.runs import all_schemes
from sparselen.presentation.tables import read_tables
from sparselen.report import claims as cl
from sparselen.statistics import verdicts as v

EVALS = {"parity": "parity/K*/seed*/eval.csv", "ppc": "ppc/*/*/seed*/eval.csv",
         "theory": "theory/*/*/k*/seed*/eval.csv"}


def in_config(name: str, t: pd.DataFrame, cfg: dict) -> pd.DataFrame:
    """The rows of runs the config trains (any seed): a results directory may also hold runs of
    another configuration."""
    c = cfg[name]
    if name == "parity":
        return t[t["K_train"].isin(c["K_train"])]
    if name == "ppc":
        return t[t["task"].isin(c["tasks"]) & t["scheme"].isin(all_schemes(c))]
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


def verdict(claim: v.Claim, table: pd.DataFrame, s: v.Settings) -> str:
    """The report's verdict on these runs: decided, then unstable when it changes too often."""
    data = {"evals": table}
    d = v.combine(claim.test(data, s)).verdict
    return v.INCONCLUSIVE if v.stability(claim, data, s, d).reason(d) else d


def power(claim: v.Claim, table: pd.DataFrame, s: v.Settings, draws: int) -> pd.DataFrame:
    seeds = sorted(table["seed"].unique())
    full = verdict(claim, table, s)
    rng = s.rng("power", claim.id)
    rows = []
    for n in range(2, len(seeds) + 1):
        picks = [rng.choice(seeds, n, replace=False) for _ in range(draws if n < len(seeds) else 1)]
        got = [verdict(claim, table[table["seed"].isin(p)], s) for p in picks]
        decisive = [x for x in got if x in (v.HOLDS, v.FAILS)]
        rows.append({"claim": claim.id, "seeds": n, "draws": len(picks), "all_seeds": full,
                     "decisive_and_stable": len(decisive) / len(picks),
                     "agrees": float(np.mean([x == full for x in decisive])) if decisive else np.nan})
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", type=Path, help="results directories to pool")
    ap.add_argument("--configfile", nargs="+", default=["config.yaml"])
    ap.add_argument("--draws", type=int, default=20, help="random seed sets per n")
    ap.add_argument("--claims", nargs="*", help="claim ids (default: every claim tested over seeds)")
    a = ap.parse_args()
    cfg = config.load(a.configfile)
    data = pooled(a.results, cfg)
    r = cfg["report"]
    parts = [power(c, data[c.slice], v.Settings(seed=r["seed"], facts=cl.slice_claims(c.slice).facts(cfg[c.slice])),
                   a.draws)
             for c in cl.CLAIMS if c.unit == "seed" and c.slice in data and (not a.claims or c.id in a.claims)]
    for name, t in data.items():
        print(f"{name}: seeds {sorted(t['seed'].unique().tolist())}")
    print(pd.concat(parts, ignore_index=True).to_markdown(index=False, floatfmt=".2f"))


if __name__ == "__main__":
    main()

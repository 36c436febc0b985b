"""The theory slice's claims (T1, T2): criteria, constants and gates, tested on the per-run
evaluation tables of the idealized model and the GPT (docs/reconstruction.md, "Claims")."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparselen.stats import resample_accuracy
from sparselen.verdicts import FIT, MIN_FITTED_RUNS, Claim, Result, Settings, gate_result, interval_result

READS = ("evals",)  # the per-run tables the tests read (RUN_TABLES["theory"] in the rules)

# Criteria, fixed before the results (docs/reconstruction.md, "Claims").
BOUND_SLOPE = 2.0  # T2: (Lbar/L)^2


def facts(section: dict) -> dict:
    """What the tests need of the config run (``theory``): the floor of log losses."""
    return {"floor": section["floor"]}


def theory_fit(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (model, distribution, k, seed): whether the run fits at Lbar = L."""
    at_L = runs[runs["ratio"] == 1]
    return (1 - at_L.groupby(["model", "distribution", "k", "seed"])["error"].mean()).ge(FIT).rename("fit").reset_index()


def _theory_fitted(g: pd.DataFrame, fit: pd.DataFrame, dist: str) -> tuple[pd.DataFrame, int, int]:
    f = fit[(fit["distribution"] == dist) & fit["model"].isin(g["model"].unique()) & fit["k"].isin(g["k"].unique())]
    keep = f[f["fit"]][["model", "distribution", "k", "seed"]]
    return g[g["distribution"] == dist].merge(keep), int(f["fit"].sum()), len(f)


def _theory_gate(name: str, dist: str, n_fit: int, n_all: int) -> Result:
    """Too few fitted runs: either too few seeds, or runs that did not learn at Lbar = L."""
    if n_all < MIN_FITTED_RUNS:
        return gate_result(name, f"{n_all} {dist} run{'s' * (n_all != 1)} (a verdict needs {MIN_FITTED_RUNS} fitted)",
                           "more training seeds (theory.seeds)")
    return gate_result(name, f"the {dist} runs did not fit at Lbar = L ({n_fit} of {n_all})",
                       "train the theory model longer (theory.gpt.train, theory.sfa)")


def theory_coupling(data: dict, s: Settings) -> list[Result]:
    """T1: for k >= 2, at the largest Lbar/L, accuracy on the coupled law minus the non-local law."""
    runs = data["evals"]
    fit, out = theory_fit(runs), []
    runs = runs.assign(correct=((1 - runs["error"]) * runs["n"]).round())
    for (model, k), g in runs.groupby(["model", "k"], sort=True):
        name = f"{model} k={k}"
        if k < 2:
            continue  # the three laws coincide at k = 1
        rows = {}
        for dist in ("coupled", "nonlocal"):
            r, n_fit, n_all = _theory_fitted(g, fit, dist)
            rows[dist] = r
            if n_fit < MIN_FITTED_RUNS:
                out.append(_theory_gate(name, dist, n_fit, n_all))
                break
        else:
            both = pd.concat(rows.values())
            both = both[both["ratio"] == both["ratio"].max()]
            cells, point, boot = resample_accuracy(both, ["distribution"], s, "T1", name)
            i, j = list(cells).index("coupled"), list(cells).index("nonlocal")
            lo, hi = s.interval(boot[i] - boot[j])
            out.append(interval_result(name, point[i] - point[j], lo, hi, 0.0,
                                       note=f"Lbar/L = {both['ratio'].max()}: coupled - nonlocal"))
    return out or [gate_result("-", "no theory run with k >= 2", "theory.k or theory.gpt.k with values >= 2")]


def loss_slopes(losses: np.ndarray, ratios: np.ndarray, floor: float) -> np.ndarray:
    """Least-squares slope of log(log loss) on log(Lbar/L) for each row of ``losses``
    [..., ratios] (losses floored at ``floor``)."""
    x = np.log(ratios) - np.log(ratios).mean()
    y = np.log(np.maximum(losses, floor))
    return (y * x).sum(-1) / (x**2).sum()


def theory_local(data: dict, s: Settings) -> list[Result]:
    """T2: on the local law, the error grows no faster than (Lbar/L)^2 (slope <= 2)."""
    runs = data["evals"]
    fit, out = theory_fit(runs), []
    for (model, k), g in runs.groupby(["model", "k"], sort=True):
        name = f"{model} k={k}"
        rows, n_fit, n_all = _theory_fitted(g, fit, "local")
        if n_all == 0:
            continue
        if n_fit < MIN_FITTED_RUNS:
            out.append(_theory_gate(name, "local", n_fit, n_all))
            continue
        per_seed = rows.pivot_table(index="seed", columns="ratio", values="log_loss", aggfunc="mean")
        ratios, L = per_seed.columns.to_numpy(float), per_seed.to_numpy(float)
        draws = s.rng("T2", name).integers(0, len(L), size=(s.n_boot, len(L)))
        lo, hi = s.interval(loss_slopes(L[draws].mean(1), ratios, s.facts["floor"]))
        out.append(interval_result(name, float(loss_slopes(L.mean(0), ratios, s.facts["floor"])), lo, hi, BOUND_SLOPE,
                                   above=False, note=f"slope of log(log loss) on log(Lbar/L), {n_fit} fitted runs"))
    return out or [gate_result("-", "no run on the local law", "add local to theory.distributions")]


CLAIMS = (
    Claim("T1", "theory", "Coupling removes the locality requirement of the length-generalization bound.",
          "a task-specific position ID re-assignment, Position Coupling, can resolve the issue",
          "For every (model, k >= 2) with fitted runs, at the largest Lbar/L: accuracy on the coupled law minus the "
          "non-local law, interval's low end > 0.",
          theory_coupling, "theory"),
    Claim("T2", "theory", "Local sparse planted correlations generalize with error growing at most like (Lbar/L)^2.",
          "we can decrease our overall error bound from O(eta_L eta_Lbar L Lbar^2 delta) to O((Lbar/L)^2 delta)",
          f"For every (model, k) on the local law with fitted runs: the slope of log(log loss) on log(Lbar/L) has an "
          f"interval whose upper end <= {BOUND_SLOPE}.",
          theory_local, "theory"),
)

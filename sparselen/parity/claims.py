"""The sparse parity slice's claims (P1-P3): criteria, constants and gates, tested on the per-run
evaluation tables (docs/reconstruction.md, "Claims")."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparselen.stats import resample_accuracy, spearman
from sparselen.verdicts import FIT, MIN_FITTED_RUNS, Claim, Result, Settings, gate_result, interval_result

READS = ("evals",)  # the per-run tables the tests read (RUN_TABLES["parity"] in the rules)

# Criteria, fixed before the results (docs/reconstruction.md, "Claims").
CHANCE = 0.5  # sparse parity is a balanced binary label
MIN_RANK_CELLS = 3  # a rank over fewer cells has no power
RETAINED = 0.5  # P2: share of the in-distribution margin above chance kept at the longest length


def facts(section: dict) -> dict:
    """What the tests need of the config run (``parity``): the training lengths."""
    return {"train_lengths": tuple(section["train"]["lengths"])}


def parity_fit(runs: pd.DataFrame, s: Settings) -> pd.DataFrame:
    """Per (K_train, seed, k_test): whether the run fits that cell (accuracy >= FIT at every
    evaluated training length)."""
    lo, hi = s.facts["train_lengths"]
    inside = runs[runs["length"].between(lo, hi)]
    fit = inside.groupby(["K_train", "seed", "k_test"])["accuracy"].min().ge(FIT)
    return fit.rename("fit").reset_index()


def _fitted_cells(g: pd.DataFrame, fit: pd.DataFrame, K: int) -> tuple[pd.DataFrame, list[int], str]:
    """Rows of fitted runs for the cells k_test <= K that have at least MIN_FITTED_RUNS of them;
    the fitted k_test; and a note of the runs left out."""
    f = fit[(fit["K_train"] == K) & (fit["k_test"] <= K)]
    counts = f.groupby("k_test")["fit"].agg(["sum", "size"])
    ks = [int(k) for k, c in counts.iterrows() if c["sum"] >= MIN_FITTED_RUNS]
    left_out = [f"k_test={k}: {int(c['sum'])} of {int(c['size'])} seeds fit" for k, c in counts.iterrows()
                if c["sum"] < c["size"]]
    keep = f[f["fit"] & f["k_test"].isin(ks)][["seed", "k_test"]]
    return g.merge(keep, on=["seed", "k_test"]), ks, "; ".join(left_out)


def _parity_groups(runs: pd.DataFrame, s: Settings):
    fit = parity_fit(runs, s)
    for K, g in runs.groupby("K_train", sort=True):
        rows, ks, note = _fitted_cells(g, fit, int(K))
        yield f"K_train={K}", int(K), rows, ks, note


NOT_LEARNED = "train longer or a larger model until every k_test <= K_train fits (configs/paper.yaml: the paper's sizes)"


def _margins(rows: pd.DataFrame, s: Settings, *key) -> tuple:
    """Per fitted k_test: (k values, acc at the longest length [point, boot], acc on the
    training lengths [point, boot])."""
    lo, hi = s.facts["train_lengths"]
    longest = rows["length"].max()
    where = np.where(rows["length"].between(lo, hi), "in", np.where(rows["length"] == longest, "long", ""))
    sel = rows.assign(where=where)
    sel = sel[sel["where"] != ""]
    cells, point, boot = resample_accuracy(sel, ["k_test", "where"], s, *key)
    frame = pd.DataFrame(np.column_stack([point, boot]), index=cells)
    long_ = frame.xs("long", level="where")
    in_ = frame.xs("in", level="where").loc[long_.index]
    return long_.index.to_numpy(float), long_.to_numpy(), in_.to_numpy(), longest


def _too_few_to_rank(name: str, ks: list[int], note: str) -> Result:
    return gate_result(name, f"{len(ks)} fitted k_test <= K_train (a rank needs {MIN_RANK_CELLS})"
                       + (f"; {note}" if note else ""), f"K_train >= {MIN_RANK_CELLS} with every k_test <= K_train "
                       "learned (configs/paper.yaml: K_train 4 to 12)")


def parity_rank(data: dict, s: Settings) -> list[Result]:
    """P1: accuracy at the longest length falls with k_test, over the fitted k_test <= K_train."""
    out = []
    for name, K, rows, ks, note in _parity_groups(data["evals"], s):
        if len(ks) < MIN_RANK_CELLS:
            out.append(_too_few_to_rank(name, ks, note))
            continue
        k, long_, _, longest = _margins(rows, s, "P1", K)
        rho = spearman(k, long_[:, 0])
        lo, hi = s.interval(spearman(k, long_[:, 1:]))
        out.append(interval_result(name, rho, lo, hi, 0.0, above=False,
                                   note=f"length {longest}, k_test {ks}" + (f"; left out: {note}" if note else "")))
    return out


def parity_retained(data: dict, s: Settings) -> list[Result]:
    """P2: at k_test = K_train, the share of the in-distribution margin above chance kept at the
    longest length exceeds RETAINED."""
    out = []
    for name, K, rows, ks, note in _parity_groups(data["evals"], s):
        if K not in ks:
            out.append(gate_result(name, f"k_test = K_train = {K} not learned in distribution ({note})", NOT_LEARNED))
            continue
        k, long_, in_, longest = _margins(rows[rows["k_test"] == K], s, "P2", K)
        with np.errstate(invalid="ignore", divide="ignore"):
            kept = (long_[0] - CHANCE) / (in_[0] - CHANCE)
        lo, hi = s.interval(kept[1:])
        out.append(interval_result(name, kept[0], lo, hi, RETAINED, note=f"k_test={K}, length {longest}"))
    return out


def parity_denser_falls_faster(data: dict, s: Settings) -> list[Result]:
    """P3: the normalised drop 1 - (acc - 0.5) / (acc_in - 0.5) grows with k_test."""
    out = []
    for name, K, rows, ks, note in _parity_groups(data["evals"], s):
        if len(ks) < MIN_RANK_CELLS:
            out.append(_too_few_to_rank(name, ks, note))
            continue
        k, long_, in_, longest = _margins(rows, s, "P3", K)
        with np.errstate(invalid="ignore", divide="ignore"):
            drop = 1 - (long_ - CHANCE) / (in_ - CHANCE)
        rho = spearman(k, drop[:, 0])
        lo, hi = s.interval(spearman(k, drop[:, 1:]))
        out.append(interval_result(name, rho, lo, hi, 0.0, note=f"training lengths to {longest}, k_test {ks}"))
    return out


CLAIMS = (
    Claim("P1", "parity", "Sparser tasks length-generalize better.",
          "length generalization occurs as long as each predicted token depends on a small (fixed) number of "
          "previous tokens",
          f"For every K_train, over the fitted k_test <= K_train (at least {MIN_RANK_CELLS}), at the longest "
          "evaluated length: Spearman's rho of accuracy against k_test < 0 (interval's upper end < 0).",
          parity_rank, "parity"),
    Claim("P2", "parity", "A trained sparsity generalizes to samples ten times longer.",
          "length generalization occurs as long as each predicted token depends on a small (fixed) number of "
          "previous tokens",
          f"For every K_train, at k_test = K_train and the longest evaluated length: (acc - 0.5) / (acc_in - 0.5), "
          f"acc_in on the training lengths, has an interval whose low end > {RETAINED}.",
          parity_retained, "parity"),
    Claim("P3", "parity", "Accuracy falls faster with length the larger k is.",
          "a key factor driving length generalization is a 'sparse' dependency structure of each token on the "
          "previous ones",
          f"For every K_train, over at least {MIN_RANK_CELLS} fitted k_test <= K_train: Spearman's rho of the "
          "normalised drop 1 - (acc - 0.5) / (acc_in - 0.5) against k_test > 0 (interval's low end > 0).",
          parity_denser_falls_faster, "parity"),
)

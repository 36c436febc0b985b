"""The sparse parity slice's claims (P1-P3): criteria, constants and gates, tested on the per-run
evaluation tables (docs/reconstruction.md, "Claims").

Each test works per K_train (a group) on the runs that fit each k_test <= K_train on the
training lengths, computes one value per training seed and decides on the interval by betting
of those values (``sparselen.statistics.betting``: valid for any distribution of the seeds' values
in their range), widened to their evaluation noise: P2's
retained margins propagate their cells' binomial noise through the ratio, P1's and P3's ranks
through redraws of their cells' accuracies (``rank_noise``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparselen.statistics import betting, power
from sparselen.statistics.stats import CORRELATION, binomial_noise, ratio_noise, shrunk_accuracy, spearman
from sparselen.statistics.verdicts import FIT, MIN_FITTED_RUNS, Claim, Result, Settings, gate_result, interval_result

READS = ("evals",)  # the per-run tables the tests read (RUN_TABLES["parity"] in the rules)

# Criteria (docs/reconstruction.md, "Claims").
CHANCE = 0.5  # sparse parity is a balanced binary label
MIN_RANK_CELLS = 3  # a rank over fewer cells has no power
RANK_NOISE_DRAWS = 200  # redraws of a seed's cells that measure its rho's evaluation noise
RETAINED = 0.5  # P2: more than half of the in-distribution margin above chance kept at the longest length

NOT_LEARNED = "train longer or a larger model until every k_test <= K_train fits (configs/paper.yaml: the paper's sizes)"
RANKABLE = f"K_train >= {MIN_RANK_CELLS} with every k_test <= K_train learned (configs/paper.yaml: K_train 4 to 12)"


def facts(section: dict) -> dict:
    """What the tests need of the config run (``parity``): the training lengths."""
    return {"train_lengths": tuple(section["train"]["lengths"])}


def accuracies(runs: pd.DataFrame, s: Settings) -> pd.DataFrame:
    """Per (K_train, seed, k_test): accuracy on the training lengths (``in``, pooled, measured
    on ``n_in`` samples), whether the run fits the cell (accuracy >= FIT at every evaluated
    training length), and its accuracy at every length (columns = lengths; the samples of each,
    columns ``("n", length)``)."""
    lo, hi = s.facts["train_lengths"]
    key = ["K_train", "seed", "k_test"]
    inside = runs[runs["length"].between(lo, hi)].groupby(key)
    cells = pd.DataFrame({"fit": inside["accuracy"].min().ge(FIT),
                          "in": inside["correct"].sum() / inside["n"].sum(), "n_in": inside["n"].sum()})
    by_length = runs.pivot_table(index=key, columns="length", values="accuracy", aggfunc="first")
    samples = runs.pivot_table(index=key, columns="length", values="n", aggfunc="first")
    samples.columns = [("n", length) for length in samples.columns]
    return cells.join(by_length, how="inner").join(samples)


def _groups(runs: pd.DataFrame, s: Settings):
    """Per K_train: (group name, K, per-run cells k_test <= K that the run fits, among the k_test
    fitted by at least MIN_FITTED_RUNS runs; a note of the runs left out)."""
    acc = accuracies(runs, s).reset_index()
    for K, g in acc[acc["k_test"] <= acc["K_train"]].groupby("K_train", sort=True):
        counts = g.groupby("k_test")["fit"].agg(["sum", "size"])
        ks = [int(k) for k, c in counts.iterrows() if c["sum"] >= MIN_FITTED_RUNS]
        left_out = "; ".join(f"k_test={k}: {int(c['sum'])} of {int(c['size'])} seeds fit"
                             for k, c in counts.iterrows() if c["sum"] < c["size"])
        yield f"K_train={K}", int(K), g[g["fit"] & g["k_test"].isin(ks)], ks, left_out


def _longest(cells: pd.DataFrame) -> int:
    return max(c for c in cells.columns if isinstance(c, (int, np.integer)))


def redrawn(cells: pd.DataFrame, draws: int, rng: np.random.Generator) -> dict:
    """A seed's cells with every accuracy redrawn ``draws`` times from the binomial law of its
    samples: column -> [cells, draws], each draw's p shrunk as ``binomial_noise`` shrinks it, so
    that a cell at 0 or 1 still varies as its n samples allow."""
    out = {}
    for column, n_column in [("in", "n_in"), *((c, ("n", c)) for c in cells.columns
                                               if isinstance(c, (int, np.integer)))]:
        n = cells[n_column].to_numpy(float)[:, None]
        p = shrunk_accuracy(cells[column].to_numpy(float)[:, None], n)
        out[column] = rng.binomial(n.astype(int), p, size=(len(cells), draws)) / n
    return out


def rank_noise(k_test: np.ndarray, value, cells: pd.DataFrame, draws: int, rng: np.random.Generator) -> float:
    """Evaluation-noise variance of a seed's rho: the variance of Spearman's rho of ``value``
    against k_test over redraws of the cells' accuracies (``redrawn``)."""
    rhos = spearman(k_test, np.asarray(value(redrawn(cells, draws, rng)), dtype=float))
    return float(np.nanvar(rhos, ddof=1))


def _per_seed_rank(cells: pd.DataFrame, value, name: str, ks: list, note: str, above: bool, what: str,
                   s: Settings) -> Result:
    """Spearman's rho of ``value(seed's cells)`` against k_test, one per seed with at least
    MIN_RANK_CELLS fitted cells; decided on the interval by betting of the seeds' rhos against 0 (the
    claim's side: ``above`` it or below), floored at the rhos' evaluation noise (``rank_noise``)."""
    seeds = {seed: c for seed, c in cells.groupby("seed") if len(c) >= MIN_RANK_CELLS}
    left = f"; left out: {note}" if note else ""
    if len(ks) < MIN_RANK_CELLS or len(seeds) < MIN_FITTED_RUNS:
        return gate_result(name, f"{len(ks)} fitted k_test <= K_train {ks}, {len(seeds)} seeds with "
                           f"{MIN_RANK_CELLS} fitted cells (a rank needs {MIN_RANK_CELLS} cells, a verdict "
                           f"{MIN_FITTED_RUNS} seeds){left}", RANKABLE)
    rhos, noise = [], []
    for seed, c in seeds.items():
        k_test = c["k_test"].to_numpy(float)
        rhos.append(spearman(k_test, np.asarray(value(c), dtype=float)))
        noise.append(rank_noise(k_test, value, c, RANK_NOISE_DRAWS, s.rng("rank noise", name, what, seed)))
    mean, lo, hi = betting.interval(rhos, CORRELATION, noise=noise)
    return interval_result(name, mean, lo, hi, 0.0, above=above,
                           note=f"{what}, k_test {ks}, mean of {len(rhos)} seeds' rho{left}")


def retained_margin(acc, acc_in):
    """The share of the in-distribution margin above chance kept: 1 = no loss, 0 = at chance."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (acc - CHANCE) / (acc_in - CHANCE)


def retained_noise(cells: pd.DataFrame, length: int) -> np.ndarray:
    """Evaluation-noise variance of each cell's retained margin at ``length``."""
    return ratio_noise(cells[length] - CHANCE, cells["in"] - CHANCE,
                       binomial_noise(cells[length], cells[("n", length)]), binomial_noise(cells["in"], cells["n_in"]))


def parity_rank(data: dict, s: Settings) -> list[Result]:
    """P1: the margin above chance a cell keeps at the longest length (``retained_margin``) falls
    with k_test, over the fitted k_test <= K_train. Kept margin, not raw accuracy: a denser k_test
    is also harder on the training lengths, and a rank of raw accuracy would credit that
    in-distribution difficulty as length generalization even where no cell loses anything with
    length."""
    out = []
    for name, K, cells, ks, note in _groups(data["evals"], s):
        longest = _longest(cells)
        out.append(_per_seed_rank(cells, lambda c: retained_margin(c[longest], c["in"]), name, ks, note, False,
                                  f"margin kept at length {longest}", s))
    return out


def parity_retained(data: dict, s: Settings) -> list[Result]:
    """P2: at k_test = K_train, more than RETAINED of the in-distribution margin above chance is
    kept at the longest length."""
    out = []
    for name, K, cells, ks, note in _groups(data["evals"], s):
        if K not in ks:
            out.append(gate_result(name, f"k_test = K_train = {K} not learned in distribution ({note})", NOT_LEARNED))
            continue
        longest, at_k = _longest(cells), cells[cells["k_test"] == K]
        kept = retained_margin(at_k[longest], at_k["in"])
        mean, lo, hi = betting.interval(kept, betting.kept_range(CHANCE, FIT), noise=retained_noise(at_k, longest))
        out.append(interval_result(name, mean, lo, hi, RETAINED,
                                   note=f"k_test={K}, length {longest}, mean of {len(kept)} seeds"))
    return out


def fall_lengths(cells: pd.DataFrame, train_max: int) -> list:
    """The evaluated lengths P3 reads: beyond training and short of the longest, which P1 ranks
    (P1 and P3 read the same runs; on different lengths they are not the same statistic twice)."""
    longest = _longest(cells)
    return [c for c in cells.columns if isinstance(c, (int, np.integer)) and train_max < c < longest]


def fall_rate(cells, train_max: int, lengths: list):
    """How fast a cell's accuracy falls with length: the mean, over ``lengths``, of the retained
    margin lost per doubling from the longest training length, (1 - retained(L)) / log2(L / train_max).
    ``cells``: the cells' table, or their redrawn accuracies (``redrawn``)."""
    return sum((1 - retained_margin(cells[L], cells["in"])) / np.log2(L / train_max) for L in lengths) / len(lengths)


def parity_denser_falls_faster(data: dict, s: Settings) -> list[Result]:
    """P3: accuracy falls faster with length the larger k_test (``fall_rate`` rises with k_test),
    on the lengths P1 does not read."""
    out = []
    train_max = s.facts["train_lengths"][1]
    for name, K, cells, ks, note in _groups(data["evals"], s):
        lengths = fall_lengths(cells, train_max)
        if not lengths:
            out.append(gate_result(name, f"no evaluated length between the training lengths and the longest "
                                   f"({_longest(cells)}, P1's)", "evaluate lengths between (parity.eval.lengths)"))
            continue
        out.append(_per_seed_rank(cells, lambda c: fall_rate(c, train_max, lengths), name, ks, note, True,
                                  f"fall rate from length {train_max} over lengths {lengths[0]}-{lengths[-1]} "
                                  "(P1's runs, not its length)", s))
    return out


def _groups_of(claim: str, section: dict) -> int:
    """The K_train groups ``claim`` is tested on: those with MIN_RANK_CELLS evaluated k_test <=
    K_train (P1, P3), those evaluated at k_test = K_train (P2)."""
    ks = section["eval"]["k_test"]
    if claim == "P2":
        return len(set(section["K_train"]) & set(ks))
    return sum(sum(k <= K for k in ks) >= MIN_RANK_CELLS for K in section["K_train"])


def _power(claim: str):
    return lambda section: power.claim_power(claim, len(section["seeds"]), _groups_of(claim, section),
                                             section["eval"]["n"])


def _powered(claim: str, section: dict) -> str:
    """"" when the config's seeds per K_train give ``claim`` its power at the measured spread."""
    return power.design(claim, len(section["seeds"]), _groups_of(claim, section), section["eval"]["n"], "K_train")


def _rankable(section: dict, claim: str = "P1") -> str:
    if not _groups_of(claim, section):
        return f"no K_train with {MIN_RANK_CELLS} evaluated k_test <= K_train"
    return _powered(claim, section)


def _falls(section: dict) -> str:
    lengths, train_max = section["eval"]["lengths"], section["train"]["lengths"][1]
    if not any(train_max < L < max(lengths) for L in lengths):
        return "no evaluated length between the training lengths and the longest (P1's)"
    return _rankable(section, "P3")


def _retainable(section: dict) -> str:
    if not _groups_of("P2", section):
        return "no K_train is an evaluated k_test"
    return _powered("P2", section)


CLAIMS = (
    Claim("P1", "parity", "Sparser tasks length-generalize better.",
          "length generalization occurs as long as each predicted token depends on a small (fixed) number of "
          "previous tokens",
          f"For every K_train with {MIN_RANK_CELLS} fitted k_test <= K_train: per seed, Spearman's rho against "
          "k_test of each cell's retained margin at the longest evaluated length, (acc - 0.5) / (acc_in - 0.5) with "
          "acc_in on the training lengths (what a cell keeps of the margin it learned, so that a k_test harder in "
          "distribution only does not rank lower); the interval by betting of the seeds' rhos (range [-1, 1]) has its "
          "upper end < 0.",
          parity_rank, "parity", _rankable, power=_power("P1"), stability_rule=False),
    Claim("P2", "parity", "A trained sparsity generalizes to samples ten times longer.",
          "l is sampled uniformly subject to the length of the sample satisfying 2l in [20, 50] ... We then "
          "evaluate the performance of each of the trained transformers h_K_train on samples drawn from "
          "D_{l,k_test} of length 2l in [20, 500]",
          f"For every K_train, at k_test = K_train and the longest evaluated length: the retained margin "
          f"(acc - 0.5) / (acc_in - 0.5) per seed, acc_in on the training lengths; the interval by betting of the "
          f"seeds' values (range a fitted run's, [-1.25, 1.25]) has its low end > {RETAINED}.",
          parity_retained, "parity", _retainable, power=_power("P2"), stability_rule=False),
    Claim("P3", "parity", "Accuracy falls faster with length the larger k is.",
          "a key factor driving length generalization is a 'sparse' dependency structure of each token on the "
          "previous ones",
          f"For every K_train with {MIN_RANK_CELLS} fitted k_test <= K_train: per seed, Spearman's rho of the fall "
          "rate (the mean over every evaluated length L beyond training and short of the longest, which P1 reads, "
          "of the retained margin lost per doubling of length, (1 - retained(L)) / log2(L / longest training "
          "length)) against k_test; the interval by betting of the seeds' rhos has its low end > 0. P1 and P3 read the same "
          "runs and seeds, on different lengths: they are not independent evidence.",
          parity_denser_falls_faster, "parity", _falls, power=_power("P3"), stability_rule=False),
)

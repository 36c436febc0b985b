"""Every interval and resampling primitive of the pipeline, in one place.

- Across seeds (the unit of replication: the paper's figures show intervals over training
  runs): the Student-t interval of per-seed values (``t_interval``, ``summarize``: the tables'
  intervals, and the claims whose statistic has no range known in advance, T2's exponent and
  L2), Welch's interval of a difference between two sets of runs (``welch_interval``), and
  Spearman's rho of a run's cells (``spearman``). The claims whose statistic has a known range
  decide on bounds by betting instead (``sparselen.statistics.betting``). A run's accuracy is measured on n samples, and every run of
  a cell is measured on the same samples (one evaluation seed for all models), so the claims'
  and the accuracy tables' intervals are at least as wide as the evaluation noise of one
  sample set gives (``binomial_noise``, ``ratio_noise``), which more runs do not average away:
  seeds that agree exactly do not make an interval of zero width.
- Over tokens (the natural-language statistics): plain bootstrap (``bootstrap_ci``) and
  resamples of whole documents (``ClusterBootstrap``, ``cluster_interval``, ``cluster_ci``),
  since tokens of one document are not independent; a difference between two kinds of tokens
  within strata of a third variable (``stratified_difference``) and its null, the labels
  shuffled within the strata (``shuffled_within``).

``Resampling`` carries the bootstrap settings; its generators are keyed by names, so every
statistic draws the same replicates in every process.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Resampling:
    """Bootstrap replicates, their seed and the interval's level."""

    n_boot: int = 2000
    seed: int = 0
    level: float = 0.95

    def rng(self, *key) -> np.random.Generator:
        """A generator per key (claim, group, table): stable across processes (crc32, not hash())."""
        return np.random.default_rng([self.seed, *[zlib.crc32(str(k).encode()) for k in key]])

    def interval(self, boot: np.ndarray) -> tuple[float, float]:
        """Percentile interval of the finite replicates (NaN when there are none)."""
        a = (1 - self.level) / 2
        boot = np.asarray(boot, dtype=float)
        boot = boot[np.isfinite(boot)]
        if boot.size == 0:
            return float("nan"), float("nan")
        return float(np.quantile(boot, a)), float(np.quantile(boot, 1 - a))


# ----------------------------------------------------------------------------- across seeds

# The range of a statistic, for its interval: an interval is cut to it, so that no end is a value
# the statistic cannot take (cutting keeps the interval's coverage).
ACCURACY = (0.0, 1.0)
DIFFERENCE = (-1.0, 1.0)  # of two accuracies
CORRELATION = (-1.0, 1.0)
NONNEGATIVE = (0.0, np.inf)  # e.g. a log loss


def shrunk_accuracy(accuracy, n, level: float = 0.95) -> np.ndarray:
    """Agresti and Coull's estimate of a share measured on ``n`` samples: (x + z^2/2)/(n + z^2),
    x = accuracy * n correct, z the normal quantile of ``level``; never exactly 0 or 1."""
    from scipy.stats import norm  # imported on first use: seconds of start-up per job

    z2 = float(norm.ppf(0.5 + level / 2)) ** 2
    n = np.asarray(n, dtype=float)
    return (np.asarray(accuracy, dtype=float) * n + z2 / 2) / (n + z2)


def binomial_noise(accuracy, n, level: float = 0.95) -> np.ndarray:
    """Variance of accuracies measured on ``n`` samples each, as Agresti and Coull's interval
    takes it: p(1 - p)/(n + z^2) with p the shrunk accuracy (``shrunk_accuracy``). A Wald
    interval with this variance covers about as often as its level even at 0 or 1, where the
    plain p(1 - p)/n is 0: 200 of 200 correct gives [0.987, 1], the exact (Clopper-Pearson)
    interval [0.982, 1]."""
    from scipy.stats import norm

    z2 = float(norm.ppf(0.5 + level / 2)) ** 2
    p = shrunk_accuracy(accuracy, n, level)
    return p * (1 - p) / (np.asarray(n, dtype=float) + z2)


def ratio_noise(num, den, num_noise, den_noise) -> np.ndarray:
    """Variance of num / den for independent measurements with variances ``num_noise`` and
    ``den_noise`` (first-order propagation), e.g. a retained margin above chance."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(num_noise) / den**2 + num**2 * np.asarray(den_noise) / den**4


def _half_width(sets, level: float) -> float:
    """Half-width of the interval of a mean (one set of runs) or of a difference of means (two),
    ``sets``: (values, noise) per set, ``noise`` each run's evaluation-noise variance (None for
    values without one). The larger of two widths: the runs' spread, s^2/n per set, with Student
    t (Welch's degrees of freedom for two sets); and the evaluation noise of the one sample set
    each set's runs share (the mean of their noise), with the normal quantile, since that
    variance is known rather than estimated from the seeds. Every run of a cell is scored on the
    same samples, so that noise is common to its runs and does not shrink with their number."""
    from scipy.stats import norm  # imported on first use: seconds of start-up per job
    from scipy.stats import t as student_t

    spread = [float(v.var(ddof=1)) / len(v) for v, _ in sets]
    shared = sum(float(np.mean(noise)) for _, noise in sets if noise is not None)
    half = float(norm.ppf(0.5 + level / 2) * np.sqrt(shared))
    if sum(spread) > 0:
        df = sum(spread) ** 2 / sum(w**2 / (len(v) - 1) for w, (v, _) in zip(spread, sets))
        half = max(half, float(student_t.ppf(0.5 + level / 2, df) * np.sqrt(sum(spread))))
    return half


def within(point: float, half: float, bounds) -> tuple[float, float, float]:
    """(point, low, high) of ``point`` +- ``half``, cut to the statistic's range ``bounds`` (None:
    unbounded)."""
    lo, hi = point - half, point + half
    if bounds is not None:
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    return point, lo, hi


def t_interval(values, level: float = 0.95, noise=None, bounds=None, shared=None) -> tuple[float, float, float]:
    """(mean, low, high) of ``values``; low/high are NaN for fewer than two values. ``noise``:
    each value's evaluation-noise variance, the floor of the interval (``binomial_noise``,
    ``_half_width``); ``shared``: each value's variance from a term every value shares (``added``);
    ``bounds``: the statistic's range (``ACCURACY``, ...), the interval cut to it."""
    v = np.asarray(values, dtype=float)
    mean = float(v.mean())
    if len(v) < 2:
        return mean, float("nan"), float("nan")
    half = _half_width([(v, noise)], level)
    return within(mean, half if shared is None else added(half, shared, level), bounds)


def added(half: float, shared, level: float = 0.95) -> float:
    """A half-width widened by a term every value shares (e.g. the draw of the one sample set
    every run is scored on), ``shared`` each value's variance from it (their mean is taken: at
    least the variance the term gives the values' mean, however correlated they are). The values'
    spread cannot show a term they all share, so its variance adds to theirs: the two
    half-widths are added in quadrature, each with its quantile (Student's for the spread, which
    the seeds estimate; the normal for the shared term, whose variance is measured apart)."""
    from scipy.stats import norm

    return float(np.hypot(half, norm.ppf(0.5 + level / 2) * np.sqrt(float(np.mean(shared)))))


def welch_interval(a, b, level: float = 0.95, noise_a=None, noise_b=None,
                   bounds=None) -> tuple[float, float, float]:
    """(mean(a) - mean(b), low, high): Welch's t interval of a difference of means of two sets
    of runs with possibly unequal variances, floored at the evaluation noise of their sample
    sets (``noise_a``, ``noise_b``, as ``t_interval``) and cut to ``bounds`` (``DIFFERENCE`` for
    two accuracies); NaN interval if either has fewer than two values, zero width when neither
    varies nor has a noise floor."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    diff = float(a.mean() - b.mean())
    if len(a) < 2 or len(b) < 2:
        return diff, float("nan"), float("nan")
    return within(diff, _half_width([(a, noise_a), (b, noise_b)], level), bounds)


def summarize(df: pd.DataFrame, by: list[str], value: str, seed_col: str = "seed",
              clip: tuple[float, float] | None = ACCURACY, n_col: str | None = None) -> pd.DataFrame:
    """One row per ``by`` group: mean, ci_low, ci_high, n_seeds of ``value`` over seeds, the
    interval cut to ``value``'s range ``clip`` (None: unbounded). ``n_col``: each run's sample
    count, where ``value`` is an accuracy over that many samples; the interval is then floored
    at the binomial noise of one sample set (``binomial_noise``), as the claims' intervals are,
    so seeds that all score 0 or 1 do not read as certain."""
    rows = []
    for key, g in df.groupby(by, sort=True):
        mean, lo, hi = t_interval(g[value], noise=binomial_noise(g[value], g[n_col]) if n_col else None, bounds=clip)
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))),
                     "mean": mean, "ci_low": lo, "ci_high": hi, "n_seeds": g[seed_col].nunique()})
    return pd.DataFrame(rows)


def spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman rho of ``x`` [m] with each column of ``y`` [m] or [m, B]; 0 when y is
    constant, NaN for a column with a NaN."""
    from scipy.stats import rankdata

    y2 = y.reshape(len(y), -1)
    bad = ~np.isfinite(y2).all(0)
    rx = rankdata(x)
    ry = rankdata(np.where(np.isfinite(y2), y2, 0), axis=0)
    rx, ry = rx - rx.mean(), ry - ry.mean(0)
    den = np.sqrt((rx**2).sum() * (ry**2).sum(0))
    rho = np.divide((rx[:, None] * ry).sum(0), den, out=np.zeros(y2.shape[1]), where=den > 0)
    rho[bad] = np.nan
    return rho if y.ndim > 1 else rho[0]


# ----------------------------------------------------------------------------- tokens


def stratified_difference(x, label, strata, w=None) -> np.ndarray:
    """Mean of ``x`` on rows with ``label`` minus on rows without, within each stratum, averaged
    over the strata that have both with weights n1 n0 / (n1 + n0) (the precision of each
    stratum's difference): a comparison the variable that defines the strata cannot confound.
    ``label`` and the row weights ``w`` may carry a leading axis (shuffles, bootstrap
    replicates); NaN where no stratum has both kinds of rows."""
    x, label, strata = np.asarray(x, dtype=float), np.asarray(label, dtype=bool), np.asarray(strata)
    w = np.ones(x.shape) if w is None else np.asarray(w, dtype=float)
    total = weight = 0.0
    for h in np.unique(strata):
        inside = strata == h
        w1, w0 = w * (label & inside), w * (~label & inside)
        n1, n0 = w1.sum(-1), w0.sum(-1)
        ok = (n1 > 0) & (n0 > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            diff = (w1 * x).sum(-1) / n1 - (w0 * x).sum(-1) / n0
            size = n1 * n0 / (n1 + n0)
        total = total + np.where(ok, size * diff, 0.0)
        weight = weight + np.where(ok, size, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / weight


def shuffled_within(label, strata, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` shuffles of ``label`` [rows], each within every stratum: [n, rows]."""
    label, strata = np.asarray(label), np.asarray(strata)
    out = np.tile(label, (n, 1))
    for h in np.unique(strata):
        rows = np.flatnonzero(strata == h)
        out[:, rows] = rng.permuted(out[:, rows], axis=1)
    return out


def bootstrap_ci(values, stat=np.median, n_boot: int = 2000, seed: int = 0,
                 level: float = 0.95) -> tuple[float, float, float]:
    """(stat(values), low, high): percentile interval of ``stat`` over ``n_boot`` resamples
    with replacement; NaN interval for fewer than two values."""
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return float("nan"), float("nan"), float("nan")
    point = float(stat(v))
    if len(v) < 2:
        return point, float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    stats = stat(v[rng.integers(0, len(v), (n_boot, len(v)))], axis=1)
    lo, hi = np.quantile(stats, [(1 - level) / 2, (1 + level) / 2])
    return point, float(lo), float(hi)


class ClusterBootstrap:
    """Resamples of whole clusters (e.g. documents) with replacement, as weights: replicate b
    gives every row the number of times its cluster was drawn. One set of draws serves every
    table whose rows carry the cluster (so statistics of several tables stay paired)."""

    def __init__(self, units, s: Resampling, *key):
        self.units = np.array(sorted(set(units)), dtype=object)
        rng = s.rng(*key)
        draws = rng.integers(0, len(self.units), size=(s.n_boot, len(self.units)))
        self.counts = np.stack([np.bincount(d, minlength=len(self.units)) for d in draws]).astype(float)
        self.s = s

    def weights(self, units) -> np.ndarray:
        """(n_boot, rows) weights of rows belonging to ``units``."""
        index = pd.Index(self.units).get_indexer(np.asarray(units, dtype=object))
        return self.counts[:, index]

    def interval(self, point: float, boot: np.ndarray) -> tuple[float, float, float]:
        if len(self.units) < 2:
            return point, float("nan"), float("nan")
        return (point, *self.s.interval(boot))


def weighted_mean(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return (w * x).sum(-1) / w.sum(-1)


def weighted_median(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Median of ``x`` under each row of weights ``w`` (the lower median on ties)."""
    order = np.argsort(x, kind="stable")
    cum = np.cumsum(w[..., order], axis=-1)
    idx = (cum >= cum[..., -1:] / 2).argmax(-1)
    out = x[order][idx]
    return np.where(cum[..., -1] > 0, out, np.nan)


def cluster_interval(point: float, statistic, clusters, n_boot: int = 2000, seed: int = 0,
                     level: float = 0.95) -> tuple[float, float, float]:
    """(point, low, high): percentile interval of ``statistic(weights)`` (one value per row of
    ``weights``) over resamples of the clusters (``ClusterBootstrap``); NaN interval for fewer
    than two clusters."""
    boot = ClusterBootstrap(clusters, Resampling(n_boot=n_boot, seed=seed, level=level), "language-table")
    return boot.interval(point, statistic(boot.weights(clusters)))


def cluster_ci(values, clusters, stat=weighted_mean, n_boot: int = 2000, seed: int = 0,
               level: float = 0.95) -> tuple[float, float, float]:
    """(stat, low, high) of ``values`` with its cluster-resampled interval (``cluster_interval``)."""
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return float("nan"), float("nan"), float("nan")
    return cluster_interval(float(stat(v, np.ones((1, len(v))))[0]), lambda w: stat(v, w), clusters,
                            n_boot, seed, level)

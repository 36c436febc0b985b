"""Bootstrap intervals over analysed tokens (the unit of the natural-language statistics,
as the reviewers asked for intervals there too), plain or clustered by document."""

from __future__ import annotations

import numpy as np

from sparselen.report.claims import ClusterBootstrap, Settings, weighted_mean, weighted_median  # noqa: F401 (re-exported)


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


def cluster_weights(clusters, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n) weight of each row in each resample of the clusters (documents drawn with
    replacement): the claims' ``ClusterBootstrap``, so tables and claims resample alike."""
    return ClusterBootstrap(clusters, Settings(n_boot=n_boot, seed=seed), "language-table").weights(clusters)


def cluster_ci(values, clusters, stat=weighted_mean, n_boot: int = 2000, seed: int = 0,
               level: float = 0.95) -> tuple[float, float, float]:
    """(stat, low, high): percentile interval of ``stat`` over resamples of the clusters
    (tokens of one document are not independent); NaN interval for fewer than two clusters."""
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return float("nan"), float("nan"), float("nan")
    s = Settings(n_boot=n_boot, seed=seed, level=level)
    boot = ClusterBootstrap(clusters, s, "language-table")
    return boot.interval(float(stat(v, np.ones((1, len(v))))[0]), stat(v, boot.weights(clusters)))

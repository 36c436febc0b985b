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


def cluster_interval(point: float, statistic, clusters, n_boot: int = 2000, seed: int = 0,
                     level: float = 0.95) -> tuple[float, float, float]:
    """(point, low, high): percentile interval of ``statistic(weights)`` (one value per row of
    ``weights``) over resamples of the clusters, i.e. documents drawn with replacement as the
    claims' ``ClusterBootstrap`` draws them (tokens of one document are not independent); NaN
    interval for fewer than two clusters."""
    boot = ClusterBootstrap(clusters, Settings(n_boot=n_boot, seed=seed, level=level), "language-table")
    return boot.interval(point, statistic(boot.weights(clusters)))


def cluster_ci(values, clusters, stat=weighted_mean, n_boot: int = 2000, seed: int = 0,
               level: float = 0.95) -> tuple[float, float, float]:
    """(stat, low, high) of ``values`` with its document-clustered interval (``cluster_interval``)."""
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return float("nan"), float("nan"), float("nan")
    return cluster_interval(float(stat(v, np.ones((1, len(v))))[0]), lambda w: stat(v, w), clusters,
                            n_boot, seed, level)

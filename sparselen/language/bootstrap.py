"""Bootstrap intervals over analysed tokens (the unit of the natural-language statistics,
as the reviewers asked for intervals there too)."""

from __future__ import annotations

import numpy as np


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

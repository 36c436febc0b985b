"""Across-seed summaries: mean and a 95% Student-t interval.

Seeds are the unit of replication (the paper's figures show intervals over training runs),
so the interval is over per-seed accuracies; with one seed there is no interval (NaN).
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def t_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high) of ``values``; low/high are NaN for fewer than two values."""
    from scipy.stats import t as student_t  # imported on first use: seconds of start-up per job

    v = np.asarray(values, dtype=float)
    mean = float(v.mean())
    if len(v) < 2:
        return mean, float("nan"), float("nan")
    half = float(student_t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))
    return mean, mean - half, mean + half


def summarize(df: pd.DataFrame, by: list[str], value: str, seed_col: str = "seed",
              clip: tuple[float, float] | None = (0.0, 1.0)) -> pd.DataFrame:
    """One row per ``by`` group: mean, ci_low, ci_high, n_seeds of ``value`` over seeds."""
    rows = []
    for key, g in df.groupby(by, sort=True):
        mean, lo, hi = t_interval(g[value])
        if clip is not None and not np.isnan(lo):
            lo, hi = max(lo, clip[0]), min(hi, clip[1])
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))),
                     "mean": mean, "ci_low": lo, "ci_high": hi, "n_seeds": g[seed_col].nunique()})
    return pd.DataFrame(rows)

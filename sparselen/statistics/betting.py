"""Confidence bounds for the mean of per-seed values that hold for any distribution of those
values within a known range, by betting (Waudby-Smith and Ramdas, "Estimating means of bounded
random variables by betting", JRSS B 86(1), 2024).

Why: a Student-t interval assumes the seeds' values are roughly normal. Where a share of seeds
fails (bimodal values: most seeds generalize, one in seven collapses to chance), a handful of
seeds often contains no failed one, their spread is small, and the t interval excludes a
threshold the mean sits on: the calibration measured up to 23% false "holds" there at 10 seeds.
A bound by betting needs only the range: it covers at its level whatever the distribution, and
it is valid at every number of seeds at once (a confidence sequence, Ville's inequality), so a
claim may be tested after each round of seeds without spending its error rate.

The test of "mean <= m" bets, seed after seed in seed order, a share lambda_i of its wealth that
the next value exceeds m: wealth K_t(m) = prod_{i <= t} (1 + lambda_i (x_i - m)), a nonnegative
supermartingale when the mean is at most m, so it reaches 1/alpha with probability at most
alpha. lambda_i is the predictable plug-in (the paper's PrPl: sqrt(2 log(1/alpha) / (horizon x
the variance estimated from the values before i))), truncated at ``TRUNCATION`` / (m - low) so
that no bet can lose more than that share. K_t(m) falls as m rises (each factor does), so the
means the test rejects are those below one number: the lower bound.

No maintained library is used: ``confseq`` does not build here and ``expectation`` needs Python
3.12; the bound is a few lines of numpy, tested for coverage on bimodal values."""

from __future__ import annotations

import numpy as np

TRUNCATION = 0.75  # the largest share of its wealth a bet may risk (the paper suggests 1/2 to 3/4)
TOLERANCE = 1e-6  # of the bound, as a share of the range (bisection)


def plug_in_bets(y: np.ndarray, alpha: float, horizon: int) -> np.ndarray:
    """The untruncated bets lambda_i for values ``y`` [..., n] scaled to [0, 1]: each from the
    values before it (mean and variance shrunk to 1/2 and 1/4, the paper's start)."""
    t = np.arange(1, y.shape[-1] + 1)
    mean = (0.5 + np.cumsum(y, -1)) / (t + 1)
    var = (0.25 + np.cumsum((y - mean) ** 2, -1)) / (t + 1)
    before = np.concatenate([np.full(y.shape[:-1] + (1,), 0.25), var[..., :-1]], -1)
    return np.sqrt(2 * np.log(1 / alpha) / (horizon * before))


def rejects(y: np.ndarray, m, alpha: float, bets: np.ndarray) -> np.ndarray:
    """Whether the wealth of betting that the mean of ``y`` [..., n] (in [0, 1]) exceeds ``m``
    (broadcast against y's leading axes) reaches 1/alpha at some seed."""
    m = np.asarray(m, dtype=float)[..., None]
    lam = np.minimum(bets, TRUNCATION / np.maximum(m, 1e-12))
    log_wealth = np.cumsum(np.log1p(lam * (y - m)), -1)  # each factor >= 1 - TRUNCATION: no log of 0, no overflow
    return log_wealth.max(-1) >= np.log(1 / alpha)


def _scaled(values, bounds) -> tuple[np.ndarray, float, float]:
    lo, hi = (float(b) for b in bounds)
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
        raise ValueError(f"a bound by betting needs a finite range, got {bounds}")
    v = np.asarray(values, dtype=float)
    if v.size and (v.min() < lo - 1e-9 or v.max() > hi + 1e-9):
        raise ValueError(f"values outside their declared range {bounds}: {v.min():.4g} .. {v.max():.4g}")
    return np.clip((v - lo) / (hi - lo), 0.0, 1.0), lo, hi


def lower_bounds(y: np.ndarray, alpha: float, horizon: int | None = None) -> np.ndarray:
    """``lower_bound`` of every row of ``y`` [..., n] (values scaled to [0, 1]) at once, in
    [0, 1]: bisection on the rejected means, which are those below one number."""
    bets = plug_in_bets(y, alpha, horizon or y.shape[-1])
    a, b = np.zeros(y.shape[:-1]), np.minimum(1.0, y.max(-1) + TOLERANCE)
    none = ~rejects(y, a, alpha, bets)  # nothing rejected: the range's low end
    while (b - a).max(initial=0.0) > TOLERANCE:
        mid = (a + b) / 2
        r = rejects(y, mid, alpha, bets)
        a, b = np.where(r, mid, a), np.where(r, b, mid)
    return np.where(none, 0.0, a)


def lower_bound(values, bounds, alpha: float, horizon: int | None = None) -> float:
    """The largest m whose "mean <= m" the bets reject at level ``alpha`` (one-sided): the mean
    of ``values`` (in order, within ``bounds``) is above it with probability at least 1 - alpha,
    whatever their distribution. ``horizon``: the number of values the bets are tuned for (the
    planned seeds; default: as many as there are). The range's low end when nothing is rejected."""
    y, lo, hi = _scaled(values, bounds)
    if y.size == 0:
        return lo
    return lo + float(lower_bounds(y, alpha, horizon)) * (hi - lo)


def upper_bound(values, bounds, alpha: float, horizon: int | None = None) -> float:
    """``lower_bound`` of the values mirrored: the mean is below it with probability at least
    1 - alpha."""
    lo, hi = bounds
    return -lower_bound(-np.asarray(values, dtype=float), (-hi, -lo), alpha, horizon)


def holds_above(values, threshold, bounds, alpha: float, horizon: int | None = None) -> np.ndarray:
    """Whether the lower bound clears ``threshold``, for sets of values ``values`` [..., n] at
    once (the power model's draws): the test of "mean <= threshold" rejects."""
    y, lo, hi = _scaled(values, bounds)
    bets = plug_in_bets(y, alpha, horizon or y.shape[-1])
    return rejects(y, (threshold - lo) / (hi - lo), alpha, bets)


def _split(alpha: float, noise) -> tuple[float, float]:
    """(the seeds' share of ``alpha``, the shift for the shared samples' noise): the values'
    mean moves with the one evaluation sample set every run is scored on (``noise``: the runs'
    variances, their mean taken as that shift's), which no number of seeds averages away and
    a bound over seeds cannot see. A union bound covers both: half of ``alpha`` for the seeds'
    bound, half for the shift (its normal quantile: a variance measured, not estimated); all of
    it for the seeds without ``noise``."""
    if noise is None:
        return alpha, 0.0
    from scipy.stats import norm  # imported on first use: seconds of start-up per job

    return alpha / 2, float(norm.ppf(1 - alpha / 2) * np.sqrt(float(np.mean(noise))))


def interval(values, bounds, level: float = 0.95, noise=None, horizon: int | None = None) -> tuple[float, float, float]:
    """(mean, low, high) of the per-seed ``values`` (each within ``bounds``): each end a bound
    by betting, moved out by the evaluation noise of their shared samples (``noise``; ``_split``),
    at (1 - level) / 2 in all; NaN ends for fewer than two values (no group is decided on one
    run)."""
    v = np.asarray(values, dtype=float)
    mean = float(v.mean())
    if len(v) < 2:
        return mean, float("nan"), float("nan")
    alpha, shift = _split((1 - level) / 2, noise)
    lo = lower_bound(v, bounds, alpha, horizon) - shift
    hi = upper_bound(v, bounds, alpha, horizon) + shift
    return mean, max(lo, bounds[0]), min(hi, bounds[1])


def difference(a, b, bounds, level: float = 0.95, noise_a=None, noise_b=None,
               horizon: int | None = None) -> tuple[float, float, float]:
    """(mean(a) - mean(b), low, high) for two sets of runs (each value within ``bounds``), each
    end a union bound: low = a's lower bound - b's upper bound, each at half the seeds' share of
    (1 - level) / 2, moved out by the noise of both sample sets (``_split``); NaN ends when either
    set has fewer than two values."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    diff = float(a.mean() - b.mean())
    if len(a) < 2 or len(b) < 2:
        return diff, float("nan"), float("nan")
    noise = None if noise_a is None else float(np.mean(noise_a)) + float(np.mean(noise_b))
    alpha, shift = _split((1 - level) / 2, noise)
    lo = lower_bound(a, bounds, alpha / 2, horizon) - upper_bound(b, bounds, alpha / 2, horizon) - shift
    hi = upper_bound(a, bounds, alpha / 2, horizon) - lower_bound(b, bounds, alpha / 2, horizon) + shift
    width = bounds[1] - bounds[0]
    return diff, max(lo, -width), min(hi, width)


def kept_range(chance, fit: float) -> tuple[float, float]:
    """The range of one fitted run's kept margin (acc - chance) / (acc_fit - chance), for
    accuracies in [0, 1] and acc_fit >= ``fit`` (the fit gate), at the largest of ``chance``:
    known before any run, as a bound by betting needs."""
    c = float(np.max(chance))
    return -c / (fit - c), (1 - c) / (fit - c)

"""Power of a claim's test at a config's sizes, in closed form, from the effect and the spread
over seeds measured for it (``SPREADS``; configs/README.md, "Seed power"): what "decidable on
this config" asks before any run.

A seed-level claim holds when, in every group, the t interval of one value per seed (Welch's
for a difference of two schemes) has its end on the claim's side of the threshold, no closer
than the evaluation noise of the shared samples allows, and when at most ``UNSTABLE`` of the
resamples of the seeds give another verdict. With the per-seed values normal (mean ``effect``,
sd ``sd``), the sample mean and sd are independent (normal and scaled chi): both are integrated
on a grid. A resample that keeps m distinct seeds (probability ``distinct_counts``) is a subset
of m seeds whose mean is normal about the full mean, with the finite-population variance of a
subset; it passes with the normal probability of clearing its own t and floor. A group is stable
when its differing share is within ``UNSTABLE`` divided among the groups (a union bound: the
claim's share is at most their sum). The claim's power is the product over its groups, each
group at the claim's effect (one K_train, task or k stands for all; ``basis``).

C1 is sized from a failure rate (a seed where coupling fits and does not generalize), not a
normal spread: its power sums, over the number of failed seeds, the chance of that number times
whether that set of values holds stably (every subset's t interval computed exactly).

The calibration (``sparselen.calibration``, the claims' own code on generated tables) measures
the same power at the shipped sizes; ``tests/calibration/test_calibration.py`` checks this model against the
stability code on generated values."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats

from sparselen.statistics.verdicts import MIN_STABLE_SEEDS, UNSTABLE

TARGET = 0.80  # the power a config needs at the effect it is sized at to decide a claim
MAX_SEEDS = 400  # seed counts searched for the one that reaches TARGET
LEVEL = 0.95
Z = stats.norm.ppf(0.5 + LEVEL / 2)


@dataclass(frozen=True)
class Spread:
    """A claim's per-seed statistic as sized: mean ``effect`` and sd ``sd`` against
    ``threshold`` (the claim's side above it, or below), ``where`` they come from, and whether
    they were measured there or assumed (``basis``); ``floor(n)``:
    the evaluation-noise sd of the statistic's mean on n samples per cell (0: none); ``fail``: a
    failure rate instead of a normal spread (C1: seeds at ``failed`` among seeds at ``effect``)."""

    claim: str
    statistic: str
    effect: float
    sd: float
    threshold: float
    above: bool
    where: str
    floor: object = None
    fail: float = 0.0
    failed: float = 0.0
    basis: str = "measured"  # what the effect and spread are (``BASES``), worded on every power line


def _retained_floor(kept: float, fit: float = 0.99, chance: float = 0.5):
    """The evaluation-noise sd of a retained margin on n samples per cell (its numerator's)."""
    acc = chance + kept * (fit - chance)
    return lambda n: math.sqrt(acc * (1 - acc) / (n + Z**2)) / (fit - chance)


def _difference_floor(a: float, b: float):
    return lambda n: math.sqrt((a * (1 - a) + b * (1 - b)) / (n + Z**2))


# What a claim's effect and spread are: measured on this project's runs of this statistic
# (another model, task or size than the config's: ``where`` says which), or assumed (the paper's
# effect, a spread from another statistic or a generator). Every power line says which.
BASES = {
    "measured": "the effect and spread measured on {where}",
    "assumed effect": "the paper's effect (assumed) with the spread measured on {where}",
    "other statistic": "an effect and spread measured on another statistic ({where}), assumed to carry over",
    "assumed": "an assumed effect and spread ({where})",
}
SHORT_BASES = {"measured": "", "assumed effect": "assumed effect", "other statistic": "other statistic",
               "assumed": "assumed"}

# The effects and spreads each claim is sized at (configs/README.md, "Seed power", states each).
PARITY_K3 = "parity K_train = 3, 2 layers of width 64, 6 seeds of 8,000 steps"
POINTER_COPY = "pointer_copy, 16 seeds, scored before the end token; the paper's effect ppc = coupled"
SPREADS = {
    "P1": Spread("P1", "rho of the kept margin against k_test (measured on the rank of accuracy)", -0.64, 0.80, 0.0,
                 False, "the rank of raw accuracy, " + PARITY_K3, basis="other statistic"),
    "P2": Spread("P2", "retained margin at k_test = K_train", 0.61, 0.28, 0.5, True, PARITY_K3,
                 floor=_retained_floor(0.61)),
    "P3": Spread("P3", "rho of the fall rate against k_test", 0.56, 0.79, 0.0, True, PARITY_K3),
    "C1": Spread("C1", "coupled's kept margin", 1.0, 0.0, 0.5, True,
                 "copy_repeat, 12 seeds: coupled failed to generalize on 1",
                 fail=1 / 12, failed=0.025),
    "C2": Spread("C2", "ppc - coupled (needs > -0.1; ppc - pose +0.33, sd 0.31, also)", 0.0, math.hypot(0.11, 0.11),
                 -0.1, True, POINTER_COPY, floor=_difference_floor(0.95, 0.95), basis="assumed effect"),
    "T1": Spread("T1", "coupled - local accuracy at the largest Lbar (GPT)", 0.0, 0.18, -0.1, True,
                 "theory GPT k = 2, 6 seeds of cpu-extended; the paper's effect coupled = local",
                 floor=_difference_floor(0.9, 0.99), basis="assumed effect"),
    "T2": Spread("T2", "growth exponent of the log loss", 1.0, 0.065, 2.0, False,
                 "the calibration's generator, no exponent fitted on runs yet: b = 1, log-loss noise 0.1",
                 basis="assumed"),
    "L2": Spread("L2", "sparse - dense normalised gain within documents (a seed's mean over its tokens)", 0.3, 0.05,
                 0.0, True, "the calibration's generator, no L2 measured: sparse tokens gain 0.3 x their benefit "
                 "more, 0.05 between training seeds; the documents' noise 0.045 / sqrt(tokens)",
                 floor=lambda tokens: 0.045 / math.sqrt(tokens), basis="assumed"),
}
# C2 also needs ppc - best baseline > 0: pose 0.62 (sd 0.29) against ppc 0.95 (sd 0.11) on pointer_copy
C2_GAIN = Spread("C2", "ppc - pose", 0.33, math.hypot(0.11, 0.29), 0.0, True, POINTER_COPY,
                 floor=_difference_floor(0.95, 0.62), basis="assumed effect")


def basis(claim: str) -> str:
    """What ``claim``'s power is computed at, in words: measured or assumed, and where."""
    sp = SPREADS[claim]
    return BASES[sp.basis].format(where=sp.where)


@lru_cache(maxsize=None)
def distinct_counts(n: int) -> np.ndarray:
    """P(m distinct seeds) for m = 0..n in a resample of n seeds with replacement (the exact
    weights of ``verdicts.seed_strata``, by recursion over the draws)."""
    p = np.zeros(n + 1)
    p[0] = 1.0
    for _ in range(n):
        m = np.arange(n + 1)
        p = p * m / n + np.concatenate([[0.0], p[:-1] * (n - m[:-1]) / n])
    return p


_X = np.polynomial.hermite_e.hermegauss(48)  # nodes and weights for the sample mean (standard normal)
_CHI_Q = (np.arange(40) + 0.5) / 40  # quantiles of the sample sd's chi law


def group_power(n: int, spread: Spread, samples: int | None, share: float = UNSTABLE) -> float:
    """The chance that one group of ``n`` seeds decides "holds" stably (differing share at most
    ``share``) at the spread's effect, on ``samples`` evaluation samples per cell."""
    if spread.fail:
        return _failure_power(n, spread, share)
    if n < 2:
        return 0.0
    sign = 1.0 if spread.above else -1.0
    delta, sd = sign * (spread.effect - spread.threshold), spread.sd
    floor = Z * spread.floor(samples) if spread.floor and samples else 0.0
    nodes, weights = _X
    means = delta + sd / math.sqrt(n) * nodes  # sample mean minus threshold, claim side positive
    sds = sd * np.sqrt(stats.chi2.ppf(_CHI_Q, n - 1) / (n - 1))
    gap, s = means[:, None], sds[None, :]
    passes = gap > np.maximum(stats.t.ppf(0.5 + LEVEL / 2, n - 1) * s / math.sqrt(n), floor)
    m = np.arange(2, n)
    w = distinct_counts(n)
    t_m = stats.t.ppf(0.5 + LEVEL / 2, m - 1)
    spread_m = np.sqrt((1 / m - 1 / n) * n / (n - 1))
    need = np.maximum(t_m[None, None, :] * s[..., None] / np.sqrt(m), floor)
    p_pass = stats.norm.cdf((gap[..., None] - need) / (s[..., None] * spread_m))
    differ = w[1] + (w[2:n] * (1 - p_pass)).sum(-1)  # one distinct seed: never decided
    ok = passes & (differ <= share)
    return float((weights / weights.sum()) @ ok.mean(axis=1))


def _failure_power(n: int, spread: Spread, share: float) -> float:
    """C1: sum over j failed seeds of Binomial(j; n, fail) x [the values hold and are stable]
    (numbers of failures of negligible chance left out)."""
    if n < 2:
        return 0.0
    js = [j for j in range(n + 1) if stats.binom.pmf(j, n, spread.fail) > 1e-6]
    holds = _holds_table(n, max(js), spread)
    w = distinct_counts(n)
    m = np.arange(1, n + 1)[:, None]
    total = 0.0
    for j in js:
        if not holds[n, j]:
            continue
        i = np.arange(j + 1)[None, :]
        pmf = stats.hypergeom.pmf(i, n, j, m)  # failed seeds among a resample's m distinct ones
        differ = float((w[1:, None] * pmf * ~holds[1:, : j + 1]).sum())
        total += stats.binom.pmf(j, n, spread.fail) * (differ <= share)
    return float(total)


def _holds_table(n: int, j: int, spread: Spread) -> np.ndarray:
    """[m, i]: whether m seeds, i of them failed, clear the threshold by their t interval."""
    m = np.arange(n + 1)[:, None].astype(float)
    i = np.arange(j + 1)[None, :].astype(float)
    good, bad = spread.effect, spread.failed
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = good - (good - bad) * i / m
        sd = (good - bad) * np.sqrt(i * (m - i) / (m * (m - 1)))
        low = mean - stats.t.ppf(0.5 + LEVEL / 2, m - 1) * sd / np.sqrt(m)
    return (m >= 2) & (i <= m) & (low > spread.threshold)


@lru_cache(maxsize=None)
def replicated_power(claim: str, n: int, samples: int) -> float:
    """The chance that the t interval of ``n`` seeds' values, widened in quadrature by a noise
    every seed shares (its sd ``floor(samples)``: L2's documents, which every seed analyses),
    clears the threshold at the spread's effect; no seed resamples (L2's stability resamples the
    documents, whose noise is small beside the seeds' at its sizes). 0 below 2 seeds."""
    spread = SPREADS[claim]
    if n < 2:
        return 0.0
    sign = 1.0 if spread.above else -1.0
    delta, sd = sign * (spread.effect - spread.threshold), spread.sd
    shared = spread.floor(samples) if spread.floor and samples else 0.0
    nodes, weights = _X
    means = delta + math.hypot(sd / math.sqrt(n), shared) * nodes
    sds = sd * np.sqrt(stats.chi2.ppf(_CHI_Q, n - 1) / (n - 1))
    half = np.hypot(stats.t.ppf(0.5 + LEVEL / 2, n - 1) * sds / math.sqrt(n), Z * shared)
    passes = means[:, None] > half[None, :]
    return float((weights / weights.sum()) @ passes.mean(axis=1))


def claim_power(claim: str, n: int, groups: int, samples: int | None = None) -> float:
    """Power of ``claim`` with ``n`` seeds in each of ``groups`` groups that must all hold."""
    return groups_power(claim, (n,) * groups, samples)


@lru_cache(maxsize=None)
def groups_power(claim: str, seeds: tuple[int, ...], samples: int | None = None) -> float:
    """Power of ``claim`` over groups that must all hold, ``seeds[g]`` seeds in group g (a
    claim over two models' runs counts each group's model's seeds)."""
    if not seeds or min(seeds) < MIN_STABLE_SEEDS:
        return 0.0
    parts = [SPREADS[claim]] + ([C2_GAIN] if claim == "C2" else [])
    share = UNSTABLE / (len(seeds) * len(parts))
    return math.prod(group_power(n, sp, samples, share) ** seeds.count(n) for n in set(seeds) for sp in parts)


@lru_cache(maxsize=None)
def seeds_needed(claim: str, groups: int, samples: int | None = None, target: float = TARGET) -> int | None:
    """The fewest seeds per group that give ``claim`` at least ``target`` power (None: none up
    to MAX_SEEDS, e.g. where the evaluation noise alone keeps the interval across the threshold)."""
    lo = MIN_STABLE_SEEDS
    if claim_power(claim, MAX_SEEDS, groups, samples) < target:
        return next((n for n in range(lo, 41) if claim_power(claim, n, groups, samples) >= target), None)
    hi = MAX_SEEDS
    for n in range(lo, 41):  # small counts one by one (C1's power is not monotone there)
        if claim_power(claim, n, groups, samples) >= target:
            return n
    lo = 41
    while lo < hi:  # beyond, power rises with the seeds
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if claim_power(claim, mid, groups, samples) < target else (lo, mid)
    return lo


def design(claim: str, n: int, groups: int, samples: int | None, what: str = "group") -> str:
    """"" when ``n`` seeds per group give ``claim`` at least TARGET power at its measured spread,
    else why not, naming the seeds needed."""
    return models_design(claim, {"": (n, groups)}, samples, what)


def models_design(claim: str, models: dict[str, tuple[int, int]], samples: int | None, what: str = "group") -> str:
    """``design`` of a claim whose groups are runs of several models with seed counts of their
    own, ``models``: {model: (its seeds, its groups)}."""
    seeds = tuple(count for count, groups in models.values() for _ in range(groups))
    p = groups_power(claim, seeds, samples)
    if p >= TARGET:
        return ""
    need = seeds_needed(claim, len(seeds), samples)
    runs = ", ".join(f"{count} {model}".strip() for model, (count, groups) in models.items() if groups)
    runs = f"this config runs {runs} ({p:.0%} power)"
    if need is None:
        return f"no seed count up to {MAX_SEEDS} per {what} gives {TARGET:.0%} power at {samples} samples a cell; {runs}"
    return f"needs about {need} seeds per {what} for {TARGET:.0%} power; {runs}"

"""Power of a claim's test at a config's sizes, from the effect and the spread over seeds it is
sized at (``SPREADS``; configs/README.md, "Power at the measured spreads"): what "decidable on
this config" asks before any run.

Every seed-level claim decides on bounds by betting (``betting``): in every group the bound, at
half its level, clears the threshold by more than the shift for the noise of the shared
evaluation samples (``betting._split``). Its power is Monte Carlo (``betting_power``): normal
per-seed values (C1: a failure rate, ``fail`` of the seeds at ``failed``), cut to the
statistic's range, or two such sets for a difference, through the same bounds, on the share of
the seeds expected to fit (``fits``). No claim sized here carries the stability rule. A claim
must hold in every group and condition (C2's two, T2's exponent and kept margin): its power is
the product, each group at the claim's effect (one K_train, task or k stands for all;
``basis``).

The calibration (``sparselen.calibration``, the claims' own code on generated tables) measures
the same power at the shipped sizes; ``tests/calibration/test_calibration.py`` checks this model
against the claims' bounds on generated values."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats

from sparselen.statistics import betting
from sparselen.statistics.stats import ACCURACY, CORRELATION
from sparselen.statistics.verdicts import FIT, MIN_FITTED_RUNS

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
    bounds: tuple | None = None  # a seed's value's range: the claim is decided by betting (``betting_power``)
    parts: tuple | None = None  # a difference of two sets of runs: ((mean, sd), (mean, sd)), each value in ``bounds``
    fits: float = 1.0  # the share of a group's seeds that fit (the others are not tested)


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
                 False, "the rank of raw accuracy, " + PARITY_K3, basis="other statistic", bounds=CORRELATION),
    "P2": Spread("P2", "retained margin at k_test = K_train", 0.61, 0.28, 0.5, True, PARITY_K3,
                 floor=_retained_floor(0.61), bounds=betting.kept_range(0.5, FIT)),
    "P3": Spread("P3", "rho of the fall rate against k_test", 0.56, 0.79, 0.0, True, PARITY_K3, bounds=CORRELATION),
    "C1": Spread("C1", "coupled's kept margin", 1.0, 0.0, 0.5, True,
                 "copy_repeat, 12 seeds: coupled failed to generalize on 1",
                 fail=1 / 12, failed=0.025, bounds=betting.kept_range(0.0, FIT)),
    "C2": Spread("C2", "ppc - coupled (needs > -0.1; ppc - pose +0.33, sd 0.31, also)", 0.0, math.hypot(0.11, 0.11),
                 -0.1, True, POINTER_COPY, floor=_difference_floor(0.95, 0.95), basis="assumed effect",
                 bounds=ACCURACY, parts=((0.95, 0.11), (0.95, 0.11))),
    "T1": Spread("T1", "coupled - local accuracy at the largest Lbar (GPT)", 0.0, 0.18, -0.1, True,
                 "theory GPT k = 2, 6 seeds of cpu-extended; the paper's effect coupled = local",
                 floor=_difference_floor(0.9, 0.99), basis="assumed effect", bounds=ACCURACY,
                 parts=((0.9, 0.18 / math.sqrt(2)), (0.9, 0.18 / math.sqrt(2)))),
    "T2": Spread("T2", "growth exponent of the log loss, capped to [0, 4]", 1.0, 0.065, 2.0, False,
                 "the calibration's generator, no exponent fitted on runs yet: b = 1, log-loss noise 0.1",
                 basis="assumed", bounds=(0.0, 4.0)),
    "L2": Spread("L2", "sparse - dense normalised gain within documents (a seed's mean over its tokens), capped to "
                 "[-1, 1]", 0.25, 0.05, 0.0, True, "the calibration's generator, no L2 measured: sparse tokens gain "
                 "0.3 x their benefit more, 0.05 between training seeds, with its document factor and noisy benefit, "
                 "which the statistic reads as 0.25 (sd 0.04-0.05 over 30 seeds); the documents' noise 0.045 / "
                 "sqrt(tokens)", floor=lambda tokens: 0.045 / math.sqrt(tokens), basis="assumed", bounds=(-1.0, 1.0)),
}
# C2 also needs ppc - best baseline > 0: pose 0.62 (sd 0.29) against ppc 0.95 (sd 0.11) on pointer_copy
C2_GAIN = Spread("C2", "ppc - pose", 0.33, math.hypot(0.11, 0.29), 0.0, True, POINTER_COPY,
                 floor=_difference_floor(0.95, 0.62), basis="assumed effect", bounds=ACCURACY,
                 parts=((0.95, 0.11), (0.62, 0.29)))
# T2 also needs the local law's kept margin > 0.5, decided by betting on a fitted run's range
T2_MARGIN = Spread("T2", "local law's kept margin at the largest Lbar", 0.98, 0.077, 0.5, True,
                   "config.yaml's idealized model, 30 seeds: 26 fit at L, kept 0.98 [0.48, 1.18]",
                   floor=_retained_floor(0.98), bounds=betting.kept_range(0.5, FIT), fits=26 / 30)
CONDITIONS = {"C2": (C2_GAIN,), "T2": (T2_MARGIN,)}  # a claim's conditions beyond the one its spread sizes


def basis(claim: str) -> str:
    """What ``claim``'s power is computed at, in words: measured or assumed, and where."""
    sp = SPREADS[claim]
    return BASES[sp.basis].format(where=sp.where)


def group_power(n: int, spread: Spread, samples: int | None) -> float:
    """The chance that one group of ``n`` seeds decides "holds" at the spread's effect, on
    ``samples`` evaluation samples per cell (``betting_power`` on the seeds expected to fit)."""
    return betting_power(int(n * spread.fits), spread, samples)


DRAWS = 2000  # Monte Carlo draws of a group's seeds (the same draws for every spread at a count: common numbers)


@lru_cache(maxsize=None)
def betting_power(n: int, spread: Spread, samples: int | None) -> float:
    """The chance that one group of ``n`` seeds decides "holds" by betting (``betting``: no
    stability rule) at the spread's effect: Monte Carlo over DRAWS sets of seeds, normal values
    (or, C1, ``fail`` of them at ``failed``) cut to the spread's range, or a difference of two
    such sets (``parts``, a union bound as ``betting.difference``), the end moved out by the
    evaluation noise of ``samples`` samples a cell (``floor``; ``betting._split``)."""
    if n < MIN_FITTED_RUNS:
        return 0.0
    rng = np.random.default_rng(n)
    lo, hi = spread.bounds
    sign = 1.0 if spread.above else -1.0
    alpha = (1 - LEVEL) / 2
    # every bounded claim carries its runs' evaluation noise: the union bound of ``betting._split``,
    # half of alpha for the seeds, half for the shift by the shared samples' noise (none without a floor)
    shared = spread.floor(samples) if spread.floor and samples else 0.0
    alpha, shift = alpha / 2, stats.norm.ppf(1 - alpha / 2) * shared

    def draw(mean: float, sd: float) -> np.ndarray:
        if spread.fail:
            return np.where(rng.random((DRAWS, n)) < spread.fail, spread.failed, mean)
        return np.clip(rng.normal(mean, sd, (DRAWS, n)), lo, hi)

    def near_end(values: np.ndarray, a: float) -> np.ndarray:
        """The bound on the claim's side's near end (low for a claim above its threshold)."""
        y = (values - lo) / (hi - lo)
        if spread.above:
            return lo + betting.lower_bounds(y, a) * (hi - lo)
        return hi - betting.lower_bounds(1 - y, a) * (hi - lo)

    def far_end(values: np.ndarray, a: float) -> np.ndarray:
        y = (values - lo) / (hi - lo)
        if spread.above:
            return hi - betting.lower_bounds(1 - y, a) * (hi - lo)
        return lo + betting.lower_bounds(y, a) * (hi - lo)

    if spread.parts:
        (ma, sa), (mb, sb) = spread.parts
        a, b = draw(ma, sa), draw(mb, sb)
        end = near_end(a, alpha / 2) - far_end(b, alpha / 2)
    else:
        end = near_end(draw(spread.effect, spread.sd), alpha)
    return float((sign * (end - spread.threshold) > shift).mean())


def claim_power(claim: str, n: int, groups: int, samples: int | None = None) -> float:
    """Power of ``claim`` with ``n`` seeds in each of ``groups`` groups that must all hold."""
    return groups_power(claim, (n,) * groups, samples)


@lru_cache(maxsize=None)
def groups_power(claim: str, seeds: tuple[int, ...], samples: int | None = None) -> float:
    """Power of ``claim`` over groups that must all hold, ``seeds[g]`` seeds in group g (a
    claim over two models' runs counts each group's model's seeds)."""
    parts = [SPREADS[claim], *CONDITIONS.get(claim, ())]
    if not seeds or min(seeds) < MIN_FITTED_RUNS:
        return 0.0
    return math.prod(group_power(n, sp, samples) ** seeds.count(n) for n in set(seeds) for sp in parts)


@lru_cache(maxsize=None)
def seeds_needed(claim: str, groups: int, samples: int | None = None, target: float = TARGET) -> int | None:
    """The fewest seeds per group that give ``claim`` at least ``target`` power (None: none up
    to MAX_SEEDS, e.g. where the evaluation noise alone keeps the interval across the threshold)."""
    lo = MIN_FITTED_RUNS
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

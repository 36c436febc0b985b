"""Three-valued verdicts: how a claim's test on measured tables becomes holds, does not hold or
inconclusive, and how stable that verdict is.

A claim's test (``sparselen/<slice>/claims.py``) returns one ``Result`` per group (a K_train,
a task, a (model, k)), each with a verdict and its reason:

- **gates** first: only a model that fits its training distribution is evidence about length
  generalization, so runs that do not fit are left out and a group with too few fitted runs
  (or no benefit to explain) is *inconclusive*, saying why and what would resolve it;
- then the **interval**: *holds* when the whole 95% interval is on the claim's side of its
  threshold, *does not hold* when the whole interval is on the other side, *inconclusive*
  when it straddles it (an effect below the resolution of these seeds and samples).

A claim holds when every group holds, does not hold when a group does not, and is
inconclusive otherwise (``combine``). Its **stability** is the share of resamples of the
training runs (leave one seed out, and bootstrap resamples of the seeds; documents for the
language claims, which analyse one model) whose verdict differs from the full data's; above
``UNSTABLE`` the claim is reported inconclusive (unstable).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np
import pandas as pd

from sparselen.stats import Resampling

HOLDS, FAILS, INCONCLUSIVE, NOT_RUN = "holds", "does not hold", "inconclusive", "not run"

# The gates every slice shares, fixed before the results (docs/reconstruction.md, "Claims").
FIT = 0.9  # a run fits when its in-distribution accuracy is at least this
MIN_FITTED_RUNS = 2  # a group with fewer fitted runs is inconclusive
UNSTABLE = 0.10  # a verdict that flips in more than this share of resamples is unstable
STABILITY_REPLICATES = 20  # bootstrap resamples of the seeds (besides leave-one-out)
STABILITY_BOOT = 400  # bootstrap replicates inside each stability resample

BELOW_RESOLUTION = "the interval includes the threshold: an effect below the resolution of these runs"
MORE_RUNS = "more seeds or evaluation samples"


@dataclass(frozen=True)
class Result:
    group: str
    value: float
    ci_low: float
    ci_high: float
    verdict: str
    reason: str = ""
    resolve: str = ""  # what would resolve an inconclusive or failed gate


@dataclass(frozen=True)
class Settings(Resampling):
    """The bootstrap settings, and the facts of the slice's experiments its claims need (its
    claims module's ``facts``: training lengths, sizes, floors, from the config run)."""

    facts: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Claim:
    id: str
    slice: str  # the experiment whose tables the test reads
    statement: str  # the claim, in one line
    quote: str  # the paper's words it tests (docs/reconstruction.md quotes the source)
    criterion: str  # the test, with its tolerances, in words
    test: Callable  # (tables by name, Settings) -> list[Result]
    figure: str  # the figure that shows the evidence (results/figures/<figure>.png)
    unit: str = "seed"  # what the stability check resamples


def decide(lo: float, hi: float, threshold: float, above: bool = True) -> str:
    """The claim side is ``> threshold`` (``above``) or ``< threshold``: holds when the whole
    interval is on it, does not hold when the whole interval is on the other side."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return INCONCLUSIVE
    if above:
        return HOLDS if lo > threshold else FAILS if hi < threshold else INCONCLUSIVE
    return HOLDS if hi < threshold else FAILS if lo > threshold else INCONCLUSIVE


def interval_result(group: str, value: float, lo: float, hi: float, threshold: float, above: bool = True,
                    note: str = "") -> Result:
    v = decide(lo, hi, threshold, above)
    reason = note if v != INCONCLUSIVE else "; ".join(filter(None, [note, BELOW_RESOLUTION]))
    return Result(group, value, lo, hi, v, reason, MORE_RUNS if v == INCONCLUSIVE else "")


def gate_result(group: str, reason: str, resolve: str) -> Result:
    return Result(group, np.nan, np.nan, np.nan, INCONCLUSIVE, reason, resolve)


def combine(results: list[Result]) -> tuple[str, str]:
    """(verdict, reason) of a claim from its groups' results."""
    verdicts = Counter(r.verdict for r in results)
    if verdicts[FAILS]:
        return FAILS, "; ".join(f"{r.group} does not hold" for r in results if r.verdict == FAILS)
    if verdicts[HOLDS] == len(results):
        return HOLDS, "; ".join(f"{r.group}: {r.reason}" for r in results)
    open_ = [r for r in results if r.verdict != HOLDS]
    return INCONCLUSIVE, "; ".join(f"{r.group}: {r.reason}" for r in open_)


# ----------------------------------------------------------------------------- stability


def resample_units(data, unit: str, draw: np.ndarray):
    """``data`` (a table, or a dict of tables) with the units ``draw`` (values of ``unit``,
    repeats allowed); a repeated unit gets a new label so it counts as another unit."""
    if isinstance(data, dict):
        return {name: resample_units(t, unit, draw) for name, t in data.items()}
    parts = [data[data[unit] == u].assign(**{unit: f"{u}#{i}" if unit != "seed" else i})
             for i, u in enumerate(draw)]
    return pd.concat(parts, ignore_index=True)


def units_of(data, unit: str) -> np.ndarray:
    table = next(iter(data.values())) if isinstance(data, dict) else data
    return np.array(sorted(table[unit].unique()))


def stability(claim: Claim, data, s: Settings, verdict: str) -> tuple[float, int]:
    """(share of resamples whose verdict differs from ``verdict``, number of resamples):
    leave-one-unit-out and bootstrap resamples of the units."""
    units = units_of(data, claim.unit)
    if len(units) < 2:
        return float("nan"), 0
    rng = s.rng("stability", claim.id)
    draws = [np.delete(units, i) for i in range(len(units))] if claim.unit == "seed" else []
    draws += [rng.choice(units, len(units)) for _ in range(STABILITY_REPLICATES)]
    small = replace(s, n_boot=STABILITY_BOOT)
    flips = [combine(claim.test(resample_units(data, claim.unit, d), small))[0] != verdict for d in draws]
    return float(np.mean(flips)), len(draws)

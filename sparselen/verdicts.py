"""Three-valued verdicts: how a claim's test on measured tables becomes holds, does not hold or
inconclusive, and how stable that verdict is.

A claim's test (``sparselen/<slice>/claims.py``) returns one ``Result`` per group (a K_train,
a task, a (model, k)), each with a verdict and its reason:

- **gates** first: only a model that fits its training distribution is evidence about length
  generalization, so runs that do not fit are left out, and a group with too few fitted runs
  (or no benefit to explain) is *not tested*: inconclusive, saying why and what would resolve it;
- then the **interval**, at the level of the unit of replication (training seeds: a Student-t
  interval over per-seed values, which carry their own evaluation noise; documents, for the
  language claims): *holds* when the whole 95% interval is on the claim's side of its
  threshold, *does not hold* when the whole interval is on the other side, *inconclusive*
  when it straddles it (an effect below the resolution of these seeds and samples).

A group may be a declared **control** (a task where coupling is not needed, a reference
expected to fail): it is shown beside the claim and never decides it. A claim is decided over
its tested groups (``combine``): it holds when every tested group holds, does not hold when one
does not, is inconclusive otherwise, and is inconclusive with the gates' reasons when no group
could be tested; "m of n groups tested" is reported beside it. Its **stability** is the share
of resamples of the training seeds with replacement (a seed drawn twice is one run) whose
verdict differs from the full data's, computed exactly where the seeds are few
(``seed_resamples``); documents are resampled at random (``DOCUMENT_RESAMPLES``). Above
``UNSTABLE`` the claim is reported inconclusive (unstable).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Callable

import numpy as np
import pandas as pd

from sparselen.stats import Resampling

HOLDS, FAILS, INCONCLUSIVE, NOT_RUN = "holds", "does not hold", "inconclusive", "not run"

# The gates every slice shares (docs/reconstruction.md, "Claims").
FIT = 0.9  # a run fits when its in-distribution accuracy is at least this
MIN_FITTED_RUNS = 2  # a group with fewer fitted runs is not tested
UNSTABLE = 0.10  # a verdict that differs in more than this share of resamples is unstable
EXACT_SEEDS = 8  # up to this many seeds the stability enumerates every resample
STABILITY_REPLICATES = 200  # random resamples of more seeds than that
DOCUMENT_RESAMPLES = 50  # random resamples of documents (each with a cluster bootstrap inside)
STABILITY_BOOT = 400  # bootstrap replicates inside each resample of documents



def _fewest_stable_seeds() -> int:
    """The fewest seeds with which a decided claim can be stable: the resamples that draw one
    seed every time are one run, which no test decides, and weigh n^(1 - n) (``seed_resamples``)."""
    n = MIN_FITTED_RUNS
    while n ** (1 - n) > UNSTABLE:
        n += 1
    return n


MIN_STABLE_SEEDS = _fewest_stable_seeds()  # 4 at UNSTABLE 0.10


def seeds_design(n: int) -> str:
    """"" when ``n`` training seeds per group can give a stable verdict, else why not."""
    if n >= MIN_STABLE_SEEDS:
        return ""
    return f"{n} seed{'s' * (n != 1)} per group (a stable verdict needs {MIN_STABLE_SEEDS})"


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
    resolve: str = ""  # what would resolve an inconclusive verdict or a failed gate
    tested: bool = True  # False: a gate left the group untested
    control: bool = False  # shown beside the claim, never part of its verdict


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
    criterion: str  # the test, with its tolerances, in words ({fact} placeholders: the slice's facts)
    test: Callable  # (tables by name, Settings) -> list[Result]
    figure: str  # the figure that shows the evidence (results/figures/<figure>.png)
    design: Callable  # (the slice's config section) -> "" when its design can decide the claim, else why not
    unit: str = "seed"  # what the stability check resamples


def decide(lo: float, hi: float, threshold: float, above: bool = True) -> str:
    """The claim side is ``> threshold`` (``above``) or ``< threshold``: holds when the whole
    interval is on it, does not hold when the whole interval is on the other side."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return INCONCLUSIVE
    if above:
        return HOLDS if lo > threshold else FAILS if hi < threshold else INCONCLUSIVE
    return HOLDS if hi < threshold else FAILS if lo > threshold else INCONCLUSIVE


def both(*verdicts: str) -> str:
    """The verdict of a criterion with several conditions: does not hold when one does not,
    holds when all hold, else inconclusive."""
    return FAILS if FAILS in verdicts else HOLDS if all(v == HOLDS for v in verdicts) else INCONCLUSIVE


def interval_result(group: str, value: float, lo: float, hi: float, threshold: float, above: bool = True,
                    note: str = "", control: bool = False) -> Result:
    return verdict_result(group, value, lo, hi, decide(lo, hi, threshold, above), note, control)


def verdict_result(group: str, value: float, lo: float, hi: float, verdict: str, note: str,
                   control: bool = False) -> Result:
    """A tested group's result; an inconclusive one says so and what would resolve it."""
    reason = note if verdict != INCONCLUSIVE else "; ".join(filter(None, [note, BELOW_RESOLUTION]))
    return Result(group, value, lo, hi, verdict, reason, MORE_RUNS if verdict == INCONCLUSIVE else "",
                  control=control)


def gate_result(group: str, reason: str, resolve: str, control: bool = False) -> Result:
    return Result(group, np.nan, np.nan, np.nan, INCONCLUSIVE, reason, resolve, tested=False, control=control)


@dataclass(frozen=True)
class Decision:
    verdict: str
    reason: str
    tested: int  # groups tested (controls aside)
    groups: int  # groups (controls aside)


def combine(results: list[Result]) -> Decision:
    """A claim's verdict over its tested groups; controls never count."""
    mine = [r for r in results if not r.control]
    tested = [r for r in mine if r.tested]
    untested = "; ".join(f"{r.group} not tested: {r.reason}" for r in mine if not r.tested)
    if not tested:
        why = untested or "only controls: " + "; ".join(f"{r.group}: {r.reason}" for r in results)
        return Decision(INCONCLUSIVE, "no group could be tested: " + why, 0, len(mine))
    verdicts = [r.verdict for r in tested]
    if FAILS in verdicts:
        verdict, shown = FAILS, [r for r in tested if r.verdict == FAILS]
    elif all(v == HOLDS for v in verdicts):
        verdict, shown = HOLDS, tested
    else:
        verdict, shown = INCONCLUSIVE, [r for r in tested if r.verdict != HOLDS]
    reason = "; ".join([*(f"{r.group} {r.verdict}: {r.reason}" for r in shown), *filter(None, [untested])])
    return Decision(verdict, reason, len(tested), len(mine))


# ----------------------------------------------------------------------------- stability


def seed_resamples(seeds, rng: np.random.Generator) -> list[tuple[tuple, Fraction]]:
    """(distinct seeds, probability) of resampling ``seeds`` with replacement, a seed drawn twice
    counting as one run: exactly, over every distinct set, when there are at most EXACT_SEEDS
    (the n^n equally likely draws land on a set of m seeds in m! S(n, m) ways, S a Stirling
    number of the second kind); else STABILITY_REPLICATES random draws of equal weight.
    Probabilities are exact fractions, so a share of exactly UNSTABLE is not read as above it."""
    seeds, n = list(seeds), len(seeds)
    if n > EXACT_SEEDS:
        draws = [tuple(sorted(set(rng.choice(seeds, n).tolist()))) for _ in range(STABILITY_REPLICATES)]
        return [(d, Fraction(1, len(draws))) for d in draws]
    onto = {m: Fraction(math.factorial(m) * _stirling2(n, m), n**n) for m in range(1, n + 1)}
    return [(subset, onto[m]) for m in range(1, n + 1) for subset in itertools.combinations(seeds, m)]


def _stirling2(n: int, m: int) -> int:
    """Ways to split n labelled draws into m non-empty groups."""
    return sum((-1) ** j * math.comb(m, j) * (m - j) ** n for j in range(m + 1)) // math.factorial(m)


def resample_units(data, unit: str, draw) -> dict:
    """``data`` (tables by name) with the units ``draw`` (values of ``unit``, repeats allowed);
    a repeated unit gets a new label so it counts as another unit (documents: a cluster drawn
    twice weighs twice)."""
    out = {}
    for name, t in data.items():
        parts = [t[t[unit] == u].assign(**{unit: f"{u}#{i}"}) for i, u in enumerate(draw)]
        out[name] = pd.concat(parts, ignore_index=True)
    return out


def units_of(data, unit: str) -> list:
    """Every value of ``unit`` in any of the tables (a task with fewer seeds than another is
    resampled within the seeds it has)."""
    return sorted({u for t in data.values() for u in t[unit].unique()})


def stability(claim: Claim, data: dict, s: Settings, verdict: str) -> tuple[float, str]:
    """(share of resamples whose verdict differs from ``verdict``, what was resampled and how)."""
    units = units_of(data, claim.unit)
    if len(units) < 2:
        return float("nan"), f"one {claim.unit}: not measured"
    rng = s.rng("stability", claim.id)
    if claim.unit == "seed":
        weighted = [({name: t[t["seed"].isin(subset)] for name, t in data.items()}, w)
                    for subset, w in seed_resamples(units, rng)]
        how = (f"exact, {len(weighted)} distinct seed sets of {len(units)} seeds" if len(units) <= EXACT_SEEDS
               else f"{len(weighted)} random resamples of {len(units)} seeds")
        small = s
    else:
        draws = [rng.choice(units, len(units)) for _ in range(DOCUMENT_RESAMPLES)]
        weighted = [(resample_units(data, claim.unit, d), Fraction(1, len(draws))) for d in draws]
        how = f"{len(weighted)} random resamples of {len(units)} {claim.unit}s"
        small = replace(s, n_boot=STABILITY_BOOT)
    share = sum(w for tables, w in weighted if combine(claim.test(tables, small)).verdict != verdict)
    return float(share), how

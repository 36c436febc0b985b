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
verdict differs from the full data's (``stability``). The resamples are grouped by how many
distinct seeds they keep, each group with its exact probability (``seed_strata``): every set
is enumerated where they are few (up to 10 seeds), else sets are sampled within each group,
with draws added until the share's Monte Carlo error cannot carry it across ``UNSTABLE``.
Documents are resampled at random, with the same rule for the number of draws. Above
``UNSTABLE`` the claim is reported inconclusive (unstable), and so is a claim whose share is
still within Monte Carlo error of it after the most draws allowed, saying so.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Callable

import numpy as np

from sparselen.statistics.stats import Resampling

HOLDS, FAILS, INCONCLUSIVE, NOT_RUN = "holds", "does not hold", "inconclusive", "not run"

# The gates every slice shares (docs/reconstruction.md, "Claims").
FIT = 0.9  # a run fits when its in-distribution accuracy is at least this
MIN_FITTED_RUNS = 2  # a group with fewer fitted runs is not tested
UNSTABLE = 0.10  # a verdict that differs in more than this share of resamples is unstable
ENUMERATED = math.comb(10, 5)  # a group of seed sets this small is enumerated: up to 10 seeds, every set
SEED_DRAWS = 400, 6400  # seed sets sampled when not enumerated: at first, at most
DOCUMENT_DRAWS = 50, 400  # random resamples of documents (each with a cluster bootstrap inside): at first, at most
MONTE_CARLO_Z = 3.0  # a sampled share is decided against UNSTABLE when this many standard errors from it
STABILITY_BOOT = 400  # bootstrap replicates inside each resample of documents



def _fewest_stable_seeds() -> int:
    """The fewest seeds with which a decided claim can be stable: the resamples that draw one
    seed every time are one run, which no test decides, and weigh n^(1 - n) (``seed_strata``)."""
    n = MIN_FITTED_RUNS
    while n ** (1 - n) > UNSTABLE:
        n += 1
    return n


MIN_STABLE_SEEDS = _fewest_stable_seeds()  # 4 at UNSTABLE 0.10


NOT_NEEDED = ("not applied: the claim decides on bounds by betting, valid for any distribution of the seeds' values "
              "(a share of failed seeds included), which resamples of fewer distinct seeds cannot reproduce")
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
    power: Callable | None = None  # (the slice's config section) -> power at the effect and spread it is sized at (seed-level claims)
    stability_rule: bool = True  # False: decided on bounds by betting, valid for any distribution of the seeds' values


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


@dataclass
class Stratum:
    """Resamples of one kind, of total probability ``mass``: those that keep m distinct seeds
    (every m-subset equally likely, ``total`` of them), or every resample of documents
    (``total`` None: draws with replacement). ``members``: the ones enumerated or drawn so far;
    ``differ``: how many of them give another verdict."""

    mass: Fraction
    total: int | None
    members: list = field(default_factory=list)
    differ: int = 0
    exhaustive: bool = False

    def grow(self, draws: int, draw: Callable) -> list:
        """Enumerate, or draw up to ``draws`` members (``draw()``: one random member,
        ``draw.every()``: all of them); the new members. A stratum of at most ENUMERATED seed
        sets, or of at most twice ``draws``, is enumerated."""
        if self.exhaustive:
            return []
        seen, new = set(self.members), []
        if self.total is not None and (self.total <= ENUMERATED or 2 * draws >= self.total):
            new = [m for m in draw.every() if m not in seen]
            self.exhaustive = True
        else:
            while len(self.members) + len(new) < draws:
                m = draw()
                if self.total is None or m not in seen:
                    seen.add(m)
                    new.append(m)
        self.members += new
        return new

    def variance(self) -> float:
        """Monte Carlo variance of this stratum's share of differing resamples (0 when
        enumerated): binomial, without replacement for seed sets, the share shrunk to
        (d + 1/2)/(r + 1) so that draws that all agree still leave an error."""
        if self.exhaustive:
            return 0.0
        r = len(self.members)
        p = (self.differ + 0.5) / (r + 1)
        fpc = 1.0 if self.total is None or self.total < 2 else (self.total - r) / (self.total - 1)
        return p * (1 - p) / r * fpc


def seed_strata(n: int) -> list[Stratum]:
    """The resamples of ``n`` seeds with replacement, grouped by the number m of distinct seeds
    they keep: the n^n equally likely draws land on a given set of m seeds in m! S(n, m) ways
    (S a Stirling number of the second kind), so the m-sets weigh C(n, m) m! S(n, m) / n^n in
    all, exactly."""
    return [Stratum(Fraction(math.comb(n, m) * math.factorial(m) * _stirling2(n, m), n**n), math.comb(n, m))
            for m in range(1, n + 1)]


def _stirling2(n: int, m: int) -> int:
    """Ways to split n labelled draws into m non-empty groups."""
    return sum((-1) ** j * math.comb(m, j) * (m - j) ** n for j in range(m + 1)) // math.factorial(m)


def estimate(strata: list[Stratum]) -> tuple[Fraction, float]:
    """(share of differing resamples, its Monte Carlo standard error). The share is an exact
    fraction, so that a share of exactly UNSTABLE is not read as above it."""
    share = sum((st.mass * Fraction(st.differ, len(st.members)) for st in strata if st.members), Fraction(0))
    return share, math.sqrt(sum(float(st.mass) ** 2 * st.variance() for st in strata))


@dataclass(frozen=True)
class Stability:
    """The share of resamples whose verdict differs from the full data's, its Monte Carlo
    standard error (0: every resample enumerated), what was resampled and how, and whether the
    share is above UNSTABLE (None: within MONTE_CARLO_Z standard errors of it)."""

    share: float
    error: float
    how: str
    above: bool | None

    def reason(self, verdict: str) -> str:
        """"" when a decided ``verdict`` stands, else why it is reported inconclusive."""
        differs = f"the verdict ({verdict}) differs in {self.share:.0%} of the resamples ({self.how})"
        if verdict == INCONCLUSIVE or self.above is False:
            return ""
        if self.above is None:
            return f"unstable within Monte Carlo error: {differs}, too close to {UNSTABLE:.0%} to tell"
        return f"unstable: {differs}"


def rows_by_unit(data: dict, unit: str) -> dict:
    """Per table, the row positions of each value of ``unit``: found once, so that each of many
    resamples is one gather per table."""
    return {name: {u: np.asarray(ix) for u, ix in t.groupby(unit, sort=False).indices.items()}
            for name, t in data.items()}


class SeedSubsets:
    """``data`` (tables by name) restricted to a set of seeds, rows in their order; each
    table's rows per seed are found once, so each of a thousand seed sets is one gather."""

    def __init__(self, data: dict):
        self.data = data
        self.rows = rows_by_unit(data, "seed")

    def __call__(self, subset) -> dict:
        out = {}
        for name, t in self.data.items():
            ix = [self.rows[name][u] for u in subset if u in self.rows[name]]
            out[name] = t.iloc[np.sort(np.concatenate(ix))] if ix else t.iloc[:0]
        return out


class UnitResampler:
    """``data`` (tables by name) resampled by ``unit`` (values drawn with repeats allowed); a
    repeated unit gets a new label so it counts as another unit (documents: a cluster drawn
    twice weighs twice). Each table's rows per unit are found once, so a draw is one gather
    per table: hundreds of draws of tens of documents stay cheap."""

    def __init__(self, data: dict, unit: str):
        self.data, self.unit = data, unit
        self.rows = rows_by_unit(data, unit)

    def __call__(self, draw) -> dict:
        out = {}
        for name, t in self.data.items():
            rows = self.rows[name]
            parts = [(i, u, rows[u]) for i, u in enumerate(draw) if u in rows]
            if not parts:
                out[name] = t.iloc[:0].copy()
                continue
            picked = t.iloc[np.concatenate([ix for _, _, ix in parts])].reset_index(drop=True)
            picked[self.unit] = np.concatenate([np.full(len(ix), f"{u}#{i}", dtype=object) for i, u, ix in parts])
            out[name] = picked
        return out


def units_of(data, unit: str) -> list:
    """Every value of ``unit`` in any of the tables (a task with fewer seeds than another is
    resampled within the seeds it has)."""
    return sorted({u for t in data.values() for u in t[unit].unique()})


def stability(claim: Claim, data: dict, s: Settings, verdict: str) -> Stability:
    """How often the verdict differs from ``verdict`` on resamples of the claim's units: seed
    sets by number of distinct seeds (``seed_strata``), or documents with replacement. For a
    decided verdict, draws are added (up to SEED_DRAWS or DOCUMENT_DRAWS) until the share is
    MONTE_CARLO_Z standard errors from UNSTABLE or every seed set is enumerated; an
    inconclusive one keeps the first draws (its share is shown, it decides nothing)."""
    if not claim.stability_rule:
        return Stability(float("nan"), 0.0, NOT_NEEDED, False)
    units = units_of(data, claim.unit)
    n = len(units)
    if n < 2:
        return Stability(float("nan"), 0.0, f"one {claim.unit}: not measured", False)
    rng = s.rng("stability", claim.id)
    if claim.unit == "seed":
        strata, (first, most) = seed_strata(n), SEED_DRAWS
        samplers = [_SeedSets(units, m, rng) for m in range(1, n + 1)]

        tables = SeedSubsets(data)
        small = s
    else:
        strata, (first, most) = [Stratum(Fraction(1), None)], DOCUMENT_DRAWS
        samplers = [lambda: tuple(rng.choice(units, n))]

        tables = UnitResampler(data, claim.unit)
        small = replace(s, n_boot=STABILITY_BOOT)
    draws = first
    while True:
        for st, sample in zip(strata, samplers):
            new = st.grow(max(2, math.ceil(draws * st.mass)), sample)
            st.differ += sum(combine(claim.test(tables(m), small)).verdict != verdict for m in new)
        share, error = estimate(strata)
        gap = abs(float(share) - UNSTABLE)
        if error == 0 or gap > MONTE_CARLO_Z * error or draws >= most or verdict == INCONCLUSIVE:
            break
        needed = 1.1 * draws * (MONTE_CARLO_Z * error / max(gap, 1e-9)) ** 2  # the error falls like 1/sqrt(draws)
        draws = min(most, 4 * draws, max(2 * draws, math.ceil(needed)))
    above = share > UNSTABLE if error == 0 or gap > MONTE_CARLO_Z * error else None
    drawn = sum(len(st.members) for st in strata)
    if claim.unit == "seed" and error == 0:
        how = f"exact, {drawn} distinct seed sets of {n} seeds"
    elif claim.unit == "seed":
        how = (f"{drawn:,} of {2**n - 1:,} distinct seed sets of {n} seeds, sampled by number of distinct seeds; "
               f"Monte Carlo standard error {error:.1%}")
    else:
        how = f"{drawn} random resamples of {n} {claim.unit}s; Monte Carlo standard error {error:.1%}"
    return Stability(float(share), error, how, above)


class _SeedSets:
    """Random sets of m of ``seeds`` (as sorted tuples), and all of them (``every``)."""

    def __init__(self, seeds, m: int, rng: np.random.Generator):
        self.seeds, self.m, self.rng = list(seeds), m, rng

    def __call__(self) -> tuple:
        return tuple(sorted(self.rng.choice(self.seeds, self.m, replace=False).tolist()))

    def every(self) -> list[tuple]:
        return list(itertools.combinations(self.seeds, self.m))

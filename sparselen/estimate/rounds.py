"""What seeds in rounds cost (``sparselen.interface.rounds``): a rounded slice trains its seed
list a round at a time and stops once every claim reading it is decided, so its cost is not the
config's plan but that plan's rounds, each weighed by the chance it runs. Without this the
estimate prices every round, the most a rounded config can cost, and says nothing of what it is
likely to cost.

A round's hours are the plan's (``plan``, ``tables.estimate``) on a copy of the config whose
rounded slices' seed lists (and the PPC tasks' own; not ``theory.sfa_seeds`` where it is set) are
cut to rounds 0..r, less the same through round r - 1 (``through``): round 0 carries a slice's fixed jobs, the slices without rounds are
counted once, at the cap. The slice-wide jobs a round's decision reruns (its tables, over the
seeds so far) are counted once, at their last size: the round costs err low by those reruns
(CPU jobs of minutes).

The chance that round r >= 1 runs is the chance that some claim reading the slice (its claims
module's claims with a ``power``) is undecided after round r - 1: 1 - the product over those
claims of each one's power at the seeds through round r - 1 (``Claim.power`` on the cut section,
so its groups and samples are the config's). An approximation that errs high, towards more
rounds: the claims of one slice read the same seeds, so their decisions go together more often
than independent ones would (the product understates the chance all are decided), and power
counts only "holds" at the assumed effect, not a claim decided as failing nor one decided at an
earlier round. A claim that no number of seeds lets the design decide (the config runs none of
its groups, or too few samples a cell) is settled in round 0, as the workflow settles it; one
whose power is merely 0 at the cap keeps its slice training every round. A round is priced
whole, though the workflow trains only the runs an undecided claim reads (PPC: the tasks of its
kind): for a slice whose claims read different cells this errs high. The same chances at effects twice
as far from their thresholds (``farther``) show how much of the cost rides on the assumed
effects.

Expected hours: the sum over rounds of each round's chance times its hours, plus the slices
without rounds; the maximum: every round (the plan at the cap). Wall clock: the maximum's is the
cap's plan's (every seed at once: it errs low where a slice's rounds, each waiting on the
decision before it, set the pace rather than the GPUs); the expected one is the cap's scaled by
the expected share of the cap's hours, never under the cap's critical chain (GPU-bound campaigns:
the same errors, larger where few rounds run).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, replace

from sparselen.interface import rounds as config_rounds
from sparselen.interface.rounds import Rounds, rounded, section_through, through
from sparselen.statistics import power

FARTHER = 2.0  # effects this many times as far from their thresholds: the second set of chances


@dataclass(frozen=True)
class Priced:
    """A config's plan in brief: device-hours per slice (GPU-hours, with packing, on a cluster;
    CPU-hours for a local run), its wall clock ({GPUs or cores: hours}) and critical chain."""

    hours: dict
    wall_h: dict
    chain_h: float
    unit: str = "GPU"


@dataclass(frozen=True)
class Round:
    slice: str
    index: int  # 0-based
    rounds: Rounds
    seeds: int  # the slice's seeds through this round (its ``seeds`` list)
    hours: float  # what this round adds to the plan
    chance: float  # that it runs, at the assumed effects
    chance_far: float  # that it runs, at effects FARTHER times as far from their thresholds


@dataclass(frozen=True)
class Outlook:
    """A rounded config's rounds and its plan at the cap."""

    rounds: tuple
    cap: Priced

    @property
    def maximum(self) -> float:
        return sum(self.cap.hours.values())

    def expected(self, far: bool = False) -> float:
        rounded = {r.slice for r in self.rounds}
        fixed = sum(h for s, h in self.cap.hours.items() if s not in rounded)
        return fixed + sum((r.chance_far if far else r.chance) * r.hours for r in self.rounds)

    def wall(self, hours: float) -> dict:
        """The wall clock ({GPUs or cores: hours}) of ``hours`` of the cap's: its wall clock
        scaled by the share, at least its critical chain."""
        share = hours / self.maximum if self.maximum else 1.0
        return {n: max(self.cap.chain_h, w * share) for n, w in self.cap.wall_h.items()}


def claims_reading(name: str) -> tuple:
    """The claims decided on slice ``name``'s training seeds (those with a power model)."""
    from sparselen.report.claims import slice_claims

    return tuple(c for c in slice_claims(name).CLAIMS if c.power is not None)


def chances(name: str, section: dict) -> list[float]:
    """Per round of slice ``name``, the chance it runs: 1 for round 0, then 1 - the product of
    its claims' power at the seeds through the round before; a claim that no number of seeds
    lets the design decide is settled in round 0 (``sparselen.report.rounds``) and left out."""
    spare = config_rounds.with_seeds(section, power.MAX_SEEDS)
    rounds = config_rounds.of(section)
    claims = tuple(c for c in claims_reading(name) if not c.design(spare))
    decided = [math.prod(c.power(section_through(section, r)) for c in claims) for r in range(rounds.max - 1)]
    return [1.0] + [1.0 - d for d in decided]


def moved(spread: power.Spread, factor: float = FARTHER) -> power.Spread:
    """``spread`` with its effect ``factor`` times as far from its threshold. A difference's
    first part moves by the difference's change as far as the statistic's range allows, its
    second part the rest the other way; a failure-rate spread's effect (its values are not cut to
    the range) stays in the range."""
    shift = (factor - 1) * (spread.effect - spread.threshold)
    effect = spread.effect + shift
    if spread.fail:
        effect = min(max(effect, spread.bounds[0]), spread.bounds[1])
    parts = spread.parts
    if parts:
        (ma, sa), (mb, sb) = parts
        shift = (factor - 1) * (ma - mb - spread.threshold)
        first = min(max(ma + shift, spread.bounds[0]), spread.bounds[1])
        parts = ((first, sa), (mb - (shift - (first - ma)), sb))
    return replace(spread, effect=effect, parts=parts)


def _clear_caches() -> None:
    for cached in (power.betting_power, power.groups_power, power.seeds_needed):
        cached.cache_clear()


@contextmanager
def farther(factor: float = FARTHER):
    """Within it, the power model (``power.SPREADS``, ``power.CONDITIONS``) has every effect
    ``factor`` times as far from its threshold (``moved``); the model and its caches are as
    before on leaving."""
    spreads, conditions = power.SPREADS, power.CONDITIONS
    power.SPREADS = {c: moved(s, factor) for c, s in spreads.items()}
    power.CONDITIONS = {c: tuple(moved(s, factor) for s in parts) for c, parts in conditions.items()}
    _clear_caches()
    try:
        yield
    finally:
        power.SPREADS, power.CONDITIONS = spreads, conditions
        _clear_caches()


def plan_of(config: dict):
    """``config``'s planned jobs (Snakemake's DAG of the config written to a file, as ``sparselen
    estimate`` plans it)."""
    from sparselen.estimate.dag import config_jobs
    from sparselen.estimate.plan import plan

    return plan(config, config_jobs(config))


def price(config: dict, gpu, cpu, retries: int = 2, dp_efficiency: float | None = None, gpus_available=(8,),
          cores: int | None = None, clock: bool = True) -> Priced:
    """``config``'s plan (Snakemake's DAG from the config written to a file, priced as
    ``sparselen estimate`` prices it) in brief; without ``clock``, no wall clock."""
    from sparselen.estimate import tables
    from sparselen.estimate.timeline import PACKED_GROUP, campaign_clock

    jobs = plan_of(config)
    df = tables.estimate(config, jobs, gpu, cpu, retries, dp_efficiency or tables.DP_EFFICIENCY)
    local = gpu is None or not config.get("gpus_per_job", 0) > 0
    if local:
        hours = df.groupby("slice", sort=False)["device_seconds"].sum() / 3600
    else:  # as the estimate's total: every GPU job's own, but a packed submission's (its slices' share of it)
        gpu_jobs = df[df["device"] == "gpu"]
        hours, packed = gpu_jobs["device_seconds"] / 3600, gpu_jobs["group"] == PACKED_GROUP
        if packed.any():
            subs = tables.submissions(df[df["submission"].isin(gpu_jobs.loc[packed, "submission"])], retries)
            share = gpu_jobs["device_seconds"] / gpu_jobs.groupby("submission")["device_seconds"].transform("sum")
            hours = hours.where(~packed, share * gpu_jobs["submission"].map(subs.set_index("submission")["gpu_hours"]))
        hours = hours.groupby(gpu_jobs["slice"], sort=False).sum()
    run = campaign_clock(df, local, tuple(gpus_available), cores) if clock else {"wall_h": {}, "chain_h": 0.0}
    return Priced({s: float(h) for s, h in hours.items()}, {n: float(h) for n, h in run["wall_h"].items()},
                  float(run["chain_h"]), "CPU" if local else "GPU")


def round_hours(config: dict, price) -> tuple[dict[str, list[float]], Priced]:
    """Per rounded slice, its rounds' hours (``price``: a config -> ``Priced``, with ``clock``
    for the cap's), and the plan at the cap. Every rounded slice is cut at the same round in one
    plan: a plan per round, not per slice and round."""
    slices = rounded(config)
    last = max(rd.max for rd in slices.values())
    plans = [price(through(config, r), clock=r == last - 1) for r in range(last)]

    def at(r: int, name: str) -> float:
        return plans[r].hours.get(name, 0.0) if r >= 0 else 0.0

    return {name: [at(r, name) - at(r - 1, name) for r in range(rd.max)] for name, rd in slices.items()}, plans[-1]


def outlook(config: dict, hours: dict[str, list[float]], cap: Priced, factor: float = FARTHER) -> Outlook:
    """The rounds of ``config`` with their ``hours`` (``round_hours``) and chances to run."""
    slices = rounded(config)
    near = {name: chances(name, config[name]) for name in slices}
    with farther(factor):
        far = {name: chances(name, config[name]) for name in slices}
    return Outlook(tuple(Round(name, r, rd, len(rd.through(config[name]["seeds"], r)), hours[name][r], near[name][r],
                               far[name][r]) for name, rd in slices.items() for r in range(rd.max)), cap)


def report(config: dict, price, out=print, factor: float = FARTHER) -> Outlook:
    """Print the rounds of a rounded ``config``, each round's hours and chance to run, and the
    expected and maximum hours with their wall clocks; return them."""
    import pandas as pd

    from sparselen.estimate.display import hm, markdown

    look = outlook(config, *round_hours(config, price), factor)
    unit = look.cap.unit
    rows = pd.DataFrame([{"slice": f"{r.slice} ({r.rounds.size} a round, at most {r.rounds.max})",
                          "round": r.index + 1, "seeds": r.seeds, "gpu_hours" if unit == "GPU" else "hours": r.hours,
                          "runs": f"{r.chance:.0%}", f"runs_x{factor:g}": f"{r.chance_far:.0%}"}
                         for r in look.rounds])
    out(f"\nSeeds in rounds (sparselen.estimate.rounds): each round's {unit}-hours, and the chance it runs: that a "
        f"claim reading its slice is undecided after the round before (1 - the product of the claims' power at its "
        f"seeds; errs towards more rounds), at the assumed effects (runs) and at effects {factor:g} times as far from "
        f"their thresholds (runs_x{factor:g}):\n")
    out(markdown(rows))

    def line(what: str, hours: float) -> str:
        what_n = "cores" if unit == "CPU" else "GPUs"
        clock = "; ".join(f"{hm(h)} on {n} {what_n}" for n, h in look.wall(hours).items())
        return f"  {what}: {hm(hours)} {unit}-hours, wall clock {clock}"

    out(f"\nExpected and most {unit}-hours of the whole config (its slices without rounds counted once; the wall "
        f"clock: the cap's, scaled by the share of its hours, at least its critical chain):")
    out(line("expected at the assumed effects", look.expected()))
    out(line(f"expected at effects {factor:g} times as far", look.expected(far=True)))
    out(line("at most (every round)", look.maximum))
    return look

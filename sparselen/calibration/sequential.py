"""Seeds in rounds, calibrated: a slice trained ``size`` seeds at a time, every claim that reads it
decided after each round on the seeds so far and stopped at the first round that decides it
("holds" or "does not hold"), else at ``max`` rounds (``sparselen.interface.rounds``).

The bounds by betting the claims decide on are valid at every number of seeds at once, so the
stopping should keep a claim's false "holds" at its nominal rate. A calibration at one number of
seeds (``sparselen.calibration.run``) cannot show that: the stopping picks the seeds a verdict
rests on. This one simulates the whole procedure. Each replicate draws the scenario's tables
once, at the cap's seeds (``at_cap``: every seed list of the slice), and decides the
claim on the runs of the first one, two, ... rounds' seeds of that one draw, as the rounds would
have trained them, each model (theory: the idealized model and the GPT) or task (PPC) by the
ranks of its own seeds.

The stability rule is not applied: no claim decided over training seeds carries it
(``Claim.stability_rule``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from sparselen.calibration import FALSE, TRUE, Scenario, Sizes, claim_of, decide, rng_of
from sparselen.interface.rounds import ROUNDED_SLICES, Rounds
from sparselen.statistics.rates import upper_bound
from sparselen.statistics.stats import Resampling
from sparselen.statistics.verdicts import FAILS, HOLDS

SEED_COUNTS = {"parity": ("parity_seeds",), "ppc": ("ppc_seeds",), "theory": ("theory_seeds", "sfa_seeds")}
OWN_SEEDS = {"ppc": ("task",), "theory": ("model",)}  # the columns whose values train on seed lists of their own


def rounded_slice(claim_id: str) -> str:
    """The slice of claim ``claim_id``, one whose seeds can be trained in rounds."""
    slice_ = claim_of(claim_id).slice
    if slice_ not in ROUNDED_SLICES:
        raise ValueError(f"{claim_id} is decided on the {slice_} slice, whose seeds are not trained in rounds "
                         f"(rounds: {', '.join(ROUNDED_SLICES)})")
    return slice_


def at_cap(sizes: Sizes, slice_: str, rounds: Rounds) -> Sizes:
    """``sizes`` with every seed list of ``slice_`` at the seeds of ``rounds``' every round: the
    config's list where it has seeds for every round and no more (its last round short), else
    ``size`` x ``max``."""
    def cap(listed: int) -> int:
        full = rounds.size * rounds.max
        return listed if rounds.size * (rounds.max - 1) < listed <= full else full

    return replace(sizes, **{count: cap(getattr(sizes, count)) for count in SEED_COUNTS[slice_]})


def first_seeds(table: pd.DataFrame, n: int, by: tuple = ()) -> pd.DataFrame:
    """The rows of ``table`` whose seed is among the ``n`` lowest of its group's (``by``: the
    columns that set a group; those absent from the table are ignored). A table without seeds is
    kept whole."""
    if "seed" not in table:
        return table
    keys = [c for c in by if c in table]
    seeds = table.groupby(keys)["seed"] if keys else table["seed"]
    return table[seeds.rank(method="dense") <= n]


def through(data: dict, slice_: str, n: int) -> dict:
    """``data`` (tables by slice) with ``slice_``'s per-run tables cut to their first ``n`` seeds."""
    tables = {name: first_seeds(t, n, OWN_SEEDS.get(slice_, ())) if isinstance(t, pd.DataFrame) else t
              for name, t in data[slice_].items()}
    return data | {slice_: tables}


def sequence(claim, data: dict, facts: dict, rounds: Rounds, resampling: Resampling) -> tuple[str, int]:
    """(verdict, rounds trained) of ``claim`` decided after each round of one draw ``data`` at
    the cap, stopped at the first decided one."""
    for r in range(rounds.max):
        verdict = decide(claim, through(data, claim.slice, rounds.size * (r + 1)), facts, resampling)
        if verdict in (HOLDS, FAILS):
            break
    return verdict, r + 1


def run_rounds(scenario: Scenario, sizes: Sizes, rounds: Rounds, replicates: int, resampling: Resampling,
               seed: int = 0) -> dict:
    """The final verdicts of ``replicates`` sequential procedures on ``scenario`` at config
    ``sizes``, the slice's seeds in ``rounds``: their rates (``false holds bound``: the one-sided
    95% upper bound of the false "holds"), the mean rounds trained and seeds per seed list."""
    claim = claim_of(scenario.claim)
    cap = at_cap(sizes, rounded_slice(claim.id), rounds)
    rng = rng_of(scenario, cap, seed)
    final, used = [], []
    for _ in range(replicates):
        data, facts = scenario.draw(cap, rng)
        verdict, r = sequence(claim, data, facts, rounds, resampling)
        final.append(verdict)
        used.append(r)
    most = getattr(cap, SEED_COUNTS[claim.slice][0])
    seeds = [min(rounds.size * r, most) for r in used]
    n, holds = len(final), final.count(HOLDS)
    return {"claim": scenario.claim, "config": sizes.config, "scenario": scenario.name, "truth": scenario.truth,
            "kind": scenario.kind, "condition": scenario.condition, "form": scenario.form,
            "round size": rounds.size, "max rounds": rounds.max, "replicates": n, "holds": holds / n,
            "does not hold": final.count(FAILS) / n,
            "false holds": holds / n if scenario.truth == FALSE else np.nan,
            "false holds bound": upper_bound(holds, n) if scenario.truth == FALSE else np.nan,
            "power": holds / n if scenario.truth == TRUE else np.nan,
            "mean rounds": float(np.mean(used)), "expected seeds": float(np.mean(seeds)), "max seeds": most}

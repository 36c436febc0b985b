"""Calibration of the claims' tests: how often each claim's own code (``report.claims.check``,
gates and stability included) gives each verdict on result tables whose truth is known, at the
sizes of a shipped config (seeds, evaluation samples, analysed tokens).

A **scenario** (``sparselen.calibration.scenarios``) draws one experiment's tables for a claim
with a known truth: the claim false (no effect, models at chance, models that did not fit, a
failure mode the criteria must not credit), where any "holds" is a false one; or the claim true
(the effect the paper states, or the one measured here, at the spread measured here), where
"does not hold" is false and "holds" is the decided, correct verdict whose rate is the power.

Two kinds of false-claim scenario. **Developed-on** ones (``scenarios``) are the counterexamples
the criteria were fixed on; **certifying** ones (``sparselen.calibration.thresholds``) are nulls
exactly at each tested condition's threshold, kept apart from them, and the verdict lines cite
the worst certifying null (``sparselen.statistics.rates``).

A replicate's final verdict is what the report would print. The stability check can only turn a
decided verdict into "inconclusive", so it is run only where it can change a rate: on a decided
"holds", and, where the claim is true, on a decided "does not hold".

The calibration layer, just below ``cli``. May import: ``estimate``, ``report``, ``jobs``, the
four slices and every layer below them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from sparselen.report import claims as cl
from sparselen.statistics.stats import Resampling
from sparselen.statistics.verdicts import FAILS, HOLDS, INCONCLUSIVE, Settings, combine
from sparselen.theory import sfa_seeds

FALSE, TRUE = "claim false", "claim true"
DEVELOPED, CERTIFYING = "developed-on", "certifying"  # a scenario's kind (the module's docstring)
KINDS = (DEVELOPED, CERTIFYING)
MAX_FALSE_HOLDS = 0.05  # the rate of false "holds" a claim's test may have at a shipped config's sizes


@dataclass(frozen=True)
class Sizes:
    """What a config fixes of each slice's experiment, as the calibration reads it."""

    config: str
    ppc_seeds: int
    ppc_n: int
    ppc_tasks: dict  # task -> its config section (the config's, else paper.yaml's: the claim's task)
    parity_seeds: int
    parity_n: int
    theory_seeds: int
    theory_n: int
    tokens: int
    sections: dict = field(default_factory=dict, repr=False)
    language_seeds: int = 1
    sfa_seeds: int = 0  # the idealized model's seeds (theory.sfa_seeds; 0: theory_seeds)


def sizes_of(name: str, cfg: dict, fallback: dict | None = None) -> Sizes:
    """The sizes of config ``cfg``; a PPC task it does not run takes its section from
    ``fallback`` (paper.yaml), at this config's seeds and samples."""
    ppc, tasks = cfg["ppc"], dict((fallback or {}).get("ppc", {}))
    tasks = {t: s for t, s in tasks.items() if isinstance(s, dict) and "train_sizes" in s}
    tasks |= {t: ppc[t] for t in ppc["tasks"]}
    return Sizes(name, len(ppc["seeds"]), ppc["eval"]["n"], tasks, len(cfg["parity"]["seeds"]),
                 cfg["parity"]["eval"]["n"], len(cfg["theory"]["seeds"]), cfg["theory"]["eval"]["n"],
                 cfg["language"]["analysis"]["tokens"], cfg, len(cfg["language"]["seeds"]),
                 len(sfa_seeds(cfg["theory"])))


@dataclass(frozen=True)
class Scenario:
    """One known truth for ``claim``: ``draw(sizes, rng)`` -> (tables by slice, facts by slice)."""

    claim: str
    name: str
    truth: str  # FALSE or TRUE
    draw: Callable
    kind: str = DEVELOPED  # DEVELOPED or CERTIFYING
    condition: str = ""  # a certifying null: the tested condition it sits at the threshold of
    form: str = ""  # a certifying null: its per-seed form ("normal seeds", "bimodal seeds")


def claim_of(claim_id: str):
    return next(c for c in cl.CLAIMS if c.id == claim_id)


def decide(claim, data: dict, facts: dict, resampling: Resampling) -> str:
    """The claim's verdict on ``data`` by its intervals alone: HOLDS, FAILS or INCONCLUSIVE."""
    settings = Settings(resampling.n_boot, resampling.seed, resampling.level, facts.get(claim.slice, {}))
    verdict = combine(claim.test(data[claim.slice], settings)).verdict
    return verdict if verdict in (HOLDS, FAILS) else INCONCLUSIVE


def verdicts(scenario: Scenario, sizes: Sizes, rng: np.random.Generator, resampling: Resampling,
             stability: bool = True) -> tuple[str, str]:
    """(decided, final) on one draw of ``scenario``: the verdict of the intervals alone, and the
    one the report would give, the stability rule applied (``INCONCLUSIVE`` for a decided verdict
    that cannot change a rate, see the module's docstring; without ``stability``, final is
    decided)."""
    claim = claim_of(scenario.claim)
    data, facts = scenario.draw(sizes, rng)
    decided = decide(claim, data, facts, resampling)
    if stability and (decided == HOLDS or (decided == FAILS and scenario.truth == TRUE)):
        t = cl.check(data, resampling, facts, claims=[claim])
        return decided, t[t["group"] == "all"]["verdict"].iloc[0]
    return decided, decided if decided == FAILS or not stability else INCONCLUSIVE


def false_holds_limit(replicates: int, rate: float = MAX_FALSE_HOLDS, alpha: float = 0.01) -> int:
    """The most false "holds" in ``replicates`` draws that a rate of ``rate`` gives with
    probability at least 1 - ``alpha``: more is evidence, at level ``alpha``, of a higher rate."""
    from scipy.stats import binom

    return int(binom.ppf(1 - alpha, replicates, rate))


def rng_of(scenario: Scenario, sizes: Sizes, seed: int) -> np.random.Generator:
    """The draws of ``scenario`` at config ``sizes``: seeded by ``seed``, the claim, the scenario
    and the config's name only."""
    return np.random.default_rng([seed, *map(ord, f"{scenario.claim}/{scenario.name}/{sizes.config}")])


def run(scenario: Scenario, sizes: Sizes, replicates: int, resampling: Resampling, seed: int = 0,
        stop_above: int | None = None, stability: bool = True) -> dict:
    """The verdicts of ``replicates`` draws (``stop_above``: stop once this many false "holds"
    are counted) and their rates; ``holds_interval``, the share of "holds" by the intervals alone
    (without the stability rule: every rate is then of the intervals alone)."""
    rng = rng_of(scenario, sizes, seed)
    decided, final = [], []
    for _ in range(replicates):
        d, f = verdicts(scenario, sizes, rng, resampling, stability)
        decided.append(d)
        final.append(f)
        if stop_above is not None and scenario.truth == FALSE and final.count(HOLDS) > stop_above:
            break
    n = len(final)
    holds, fails = final.count(HOLDS) / n, final.count(FAILS) / n
    return {"claim": scenario.claim, "config": sizes.config, "scenario": scenario.name, "truth": scenario.truth,
            "kind": scenario.kind, "condition": scenario.condition, "form": scenario.form,
            "replicates": n, "holds": holds, "holds_interval": decided.count(HOLDS) / n, "stability": stability,
            "does not hold": fails, "false holds": holds if scenario.truth == FALSE
            else np.nan, "false does not hold": fails if scenario.truth == TRUE else np.nan,
            "power": holds if scenario.truth == TRUE else np.nan}


def monte_carlo_error(rate: float, replicates: int) -> float:
    """Standard error of a rate over ``replicates`` draws; at 0 or 1, the 95% one-sided bound's
    distance (3/R, the rule of three)."""
    if rate in (0.0, 1.0):
        return 3 / replicates
    return math.sqrt(rate * (1 - rate) / replicates)


def calibrate(scenarios, sizes: list[Sizes], replicates: int, resampling: Resampling, seed: int = 0) -> pd.DataFrame:
    return pd.DataFrame([run(sc, sz, replicates, resampling, seed) for sz in sizes for sc in scenarios])

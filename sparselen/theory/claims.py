"""The theory slice's claims (T1, T2): criteria, constants and gates, tested on the per-run
evaluation tables of the idealized model and the GPT (docs/reconstruction.md, "Claims"); T1
is decided on the GPT's runs (on the idealized model it holds by construction).

Each test works per (model, k) on the runs that fit at Lbar = L, with one value per training
seed: an interval by betting over seeds for one law, for the difference of two laws and for
the growth exponent capped to ``EXPONENT_RANGE`` (``sparselen.statistics.betting``),
accuracies floored at their evaluation noise (``sparselen.statistics.stats.binomial_noise``),
the growth exponent's interval widened by the noise of the sample sets every run shares
(``exponent_noise``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from sparselen.statistics import betting, power
from sparselen.statistics.stats import ACCURACY, binomial_noise, ratio_noise
from sparselen.statistics.verdicts import (FAILS, FIT, INCONCLUSIVE, MIN_FITTED_RUNS, Claim, Result, Settings, both,
                                           decide, gate_result, interval_result, verdict_result)
from sparselen.theory import sfa_seeds

READS = ("evals",)  # the per-run tables the tests read (RUN_TABLES["theory"] in the rules)

# Criteria (docs/reconstruction.md, "Claims").
GROWTH_EXPONENT = 2.0  # T2: the error grows at most like (Lbar/L)^2
# T2: a run's exponent as tested, capped so that its bound holds for any spread of the runs: a
# loss that falls with Lbar counts as no growth, one growing faster than twice the threshold as twice
EXPONENT_RANGE = (0.0, 2 * GROWTH_EXPONENT)
RETAINED = 0.5  # T2: more than half of the accuracy above chance at Lbar = L kept at the largest Lbar
NONINFERIORITY = round(1 - FIT, 10)  # T1: coupled as good as local within the shortfall the fit gate accepts
DECIDES_T1 = "gpt"  # the model whose runs decide T1; the idealized model's are an implementation check
IMPLEMENTATION_CHECK = "implementation check: holds by construction"
NO_SPREAD = "rerun the theory evaluation (it writes each ratio's per-sample spread of the log loss, log_loss_sd)"
BY_CONSTRUCTION = ("the idealized model attends to tuples within a window of the position ids it is given, and in "
                   "coupled ids the coupled law is the local one, so coupling cannot fail it")


def facts(section: dict) -> dict:
    """What the tests need of the config run (``theory``): the floor of log losses."""
    return {"floor": section["floor"]}


def per_run(runs: pd.DataFrame, s: Settings) -> pd.DataFrame:
    """Per (model, distribution, k, seed): whether it fits (1 - error >= FIT at Lbar = L), its
    accuracy, the samples it was measured on, log loss (floored) and the spread of its per-sample
    values at every Lbar/L (columns ``("acc", ratio)``, ``("n", ratio)``, ``("loss", ratio)``,
    ``("loss_sd", ratio)``: none where the evaluation did not write it) and chance accuracy 1/q."""
    key = ["model", "distribution", "k", "seed"]
    wide = runs.assign(acc=1 - runs["error"], loss=np.maximum(runs["log_loss"], s.facts["floor"]),
                       loss_sd=runs.get("log_loss_sd", np.nan)).pivot_table(
        index=key, columns="ratio", values=["acc", "loss", "n", "loss_sd"], aggfunc="mean")
    wide.columns = list(wide.columns)  # (kind, ratio) tuples, beside the flat columns below
    return wide.assign(fit=wide[("acc", 1)] >= FIT, chance=1 / runs.groupby(key)["n_values"].first()).reset_index()


def evaluated_ratios(table: pd.DataFrame, kind: str) -> list:
    """The Lbar/L ratios a ``per_run`` table has columns of ``kind`` ("acc", "loss", "n") at."""
    return sorted(c[1] for c in table.columns if isinstance(c, tuple) and c[0] == kind)


def acc_noise(runs: pd.DataFrame, ratio) -> np.ndarray:
    """Evaluation-noise variance of each run's accuracy at ``ratio``."""
    return binomial_noise(runs[("acc", ratio)], runs[("n", ratio)])


def kept_margin(runs: pd.DataFrame, ratio) -> tuple[pd.Series, np.ndarray]:
    """Per run, the share of its accuracy margin above chance at Lbar = L kept at ``ratio``,
    (acc - 1/q) / (acc_L - 1/q), and its evaluation-noise variance."""
    num, den = runs[("acc", ratio)] - runs["chance"], runs[("acc", 1)] - runs["chance"]
    return num / den, ratio_noise(num, den, acc_noise(runs, ratio), acc_noise(runs, 1))


def kept_interval(runs: pd.DataFrame, ratio) -> tuple[float, float, float]:
    """The interval by betting of the runs' kept margins at ``ratio`` (``kept_margin``), floored at their
    evaluation noise and cut to the range the margins can take."""
    kept, noise = kept_margin(runs, ratio)
    return betting.interval(kept, betting.kept_range(runs["chance"], FIT), noise=noise)


def _fitted(g: pd.DataFrame, dist: str, name: str, control: bool = False) -> tuple[pd.DataFrame, Result | None]:
    """The fitted runs of one law, or the gate that leaves the group untested."""
    runs = g[g["distribution"] == dist]
    fitted = runs[runs["fit"]]
    if len(fitted) >= MIN_FITTED_RUNS:
        return fitted, None
    if len(runs) < MIN_FITTED_RUNS:
        return fitted, gate_result(name, f"{len(runs)} {dist} run{'s' * (len(runs) != 1)} (a verdict needs "
                                   f"{MIN_FITTED_RUNS} fitted)",
                           "more training seeds (theory.seeds; the idealized model's: theory.sfa_seeds)", control)
    return fitted, gate_result(name, f"the {dist} runs did not fit at Lbar = L ({len(fitted)} of {len(runs)})",
                               "train the theory model longer (theory.gpt.train, theory.sfa)", control)


def _versus_local(g: pd.DataFrame, dist: str, local: pd.DataFrame, gate: Result | None, group: str, rmax,
                  control: bool = False) -> Result:
    """Accuracy at Lbar/L = ``rmax`` on law ``dist`` minus on the local law (by betting), against
    -NONINFERIORITY; a gate when either law's runs did not fit."""
    other, gate2 = _fitted(g, dist, group, control)
    if gate or gate2:
        return gate2 or gate_result(group, gate.reason, gate.resolve, control)
    diff, lo, hi = betting.difference(other[("acc", rmax)], local[("acc", rmax)], ACCURACY,
                                      noise_a=acc_noise(other, rmax), noise_b=acc_noise(local, rmax))
    return interval_result(group, diff, lo, hi, -NONINFERIORITY, control=control,
                           note=f"Lbar/L = {rmax:g}: {dist} - local accuracy, {len(other)} and {len(local)} runs "
                                f"(needs > -{NONINFERIORITY:.2g})")


def theory_coupling(data: dict, s: Settings) -> list[Result]:
    """T1: for k >= 2, at the largest Lbar/L, accuracy on the coupled law is not below the local
    law's by more than NONINFERIORITY, on the GPT's runs (DECIDES_T1); the idealized model's
    are shown beside it as an implementation check (it holds there by construction), and the
    non-local law as the reference that the locality requirement makes fail. Tested only where
    the comparison can tell: the local law's model keeps more than RETAINED of its margin
    (nothing is non-inferior to a model at chance) and the reference falls short of local by
    more than NONINFERIORITY (the comparison detects the shortfall that the locality
    requirement predicts)."""
    table, out = per_run(data["evals"], s), []
    for (model, k), g in table.groupby(["model", "k"], sort=True):
        if k < 2:
            continue  # the three laws coincide at k = 1
        name, rmax, check = f"{model} k={k}", max(evaluated_ratios(g, "acc")), model != DECIDES_T1
        local, gate = _fitted(g, "local", name, check)
        reference = _versus_local(g, "nonlocal", local, gate, f"{name}: nonlocal (reference)", rmax, control=True)
        shown = f"{name} ({IMPLEMENTATION_CHECK})" if check else name
        out += [_coupled_versus_local(g, local, gate, reference, shown, rmax, check), reference]
    if not any(not r.control for r in out):
        out.append(gate_result("-", f"no {DECIDES_T1} run with k >= 2 ({IMPLEMENTATION_CHECK} on the idealized model: "
                               f"{BY_CONSTRUCTION})", "theory.gpt.k with values >= 2 (configs/cpu-extended.yaml)"))
    return out


def _coupled_versus_local(g: pd.DataFrame, local: pd.DataFrame, gate: Result | None, reference: Result, name: str,
                          rmax, control: bool = False) -> Result:
    """T1's group: coupled minus local, once both laws fit, the local model generalizes and the
    reference fails (``control``: shown beside the claim, never deciding it)."""
    gate = gate or _fitted(g, "coupled", name, control)[1]
    if gate:
        return replace(gate, group=name, control=control)
    k_mean, k_lo, k_hi = kept_interval(local, rmax)
    if not k_lo > RETAINED:
        return gate_result(name, f"the local law's model keeps {k_mean:.2f} [{k_lo:.2f}, {k_hi:.2f}] of its margin at "
                           f"Lbar/L = {rmax:g} (needs > {RETAINED}): no generalizing model to compare coupling with",
                           "train the local law's model until it generalizes (theory.sfa, theory.gpt.train)", control)
    if reference.verdict != FAILS:
        shown = (f"{reference.value:+.2f} [{reference.ci_low:+.2f}, {reference.ci_high:+.2f}]" if reference.tested
                 else reference.reason)
        return gate_result(name, f"the non-local reference does not fall short of local by more than "
                           f"{NONINFERIORITY:.2g} ({shown}): the comparison cannot tell a law that needs locality "
                           "from one that does not", "Lbar beyond what the non-local law generalizes to "
                           "(theory.eval.ratios)", control)
    return _versus_local(g, "coupled", local, None, name, rmax, control)


def _centred_log_ratios(runs: pd.DataFrame) -> tuple[list, np.ndarray]:
    ratios = evaluated_ratios(runs, "loss")
    x = np.log(np.asarray(ratios, dtype=float))
    return ratios, x - x.mean()


def growth_exponents(runs: pd.DataFrame) -> pd.Series:
    """Per run, the exponent b of its loss's growth, loss ~ (Lbar/L)^b: the least-squares slope
    of log loss on log(Lbar/L) over every evaluated Lbar/L."""
    ratios, x = _centred_log_ratios(runs)
    y = np.log(runs[[("loss", r) for r in ratios]].to_numpy(float))
    return pd.Series((y - y.mean(axis=1, keepdims=True)) @ x / (x @ x), index=runs.index)


def exponent_noise(runs: pd.DataFrame) -> pd.Series:
    """Per run, the variance its exponent (``growth_exponents``) gets from the draw of the sample
    sets it was scored on: every run of a (law, k) is scored on one set per Lbar/L, so that
    draw is common to the runs and their spread cannot show it. At each ratio the log of a mean
    of n per-sample losses with standard deviation sd has variance sd^2 / (n loss^2) (first
    order; the loss as floored: below the floor a change of the mean moves the floored log by at
    most that change over the floor); the ratios' sets are drawn apart, so the slope's variance is
    sum_r x_r^2 var_r / (sum_r x_r^2)^2, x the centred log ratios. Taken whole as shared (the
    part of it that differs between runs is also in their spread): at least what the draw gives
    the runs' mean exponent. NaN where the evaluation wrote no per-sample spread."""
    ratios, x = _centred_log_ratios(runs)
    if not all(("loss_sd", r) in runs.columns for r in ratios):
        return pd.Series(np.nan, index=runs.index)
    sd, n, loss = (runs[[(kind, r) for r in ratios]].to_numpy(float) for kind in ("loss_sd", "n", "loss"))
    return pd.Series((sd**2 / (n * loss**2)) @ x**2 / (x @ x) ** 2, index=runs.index)


def theory_local(data: dict, s: Settings) -> list[Result]:
    """T2: on the local law, the loss grows with Lbar/L no faster than (Lbar/L)^GROWTH_EXPONENT
    (the fitted exponent's interval wholly below it), and the accuracy at the largest Lbar keeps
    more than RETAINED of its margin above chance. The growth is decided on the runs whose loss at
    L is above the floor: at the floor the loss is not resolved, and the growth from it is the
    floor's."""
    floor, table, out = s.facts["floor"], per_run(data["evals"], s), []
    for (model, k), g in table.groupby(["model", "k"], sort=True):
        name = f"{model} k={k}"
        if not (g["distribution"] == "local").any():
            continue
        runs, gate = _fitted(g, "local", name)
        if gate:
            out.append(gate)
            continue
        rmax = max(evaluated_ratios(g, "acc"))
        k_mean, k_lo, k_hi = kept_interval(runs, rmax)
        margin = decide(k_lo, k_hi, RETAINED)
        at_floor = runs[("loss", 1)] <= floor
        measured = runs[~at_floor]
        value, lo, hi, bound, notes = _growth(measured, rmax)
        if at_floor.any():
            notes.append(f"{int(at_floor.sum())} of {len(runs)} runs at the floor (loss at L <= {floor:g}, not "
                         "resolved): no exponent")
        notes.append(f"accuracy margin kept at Lbar/L = {rmax:g}: {k_mean:.2f} [{k_lo:.2f}, {k_hi:.2f}] (needs > "
                     f"{RETAINED})")
        verdict, note = both(bound, margin), "; ".join(notes)
        if not np.isfinite(value) and verdict != FAILS:
            out.append(gate_result(name, note, NO_SPREAD if len(measured) >= MIN_FITTED_RUNS else
                                   "losses at L above theory.floor (a lower floor, where the evaluation resolves them)"))
            continue
        out.append(verdict_result(name, value, lo, hi, verdict, note))
    return out or [gate_result("-", "no run on the local law", "add local to theory.distributions")]


def _growth(measured: pd.DataFrame, rmax) -> tuple[float, float, float, str, list]:
    """T2's growth on the runs above the floor: (exponent, low, high, verdict, notes). The
    interval by betting of the runs' exponents capped to EXPONENT_RANGE, moved out by what the
    draw of the sample sets they all share gives them (``exponent_noise``); not tested with fewer
    than MIN_FITTED_RUNS runs or without the per-sample spread of the loss."""
    nan = float("nan")
    if len(measured) < MIN_FITTED_RUNS:
        return nan, nan, nan, INCONCLUSIVE, [f"the growth not tested: {len(measured)} runs with a loss at L above the "
                                             f"floor (needs {MIN_FITTED_RUNS})"]
    shared = exponent_noise(measured)
    if not np.isfinite(shared).all():
        return nan, nan, nan, INCONCLUSIVE, ["the growth not tested: the evaluation wrote no per-sample spread of the "
                                             "log loss (log_loss_sd), so the noise of the samples every run shares "
                                             "cannot be carried"]
    exponents = growth_exponents(measured)
    capped = exponents.clip(*EXPONENT_RANGE)
    value, lo, hi = betting.interval(capped, EXPONENT_RANGE, noise=shared)
    notes = [f"growth exponent of the log loss {value:.2f} [{lo:.2f}, {hi:.2f}] (loss ~ (Lbar/L)^b fitted per run, "
             f"capped to [{EXPONENT_RANGE[0]:g}, {EXPONENT_RANGE[1]:g}], mean over {len(measured)} runs, the interval "
             f"moved out by the noise of the samples they share, sd {np.sqrt(shared.mean()):.2f}; needs < "
             f"{GROWTH_EXPONENT:g})"]
    outside = int((exponents != capped).sum())
    if outside:
        notes.append(f"{outside} of them outside [{EXPONENT_RANGE[0]:g}, {EXPONENT_RANGE[1]:g}] before the cap "
                     f"(from {exponents.min():.2f} to {exponents.max():.2f})")
    loose = int((rmax**GROWTH_EXPONENT * measured[("loss", 1)] >= -np.log(measured["chance"])).sum())
    if loose:
        notes.append(f"on {loose} of them (Lbar/L)^{GROWTH_EXPONENT:g} x the loss at L exceeds a chance-level loss at "
                     f"Lbar/L = {rmax:g}, so a model at chance there grows slower: only the accuracy condition can fail "
                     "them")
    return value, lo, hi, decide(lo, hi, GROWTH_EXPONENT, above=False), notes


def _t1_design(section: dict) -> str:
    if not {"coupled", "local", "nonlocal"} <= set(section["distributions"]):
        return "the coupled, local and non-local laws are not all run"
    if max(section["gpt"]["k"], default=0) < 2:
        return ("no GPT run with k >= 2 (theory.gpt.k; the laws coincide at k = 1), and on the idealized model T1 "
                "holds by construction (an implementation check)")
    return _seeds(section, "T1")


def _t2_design(section: dict) -> str:
    if "local" not in section["distributions"]:
        return "the local law is not run"
    if max(section["eval"]["ratios"]) <= 1:
        return "no Lbar beyond L"
    return _seeds(section, "T2")


def _models(section: dict, claim: str) -> dict[str, tuple[int, int]]:
    """Per model, (its seeds, its groups) in ``claim`` (T1: the GPT's k >= 2; T2: every (model,
    k) on the local law): each group counts its own model's seeds (theory.seeds for the GPT,
    ``sfa_seeds`` for the idealized model)."""
    gpt = len(section["seeds"])
    if claim == "T1":
        return {"GPT": (gpt, sum(k >= 2 for k in section["gpt"]["k"]))}
    return {"SFA": (len(sfa_seeds(section)), len(section["k"])), "GPT": (gpt, len(section["gpt"]["k"]))}


def _seeds(section: dict, claim: str) -> str:
    """"" when the config's seeds give ``claim`` its power at the measured spread over its groups."""
    models, samples = _models(section, claim), section["eval"]["n"]
    if len({count for count, _ in models.values()}) == 1:  # one count: "runs N", as a slice of one model
        (count, _), groups = next(iter(models.values())), sum(g for _, g in models.values())
        return power.design(claim, count, groups, samples, "(model, k)")
    return power.models_design(claim, models, samples, "(model, k)")


def _power(claim: str):
    return lambda section: power.groups_power(
        claim, tuple(count for count, groups in _models(section, claim).values() for _ in range(groups)),
        section["eval"]["n"])


CLAIMS = (
    Claim("T1", "theory", "Coupling removes the locality requirement of the length-generalization bound.",
          "a task-specific position ID re-assignment, Position Coupling, can resolve the issue",
          f"For every k >= 2 with fitted GPT runs, at the largest Lbar/L: accuracy on the coupled law minus the "
          f"local law, the interval by betting of the difference over runs with its low end > -{NONINFERIORITY:.2g} (coupled no worse than "
          f"local); tested where the local law's model keeps more than {RETAINED} of its margin above chance and the "
          f"non-local law minus the local law, the reference shown beside it, has its high end < "
          f"-{NONINFERIORITY:.2g} (the comparison detects the shortfall the locality requirement predicts). The "
          f"idealized model's runs are shown beside it as an {IMPLEMENTATION_CHECK}: {BY_CONSTRUCTION}.",
          theory_coupling, "theory", _t1_design, power=_power("T1"), stability_rule=False),
    Claim("T2", "theory", "Local sparse planted correlations generalize with error growing at most like (Lbar/L)^2.",
          "we can decrease our overall error bound from O(eta_L eta_Lbar L Lbar^2 delta) to O((Lbar/L)^2 delta)",
          f"For every (model, k) on the local law with fitted runs: the exponent b of the log loss's growth, loss ~ "
          f"(Lbar/L)^b (least squares of log loss on log(Lbar/L) per run, over every evaluated Lbar/L), capped to "
          f"[{EXPONENT_RANGE[0]:g}, {EXPONENT_RANGE[1]:g}], has an interval by betting over runs, moved out by the "
          f"noise the draw of the sample sets every run shares gives the exponent (from each ratio's per-sample "
          f"spread of the log loss), with its upper end < {GROWTH_EXPONENT:g}, "
          f"on the runs whose loss at L is above the "
          f"floor ({{floor}}; runs at the floor are counted, not given an exponent), and the accuracy margin above chance "
          f"kept at the largest Lbar, (acc - 1/q) / (acc_L - 1/q), has an interval by betting over runs with its low end > "
          f"{RETAINED}.",
          theory_local, "theory", _t2_design, power=_power("T2"), stability_rule=False),
)

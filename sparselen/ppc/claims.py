"""The position-coupling slice's claims (C1, C2): criteria, constants and gates, tested on the
per-run evaluation tables (docs/reconstruction.md, "Claims")."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparselen.ppc.tasks import TASKS
from sparselen.verdicts import (BELOW_RESOLUTION, FAILS, FIT, HOLDS, INCONCLUSIVE, MIN_FITTED_RUNS, MORE_RUNS, Claim,
                                Result, Settings, decide, gate_result, interval_result)
from sparselen.stats import resample_accuracy

READS = ("evals",)  # the per-run tables the tests read (RUN_TABLES["ppc"] in the rules)

# Criteria, fixed before the results (docs/reconstruction.md, "Claims").
ORACLE_TOLERANCE = 0.10  # C2: PPC within this of oracle coupling


def facts(section: dict) -> dict:
    """What the tests need of the config run (``ppc``): each task's training sizes, and the tasks
    whose coupled ids depend on the input (a property of the task's code)."""
    return {"train_sizes": {task: section[task]["train_sizes"] for task in section["tasks"]},
            "input_dependent": tuple(name for name, task in TASKS.items() if task.IDS_DEPEND_ON_INPUT)}


ORACLE, PREDICTED = "coupled", "ppc"


def ppc_fit(runs: pd.DataFrame, s: Settings) -> pd.DataFrame:
    """Per (task, scheme, seed): whether the run fits (exact match >= FIT at every evaluated
    training size)."""
    parts = []
    for task, g in runs.groupby("task"):
        lo, hi = s.facts["train_sizes"].get(task, (g["size"].min(), g["size"].min()))
        inside = g[g["size"].between(lo, hi)]
        parts.append(inside.groupby(["task", "scheme", "seed"])["accuracy"].min().ge(FIT).rename("fit"))
    return pd.concat(parts).reset_index() if parts else pd.DataFrame(columns=["task", "scheme", "seed", "fit"])


def _ppc_task(g: pd.DataFrame, fit: pd.DataFrame) -> tuple[pd.DataFrame, dict, int]:
    """Rows of fitted runs at the largest size, runs fitted per scheme (fitted, all), the size."""
    size = g["size"].max()
    f = fit[fit["task"] == g["task"].iloc[0]]
    counts = {sc: (int(x["fit"].sum()), len(x)) for sc, x in f.groupby("scheme")}
    keep = f[f["fit"]][["scheme", "seed"]]
    return g[g["size"] == size].merge(keep, on=["scheme", "seed"]), counts, size


def _fitted(counts: dict, scheme: str) -> bool:
    return counts.get(scheme, (0, 0))[0] >= MIN_FITTED_RUNS


def _fit_note(counts: dict, schemes) -> str:
    return ", ".join(f"{sc} {counts[sc][0]}/{counts[sc][1]}" for sc in schemes if sc in counts)


def _coupling_gain(rows, counts, size, task, s, key):
    """(result of oracle coupling minus the best fitted baseline, point and boot per scheme)."""
    baselines = [sc for sc in counts if sc not in (ORACLE, PREDICTED)]
    fitted = [sc for sc in baselines if _fitted(counts, sc)]
    if not _fitted(counts, ORACLE):
        return gate_result(task, f"oracle coupling did not fit its training sizes ({_fit_note(counts, [ORACLE])})",
                           "train the coupled model until it fits"), None
    if not fitted:
        return gate_result(task, "no baseline fit its training sizes (" + _fit_note(counts, baselines) + ")",
                           "train the baselines until they fit, or a larger model"), None
    schemes = [ORACLE, PREDICTED, *fitted] if _fitted(counts, PREDICTED) else [ORACLE, *fitted]
    cells, point, boot = resample_accuracy(rows[rows["scheme"].isin(schemes)], ["scheme"], s, key, task)
    at = {sc: (point[i], boot[i]) for i, sc in enumerate(cells)}
    best_point = max(at[b][0] for b in fitted)
    best_boot = np.max([at[b][1] for b in fitted], axis=0)
    lo, hi = s.interval(at[ORACLE][1] - best_boot)
    note = f"size {size}: coupled - max({', '.join(fitted)})"
    return interval_result(task, at[ORACLE][0] - best_point, lo, hi, 0.0, note=note), (at, best_point, best_boot)


def ppc_coupling(data: dict, s: Settings) -> list[Result]:
    """C1: oracle coupling beats the best fitted baseline at the largest size, per task."""
    runs = data["evals"]
    fit = ppc_fit(runs, s)
    out = []
    for task, g in runs.groupby("task", sort=True):
        rows, counts, size = _ppc_task(g, fit)
        out.append(_coupling_gain(rows, counts, size, task, s, "C1")[0])
    return out


def ppc_predicts_ids(data: dict, s: Settings) -> list[Result]:
    """C2: on tasks whose ids depend on the input and where coupling matters, PPC beats the best
    fitted baseline and comes within ORACLE_TOLERANCE of oracle coupling."""
    runs = data["evals"]
    fit = ppc_fit(runs, s)
    out = []
    for task, g in runs.groupby("task", sort=True):
        if task not in s.facts["input_dependent"]:
            continue
        rows, counts, size = _ppc_task(g, fit)
        c1, stats = _coupling_gain(rows, counts, size, task, s, "C2")
        if c1.verdict != HOLDS:
            reason = c1.reason if stats is None else (
                f"oracle coupling does not demonstrably beat the best baseline here (coupled - best "
                f"{c1.value:+.2f} [{c1.ci_low:+.2f}, {c1.ci_high:+.2f}]): a control, not a test of PPC")
            out.append(gate_result(task, reason, c1.resolve or "a task whose lookups need coupling"))
            continue
        if not _fitted(counts, PREDICTED):
            out.append(gate_result(task, f"ppc did not fit its training sizes ({_fit_note(counts, [PREDICTED])})",
                                   "train the ppc model until it fits"))
            continue
        at, best_point, best_boot = stats
        gain, gain_lo, gain_hi = at[PREDICTED][0] - best_point, *s.interval(at[PREDICTED][1] - best_boot)
        gap, gap_lo, gap_hi = at[PREDICTED][0] - at[ORACLE][0], *s.interval(at[PREDICTED][1] - at[ORACLE][1])
        v1, v2 = decide(gain_lo, gain_hi, 0.0), decide(gap_lo, gap_hi, -ORACLE_TOLERANCE)
        verdict = FAILS if FAILS in (v1, v2) else HOLDS if v1 == v2 == HOLDS else INCONCLUSIVE
        note = (f"size {size}: ppc - best baseline {gain:.2f} [{gain_lo:.2f}, {gain_hi:.2f}]; "
                f"ppc - coupled {gap:.2f} [{gap_lo:.2f}, {gap_hi:.2f}] (tolerance -{ORACLE_TOLERANCE})")
        reason = note if verdict != INCONCLUSIVE else f"{note}; {BELOW_RESOLUTION}"
        out.append(Result(task, gain, gain_lo, gain_hi, verdict, reason, MORE_RUNS if verdict == INCONCLUSIVE else ""))
    return out or [gate_result("-", "no task whose coupled ids depend on the input was run",
                               f"run one of {list(s.facts['input_dependent'])} (configs/cpu-extended.yaml)")]


CLAIMS = (
    Claim("C1", "ppc", "Position coupling generalizes where plain positions do not.",
          "our theoretical model justifies certain techniques to modify positional embeddings which have been "
          "introduced to improve length generalization, such as position coupling",
          "For every task, at the largest evaluated size: exact match of coupled (oracle ids) minus the best baseline "
          "that fits its training sizes, interval's low end > 0.",
          ppc_coupling, "ppc"),
    Claim("C2", "ppc", "Predictive Position Coupling makes coupling work where the ids depend on the input.",
          "Predictive Position Coupling thereby allows us to broaden the array of tasks to which position coupling "
          "can successfully be applied",
          "On every task whose coupled ids depend on the input and where coupling matters, at the largest size: ppc "
          f"minus the best fitted baseline > 0, and ppc minus coupled > -{ORACLE_TOLERANCE} (interval low ends).",
          ppc_predicts_ids, "ppc"),
)

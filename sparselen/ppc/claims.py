"""The position-coupling slice's claims (C1, C2): criteria, constants and gates, tested on the
per-run evaluation tables (docs/reconstruction.md, "Claims").

Each test works per task (a group) on the runs that fit their training sizes and compares
schemes at the largest evaluated size by Welch's t interval over the runs' exact match
(``sparselen.stats.welch_interval``, floored at each run's evaluation noise). A task that needs
no coupling (its module's ``control``) is a control: shown, never part of the verdict."""

from __future__ import annotations

import pandas as pd

from sparselen.ppc.tasks import TASKS, sampler_params
from sparselen.stats import binomial_noise, welch_interval
from sparselen.verdicts import (FIT, MIN_FITTED_RUNS, Claim, Result, Settings, both, decide, gate_result,
                                interval_result, seeds_design, verdict_result)

READS = ("evals",)  # the per-run tables the tests read (RUN_TABLES["ppc"] in the rules)

# Criteria (docs/reconstruction.md, "Claims").
ORACLE_TOLERANCE = round(1 - FIT, 10)  # C2: PPC within the shortfall the fit gate accepts (0.1) of oracle coupling
ORACLE, PREDICTED = "coupled", "ppc"


def facts(section: dict) -> dict:
    """What the tests need of the config run (``ppc``): each task's training sizes, the tasks
    whose coupled ids depend on the input, and the tasks that are controls with their reason
    (properties of the task's code at the config's settings)."""
    tasks = section["tasks"]
    return {"train_sizes": {task: section[task]["train_sizes"] for task in tasks},
            "input_dependent": tuple(name for name, task in TASKS.items() if task.IDS_DEPEND_ON_INPUT),
            "controls": {task: why for task in tasks if (why := TASKS[task].control(**sampler_params(section[task])))}}


def run_scores(runs: pd.DataFrame, s: Settings) -> pd.DataFrame:
    """Per (task, scheme, seed): whether the run fits (exact match >= FIT at every evaluated
    training size), its exact match at the task's largest evaluated size and the samples it
    was measured on (``n``)."""
    parts = []
    for task, g in runs.groupby("task"):
        lo, hi = s.facts["train_sizes"].get(task, (g["size"].min(), g["size"].min()))
        key = ["task", "scheme", "seed"]
        fit = g[g["size"].between(lo, hi)].groupby(key)["accuracy"].min().ge(FIT).rename("fit")
        largest = g[g["size"] == g["size"].max()].groupby(key)[["accuracy", "n"]].first()
        parts.append(pd.concat([fit, largest.rename(columns={"accuracy": "largest"})], axis=1)
                     .assign(size=g["size"].max()))
    return pd.concat(parts).reset_index()


class TaskRuns:
    """One task's runs: the fitted runs' exact match at the largest size per scheme, and its
    evaluation noise."""

    def __init__(self, task: str, scores: pd.DataFrame, s: Settings):
        self.task, self.size = task, int(scores["size"].iloc[0])
        self.control = s.facts.get("controls", {}).get(task, "")
        self.counts = {sc: (int(g["fit"].sum()), len(g)) for sc, g in scores.groupby("scheme")}
        fitted = scores[scores["fit"]]
        self.fitted = {sc: g["largest"].to_numpy(float) for sc, g in fitted.groupby("scheme")
                       if len(g) >= MIN_FITTED_RUNS}
        self.noise = {sc: binomial_noise(g["largest"], g["n"]) for sc, g in fitted.groupby("scheme")}
        self.baselines = [sc for sc in self.counts if sc not in (ORACLE, PREDICTED)]

    @property
    def group(self) -> str:
        return f"{self.task} (control: {self.control})" if self.control else self.task

    def note(self, schemes) -> str:
        return ", ".join(f"{sc} {self.counts[sc][0]}/{self.counts[sc][1]}" for sc in schemes if sc in self.counts)

    def best_baseline(self) -> str | None:
        """The fitted baseline with the highest mean exact match at the largest size."""
        fitted = [sc for sc in self.baselines if sc in self.fitted]
        return max(fitted, key=lambda sc: self.fitted[sc].mean()) if fitted else None

    def unfitted(self, scheme: str) -> Result | None:
        """The gate: ``scheme`` (or, for "baseline", any baseline) must have MIN_FITTED_RUNS fitted runs."""
        if scheme == "baseline":
            if self.best_baseline() is None:
                return gate_result(self.group, f"no baseline fit its training sizes ({self.note(self.baselines)})",
                                   "train the baselines until they fit, or a larger model", bool(self.control))
        elif scheme not in self.counts:
            return gate_result(self.group, f"no {scheme} run", f"add {scheme} to ppc.schemes", bool(self.control))
        elif scheme not in self.fitted:
            return gate_result(self.group, f"{scheme} did not fit its training sizes ({self.note([scheme])})",
                               f"train the {scheme} model until it fits", bool(self.control))
        return None

    def difference(self, a: str, b: str) -> tuple[float, float, float]:
        return welch_interval(self.fitted[a], self.fitted[b], noise_a=self.noise[a], noise_b=self.noise[b])


def _tasks(data: dict, s: Settings):
    scores = run_scores(data["evals"], s)
    for task, g in scores.groupby("task", sort=True):
        yield TaskRuns(task, g, s)


def ppc_coupling(data: dict, s: Settings) -> list[Result]:
    """C1: oracle coupling beats the best fitted baseline at the largest size, per task."""
    out = []
    for t in _tasks(data, s):
        gate = t.unfitted(ORACLE) or t.unfitted("baseline")
        if gate:
            out.append(gate)
            continue
        best = t.best_baseline()
        diff, lo, hi = t.difference(ORACLE, best)
        out.append(interval_result(t.group, diff, lo, hi, 0.0, control=bool(t.control),
                                   note=f"size {t.size}: coupled - {best} (the best fitted of "
                                        f"{', '.join(sc for sc in t.baselines if sc in t.fitted)}), "
                                        f"{len(t.fitted[ORACLE])} and {len(t.fitted[best])} runs"))
    return out


def ppc_predicts_ids(data: dict, s: Settings) -> list[Result]:
    """C2: on every task whose ids depend on the input, PPC beats the best fitted baseline and
    comes within ORACLE_TOLERANCE of oracle coupling."""
    out = []
    for t in _tasks(data, s):
        if t.task not in s.facts["input_dependent"]:
            continue
        gate = t.unfitted(PREDICTED) or t.unfitted(ORACLE) or t.unfitted("baseline")
        if gate:
            out.append(gate)
            continue
        best = t.best_baseline()
        gain, gain_lo, gain_hi = t.difference(PREDICTED, best)
        gap, gap_lo, gap_hi = t.difference(PREDICTED, ORACLE)
        verdict = both(decide(gain_lo, gain_hi, 0.0), decide(gap_lo, gap_hi, -ORACLE_TOLERANCE))
        note = (f"size {t.size}: ppc - {best} (best fitted baseline) {gain:+.2f} [{gain_lo:+.2f}, {gain_hi:+.2f}] "
                f"(needs > 0); ppc - coupled {gap:+.2f} [{gap_lo:+.2f}, {gap_hi:+.2f}] (needs > -{ORACLE_TOLERANCE:.2g})")
        out.append(verdict_result(t.group, gain, gain_lo, gain_hi, verdict, note, bool(t.control)))
    return out or [gate_result("-", "no task whose coupled ids depend on the input was run",
                               f"run one of {list(s.facts['input_dependent'])} (configs/cpu-extended.yaml)")]


def _design(section: dict, needs) -> str:
    """"" when some non-control task runs coupled and a baseline (and ``needs``) on 2 seeds."""
    f = facts(section)
    tasks = [t for t in section["tasks"] if t not in f["controls"] and needs(t, f)]
    schemes = set(section["schemes"])
    seeds = {t: len(section[t].get("seeds", section["seeds"])) for t in tasks}
    if not tasks:
        return "no task of the kind the claim needs (controls aside)"
    if ORACLE not in schemes or not schemes - {ORACLE, PREDICTED}:
        return "no coupled run or no baseline"
    return seeds_design(max(seeds.values()))


def _c1_design(section: dict) -> str:
    return _design(section, lambda task, f: True)


def _c2_design(section: dict) -> str:
    if PREDICTED not in section["schemes"]:
        return "no ppc run"
    return _design(section, lambda task, f: task in f["input_dependent"])


CLAIMS = (
    Claim("C1", "ppc", "Position coupling generalizes where plain positions do not.",
          "our theoretical model justifies certain techniques to modify positional embeddings which have been "
          "introduced to improve length generalization, such as position coupling",
          "For every task that needs coupling (controls shown aside), at the largest evaluated size: exact match of "
          "coupled (oracle ids) minus the best baseline that fits its training sizes, Welch's t interval over the "
          "fitted runs with its low end > 0.",
          ppc_coupling, "ppc", _c1_design),
    Claim("C2", "ppc", "Predictive Position Coupling makes coupling work where the ids depend on the input.",
          "Predictive Position Coupling thereby allows us to broaden the array of tasks to which position coupling "
          "can successfully be applied",
          "On every task whose coupled ids depend on the input (controls shown aside), at the largest size: ppc "
          f"minus the best fitted baseline > 0, and ppc minus coupled > -{ORACLE_TOLERANCE:.2g} (low ends of Welch's "
          "t intervals over the fitted runs).",
          ppc_predicts_ids, "ppc", _c2_design),
)

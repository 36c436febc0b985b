"""The position-coupling slice's claims (C1, C2): criteria, constants and gates, tested on the
per-run evaluation tables (docs/reconstruction.md, "Claims").

Each test works per task (a group) on the runs that fit their training sizes and compares
schemes at the largest evaluated size by an interval by betting of the difference of the
runs' exact match (``sparselen.statistics.betting.difference``, moved out by their evaluation
noise); the best baseline
is chosen on each run's validation samples, drawn apart from the test samples it is then
compared on. What a task is to each claim
follows from its module, at the sampler's settings (``task_facts``): C1 is decided on tasks
whose coupled ids do not depend on the input (oracle ids that encode where the answer is would
make it true by construction); C2 on the paper's tasks whose ids depend on the input. Shown
beside a claim, never deciding it: controls (a task that needs no coupling), our own tasks
(extensions) and, for C2, the tasks whose ids do not depend on the input (references: there
PPC must match oracle coupling)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparselen.ppc.evaluate import ERROR_AT
from sparselen.ppc.runs import all_schemes, task_schemes
from sparselen.ppc.tasks import sampler_params, task_module
from sparselen.statistics import betting, power
from sparselen.statistics.stats import ACCURACY, binomial_noise, ratio_noise
from sparselen.statistics.verdicts import (FIT, MIN_FITTED_RUNS, Claim, Result, Settings, both, decide, gate_result,
                                           verdict_result)

READS = ("evals",)  # the per-run tables the tests read (RUN_TABLES["ppc"] in the rules)

# Criteria (docs/reconstruction.md, "Claims").
ORACLE_TOLERANCE = round(1 - FIT, 10)  # C2: PPC within the shortfall the fit gate accepts (0.1) of oracle coupling
RETAINED = 0.5  # C1, C2: the credited scheme keeps more than half its margin above chance at the largest size (as P2, T2)
ORACLE, PREDICTED = "coupled", "ppc"
DIAGNOSTICS = ("first_id_accuracy", "later_id_accuracy", "first_id_accuracy_within", "first_id_accuracy_beyond",
               "accuracy_within", "accuracy_beyond", "n_beyond", "n", "first_lookup_limit",
               *(f"first_error_at_{where}_id" for where in ERROR_AT), "forced_token_accuracy")


def task_facts(name: str, section: dict) -> dict:
    """What task ``name`` is, from its module at the section's sampler settings: whether its ids
    depend on the input, why it is a control ("" if not), whose task it is (and, the paper's, the
    form run), whether its coupled runs train on id skips, how many times its longest training
    size it is tested to, and its exact-match chance level at each evaluated size."""
    module, params = task_module(name), sampler_params(section)
    sizes, train = section.get("eval_sizes", []), section.get("train_sizes")
    return {"ids_depend_on_input": module.ids_depend_on_input(**params), "control": module.control(**params),
            "origin": module.ORIGIN, "form": module.form(**params) if module.ORIGIN == "paper" else "",
            "tested_to": max(sizes) / train[1] if sizes and train else None,
            "id_skips": section.get("id_skips", 0),
            "chance": {size: module.chance_exact_match(size, **params) for size in sizes}}


def facts(section: dict) -> dict:
    """What the tests need of the config run (``ppc``): each task's training sizes and facts,
    and the sensitivity runs of PPC (``sensitivity``: name -> what its position head predicts),
    where the config runs any."""
    tasks = section["tasks"]
    out = {"train_sizes": {task: section[task]["train_sizes"] for task in tasks},
           "tasks": {task: task_facts(task, section[task]) for task in tasks}}
    sensitivity = sensitivity_runs(section)
    return out | ({"sensitivity": sensitivity} if sensitivity else {})


def sensitivity_runs(section: dict) -> dict:
    """The runs of scheme ppc other than ``ppc`` (the primary reading), with what each one's
    position head predicts of the next id (docs/reconstruction.md, "PPC's id readings")."""
    variants = section.get("variants", {})
    return {name: variants[name].get("model", {}).get("position_target", "absolute")
            for name in all_schemes(section) if name != PREDICTED and variants.get(name, {}).get("scheme") == PREDICTED}


def run_scores(runs: pd.DataFrame, s: Settings) -> pd.DataFrame:
    """Per (task, scheme, seed): whether the run fits (exact match >= FIT at every evaluated
    training size), its exact match pooled over those sizes (``in``, on ``n_in`` samples), its
    exact match at the task's largest evaluated size, on the validation
    samples there (``validation``, NaN without them) and its diagnostics there."""
    if "split" not in runs:
        runs = runs.assign(split="test")
    parts = []
    for task, g in runs.groupby("task"):
        test, val = g[g["split"] == "test"], g[g["split"] == "validation"]
        size = test["size"].max()
        lo, hi = s.facts["train_sizes"].get(task, (test["size"].min(), test["size"].min()))
        key = ["task", "scheme", "seed"]
        inside = test[test["size"].between(lo, hi)].groupby(key)
        fit = inside["accuracy"].min().ge(FIT).rename("fit")
        n_in = inside["n"].sum().rename("n_in")
        acc_in = (inside["correct"].sum() / n_in).rename("in")
        top = test[test["size"] == size].groupby(key)
        largest = top["accuracy"].first().rename("largest")
        diag = top[[c for c in DIAGNOSTICS if c in g]].first()
        validation = val[val["size"] == size].groupby(key)["accuracy"].first().rename("validation")
        parts.append(pd.concat([fit, acc_in, n_in, largest, validation, diag], axis=1).assign(size=size))
    out = pd.concat(parts)
    return out.assign(fit=out["fit"].fillna(False).astype(bool)).reset_index()


class TaskRuns:
    """One task's runs: the fitted runs' exact match at the largest size per scheme, and its
    evaluation noise."""

    def __init__(self, task: str, scores: pd.DataFrame, s: Settings):
        self.task, self.size = task, int(scores["size"].iloc[0])
        self.facts = s.facts.get("tasks", {}).get(task) or task_facts(task, {})
        self.counts = {sc: (int(g["fit"].sum()), len(g)) for sc, g in scores.groupby("scheme")}
        fitted = scores[scores["fit"]]
        self.runs = {sc: g for sc, g in fitted.groupby("scheme") if len(g) >= MIN_FITTED_RUNS}
        self.fitted = {sc: g["largest"].to_numpy(float) for sc, g in self.runs.items()}
        self.noise = {sc: binomial_noise(g["largest"], g["n"]) for sc, g in self.runs.items()}
        self.sensitivity = s.facts.get("sensitivity", {})
        self.baselines = [sc for sc in self.counts if sc not in (ORACLE, PREDICTED, *self.sensitivity)]
        chance = self.facts.get("chance", {}).get(self.size)
        self.chance = task_module(task).chance_exact_match(self.size) if chance is None else chance

    def group(self, role: str = "") -> str:
        return f"{self.task} ({role})" if role else self.task

    def paper_group(self) -> str:
        """A deciding group of C2 named with the form run and its relation to the paper's task,
        which the verdict line cites: "parity_scratchpad (parity with a scratchpad, k 1-4
        [paper's task, our format], tested to 10x the longest training size)"."""
        form, ratio = self.facts.get("form"), self.facts.get("tested_to")
        if not form:
            return self.task
        tested = f", tested to {ratio:.3g}x the longest training size" if ratio else ""
        return f"{self.task} ({form} [paper's task, our format]{tested})"

    def note(self, schemes) -> str:
        return ", ".join(f"{sc} {self.counts[sc][0]}/{self.counts[sc][1]}" for sc in schemes if sc in self.counts)

    def best_baseline(self) -> str | None:
        """The fitted baseline with the highest mean exact match on its validation samples at
        the largest size (None if no fitted baseline has them)."""
        valid = {sc: self.runs[sc]["validation"].to_numpy(float) for sc in self.baselines if sc in self.runs}
        valid = {sc: v for sc, v in valid.items() if np.isfinite(v).all()}
        return max(valid, key=lambda sc: valid[sc].mean()) if valid else None

    def unfitted(self, scheme: str, role: str = "", group: str | None = None) -> Result | None:
        """The gate: ``scheme`` (or, for "baseline", any baseline) must have MIN_FITTED_RUNS fitted
        runs; a baseline also its validation samples. ``group``: the row's name (default by role)."""
        group, aside = group or self.group(role), bool(role)
        if scheme == "baseline":
            if not any(sc in self.runs for sc in self.baselines):
                return gate_result(group, f"no baseline fit its training sizes ({self.note(self.baselines)})",
                                   "train the baselines until they fit, or a larger model", aside)
            if self.best_baseline() is None:
                return gate_result(group, "the fitted baselines have no validation samples",
                                   "evaluate the runs again (ppc_evaluate writes the validation cell)", aside)
        elif scheme not in self.counts:
            return gate_result(group, f"no {scheme} run", f"add {scheme} to ppc.schemes", aside)
        elif scheme not in self.fitted:
            return gate_result(group, f"{scheme} did not fit its training sizes ({self.note([scheme])})",
                               f"train the {scheme} model until it fits", aside)
        return None

    def kept(self, scheme: str) -> tuple[str, str]:
        """(verdict, note) of whether ``scheme``'s fitted runs generalize: the share of their
        margin above the task's chance level on the training sizes kept at the largest size,
        (largest - chance) / (in - chance), interval by betting widened to the evaluation noise, against
        RETAINED. A run that keeps the format and guesses what it must look up is at chance."""
        g, c = self.runs[scheme], self.chance
        num, den = g["largest"] - c, g["in"] - c
        kept = num / den
        noise = ratio_noise(num, den, binomial_noise(g["largest"], g["n"]), binomial_noise(g["in"], g["n_in"]))
        mean, lo, hi = betting.interval(kept, betting.kept_range(c, FIT), noise=noise)
        return decide(lo, hi, RETAINED), (f"{scheme} keeps {mean:.2f} [{lo:.2f}, {hi:.2f}] of its margin above the "
                                          f"task's chance level {chance_words(c)} (needs > {RETAINED})")

    def difference(self, a: str, b: str) -> tuple[float, float, float]:
        return betting.difference(self.fitted[a], self.fitted[b], ACCURACY, noise_a=self.noise[a],
                                  noise_b=self.noise[b])

    def c2_role(self) -> str:
        """"" where the task decides C2, else why it is shown aside."""
        f = self.facts
        if not f["ids_depend_on_input"]:
            return "reference: ids independent of the input, PPC must match oracle coupling"
        if f["control"]:
            return f"control: {f['control']}"
        if f["origin"] != "paper":
            return "extension [ours]: not a task the paper tests PPC on"
        return ""

    def diagnostics(self, predicted: str = PREDICTED) -> str:
        """The PPC run ``predicted``'s id accuracy at the largest size (first id, later ones, the
        first by lookup distance), where its first wrong id is and its tokens given the oracle's
        ids, and oracle coupling's exact match by lookup distance, means over fitted runs; with
        whether the coupled runs ever trained on the test's first-lookup distances."""
        out = []
        if predicted in self.runs and "first_id_accuracy" in self.runs[predicted]:
            r = self.runs[predicted].mean(numeric_only=True)
            out.append(f"{predicted} ids: first {r['first_id_accuracy']:.2f} ({_split(r, 'first_id_accuracy')}), "
                       f"later {r['later_id_accuracy']:.2f} (given a right first id)")
            if "forced_token_accuracy" in r:
                errors = ", ".join(f"{where} {r[f'first_error_at_{where}_id']:.2f}" for where in ERROR_AT)
                out.append(f"{predicted}'s first wrong id: {errors}; its tokens given the oracle's ids "
                           f"{r['forced_token_accuracy']:.2f}")
        if ORACLE in self.runs and "accuracy_within" in self.runs[ORACLE]:
            out.append(f"coupled exact match: {_split(self.runs[ORACLE].mean(numeric_only=True), 'accuracy')}")
        far = next((g for g in self.runs.values() if "n_beyond" in g), None)
        if far is not None and far["n_beyond"].sum() > 0:
            limit = int(far["first_lookup_limit"].iloc[0])
            share = far["n_beyond"].sum() / far["n"].sum()
            trained = ("coupled and ppc trained with id skips, on longer distances" if self.facts["id_skips"] else
                       "confound: coupled and ppc never trained on a longer one (no id skips)")
            out.append(f"{share:.0%} of first lookups exceed the training sizes' {limit} ids ({trained})")
        return "; ".join(out)


NEGLIGIBLE_CHANCE = 5e-4  # an exact-match chance below this shows as ~0: no guess is ever right in 200 samples


def chance_words(c: float) -> str:
    """A chance level as a reader takes it: "~0 (a guessed answer is never right)" for the
    long answers whose chance is astronomically small (8.27e-25), else its value."""
    return "~0 (a guessed answer is never right)" if c < NEGLIGIBLE_CHANCE else f"{c:.3g}"


def _split(row: pd.Series, column: str) -> str:
    """``column`` within the training sizes' first-lookup distances and beyond them (where any are)."""
    parts = [f"{where} {row[f'{column}_{where}']:.2f}" for where in ("within", "beyond")
             if np.isfinite(row[f"{column}_{where}"])]
    return ", ".join(parts).replace("within", "within the training sizes' lookup distances", 1)


def _tasks(data: dict, s: Settings):
    scores = run_scores(data["evals"], s)
    for task, g in scores.groupby("task", sort=True):
        yield TaskRuns(task, g, s)


def ppc_coupling(data: dict, s: Settings) -> list[Result]:
    """C1: oracle coupling beats the best fitted baseline at the largest size, on every task
    whose coupled ids do not depend on the input (controls aside)."""
    out = []
    for t in _tasks(data, s):
        if t.facts["ids_depend_on_input"]:
            continue
        role = f"control: {t.facts['control']}" if t.facts["control"] else ""
        gate = t.unfitted(ORACLE, role) or t.unfitted("baseline", role)
        if gate:
            out.append(gate)
            continue
        best = t.best_baseline()
        diff, lo, hi = t.difference(ORACLE, best)
        kept, generalizes = t.kept(ORACLE)
        out.append(verdict_result(t.group(role), diff, lo, hi, both(decide(lo, hi, 0.0), kept),
                                  f"size {t.size}: coupled - {best} (the best on validation samples of the fitted "
                                  f"{', '.join(sc for sc in t.baselines if sc in t.fitted)}), "
                                  f"{len(t.fitted[ORACLE])} and {len(t.fitted[best])} runs (needs > 0); {generalizes}",
                                  control=bool(role)))
    return out or [gate_result("-", "no task whose coupled ids are independent of the input was run",
                               "run copy_repeat, addition or parity_scratchpad with dense: true")]


def ppc_predicts_ids(data: dict, s: Settings) -> list[Result]:
    """C2: on the paper's tasks whose ids depend on the input, PPC beats the best fitted baseline
    and comes within ORACLE_TOLERANCE of oracle coupling; controls, our own tasks and (PPC
    against oracle coupling only) the tasks whose ids do not depend on the input shown aside;
    on the deciding tasks, each sensitivity run of PPC (another reading of what its position head
    predicts) tested the same way and shown aside, never deciding."""
    out = []
    for t in _tasks(data, s):
        role = t.c2_role()
        name = t.group(role) if role else t.paper_group()
        out.append(_c2_row(t, PREDICTED, name, role))
        if not role:
            out += [_c2_row(t, run, f"{t.task} (sensitivity: {run}, ppc's head predicts the next id's {target})",
                            "sensitivity") for run, target in t.sensitivity.items() if run in t.counts]
    if not any(not r.control for r in out):
        out.append(gate_result("-", "none of the paper's tasks whose coupled ids depend on the input was run",
                               "run parity_scratchpad or variable_assignment with multi-digit constants "
                               "(configs/paper.yaml runs them on the seeds that decide C2)"))
    return out


def _c2_row(t: "TaskRuns", predicted: str, name: str, role: str) -> Result:
    """C2's row of one task for the PPC run ``predicted``: a deciding row where ``role`` is ""."""
    reference = not t.facts["ids_depend_on_input"]
    gate = (t.unfitted(predicted, role, name) or t.unfitted(ORACLE, role, name)
            or (None if reference else t.unfitted("baseline", role, name)))
    if gate:
        return gate
    gap, gap_lo, gap_hi = t.difference(predicted, ORACLE)
    oracle = f"{predicted} - coupled {gap:+.2f} [{gap_lo:+.2f}, {gap_hi:+.2f}] (needs > -{ORACLE_TOLERANCE:.2g})"
    diagnostics = t.diagnostics(predicted)
    kept, generalizes = t.kept(predicted)
    if reference:
        return verdict_result(name, gap, gap_lo, gap_hi, both(decide(gap_lo, gap_hi, -ORACLE_TOLERANCE), kept),
                              "; ".join(filter(None, [f"size {t.size}: {oracle}; {generalizes}", diagnostics])),
                              control=True)
    best = t.best_baseline()
    gain, gain_lo, gain_hi = t.difference(predicted, best)
    verdict = both(decide(gain_lo, gain_hi, 0.0), decide(gap_lo, gap_hi, -ORACLE_TOLERANCE), kept)
    note = (f"size {t.size}: {predicted} - {best} (best baseline on validation samples) {gain:+.2f} "
            f"[{gain_lo:+.2f}, {gain_hi:+.2f}] (needs > 0); {oracle}; {generalizes}")
    return verdict_result(name, gain, gain_lo, gain_hi, verdict, "; ".join(filter(None, [note, diagnostics])),
                          bool(role))


def _deciding(section: dict, claim: str) -> list:
    """The tasks ``claim`` is decided on, from their facts: C1 those whose ids do not depend on
    the input, C2 the paper's whose ids do (controls aside)."""
    f = facts(section)["tasks"]
    if claim == "C1":
        return [t for t in section["tasks"] if not f[t]["ids_depend_on_input"] and not f[t]["control"]]
    return [t for t in section["tasks"] if f[t]["ids_depend_on_input"] and not f[t]["control"]
            and f[t]["origin"] == "paper"]


def _sizing(section: dict, claim: str) -> tuple[int, int, int]:
    """(seeds of the deciding task with fewest, deciding tasks, samples per cell)."""
    tasks = _deciding(section, claim)
    return min(len(section[t].get("seeds", section["seeds"])) for t in tasks), len(tasks), section["eval"]["n"]


def _design(section: dict, claim: str) -> str:
    """"" when the tasks ``claim`` is decided on run coupled and a baseline on seeds that give it
    its power at the measured spread (every such task must hold)."""
    tasks = _deciding(section, claim)
    schemes = {name for task in tasks or section["tasks"] for name in task_schemes(section, task)}
    if claim == "C2" and PREDICTED not in schemes:
        return "no ppc run"
    if not tasks:
        return "no task of the kind the claim is decided on"
    if ORACLE not in schemes or not schemes - {ORACLE, PREDICTED, *sensitivity_runs(section)}:
        return "no coupled run or no baseline"
    return power.design(claim, *_sizing(section, claim), "task")


def _power(claim: str):
    return lambda section: power.claim_power(claim, *_sizing(section, claim)) if _deciding(section, claim) else 0.0


CLAIMS = (
    Claim("C1", "ppc", "Position coupling generalizes where plain positions do not.",
          "our theoretical model justifies certain techniques to modify positional embeddings which have been "
          "introduced to improve length generalization, such as position coupling",
          "For every task whose coupled ids do not depend on the input (controls shown aside), at the largest "
          "evaluated size: exact match of coupled (oracle ids) minus the baseline that fits its training sizes with "
          "the best exact match on validation samples, the interval by betting of the difference over the fitted runs "
          "(each scheme's bound at 1.25%, a union bound) with its low end > 0; "
          f"and coupled keeps more than {RETAINED} of its margin above the task's exact-match chance level (its "
          "module's: a model that keeps the format and guesses what it must look up) from the training sizes to the "
          "largest (interval by betting over the fitted runs, low end).",
          ppc_coupling, "ppc", lambda section: _design(section, "C1"), power=_power("C1"), stability_rule=False),
    Claim("C2", "ppc", "Predictive Position Coupling makes coupling work where the ids depend on the input.",
          "Predictive Position Coupling thereby allows us to broaden the array of tasks to which position coupling "
          "can successfully be applied",
          "On every task the paper tests PPC on whose coupled ids depend on the input (controls, our own tasks and "
          "the tasks with input-independent ids shown aside), at the largest size: ppc minus the fitted baseline "
          f"best on validation samples > 0, ppc minus coupled > -{ORACLE_TOLERANCE:.2g} (low ends of the intervals "
          f"by betting of the differences over the fitted runs), and ppc keeps more than {RETAINED} of its margin above the task's "
          "exact-match chance level from the training sizes to the largest (interval by betting, low end; the reference "
          "rows "
          "too).",
          ppc_predicts_ids, "ppc", lambda section: _design(section, "C2"), power=_power("C2"), stability_rule=False),
)

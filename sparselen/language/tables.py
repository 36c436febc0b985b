"""The natural-language tables as a registry: each entry names the inputs it reads (per-run
tables by their names in ``RUN_TABLES["language"]``, workflow/rules/language.smk, and other
tables of this registry), the ``language.analysis`` settings it uses, how it is built and its
title. The rule ``language_table`` builds any entry, so a new table is an entry here, not a rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from sparselen.language.sparsity import SPARSE_K, sparsity_level, token_sparsity
from sparselen.presentation.tables import read_table, read_tables
from sparselen.statistics.stats import (NONNEGATIVE, bootstrap_ci, cluster_ci, cluster_interval, t_interval,
                                        weighted_mean, weighted_median)

BOOTSTRAP = ("bootstrap", "seed")


def table_input(name: str) -> str:
    """The input name under which a table reads the table ``name`` (its CSV)."""
    return f"{name}_table"


@dataclass(frozen=True)
class Table:
    """``build(**inputs, analysis=settings)`` -> the table; ``title`` is formatted with the
    settings; ``inputs`` are per-run tables (lists of CSVs, concatenated), ``tables`` other
    entries (read back as written, as ``<name>_table``), ``settings`` the keys of
    ``language.analysis`` it reads (a change to another key reruns it not)."""

    build: Callable[..., pd.DataFrame]
    title: str
    inputs: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    settings: tuple[str, ...] = BOOTSTRAP

    def input_names(self) -> list[str]:
        return [*self.inputs, *map(table_input, self.tables)]

    def read(self, files: dict) -> dict[str, pd.DataFrame]:
        """Its inputs from ``files`` (input name -> file or files) by name."""
        return {**{name: read_tables(files[name]) for name in self.inputs},
                **{table_input(t): read_table(files[table_input(t)]) for t in self.tables}}


def _boot(analysis: dict) -> dict:
    return {"n_boot": analysis["bootstrap"], "seed": analysis["seed"]}


def benefit_recovered(deps: pd.DataFrame, analysis: dict) -> pd.DataFrame:
    """Per method and k: the share of the long-context benefit that k distant tokens recover."""
    share, rows = analysis["sparse_fraction"], []
    for (method, k), g in deps.groupby(["method", "k"], sort=False):
        med, lo, hi = bootstrap_ci(g["recovered"], np.median, **_boot(analysis))
        rows.append({"method": method, "k": k, "n_tokens": len(g), "median": med, "ci_low": lo, "ci_high": hi,
                     "mean": float(g["recovered"].mean()), f"share_ge_{share}": float((g["recovered"] >= share).mean()),
                     "overlap_with_greedy": float(g["overlap"].mean())})
    return pd.DataFrame(rows)


def generalization(deps: pd.DataFrame, transfer: pd.DataFrame, analysis: dict) -> pd.DataFrame:
    """Per model and token sparsity level (and over all tokens): its mean gain from the long
    over the short context on the analysed tokens."""
    levels = []
    for seed, g in deps.groupby("seed"):
        lv = sparsity_level(g, analysis["sparse_fraction"])
        lv["seed"] = seed
        levels.append(lv)
    joined = transfer.merge(pd.concat(levels), on=["doc", "t", "seed"])
    order = {str(k): i for i, k in enumerate(sorted(deps["k"].unique()))}
    rows = []
    for (ctx, scheme), run in joined.groupby(["context", "scheme"], sort=True):
        for level, g in [*run.groupby("sparsity"), ("all", run)]:
            mean, lo, hi = bootstrap_ci(g["gain"], np.mean, **_boot(analysis))
            rank = len(order) + 1 if level == "all" else order.get(level, len(order))  # ">kmax" after the ks
            rows.append({"context": ctx, "scheme": scheme, "sparsity": level, "order": rank,
                         "n_tokens": len(g), "mean": mean, "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows).sort_values(["context", "scheme", "order"])


def loss_by_position(position: pd.DataFrame, analysis: dict) -> pd.DataFrame:
    """Per model and position bin: its loss, with a t-interval over seeds when there are several,
    else the run's own interval over windows."""
    rows = []
    for (ctx, scheme, lo, hi), g in position.groupby(["context", "scheme", "bin_low", "bin_high"], sort=True):
        if len(g) > 1:
            mean, low, high = t_interval(g["mean"], bounds=NONNEGATIVE)
        else:
            mean, low, high = float(g["mean"].iloc[0]), float(g["ci_low"].iloc[0]), float(g["ci_high"].iloc[0])
        rows.append({"context": ctx, "scheme": scheme, "position": float(g["position"].iloc[0]), "bin_low": lo,
                     "bin_high": hi, "mean": mean, "ci_low": low, "ci_high": high, "n_seeds": len(g)})
    return pd.DataFrame(rows)


def controls(screen: pd.DataFrame, planted: pd.DataFrame, deps: pd.DataFrame, analysis: dict) -> pd.DataFrame:
    """Long format (control: none, planted or null_far_context; group, statistic, value, ci_low,
    ci_high, n_tokens, n_docs): the mean benefit on random tokens; per planted distance the
    mean benefit and, beyond the short window, greedy's median recovered and how often its
    first token is the copy's source; per k the median recovered by greedy on the real and on
    the null far context, and their difference (same tokens, same resamples)."""
    boot, rows = _boot(analysis), []

    def add(control, group, statistic, values, docs, stat=weighted_mean):
        v, lo, hi = cluster_ci(values, docs, stat, **boot)
        rows.append({"control": control, "group": group, "statistic": statistic, "value": v, "ci_low": lo,
                     "ci_high": hi, "n_tokens": len(values), "n_docs": int(pd.Series(docs).nunique())})

    add("none", "random held-out tokens", "mean L_short - L_long", screen["benefit"], screen["doc"])
    for d, g in planted.groupby("distance"):
        where = "beyond" if bool(g["beyond"].iloc[0]) else "inside"
        add("planted", f"distance {d} ({where} the short window)", "mean L_short - L_long", g["benefit"], g["doc"])
    pl = deps[deps["method"] == "greedy_planted"]
    for (d, k), g in pl.groupby(["distance", "k"]) if len(pl) else ():
        add("planted", f"distance {int(d)}", f"greedy k={k}: median recovered", g["recovered"], g["doc"],
            weighted_median)
    for d, g in pl[pl["k"] == pl["k"].min()].groupby("distance") if len(pl) else ():
        add("planted", f"distance {int(d)}", "greedy's first token is the source", g["source_first"].astype(float),
            g["doc"])
    real, null = deps[deps["method"] == "greedy"], deps[deps["method"] == "greedy_null"]
    for k, g in real.groupby("k"):
        add("none", "analysed tokens", f"greedy k={k}: median recovered", g["recovered"], g["doc"], weighted_median)
        n = null[null["k"] == k]
        if n.empty:
            continue
        add("null_far_context", "analysed tokens", f"greedy k={k}: median recovered", n["recovered"], n["doc"],
            weighted_median)
        rows.append(paired_difference(g, n, k, boot))
    return pd.DataFrame(rows)


def paired_difference(real: pd.DataFrame, null: pd.DataFrame, k: int, boot: dict) -> dict:
    """Median recovered on the real minus the null far context, the two on the same tokens and
    resampled together by document."""
    null = null.set_index(["doc", "t"]).loc[list(zip(real["doc"], real["t"]))]
    x, y = real["recovered"].to_numpy(float), null["recovered"].to_numpy(float)
    value, lo, hi = cluster_interval(float(np.median(x) - np.median(y)),
                                     lambda w: weighted_median(x, w) - weighted_median(y, w), real["doc"], **boot)
    return {"control": "null_far_context", "group": "analysed tokens", "statistic": f"greedy k={k}: real minus null",
            "value": value, "ci_low": lo, "ci_high": hi,
            "n_tokens": len(x), "n_docs": int(real["doc"].nunique())}


def induction_probe(induction: pd.DataFrame, analysis: dict) -> pd.DataFrame:
    """Per model: mean loss on each copy, copy2 with only the short window, and copy1 - copy2
    (the gain from having seen the span), sequences resampled."""
    rows = []
    for (ctx, scheme), g in induction.groupby(["context", "scheme"], sort=True):
        gain, lo, hi = bootstrap_ci(g["copy1"] - g["copy2"], np.mean, **_boot(analysis))
        rows.append({"context": ctx, "scheme": scheme, "sequences": len(g), "copy1": float(g["copy1"].mean()),
                     "copy2": float(g["copy2"].mean()), "copy2_short": float(g["copy2_short"].mean()),
                     "copy1_minus_copy2": gain, "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows)


def model_scale(screen_losses: pd.DataFrame, induction_table: pd.DataFrame, analysis: dict) -> pd.DataFrame:
    """Per long-context model (every scheme or variant at the longest context), smallest first:
    its parameters, its held-out loss and mean gain from the long over the short context on
    random tokens, and its induction probe (from the induction table): the reviewers'
    model-scale sweep."""
    long = screen_losses["context"].max()
    probe = induction_table[induction_table["context"] == long].set_index("scheme")
    rows = []
    for scheme, g in screen_losses[screen_losses["context"] == long].groupby("scheme", sort=True):
        mean, lo, hi = cluster_ci(g["gain"], g["doc"], weighted_mean, **_boot(analysis))
        row = {"scheme": scheme, "parameters": int(g["parameters"].iloc[0]), "seeds": g["seed"].nunique(),
               "tokens": len(g), "loss_long": float(g["loss_long"].mean()), "gain": mean, "gain_low": lo,
               "gain_high": hi}
        if scheme in probe.index:
            p = probe.loc[scheme]
            row |= {"copy1_minus_copy2": p["copy1_minus_copy2"], "copy_low": p["ci_low"], "copy_high": p["ci_high"]}
        rows.append(row)
    return pd.DataFrame(rows).sort_values("parameters")


def dependency_types(deps: pd.DataFrame, transfer: pd.DataFrame, analysis: dict) -> pd.DataFrame:
    """Analysed tokens split by whether the target occurs in the far context, by the distance of
    greedy's first token (in octaves of the short window) and by sparsity (``token_sparsity`` at
    the sparse fraction); per group and model the mean normalised gain; per model also the
    sparse minus dense difference."""
    boot = _boot(analysis)
    g = deps[deps["method"] == "greedy"]
    tok = g.groupby(["doc", "t", "seed"]).first()[["L_short", "L_long", "target_in_far", "top_distance",
                                                   "far_tokens"]].reset_index()
    tok["benefit"] = tok["L_short"] - tok["L_long"]
    short = int(transfer["context"].min())
    tok["distance_bin"] = [f"{short * 2 ** int(np.log2(d / short))}-{short * 2 ** (int(np.log2(d / short)) + 1) - 1}"
                           for d in tok["top_distance"]]
    tok = tok.merge(token_sparsity(deps, analysis["sparse_fraction"])[["doc", "t", "seed", "sparse"]],
                    on=["doc", "t", "seed"])
    rec = {k: g[g["k"] == k].set_index(["doc", "t", "seed"])["recovered"] for k in (1, 2) if k in set(g["k"])}
    for k, r in rec.items():
        tok = tok.merge(r.rename(f"recovered_k{k}").reset_index(), on=["doc", "t", "seed"])
    tok["sparsity"] = np.where(tok["sparse"], f"sparse (k <= {SPARSE_K})", "dense")
    tok["target_in_far"] = np.where(tok["target_in_far"], "target in far context", "target not in far context")
    runs = transfer.merge(tok[["doc", "t", "seed", "benefit"]], on=["doc", "t", "seed"])
    runs["normalised_gain"] = runs["gain"] / runs["benefit"]
    rows = []
    for split in ("target_in_far", "distance_bin", "sparsity"):
        for group, t in tok.groupby(split, sort=True):
            row = {"split": split, "group": group, "n_tokens": len(t), "n_docs": t["doc"].nunique(),
                   "mean_benefit": float(t["benefit"].mean())}
            for k in rec:
                row[f"recovered_k{k}"] = cluster_ci(t[f"recovered_k{k}"], t["doc"], weighted_median, **boot)[0]
            members = t[["doc", "t", "seed"]]
            for (ctx, scheme), run in runs.groupby(["context", "scheme"], sort=True):
                r = run.merge(members)
                mean, lo, hi = cluster_ci(r["normalised_gain"], r["doc"], weighted_mean, **boot)
                rows.append({**row, "context": ctx, "scheme": scheme, "normalised_gain": mean, "ci_low": lo,
                             "ci_high": hi})
    for (ctx, scheme), run in runs.groupby(["context", "scheme"], sort=True):
        rows.append(sparse_minus_dense(run.merge(tok[["doc", "t", "seed", "sparse"]]), ctx, scheme, boot))
    return pd.DataFrame(rows)


def sparse_minus_dense(run: pd.DataFrame, ctx: int, scheme: str, boot: dict) -> dict:
    """One model's mean normalised gain on sparse minus dense tokens, documents resampled."""
    x, s = run["normalised_gain"].to_numpy(float), run["sparse"].to_numpy(bool)
    point = float(x[s].mean() - x[~s].mean()) if s.any() and (~s).any() else float("nan")
    point, lo, hi = cluster_interval(point, lambda w: weighted_mean(x, w * s) - weighted_mean(x, w * ~s), run["doc"],
                                     **boot)
    return {"split": "sparsity", "group": "sparse minus dense", "n_tokens": len(x), "n_docs": run["doc"].nunique(),
            "context": ctx, "scheme": scheme, "normalised_gain": point, "ci_low": lo, "ci_high": hi}


SHARE = (*BOOTSTRAP, "sparse_fraction")
TABLES = {
    "table": Table(benefit_recovered, "Natural language: fraction of the long-context benefit recovered by k distant "
                   "tokens (median over analysed tokens, 95% bootstrap interval); greedy_null and greedy_planted are "
                   "controls (another document's far context; planted repeats)", inputs=("deps",), settings=SHARE),
    "generalization": Table(
        generalization, "Natural language: each model's gain from the long over the short context on the analysed "
        "tokens, by token sparsity (smallest greedy k recovering {sparse_fraction} of the benefit; mean, 95% "
        "bootstrap interval)", inputs=("deps", "transfer"), settings=SHARE),
    "loss_by_position": Table(
        loss_by_position, "Natural language: each model's held-out loss by position in the context (tokens seen), "
        "binned; mean with a 95% t-interval over windows (one seed) or over seeds (several)", inputs=("position",),
        settings=()),
    "controls": Table(
        controls, "Natural language: the long-context benefit on random held-out tokens, the positive control "
        "(planted repeats) and the null control for greedy (another document's far context); means and medians "
        "with 95% bootstrap intervals clustered by document", inputs=("screen", "planted", "deps")),
    "induction": Table(
        induction_probe, "Natural language: induction probe, mean loss on the second copy of a span repeated beyond the "
        "short window against the first copy (copy1 - copy2 > 0: the model copies from far context)",
        inputs=("induction",)),
    "dependency_types": Table(
        dependency_types, "Natural language: analysed tokens by dependency type; recovered by greedy k = 1, 2 "
        "(median) and each model's long-context gain normalised by the reference's benefit (mean), 95% bootstrap "
        "intervals clustered by document", inputs=("deps", "transfer"), settings=SHARE),
    "model_scale": Table(
        model_scale, "Natural language: the long-context models by size, mean gain L_short - L_long on the random "
        "screened tokens (95% interval clustered by document) and the induction probe's copy1 - copy2 (sequences "
        "resampled)", inputs=("screen_losses",), tables=("induction",)),
}


def rule_inputs(run_tables: dict, table_csv: str) -> dict:
    """The rule ``language_table``'s named inputs: per input name some entry reads, a function
    of the job's wildcards giving its files (``run_tables[name]``, or the table's CSV: the
    pattern ``table_csv`` with that table) to the entries that read it, none to the others."""
    files = run_tables | {table_input(name): table_csv.format(table=name) for name in TABLES}

    def read_by(name):
        named = files[name]  # a name neither a per-run table nor a table's fails here
        return lambda wildcards: named if name in TABLES[wildcards.table].input_names() else []

    return {name: read_by(name) for name in sorted({n for t in TABLES.values() for n in t.input_names()})}


def rule_settings(analysis: dict):
    """The rule ``language_table``'s params function: the entry's keys of ``analysis``."""
    return lambda wildcards: {key: analysis[key] for key in TABLES[wildcards.table].settings}

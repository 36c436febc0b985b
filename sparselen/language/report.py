"""The natural-language tables (benefit recovered vs k; each model's long-context gain by
token sparsity; loss by position) and figures."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparselen import io
from sparselen.language.sparsity import SPARSE_K, sparsity_level, token_sparsity
from sparselen.provenance import provenance
from sparselen.stats import (bootstrap_ci, cluster_ci, cluster_interval, t_interval, weighted_mean,
                             weighted_median)
from sparselen.tables import read_tables, runs_provenance, write_table


def tables(cfg: dict, deps_csvs, transfer_csvs, position_csvs, out, screen_csvs=(), planted_csvs=(),
           induction_csvs=(), screen_loss_csvs=()) -> None:
    """``cfg`` = language.analysis; ``out`` has the output paths table_csv, table_md,
    generalization_csv, generalization_md, position_csv and, with the screen, planted, induction
    and screen-loss CSVs, controls_csv/md, induction_csv/md, dependency_types_csv/md and
    model_scale_csv/md."""
    deps, transfer = read_tables(deps_csvs), read_tables(transfer_csvs)
    boot = {"n_boot": cfg["bootstrap"], "seed": cfg["seed"]}
    if screen_csvs:
        prov = runs_provenance(deps)
        write_table(controls(read_tables(screen_csvs), read_tables(planted_csvs), deps, boot), out.controls_csv,
                    out.controls_md, "Natural language: the long-context benefit on random held-out tokens, the "
                    "positive control (planted repeats) and the null control for greedy (another document's far "
                    "context); means and medians with 95% bootstrap intervals clustered by document", prov)
        induction = induction_table(read_tables(induction_csvs), boot)
        write_table(induction, out.induction_csv, out.induction_md,
                    "Natural language: induction probe, mean loss on the second copy of a span repeated beyond the "
                    "short window against the first copy (copy1 - copy2 > 0: the model copies from far context)",
                    prov)
        write_table(model_scale(read_tables(screen_loss_csvs), induction, boot), out.model_scale_csv,
                    out.model_scale_md, "Natural language: the long-context models by size, mean gain L_short - L_long "
                    "on the random screened tokens (95% interval clustered by document) and the induction probe's "
                    "copy1 - copy2 (sequences resampled)", prov)
        write_table(dependency_types(deps, transfer, cfg["sparse_fraction"], boot), out.dependency_types_csv, out.dependency_types_md,
                    "Natural language: analysed tokens by dependency type; recovered by greedy k = 1, 2 (median) and "
                    "each model's long-context gain normalised by the reference's benefit (mean), 95% bootstrap "
                    "intervals clustered by document", prov)
    rows = []
    for (method, k), g in deps.groupby(["method", "k"], sort=False):
        med, lo, hi = bootstrap_ci(g["recovered"], np.median, **boot)
        rows.append({"method": method, "k": k, "n_tokens": len(g), "median": med, "ci_low": lo, "ci_high": hi,
                     "mean": float(g["recovered"].mean()),
                     f"share_ge_{cfg['sparse_fraction']}": float((g["recovered"] >= cfg["sparse_fraction"]).mean()),
                     "overlap_with_greedy": float(g["overlap"].mean())})
    prov = runs_provenance(deps)
    write_table(pd.DataFrame(rows), out.table_csv, out.table_md,
                "Natural language: fraction of the long-context benefit recovered by k distant tokens "
                "(median over analysed tokens, 95% bootstrap interval); greedy_null and greedy_planted are "
                "controls (another document's far context; planted repeats)", prov)

    levels = []
    for seed, g in deps.groupby("seed"):
        lv = sparsity_level(g, cfg["sparse_fraction"])
        lv["seed"] = seed
        levels.append(lv)
    joined = transfer.merge(pd.concat(levels), on=["doc", "t", "seed"])
    order = {str(k): i for i, k in enumerate(sorted(deps["k"].unique()))}
    rows = []
    for (ctx, scheme), run in joined.groupby(["context", "scheme"], sort=True):
        for level, g in [*run.groupby("sparsity"), ("all", run)]:
            mean, lo, hi = bootstrap_ci(g["gain"], np.mean, **boot)
            rank = len(order) + 1 if level == "all" else order.get(level, len(order))  # ">kmax" after the ks
            rows.append({"context": ctx, "scheme": scheme, "sparsity": level, "order": rank,
                         "n_tokens": len(g), "mean": mean, "ci_low": lo, "ci_high": hi})
    gen = pd.DataFrame(rows).sort_values(["context", "scheme", "order"])
    write_table(gen, out.generalization_csv, out.generalization_md,
                "Natural language: each model's gain from the long over the short context on the analysed "
                f"tokens, by token sparsity (smallest greedy k recovering {cfg['sparse_fraction']} of the "
                "benefit; mean, 95% bootstrap interval)", prov)

    pos = read_tables(position_csvs)
    rows = []
    for (ctx, scheme, lo, hi), g in pos.groupby(["context", "scheme", "bin_low", "bin_high"], sort=True):
        if len(g) > 1:  # several seeds: interval over seeds
            mean, low, high = t_interval(g["mean"])
        else:
            mean, low, high = float(g["mean"].iloc[0]), float(g["ci_low"].iloc[0]), float(g["ci_high"].iloc[0])
        rows.append({"context": ctx, "scheme": scheme, "position": float(g["position"].iloc[0]), "bin_low": lo,
                     "bin_high": hi, "mean": mean, "ci_low": low, "ci_high": high, "n_seeds": len(g)})
    io.write_csv(pd.DataFrame(rows), out.position_csv)


def controls(screen: pd.DataFrame, planted: pd.DataFrame, deps: pd.DataFrame, boot: dict) -> pd.DataFrame:
    """Long format (control: none, planted or null_far_context; group, statistic, value, ci_low,
    ci_high, n_tokens, n_docs): the mean benefit on random tokens; per planted distance the
    mean benefit and, beyond the short window, greedy's median recovered and how often its
    first token is the copy's source; per k the median recovered by greedy on the real and on
    the null far context, and their difference (same tokens, same resamples)."""
    rows = []

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


def induction_table(induction: pd.DataFrame, boot: dict) -> pd.DataFrame:
    """Per model: mean loss on each copy, copy2 with only the short window, and copy1 - copy2
    (the gain from having seen the span), sequences resampled."""
    rows = []
    for (ctx, scheme), g in induction.groupby(["context", "scheme"], sort=True):
        gain, lo, hi = bootstrap_ci(g["copy1"] - g["copy2"], np.mean, **boot)
        rows.append({"context": ctx, "scheme": scheme, "sequences": len(g), "copy1": float(g["copy1"].mean()),
                     "copy2": float(g["copy2"].mean()), "copy2_short": float(g["copy2_short"].mean()),
                     "copy1_minus_copy2": gain, "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows)


def model_scale(screen_losses: pd.DataFrame, induction: pd.DataFrame, boot: dict) -> pd.DataFrame:
    """Per long-context model (every scheme or variant at the longest context), smallest first:
    its parameters, its held-out loss and mean gain from the long over the short context on
    random tokens, and its induction probe (``induction``: the ``induction_table``): the
    reviewers' model-scale sweep."""
    long = screen_losses["context"].max()
    probe = induction[induction["context"] == long].set_index("scheme")
    rows = []
    for scheme, g in screen_losses[screen_losses["context"] == long].groupby("scheme", sort=True):
        mean, lo, hi = cluster_ci(g["gain"], g["doc"], weighted_mean, **boot)
        row = {"scheme": scheme, "parameters": int(g["parameters"].iloc[0]), "seeds": g["seed"].nunique(),
               "tokens": len(g), "loss_long": float(g["loss_long"].mean()), "gain": mean, "gain_low": lo,
               "gain_high": hi}
        if scheme in probe.index:
            p = probe.loc[scheme]
            row |= {"copy1_minus_copy2": p["copy1_minus_copy2"], "copy_low": p["ci_low"], "copy_high": p["ci_high"]}
        rows.append(row)
    return pd.DataFrame(rows).sort_values("parameters")


def dependency_types(deps: pd.DataFrame, transfer: pd.DataFrame, share: float, boot: dict) -> pd.DataFrame:
    """Analysed tokens split by whether the target occurs in the far context, by the distance of
    greedy's first token (in octaves of the short window) and by sparsity (``token_sparsity`` at
    ``share``); per group and model the mean normalised gain; per model also the sparse minus
    dense difference."""
    g = deps[deps["method"] == "greedy"]
    tok = g.groupby(["doc", "t", "seed"]).first()[["L_short", "L_long", "target_in_far", "top_distance",
                                                   "far_tokens"]].reset_index()
    tok["benefit"] = tok["L_short"] - tok["L_long"]
    short = int(transfer["context"].min())
    tok["distance_bin"] = [f"{short * 2 ** int(np.log2(d / short))}-{short * 2 ** (int(np.log2(d / short)) + 1) - 1}"
                           for d in tok["top_distance"]]
    tok = tok.merge(token_sparsity(deps, share)[["doc", "t", "seed", "sparse"]], on=["doc", "t", "seed"])
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


def figures(short: int, long: int, min_benefit: float, table_csv, generalization_csv, position_csv, screen_csvs,
            out) -> None:
    """Both figures; ``out`` has the output paths sparsity_png/pdf and length_png/pdf."""
    from sparselen.plotting import save_figure  # matplotlib only where a figure is drawn

    prov = provenance(None, None, tables=[str(table_csv), str(generalization_csv), str(position_csv)])
    fig = sparsity_figure(pd.read_csv(table_csv), read_tables(screen_csvs), min_benefit, short, long)
    save_figure(fig, out.sparsity_png, out.sparsity_pdf, prov)
    gen = pd.read_csv(generalization_csv)
    fig = length_figure(pd.read_csv(position_csv), gen[gen["sparsity"] != "all"], short, long)
    save_figure(fig, out.length_png, out.length_pdf, prov)

COLORS = {"greedy": "C0", "attention": "C1", "saliency": "C2", "random": "0.5", "greedy_null": "C3",
          "greedy_planted": "C4"}
LABELS = {"greedy_null": "control: greedy, null (other document's far context)",
          "greedy_planted": "control: greedy, planted repeats"}


def sparsity_figure(table: pd.DataFrame, screened: pd.DataFrame, min_benefit: float, short: int, long: int):
    from sparselen.plotting import plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    for method, g in table.groupby("method", sort=False):
        g = g.sort_values("k")
        a.plot(g["k"], g["median"], "o--" if method in LABELS else "o-", color=COLORS.get(method),
               label=LABELS.get(method, method), ms=4)
        a.fill_between(g["k"], g["ci_low"], g["ci_high"], color=COLORS.get(method), alpha=0.2, lw=0)
    a.set_xscale("log", base=2)
    ks = sorted(table["k"].unique())
    a.set_xticks(ks, [str(k) for k in ks])
    a.minorticks_off()
    a.axhline(1.0, color="0.4", ls="--", lw=1)
    a.axhline(0.0, color="0.6", ls=":", lw=1)
    a.set_xlabel(f"k distant tokens added to the last {short}")
    a.set_ylabel("recovered (L_short - L_k) / (L_short - L_long)")
    a.set_title(f"median over {int(table['n_tokens'].max())} tokens, 95% bootstrap", fontsize=9)
    a.legend(fontsize=8, frameon=False)
    a.grid(alpha=0.3)
    lo, hi = screened["benefit"].quantile([0.001, 0.999])  # the bulk; outliers pile up at the edges
    hi = max(hi, min_benefit + 0.1)
    b.hist(screened["benefit"].clip(lo, hi), bins=80, color="0.4")
    if min_benefit >= lo:
        b.axvline(min_benefit, color="C3", ls="--", lw=1, label=f"analysed: benefit >= {min_benefit}")
    b.set_yscale("log")
    b.set_xlabel(f"L_short - L_long (nats; contexts {short} vs {long})")
    b.set_ylabel("tokens")
    b.set_title(f"{len(screened)} random held-out tokens, {int(screened['analysed'].sum())} analysed", fontsize=9)
    if b.get_legend_handles_labels()[0]:
        b.legend(fontsize=8, frameon=False)
    fig.suptitle("Sparse dependency on real text: the share of the long-context benefit that k distant tokens recover",
                 fontsize=10)
    fig.tight_layout()
    return fig


def length_figure(position: pd.DataFrame, generalization: pd.DataFrame, short: int, long: int):
    from sparselen.plotting import plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    runs = list(dict.fromkeys(zip(position["context"], position["scheme"])))
    for i, (ctx, scheme) in enumerate(runs):
        g = position[(position["context"] == ctx) & (position["scheme"] == scheme)].sort_values("position")
        a.plot(g["position"], g["mean"], "-", color=f"C{i}", label=f"trained at {ctx}, {scheme}")
        a.fill_between(g["position"], g["ci_low"], g["ci_high"], color=f"C{i}", alpha=0.2, lw=0)
    for ctx in sorted(position["context"].unique()):
        a.axvline(ctx, color="0.5", ls="--", lw=1)
    a.set_xscale("log")
    a.set_xlabel("position in the context (tokens seen)")
    a.set_ylabel("validation loss (nats)")
    a.set_title("loss vs position; dashed: training contexts", fontsize=9)
    a.legend(fontsize=8, frameon=False)
    a.grid(alpha=0.3)
    bins = list(dict.fromkeys(generalization.sort_values("order")["sparsity"]))
    x = np.arange(len(bins))
    width = 0.8 / max(1, len(runs))
    for i, (ctx, scheme) in enumerate(runs):
        g = generalization[(generalization["context"] == ctx) & (generalization["scheme"] == scheme)]
        g = g.set_index("sparsity").reindex(bins)
        err = np.vstack([g["mean"] - g["ci_low"], g["ci_high"] - g["mean"]])
        b.errorbar(x + (i - (len(runs) - 1) / 2) * width, g["mean"], yerr=err, fmt="o", color=f"C{i}", ms=4,
                   capsize=2, label=f"trained at {ctx}, {scheme}")
    b.axhline(0.0, color="0.6", ls=":", lw=1)
    b.set_xticks(x, bins)
    b.set_xlabel("token sparsity: smallest greedy k recovering the benefit")
    b.set_ylabel(f"gain from context {long} over {short} (nats)")
    b.set_title("each model's long-context gain on the analysed tokens (mean, 95% bootstrap)", fontsize=9)
    b.legend(fontsize=8, frameon=False)
    b.grid(alpha=0.3)
    fig.suptitle("Length generalization on real text, by token sparsity", fontsize=10)
    fig.tight_layout()
    return fig

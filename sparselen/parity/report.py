"""The sparse parity table (mean and 95% t-interval over seeds per cell, floored at the
evaluation noise), its figures (the paper's shape: accuracy against length, a curve per k_test,
a panel per K_train, averaged over the runs the claims count; and a heatmap of k_test x length
per K_train with every cell's mean written in it) and its layout in the report."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparselen.presentation.layout import grid as layout
from sparselen.presentation.layout import percent, seeds
from sparselen.presentation.tables import read_tables, runs_provenance, summary_table, write_table
from sparselen.runtime.provenance import provenance

CELL = ["K_train", "scheme", "k_test", "length"]
CAPTIONS = {"parity": "Sparse parity. Accuracy (predicting the parity of k_test planted bits) against sample "
                      "length 2l, one curve per k_test, one panel per model size K_train, the shape of the paper's "
                      "figure (models trained on 1 to K_train planted bits and lengths in the grey band; chance: "
                      "50%, grey dash-dot). A solid line is the mean over the seeds that fit that trained sparsity "
                      "(accuracy >= 90% at every training length), the runs the claims count; the panel's title "
                      "says how many fit where not all did. Small dots are the seeds counted in a line, crosses the "
                      "seeds that did not fit, left out of the solid line; a trained sparsity no seed fitted is "
                      "dashed (the mean of all its seeds), a sparsity never trained on (k_test > K_train) dotted "
                      "(the mean of all seeds). Intervals over seeds: parity/table.md.",
            "parity_heatmap": "Sparse parity as numbers. Each panel is one model size of the task, K_train: models "
                              "trained on samples with 1 to K_train planted bits and lengths in the training range. A "
                              "cell is the accuracy (%) of predicting the parity of k_test planted bits at sample "
                              "length 2l, mean over all the training seeds (chance: 50%). The red box is what the "
                              "models were trained on; hatched rows are sparsities they never saw (k_test > K_train); "
                              "a trained sparsity that not every seed fitted (accuracy >= 90% at every training "
                              "length) has its row label in orange with the count of seeds that fit, and its trained "
                              "cells outlined in orange dashes: the claims, and the curves above, count only those "
                              "seeds. Intervals over seeds: parity/table.md."}


def table(eval_csvs, out_csv, out_md, facts: dict) -> pd.DataFrame:
    """Per cell: accuracy over seeds, and ``n_fit``, the seeds whose model fits its (K_train,
    k_test) on the training lengths (``facts``: the parity claims' facts), as the claims count them."""
    from sparselen.parity.claims import accuracies
    from sparselen.statistics.verdicts import Settings

    df = read_tables(eval_csvs)
    fit = accuracies(df, Settings(facts=facts)).groupby(["K_train", "k_test"])["fit"].sum().rename("n_fit")
    t = summary_table(df, CELL).merge(fit.astype(int).reset_index(), on=["K_train", "k_test"], how="left")
    prov = runs_provenance(df)
    write_table(t, out_csv, out_md, "Sparse parity: accuracy by K_train, k_test and length "
                "(mean and 95% t-interval over seeds, floored at the evaluation noise of the samples every run "
                "shares; n_fit: the seeds whose model fits the sparsity on the training lengths, the only ones the "
                "claims count)", prov)
    return t


def unfitted(t: pd.DataFrame) -> dict:
    """Per K_train, {k_test: "n/N fit"} for the trained sparsities not every seed fits."""
    if "n_fit" not in t:
        return {}
    rows = t[(t["k_test"] <= t["K_train"]) & (t["n_fit"] < t["n_seeds"])].drop_duplicates(["K_train", "k_test"])
    out: dict = {}
    for r in rows.itertuples():
        out.setdefault(r.K_train, {})[r.k_test] = f"{int(r.n_fit)}/{int(r.n_seeds)} fit"
    return out


def seed_curves(eval_csvs, facts: dict) -> pd.DataFrame:
    """Per (K_train, k_test, length, seed): the run's accuracy, whether it fits the sparsity on the
    training lengths (``fit``, as the claims count it: ``sparselen.parity.claims.accuracies``) and
    whether it is counted in the curve's mean (``counted``): for a trained sparsity (k_test <=
    K_train) the seeds that fit it, or every seed where none did; for an untrained one every seed."""
    from sparselen.parity.claims import accuracies
    from sparselen.statistics.verdicts import Settings

    acc = accuracies(read_tables(eval_csvs), Settings(facts=facts))
    lengths = [c for c in acc.columns if not isinstance(c, (str, tuple))]
    long = (acc[["fit", *lengths]].reset_index()
            .melt(id_vars=["K_train", "seed", "k_test", "fit"], value_vars=lengths, var_name="length",
                  value_name="accuracy").dropna(subset=["accuracy"]))
    long["length"] = long["length"].astype(int)
    trained = long["k_test"] <= long["K_train"]
    any_fit = long.groupby(["K_train", "k_test"])["fit"].transform("any")
    long["counted"] = ~trained | long["fit"] | ~any_fit
    return long.sort_values(["K_train", "k_test", "length", "seed"]).reset_index(drop=True)


def curves(seed_rows: pd.DataFrame) -> pd.DataFrame:
    """Per (K_train, k_test, length): the mean accuracy over the counted seeds, how many were
    counted and of how many, and the line's kind: ``fitted`` (the mean of the seeds that fit a
    trained sparsity), ``none fit`` (a trained sparsity no seed fits: the mean of all) or
    ``untrained`` (k_test > K_train: the mean of all)."""
    key = ["K_train", "k_test", "length"]
    g = seed_rows.groupby(key)
    out = pd.DataFrame({"mean": seed_rows[seed_rows["counted"]].groupby(key)["accuracy"].mean(),
                        "n_counted": g["counted"].sum().astype(int), "n_seeds": g["seed"].nunique(),
                        "n_fit": g["fit"].sum().astype(int)}).reset_index()
    out["kind"] = ["untrained" if k > K else "fitted" if n > 0 else "none fit"
                   for K, k, n in zip(out["K_train"], out["k_test"], out["n_fit"])]
    return out


LINESTYLES = {"fitted": "-", "none fit": "--", "untrained": ":"}


def curve_figure(seed_rows: pd.DataFrame, facts: dict):
    """Accuracy against length, one panel per K_train, one curve per k_test (``curves``), the
    seeds as small points (crosses: a seed that did not fit its trained sparsity)."""
    from matplotlib.lines import Line2D

    from sparselen.presentation.plotting import FIGURE_WIDTH, MIN_TEXT_POINTS, plt

    lo, hi = facts["train_lengths"]
    mean = curves(seed_rows)
    Ks = sorted(mean["K_train"].unique())
    ks = sorted(mean["k_test"].unique())
    colors = dict(zip(ks, plt.cm.viridis(np.linspace(0.0, 0.85, len(ks)))))
    lengths = sorted(mean["length"].unique())
    ncols = min(2, len(Ks))
    nrows = -(-len(Ks) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(FIGURE_WIDTH, 1.0 + 2.5 * nrows), sharey=True, squeeze=False)
    for i, (ax, K) in enumerate(zip(axes.flat, Ks)):
        notes = []
        for k in ks:
            line = mean[(mean["K_train"] == K) & (mean["k_test"] == k)].sort_values("length")
            if line.empty:
                continue
            kind = line["kind"].iloc[0]
            ax.plot(line["length"], line["mean"], color=colors[k], ls=LINESTYLES[kind], lw=1.5, marker="o", ms=3.5,
                    label=f"k_test = {k}")
            runs = seed_rows[(seed_rows["K_train"] == K) & (seed_rows["k_test"] == k)]
            shown = runs[runs["fit"] | (runs["k_test"] > K)]  # crosses: the seeds that did not fit a trained k_test
            left = runs[~runs.index.isin(shown.index)]
            ax.scatter(shown["length"], shown["accuracy"], s=6, color=colors[k], alpha=0.5, lw=0, zorder=3)
            ax.scatter(left["length"], left["accuracy"], s=16, color=colors[k], marker="x", lw=0.8, alpha=0.8,
                       zorder=3)
            if kind != "untrained" and line["n_fit"].iloc[0] < line["n_seeds"].iloc[0]:
                notes.append(f"k_test {k}: {int(line['n_fit'].iloc[0])}/{int(line['n_seeds'].iloc[0])} fit")
        ax.axvspan(lo, hi, color="0.85", alpha=0.6, lw=0, zorder=0)
        ax.axhline(0.5, color="0.5", ls="-.", lw=1)
        ax.set_xscale("log")
        ax.set_xticks(lengths, [str(n) for n in lengths])
        ax.minorticks_off()
        ax.tick_params(labelsize=MIN_TEXT_POINTS)
        for label in ax.get_xticklabels()[1::2] if len(lengths) > 8 else []:
            label.set_visible(False)  # every other length, so the labels do not run into each other
        ax.set_ylim(0.35, 1.03)
        ax.grid(alpha=0.3)
        ax.set_title(f"K_train = {K}" + (f"\n({'; '.join(notes)})" if notes else ""), fontsize=8)
        ax.set_xlabel("sample length 2l", fontsize=8)
        if i % ncols == 0:
            ax.set_ylabel("accuracy", fontsize=8)
    for ax in axes.flat[len(Ks):]:
        ax.set_visible(False)
    handles = [Line2D([], [], color=colors[k], marker="o", ms=3.5, label=f"k_test = {k}") for k in ks]
    handles += [Line2D([], [], color="0.3", ls="-", label="mean of the seeds that fit"),
                Line2D([], [], color="0.3", ls="--", label="no seed fit: mean of all"),
                Line2D([], [], color="0.3", ls=":", label="k_test > K_train: mean of all"),
                Line2D([], [], color="0.3", ls="", marker="x", label="a seed that did not fit"),
                Line2D([], [], color="0.5", ls="-.", label="chance")]
    per_row = 4
    fig.legend(handles=handles, loc="lower center", ncol=per_row, frameon=False, fontsize=MIN_TEXT_POINTS)
    n = int(seed_rows["seed"].nunique())
    fig.suptitle(f"Sparse parity: accuracy against length per k_test ({n} seed{'s' * (n != 1)}; grey: the training "
                 "lengths)", fontsize=9)
    rows = -(-len(handles) // per_row)
    fig.tight_layout(rect=(0, (0.18 * rows + 0.1) / fig.get_figheight(), 1, 1))
    return fig


def figure(table_csv, eval_csvs, facts: dict, out) -> None:
    """``out.png``/``out.pdf``: accuracy against length (``curve_figure``) from the runs'
    evaluations; ``out.heatmap_png``/``out.heatmap_pdf``: the table's mean per (k_test, length),
    one heatmap per K_train, the trained sparsities and lengths boxed (``facts``: the parity
    claims' facts of the config run, its training lengths), the untrained sparsities hatched."""
    from sparselen.presentation.plotting import plot_heatmaps, save_figure  # matplotlib only where a figure is drawn

    save_figure(curve_figure(seed_curves(eval_csvs, facts), facts), out.png, out.pdf,
                provenance(None, None, tables=[str(f) for f in eval_csvs]))
    t = pd.read_csv(table_csv)
    lo, hi = facts["train_lengths"]
    lengths = sorted(t["length"].unique())
    trained = [n for n in lengths if lo <= n <= hi]
    Ks = sorted(t["K_train"].unique())
    ks = sorted(t["k_test"].unique())
    seeds = int(t["n_seeds"].max())
    fig = plot_heatmaps(t, "K_train", "k_test", "length", panel_label="K_train = {}", row_label="k_test",
                        col_label="sample length 2l", colorbar_label="accuracy (%; chance 50)",
                        fmt=lambda v: f"{100 * v:.0f}",
                        boxes={K: ([k for k in ks if k <= K], trained) for K in Ks},
                        marked_rows={K: [k for k in ks if k > K] for K in Ks},
                        box_label=f"trained: k_test <= K_train, 2l in [{lo}, {hi}]",
                        marked_label="k_test > K_train: never trained on",
                        noted_rows=unfitted(t), noted_label="not fitted by every seed (seeds that fit)",
                        title=f"Sparse parity: accuracy (%) by sparsity and length, mean over all {seeds} seed"
                              f"{'s' * (seeds != 1)}")
    save_figure(fig, out.heatmap_png, out.heatmap_pdf, provenance(None, None, table=str(table_csv)))


def paper_tables(t: pd.DataFrame) -> list[str]:
    """Accuracy (%) per K_train as a k_test x length grid, the shape of the paper's figure."""
    lines = []
    for K, g in t.groupby("K_train", sort=True):
        grid = g.pivot_table(index="k_test", columns="length", values="mean", aggfunc="first").sort_index()
        notes = unfitted(g).get(K, {})
        rows = [[f"{k}" + (" (untrained)" if k > K else f" ({notes[k]})" if k in notes else ""),
                 *(percent(v) for v in grid.loc[k])] for k in grid.index]
        lines += [f"K_train = {K}: accuracy (%) by k_test (rows) and sample length 2l (columns), mean over "
                  f"{seeds(g['n_seeds'].max())}.", "", layout(["k_test", *map(str, grid.columns)], rows), ""]
    return lines

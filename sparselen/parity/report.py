"""The sparse parity table (mean and 95% t-interval over seeds per cell, floored at the
evaluation noise), its figure (a heatmap of k_test x length per K_train, the paper's grid) and
its layout in the report."""

from __future__ import annotations

import pandas as pd

from sparselen.presentation.layout import grid as layout
from sparselen.presentation.layout import percent, seeds
from sparselen.presentation.tables import read_tables, runs_provenance, summary_table, write_table
from sparselen.runtime.provenance import provenance

CELL = ["K_train", "scheme", "k_test", "length"]
CAPTIONS = {"parity": "Sparse parity. Each panel is one model size of the task, K_train: models trained on "
                      "samples with 1 to K_train planted bits and lengths in the training range. A cell is the "
                      "accuracy (%) of predicting the parity of k_test planted bits at sample length 2l, mean over "
                      "the training seeds (chance: 50%). The red box is what the models were trained on; hatched "
                      "rows are sparsities they never saw (k_test > K_train); a trained sparsity that not every seed "
                      "fitted (accuracy >= 90% at every training length) has its row label in orange with the count "
                      "of seeds that fit, and its trained cells outlined in orange dashes: the claims count only "
                      "those seeds. Intervals over seeds: parity/table.md."}


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


def figure(table_csv, facts: dict, out_png, out_pdf) -> None:
    """Accuracy per (k_test, length), one heatmap per K_train; the trained sparsities and
    lengths boxed (``facts``: the parity claims' facts of the config run, its training lengths),
    the untrained sparsities hatched."""
    from sparselen.presentation.plotting import plot_heatmaps, save_figure  # matplotlib only where a figure is drawn

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
                        title=f"Sparse parity: accuracy (%) by sparsity and length, mean over {seeds} seed"
                              f"{'s' * (seeds != 1)}")
    save_figure(fig, out_png, out_pdf, provenance(None, None, table=str(table_csv)))


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

"""The sparse parity table (mean and 95% t-interval over seeds per cell) and figure."""

from __future__ import annotations

import pandas as pd

from sparselen.provenance import provenance
from sparselen.tables import read_tables, runs_provenance, summary_table, write_table

CELL = ["K_train", "scheme", "k_test", "length"]


def table(eval_csvs, out_csv, out_md) -> pd.DataFrame:
    df = read_tables(eval_csvs)
    t = summary_table(df, CELL)
    prov = runs_provenance(df)
    write_table(t, out_csv, out_md, "Sparse parity: accuracy by K_train, k_test and length "
                "(mean and 95% t-interval over seeds)", prov)
    return t


def figure(table_csv, train_max_length: int, out_png, out_pdf) -> None:
    from sparselen.plotting import plot_panels, save_figure  # matplotlib only where a figure is drawn

    t = pd.read_csv(table_csv)
    seeds = int(t["n_seeds"].max())
    fig = plot_panels(t, "K_train", "k_test", panel_label="K_train = {}", curve_label="k_test = {}",
                      xlabel="sample length 2l", chance=0.5,
                      vlines={K: train_max_length for K in t["K_train"].unique()},
                      title=f"Sparse parity: accuracy vs length (mean, 95% interval over {seeds} seeds; "
                            f"dashed: longest training length)")
    save_figure(fig, out_png, out_pdf, provenance(None, None, table=str(table_csv)))

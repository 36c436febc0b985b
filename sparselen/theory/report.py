"""The theory table (log loss and 0-1 error per Lbar/L), the fitted slopes beside the bound's
(Lbar/L)^2 shape, and the figure."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sparselen.provenance import provenance
from sparselen.stats import summarize
from sparselen.tables import read_tables, runs_provenance, write_table

def fit_slopes(table: pd.DataFrame, floor: float) -> pd.DataFrame:
    """Per (model, distribution, k): the least-squares slope of log(log loss) on log(Lbar/L),
    and the ratio of the error at the largest Lbar/L to the error at Lbar = L, beside the
    bound's (Lbar/L)^2. ``table`` has the seed means in ``mean`` (log loss) per ratio."""
    rows = []
    for (model, dist, k), g in table.groupby(["model", "distribution", "k"], sort=True):
        g = g.sort_values("ratio")
        r = g["ratio"].to_numpy(float)
        e = np.maximum(g["mean"].to_numpy(float), floor)
        slope = float(np.polyfit(np.log(r), np.log(e), 1)[0]) if len(r) > 1 else float("nan")
        at_L = e[r == 1][0] if (r == 1).any() else float("nan")
        rmax = r.max()
        rows.append({"model": model, "distribution": dist, "k": k, "log_loss_at_L": at_L,
                     "log_loss_at_max": e[-1], "max_ratio": rmax, "slope": slope,
                     "error_ratio": e[-1] / at_L, "bound_ratio": rmax ** 2,
                     "within_bound_shape": bool(np.all(e <= at_L * r ** 2 * (1 + 1e-9))),
                     "zero_one_error_at_L": float(g.loc[g["ratio"] == 1, "error_mean"].iloc[0])
                     if (r == 1).any() else float("nan"),
                     "zero_one_error_at_max": float(g["error_mean"].iloc[-1]),
                     "chance_log_loss": math.log(int(g["n_values"].iloc[0]))})
    return pd.DataFrame(rows)


def table(eval_csvs, out, floor: float) -> pd.DataFrame:
    """``out`` has the output paths csv, md, slopes_csv, slopes_md."""
    df = read_tables(eval_csvs)
    by = ["model", "distribution", "k", "ratio", "length", "n_values"]
    t = summarize(df, by, "log_loss", clip=None).merge(
        summarize(df, by, "error").rename(columns={"mean": "error_mean", "ci_low": "error_ci_low",
                                                   "ci_high": "error_ci_high"}).drop(columns="n_seeds"), on=by)
    prov = runs_provenance(df)
    write_table(t, out.csv, out.md, "Theory: log loss (mean, 95% t-interval over seeds) and 0-1 error at "
                "Lbar = ratio * L", prov, floatfmt=".3g")
    write_table(fit_slopes(t, floor), out.slopes_csv, out.slopes_md, "Theory: slope of log(log loss) on "
                f"log(Lbar/L), and error ratios (the bound's shape is (Lbar/L)^2; losses floored at {floor:g})", prov, floatfmt=".3g")
    return t


def figure(table_csv, train_max_length: int, floor: float, out_png, out_pdf) -> None:
    from matplotlib.lines import Line2D

    from sparselen.plotting import plt, save_figure

    t = pd.read_csv(table_csv)
    dists = [d for d in ("local", "nonlocal", "coupled") if d in set(t["distribution"])]
    ks = sorted(t["k"].unique())
    colors = dict(zip(ks, plt.cm.viridis(np.linspace(0.0, 0.85, len(ks)))))
    styles = {"sfa": ("o", "-", "SFA (idealized)"), "gpt": ("s", "--", "GPT-NeoX")}
    fig, axes = plt.subplots(1, len(dists), figsize=(3.8 * len(dists) + 1.6, 3.6), sharey=True, squeeze=False)
    for ax, dist in zip(axes[0], dists):
        sub = t[t["distribution"] == dist]
        for (model, k), line in sub.groupby(["model", "k"], sort=True):
            line = line.sort_values("ratio")
            marker, ls, name = styles[model]
            y = line["mean"].clip(lower=floor)
            ax.plot(line["ratio"], y, marker=marker, ls=ls, color=colors[k], ms=4, lw=1.5, label=f"{name}, k={k}")
            if line["ci_low"].notna().any():
                ax.fill_between(line["ratio"], line["ci_low"].clip(lower=floor), line["ci_high"].clip(lower=floor),
                                color=colors[k], alpha=0.15, lw=0)
            at_L = line.loc[line["ratio"] == 1, "mean"]
            if len(at_L):  # the bound's shape, anchored at the measured error at Lbar = L
                ax.plot(line["ratio"], max(float(at_L.iloc[0]), floor) * line["ratio"] ** 2, ls=":", lw=1,
                        color=colors[k], alpha=0.6)
        ax.axhline(math.log(int(sub["n_values"].iloc[0])), color="0.5", ls="-.", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ratios = sorted(sub["ratio"].unique())
        ax.set_xticks(ratios, [f"{r:g}" for r in ratios])
        ax.minorticks_off()
        ax.set_title(f"{dist} planted positions")
        ax.set_xlabel(f"Lbar / L  (L = {train_max_length})")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("log loss at Lbar (nats)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    handles += [Line2D([], [], color="0.3", ls=":"), Line2D([], [], color="0.5", ls="-.")]
    labels += ["(Lbar/L)^2 x error at L (bound shape)", "chance (log q)"]
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False, fontsize=8)
    fig.suptitle("k-sparse planted correlations: error at Lbar vs Lbar/L (mean over seeds; band: 95% interval)",
                 fontsize=10)
    fig.tight_layout()
    save_figure(fig, out_png, out_pdf, provenance(None, None, table=str(table_csv)))

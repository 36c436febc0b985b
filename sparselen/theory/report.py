"""The theory table (log loss and 0-1 error per Lbar/L), the fitted slopes beside the bound's
(Lbar/L)^2 shape, the figure and the table's layout in the report. Table and figure average the
runs T1 and T2 read: per (model, law, k) the runs that fit at Lbar = L (``fitted_runs``), or every
run where none did."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from sparselen.presentation.layout import grid as layout
from sparselen.presentation.layout import percent, seeds
from sparselen.presentation.tables import read_tables, runs_provenance, write_table
from sparselen.runtime.provenance import provenance
from sparselen.statistics.stats import summarize, t_interval


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


def fitted_runs(evals: pd.DataFrame) -> pd.DataFrame:
    """The evaluation rows of the runs T1 and T2 read: per (model, distribution, k), the seeds
    whose accuracy (1 - 0-1 error) at Lbar = L is at least FIT (``sparselen.theory.claims.per_run``),
    or every seed where none fits. Columns ``n_fit`` (the seeds that fit) and ``n_runs`` (the
    seeds run) say which."""
    from sparselen.statistics.verdicts import FIT

    key = ["model", "distribution", "k"]
    acc = 1 - evals[evals["ratio"] == 1].groupby([*key, "seed"])["error"].mean()
    runs = acc.ge(FIT).rename("fit").reset_index()
    counts = runs.groupby(key)["fit"].agg(n_fit="sum", n_runs="size").reset_index()
    runs = runs.merge(counts, on=key)
    kept = runs[runs["fit"] | (runs["n_fit"] == 0)]
    return evals.merge(kept[[*key, "seed", "n_fit", "n_runs"]], on=[*key, "seed"])


def table(eval_csvs, out, floor: float) -> pd.DataFrame:
    """``out`` has the output paths csv, md, slopes_csv, slopes_md."""
    df = fitted_runs(read_tables(eval_csvs))
    by = ["model", "distribution", "k", "ratio", "length", "n_values"]
    error = summarize(df, by, "error", n_col="n").rename(
        columns={"mean": "error_mean", "ci_low": "error_ci_low", "ci_high": "error_ci_high"})
    loss = log_summary(df, floor).drop(columns="n_values")  # the figure's statistic
    t = loss.merge(error.drop(columns="n_seeds"), on=["model", "distribution", "k", "ratio"])
    t = t[[*by, "mean", "ci_low", "ci_high", "n_seeds", "n_fit", "n_runs", "error_mean", "error_ci_low",
           "error_ci_high"]]
    prov = runs_provenance(df)
    write_table(t, out.csv, out.md, "Theory, over the runs T1 and T2 read (the seeds that fit at Lbar = L: n_fit of "
                "n_runs; every seed where none fit): log loss (geometric mean over seeds, floored at "
                f"{floor:g}, with its 95% t-interval computed on the log scale: the figure's statistic) and 0-1 error "
                "(arithmetic mean, its interval floored at the evaluation noise of the samples every run shares) "
                "at Lbar = ratio * L", prov, floatfmt=".3g")
    write_table(fit_slopes(t, floor), out.slopes_csv, out.slopes_md, "Theory: slope of log(log loss) on "
                f"log(Lbar/L), and error ratios (the bound's shape is (Lbar/L)^2; losses floored at {floor:g})", prov, floatfmt=".3g")
    return t


MODELS = {"sfa": "idealized model (SFA)", "gpt": "GPT-NeoX"}
DISTRIBUTIONS = ("local", "nonlocal", "coupled")
CAPTIONS = {"theory": "The theory made runnable: log loss of the label at Lbar against Lbar/L, per law of planted "
                      "positions and model."}


def caption(name: str, t: pd.DataFrame) -> str:
    """The figure's caption from the table it was drawn from: the models that ran, one row each."""
    models = [m for m in MODELS if m in set(t["model"])]
    rows = (f"learned by the {MODELS[models[0]]}" if len(models) == 1 else
            "learned by " + " and ".join(f"the {MODELS[m]} (row {i + 1})" for i, m in enumerate(models)))
    return ("The theory made runnable: k-sparse planted correlations whose planted positions are local, non-local or "
            f"coupled (columns), {rows}, trained on lengths up to L and evaluated at Lbar = r L. Lines: log loss of "
            "the label at Lbar (the risk the paper's bound controls), geometric mean over the runs that fit at Lbar = L "
            "(accuracy >= 90%: the runs T1 and T2 read, the panel says how many where not all did; dashed where none "
            "did: the mean of all) with a 95% interval computed on the log scale, as in the table below; dotted: the bound's shape, (Lbar/L)^2 times the loss "
            "at Lbar = L; dash-dotted: chance. Losses below the floor are drawn at the floor. T1 and T2 are decided "
            "on accuracy and on the constant each run needs: the accuracy table below and the claims' details.")

def log_summary(evals: pd.DataFrame, floor: float) -> pd.DataFrame:
    """Per (model, distribution, k, ratio): the geometric mean of the seeds' log losses (floored)
    and its 95% t-interval, computed on log(log loss) and taken back."""
    rows = []
    key = ["model", "distribution", "k", "ratio"]
    for cell, g in evals.groupby(key, sort=True):
        per_seed = g.groupby("seed")["log_loss"].mean().clip(lower=floor)
        mean, lo, hi = t_interval(np.log(per_seed.to_numpy(float)))
        counts = {c: int(g[c].iloc[0]) for c in ("n_fit", "n_runs") if c in g}
        rows.append({**dict(zip(key, cell)), "mean": math.exp(mean), "ci_low": math.exp(lo) if np.isfinite(lo)
                     else np.nan, "ci_high": math.exp(hi) if np.isfinite(hi) else np.nan, "n_seeds": len(per_seed),
                     **counts, "n_values": int(g["n_values"].iloc[0])})
    return pd.DataFrame(rows)


def figure(eval_csvs, train_max_length: int, floor: float, out_png, out_pdf) -> None:
    """Log loss against Lbar/L: a row per model, a column per law, a line per k, over the runs
    that fit at Lbar = L (``fitted_runs``: the runs T1 and T2 read); dashed where none fit (every
    run), with the count of runs that fit per k in the panel where not all did."""
    import matplotlib.ticker
    from matplotlib.lines import Line2D

    from sparselen.presentation.plotting import FIGURE_WIDTH, MIN_TEXT_POINTS, plt, save_figure

    t = log_summary(fitted_runs(read_tables(eval_csvs)), floor)
    models = [m for m in MODELS if m in set(t["model"])]
    dists = [d for d in DISTRIBUTIONS if d in set(t["distribution"])]
    ks = sorted(t["k"].unique())
    colors = dict(zip(ks, plt.cm.viridis(np.linspace(0.0, 0.85, len(ks)))))
    fig, axes = plt.subplots(len(models), len(dists), figsize=(FIGURE_WIDTH, 0.9 + 2.3 * len(models)), sharex=True,
                             sharey=True, squeeze=False)
    for (r, model), (c, dist) in itertools.product(enumerate(models), enumerate(dists)):
        ax, sub = axes[r][c], t[(t["model"] == model) & (t["distribution"] == dist)]
        notes = []
        for k, line in sub.groupby("k", sort=True):
            line = line.sort_values("ratio")
            n_fit, n_runs = int(line["n_fit"].iloc[0]), int(line["n_runs"].iloc[0])
            if n_fit < n_runs:
                notes.append(f"k={k}: {n_fit}/{n_runs} fit")
            ax.plot(line["ratio"], line["mean"], marker="o", color=colors[k], ms=4, lw=1.5, ls="-" if n_fit else "--",
                    label=f"k = {k}")
            if line["ci_low"].notna().any():
                ax.fill_between(line["ratio"], line["ci_low"], line["ci_high"], color=colors[k], alpha=0.2, lw=0)
            at_L = line.loc[line["ratio"] == 1, "mean"]
            if len(at_L):  # the bound's shape, anchored at the measured loss at Lbar = L
                ax.plot(line["ratio"], float(at_L.iloc[0]) * line["ratio"] ** 2, ls=":", lw=1.2, color=colors[k])
        if len(sub):
            ax.axhline(math.log(int(sub["n_values"].iloc[0])), color="0.5", ls="-.", lw=1)
        if notes:
            ax.text(0.03, 0.03, "\n".join(notes), transform=ax.transAxes, fontsize=MIN_TEXT_POINTS, va="bottom",
                    color="0.25")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ratios = sorted(t["ratio"].unique())
        ax.set_xticks(ratios, [f"{x:g}" for x in ratios])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())  # y keeps its minor ticks: labelled in a short range
        ax.tick_params(which="both", labelsize=MIN_TEXT_POINTS)
        ax.grid(alpha=0.3)
        if r == 0:
            ax.set_title(f"{dist} planted positions", fontsize=9)
        if r == len(models) - 1:
            ax.set_xlabel(f"Lbar / L  (L = {train_max_length})", fontsize=8)
        if c == 0:
            ax.set_ylabel(f"{MODELS[model]}\nlog loss at Lbar (nats)", fontsize=8)
    handles = [Line2D([], [], color=colors[k], marker="o", label=f"k = {k}") for k in ks]
    handles += [Line2D([], [], color="0.3", ls="-", label="mean of the runs that fit at L"),
                Line2D([], [], color="0.3", ls="--", label="no run fit: mean of all"),
                Line2D([], [], color="0.3", ls=":", label="(Lbar/L)^2 x loss at L (bound's shape)"),
                Line2D([], [], color="0.5", ls="-.", label="chance (log q)")]
    per_row = min(3, len(handles))
    fig.legend(handles=handles, loc="lower center", ncol=per_row, frameon=False, fontsize=8)
    fig.suptitle("Log loss at Lbar against Lbar/L (geometric mean over the runs that fit at L; band: 95% interval)",
                 fontsize=9)
    rows = math.ceil(len(handles) / per_row)
    fig.tight_layout(rect=(0, (0.2 * rows + 0.1) / fig.get_figheight(), 1, 1))
    save_figure(fig, out_png, out_pdf, provenance(None, None, tables=[str(f) for f in eval_csvs]))


def paper_tables(t: pd.DataFrame) -> list[str]:
    """Per law, log loss (the figure's geometric mean) and accuracy (1 - 0-1 error, what T1 and
    T2 read) as (model, k) x Lbar/L grids."""
    lines = []
    t = t.assign(accuracy=1 - t["error_mean"])
    for dist in [d for d in DISTRIBUTIONS if d in set(t["distribution"])]:
        g = t[t["distribution"] == dist]
        fits = {(r.model, r.k): f" ({r.n_fit}/{r.n_runs} fit)" for r in g.drop_duplicates(["model", "k"]).itertuples()
                if "n_fit" in g and r.n_fit < r.n_runs}
        for value, what, fmt in (("mean", "log loss at Lbar (nats), geometric mean", "{:.3g}"),
                                 ("accuracy", "accuracy at Lbar (%), mean", None)):
            grid = g.pivot_table(index=["model", "k"], columns="ratio", values=value, aggfunc="first")
            head = ["model", "k", *(f"{r:g}" for r in grid.columns)]
            rows = [[MODELS.get(m, m), f"{k}{fits.get((m, k), '')}",
                     *((fmt.format(v) if fmt else percent(v)) for v in grid.loc[(m, k)])] for m, k in grid.index]
            lines += [f"{dist} planted positions: {what} by model and k (rows) and Lbar/L (columns), over the runs "
                      f"that fit at Lbar = L (every run where none did; at most {seeds(g['n_seeds'].max())}).", "",
                      layout(head, rows), ""]
    return lines

"""The natural-language figures: the benefit recovered vs k beside the distribution of the
benefit (sparsity figure), and loss by position beside each model's gain by token sparsity
(length figure), drawn from the tables (sparselen/language/tables.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparselen.provenance import provenance
from sparselen.tables import read_tables


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

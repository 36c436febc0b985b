"""The natural-language figures: the benefit recovered vs k beside the distribution of the
benefit (sparsity figure), and loss by position beside each model's gain by token sparsity
(length figure), drawn from the tables (sparselen/language/tables.py), and the layout of the
slice's main table in the report.

Where the claims do not read greedy's shares (no long-context benefit, or a failed positive
control: ``sparselen.language.claims``), the panels that show them say so on their face.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparselen.presentation.layout import grid as layout
from sparselen.presentation.tables import read_tables
from sparselen.runtime.provenance import provenance

CAPTIONS = {
    "language_sparsity": "Sparse dependency on real text. Left: for held-out tokens whose loss drops when the "
                         "reference model sees the long instead of the short context, the share of that benefit, "
                         "(L_short - L_k) / (L_short - L_long), recovered by adding only k distant tokens to the "
                         "short window: greedy choice, cheap selectors and two controls (dashed); medians with 95% "
                         "bootstrap bands over tokens. A share above 1 means the k tokens lower the loss more than "
                         "the whole long context does. Right: the benefit of every screened token; the dashed line "
                         "is the threshold for analysis.",
    "language_length": "Length generalization on real text. Left: validation loss against the number of context "
                       "tokens seen, for models trained at the short and the long context (dashed: the training "
                       "contexts); bands: 95% intervals over held-out windows. Right: each model's gain from the "
                       "long over the short context on the analysed tokens, grouped by the token's sparsity (the "
                       "smallest greedy k that recovers most of the benefit); means with 95% bootstrap intervals.",
}
COLORS = {"greedy": "C0", "attention": "C1", "saliency": "C2", "random": "0.5", "greedy_null": "C3",
          "greedy_planted": "C4"}
LABELS = {"greedy_null": "control: greedy, null (other document)", "greedy_planted": "control: greedy, planted repeats"}


def figures(short: int, long: int, min_benefit: float, table_csv, generalization_csv, position_csv, screen_csvs,
            deps_csvs, settings, out) -> None:
    """Both figures; ``out`` has the output paths sparsity_png/pdf and length_png/pdf;
    ``settings``: the claims' Settings (bootstrap and facts), to mark what they do not read."""
    from sparselen.presentation.plotting import save_figure  # matplotlib only where a figure is drawn

    prov = provenance(None, None, tables=[str(table_csv), str(generalization_csv), str(position_csv)])
    screened = read_tables(screen_csvs)
    unread = not_read(screened, read_tables(deps_csvs), settings)
    fig = sparsity_figure(pd.read_csv(table_csv), screened, min_benefit, short, long, unread)
    save_figure(fig, out.sparsity_png, out.sparsity_pdf, prov)
    gen = pd.read_csv(generalization_csv)
    fig = length_figure(pd.read_csv(position_csv), gen[gen["sparsity"] != "all"], short, long, unread)
    save_figure(fig, out.length_png, out.length_pdf, prov)


def not_read(screen: pd.DataFrame, deps: pd.DataFrame, settings) -> str:
    """Why the claims do not read greedy's shares on these runs ("" when they do): the gates of
    L1 and L2, as the report applies them."""
    from sparselen.language.claims import language_benefit, planted_control
    from sparselen.statistics.verdicts import HOLDS

    for gate in (language_benefit(screen, settings), planted_control(deps, settings)):
        if gate.verdict != HOLDS:
            return f"not read by the claims: {gate.reason}"
    return ""


STAMP_WIDTH = 48  # characters per line of the "not read" stamp: a panel's width at its font size


def _mark_unread(ax, why: str) -> None:
    """Dim what the panel shows and say, in its title's place (above the data, so it covers no
    line), that the claims do not read it and why."""
    import textwrap

    for artist in [*ax.lines, *ax.collections]:
        artist.set_alpha((artist.get_alpha() or 1.0) * 0.3)
    ax.set_title("\n".join(textwrap.wrap(why, STAMP_WIDTH)), fontsize=7, color="#cf222e")


def _legend_below(fig, axes, ncol: int = 2) -> None:
    """Each panel's legend under it; long enough handles that a dashed line reads as dashed."""
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=ncol,
                      handlelength=3.5)


def sparsity_figure(table: pd.DataFrame, screened: pd.DataFrame, min_benefit: float, short: int, long: int,
                    unread: str = ""):
    import matplotlib.ticker

    from sparselen.presentation.plotting import FIGURE_WIDTH, MIN_TEXT_POINTS, plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH, 4.0))
    for method, g in table.groupby("method", sort=False):
        g = g.sort_values("k")
        a.plot(g["k"], g["median"], "o--" if method in LABELS else "o-", color=COLORS.get(method),
               label=LABELS.get(method, method), ms=4)
        a.fill_between(g["k"], g["ci_low"], g["ci_high"], color=COLORS.get(method), alpha=0.15, lw=0)
    a.set_xscale("log", base=2)
    ks = sorted(table["k"].unique())
    a.set_xticks(ks, [str(k) for k in ks])
    a.minorticks_off()
    a.axhline(1.0, color="0.4", ls="--", lw=1)
    a.axhline(0.0, color="0.6", ls=":", lw=1)
    a.set_xlabel(f"k distant tokens added to the last {short}", fontsize=8)
    a.set_ylabel("share of the benefit recovered\n(1: all of it; above 1: more than all)", fontsize=8)
    a.set_title(f"median over {int(table['n_tokens'].max())} tokens, 95% bootstrap", fontsize=8)
    a.grid(alpha=0.3)
    lo, hi = screened["benefit"].quantile([0.001, 0.999])  # the bulk; outliers pile up at the edges
    hi = max(hi, min_benefit + 0.1)
    b.hist(screened["benefit"].clip(lo, hi), bins=60, color="0.4")
    if min_benefit >= lo:
        b.axvline(min_benefit, color="C3", ls="--", lw=1, label=f"analysed: benefit >= {min_benefit}")
    b.set_yscale("log")
    b.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10))
    b.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    b.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # labelled minor ticks overprint
    b.set_xlabel(f"L_short - L_long (nats; contexts {short} vs {long})", fontsize=8)
    b.set_ylabel("tokens", fontsize=8)
    b.set_title(f"{len(screened)} random held-out tokens, {int(screened['analysed'].sum())} analysed", fontsize=8)
    for ax in (a, b):
        ax.tick_params(which="both", labelsize=MIN_TEXT_POINTS)
    _legend_below(fig, (a, b), ncol=2)
    if unread:
        _mark_unread(a, unread)
    fig.suptitle("The share of the long-context benefit that k distant tokens recover", fontsize=9)
    fig.tight_layout()
    return fig


def length_figure(position: pd.DataFrame, generalization: pd.DataFrame, short: int, long: int, unread: str = ""):
    from sparselen.presentation.plotting import FIGURE_WIDTH, MIN_TEXT_POINTS, plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(FIGURE_WIDTH, 4.0))
    runs = list(dict.fromkeys(zip(position["context"], position["scheme"])))
    for i, (ctx, scheme) in enumerate(runs):
        g = position[(position["context"] == ctx) & (position["scheme"] == scheme)].sort_values("position")
        a.plot(g["position"], g["mean"], "-", color=f"C{i}", label=f"trained at {ctx}, {scheme}")
        a.fill_between(g["position"], g["ci_low"], g["ci_high"], color=f"C{i}", alpha=0.15, lw=0)
    for ctx in sorted(position["context"].unique()):
        a.axvline(ctx, color="0.5", ls="--", lw=1)
    a.set_xscale("log")
    ticks = sorted({int(position["position"].min()), short, long, int(position["position"].max())})
    a.set_xticks(ticks, [str(t) for t in ticks])
    a.minorticks_off()
    a.set_xlabel("position in the context (tokens seen)", fontsize=8)
    a.set_ylabel("validation loss (nats)", fontsize=8)
    a.set_title("loss by position; dashed: training contexts", fontsize=8)
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
    b.set_xlabel("token sparsity: smallest greedy k recovering the benefit", fontsize=8)
    b.set_ylabel(f"gain from context {long} over {short} (nats)", fontsize=8)
    b.set_title("long-context gain on the analysed tokens", fontsize=8)
    b.grid(alpha=0.3)
    for ax in (a, b):
        ax.tick_params(which="both", labelsize=MIN_TEXT_POINTS)
    _legend_below(fig, (a, b), ncol=1)
    if unread:
        _mark_unread(b, unread)
    fig.suptitle("Length generalization on real text, by token sparsity", fontsize=9)
    fig.tight_layout()
    return fig


def paper_tables(t: pd.DataFrame) -> list[str]:
    """The median share of the benefit recovered, method x k."""
    grid = t.pivot_table(index="method", columns="k", values="median", aggfunc="first")
    grid = grid.reindex([m for m in COLORS if m in grid.index] + [m for m in grid.index if m not in COLORS])
    head = ["method", *(f"k = {k}" for k in grid.columns)]
    rows = [[LABELS.get(m, m), *("" if pd.isna(v) else f"{v:.2f}" for v in grid.loc[m])] for m in grid.index]
    return [f"Median share of the long-context benefit recovered by k distant tokens, over "
            f"{int(t['n_tokens'].max())} analysed tokens (1 = all of it).", "",
            layout(head, rows), ""]

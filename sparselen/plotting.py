"""Figures: accuracy-vs-length panels with a 95% band over seeds, saved as PNG and PDF.

One generic drawer serves every slice (parity: panel per K_train, curve per k_test; PPC:
panel per task, curve per scheme). Figures embed their provenance in the file metadata.
"""

from __future__ import annotations

import json
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from sparselen.io import atomic_path  # noqa: E402

PNG_DPI = 150  # resolution of the PNG figures
PANEL_WIDTH = 3.6  # inches per panel
NOTE_POINTS = 6.5  # font size of the notes under a panel
NOTE_CHARS = int(0.9 * PANEL_WIDTH * 72 / (0.6 * NOTE_POINTS))  # monospace characters fit under one panel


def plot_panels(summary: pd.DataFrame, panel: str, curve: str, x: str = "length", *,
                panel_label: str = "{}", curve_label: str = "{}", xlabel: str = "length",
                ylabel: str = "accuracy", title: str = "", vlines: dict | None = None,
                chance: float | None = None, logx: bool = True, styles: dict | None = None,
                xlabels: dict | None = None, spans: dict | None = None, notes: dict | None = None):
    """Draw ``summary`` (columns panel, curve, x, mean, ci_low, ci_high) as a row of panels.

    Curves are ordered values (k_test) drawn in a sequential colormap, unless ``styles`` maps
    each curve to its own line style (e.g. ``{"color": "tab:green", "ls": "--"}``) for
    categories, listed in the order ``styles`` gives. ``vlines`` maps a panel value to an x
    position to mark (e.g. the longest training length), ``spans`` to an x range to shade (the
    training range); ``xlabels`` a panel value to its own x-axis label; ``notes`` to text written
    under the panel (e.g. the claims measured on it).
    """
    panels = sorted(summary[panel].unique(), key=_sort_key)
    curves = sorted(summary[curve].unique(), key=_sort_key)
    if styles:  # categories in the order ``styles`` lists them
        curves.sort(key=lambda c: list(styles).index(c) if c in styles else len(styles))
    colors = plt.cm.viridis(np.linspace(0.0, 0.9, len(curves)))
    ncol = len(panels)
    notes = {p: _wrap(text) for p, text in (notes or {}).items()}
    note_lines = max((text.count("\n") + 1 for text in notes.values()), default=0)
    height = 3.4 + note_lines * 1.2 * NOTE_POINTS / 72  # the notes get room of their own under the panels
    fig, axes = plt.subplots(1, ncol, figsize=(PANEL_WIDTH * ncol + 1.2, height), sharey=True, squeeze=False)
    for ax, p in zip(axes[0], panels):
        sub = summary[summary[panel] == p]
        for color, c in zip(colors, curves):
            line = sub[sub[curve] == c].sort_values(x)
            if line.empty:
                continue
            style = {"color": color, "ls": "-", **((styles or {}).get(c, {}))}
            ax.plot(line[x], line["mean"], marker="o", ms=3, lw=1.5, label=curve_label.format(c), **style)
            if line["ci_low"].notna().any():
                ax.fill_between(line[x], line["ci_low"], line["ci_high"], color=style["color"], alpha=0.10, lw=0)
        if vlines and p in vlines:
            ax.axvline(vlines[p], color="0.4", ls="--", lw=1)
        if spans and p in spans:
            ax.axvspan(*spans[p], color="0.85", alpha=0.6, lw=0, zorder=0)
        if p in notes:
            # anchored under the x-axis label at draw time, so rotated tick labels never overlap it
            ax.annotate(notes[p], xy=(0.0, 0.0), xycoords=("axes fraction", ax.xaxis.label),
                        xytext=(0, -4), textcoords="offset points", fontsize=NOTE_POINTS, va="top",
                        ha="left", family="monospace")
        if chance is not None:
            ax.axhline(chance, color="0.6", ls=":", lw=1)
        if logx:
            ax.set_xscale("log")
            ticks = sorted(sub[x].unique())
            ax.set_xticks(ticks, [str(t) for t in ticks], rotation=45, fontsize=7)
            ax.minorticks_off()
        ax.set_title(panel_label.format(p))
        ax.set_xlabel((xlabels or {}).get(p, xlabel))
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(ylabel)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False, fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def _wrap(note: str) -> str:
    """Each line of a panel's note wrapped to the panel's width, so neighbouring notes never meet."""
    return "\n".join(textwrap.fill(line, NOTE_CHARS, subsequent_indent="  ") for line in note.splitlines())


def save_figure(fig, png_path, pdf_path, provenance: dict) -> None:
    """Write PNG and PDF atomically, with provenance in each file's metadata."""
    meta = json.dumps(provenance, sort_keys=True, default=str)
    with atomic_path(png_path) as tmp:
        fig.savefig(tmp, format="png", dpi=PNG_DPI, bbox_inches="tight", metadata={"Description": meta})
    with atomic_path(pdf_path) as tmp:
        fig.savefig(tmp, format="pdf", bbox_inches="tight", metadata={"Subject": meta, "Creator": "sparselen"})
    plt.close(fig)


def _sort_key(v):
    return (0, v, "") if isinstance(v, (int, float, np.integer, np.floating)) else (1, 0, str(v))

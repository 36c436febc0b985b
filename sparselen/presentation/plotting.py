"""Figures, saved as PNG and PDF with their provenance in the file metadata, sized for the
report: at PNG_DPI a figure at most FIGURE_WIDTH wide is shown at its own size in the report's
text column, so its text keeps the size it is set in (``readable_text`` checks it).

Two drawers serve the slices: ``plot_panels`` (a row of panels, accuracy against a size, one
line per category, each with its own marker, a width of its own and a sideways offset of at
most ``MAX_DODGE``, so that lines on top of each other stay visible and every point stays at
its own length) and ``plot_heatmaps`` (one grid per panel, a value per cell,
written in the cell; e.g. parity: k_test x length per K_train).
"""

from __future__ import annotations

import json
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from sparselen.runtime.io import atomic_path  # noqa: E402

PNG_DPI = 150  # resolution of the PNG figures
FIGURE_WIDTH = 7.3  # inches: at PNG_DPI, the report's text column (sparselen.report.render.REPORT_WIDTH_PX)
MIN_TEXT_POINTS = 7.0  # no text of a figure is set smaller (at PNG_DPI and FIGURE_WIDTH: 14.6 px)
MARKERS = "osD^v<>ph*"
NOTE_COLOR = "#ff4500"  # a flagged heatmap row: its label and its trained cells' outline, inside the red box
NOTE_INSET = 0.12  # cells: the outline sits inside the trained box's edge, not on it
MAX_DODGE = 0.01  # the outermost curve moves at most this far sideways (decades of a log axis: 2.3%)


def dodge_step(xs, n_curves: int, dodge: float, logx: bool) -> float:
    """The sideways step between neighbouring curves: ``dodge``, narrowed so that the outermost
    curve moves at most MAX_DODGE and at most a quarter of the way to the nearest other x value,
    so that no point reads as another length or crosses a mark drawn at its own."""
    half = (n_curves - 1) / 2
    if half <= 0:
        return 0.0
    values = np.unique(np.log10(np.asarray(xs, float)) if logx else np.asarray(xs, float))
    span = np.ptp(values) if len(values) > 1 else 1.0
    gap = np.diff(values).min() if len(values) > 1 else span
    widest = min(MAX_DODGE, gap / 4) if logx else min(MAX_DODGE, gap / 4 / max(span, 1))
    return min(dodge, widest / half)


def plot_panels(summary: pd.DataFrame, panel: str, curve: str, x: str = "length", *,
                panel_label: str = "{}", curve_label: str = "{}", xlabel: str = "length",
                ylabel: str = "accuracy", title: str = "", vlines: dict | None = None,
                chance: float | None = None, logx: bool = True, styles: dict | None = None,
                xlabels: dict | None = None, spans: dict | None = None, dodge: float = 0.03,
                ncols: int = 3, unfitted: dict | None = None, unfitted_label: str = "dashed: did not fit",
                unfitted_title: str = "did not fit"):
    """Draw ``summary`` (columns panel, curve, x, mean, ci_low, ci_high) as panels, ``ncols``
    to a row.

    Curves are ordered values (k_test) drawn in a sequential colormap, unless ``styles`` maps
    each curve to its own style (e.g. ``{"color": "tab:green", "ls": "--", "marker": "s"}``) for
    categories, listed in the order ``styles`` gives. Each curve has its own marker, is moved
    sideways by ``dodge`` (a fraction of a decade on a log axis, of the x range otherwise) times
    its rank from the middle, narrowed by ``dodge_step`` so that no point moves towards another
    length, and is drawn wider than the curves after it, so equal values do not hide one another.
    ``vlines`` maps a panel value to an x position to mark (e.g. the longest training size), ``spans`` to an x range to
    shade (the training range); ``xlabels`` a panel value to its own x-axis label; ``unfitted`` a
    panel value to {curve: note} for curves to mark (e.g. runs that did not fit their training
    sizes): drawn dashed, and named with their note under the panel's title, after
    ``unfitted_title``. The legend lists the curves drawn, once, and ``unfitted_label`` for the dashes where any curve is marked. A style
    may set the marker's size and face (``ms``, ``mfc``: e.g. hollow, so that a curve under
    another shows around it).
    """
    panels = sorted(summary[panel].unique(), key=_sort_key)
    curves = sorted(summary[curve].unique(), key=_sort_key)
    if styles:  # categories in the order ``styles`` lists them
        curves.sort(key=lambda c: list(styles).index(c) if c in styles else len(styles))
    colors = plt.cm.viridis(np.linspace(0.0, 0.9, len(curves)))
    ncols = 2 if len(panels) == 4 else min(ncols, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(FIGURE_WIDTH, 0.4 + 2.6 * nrows), sharey=True, squeeze=False)
    drawn = {}
    for i, (ax, p) in enumerate(zip(axes.flat, panels)):
        sub = summary[summary[panel] == p]
        span = np.ptp(np.log10(sub[x])) if logx else np.ptp(sub[x])
        step = dodge_step(sub[x], len(curves), dodge, logx)
        for rank, (color, c) in enumerate(zip(colors, curves)):
            line = sub[sub[curve] == c].sort_values(x)
            if line.empty:
                continue
            under = len(curves) - 1 - rank  # curves drawn later lie on top: the earlier ones are wider
            style = {"color": color, "ls": "-", "marker": MARKERS[rank % len(MARKERS)],
                     "ms": min(3.5 + 0.4 * under, 6), "lw": min(1.1 + 0.35 * under, 3), **((styles or {}).get(c, {}))}
            shift = step * (rank - (len(curves) - 1) / 2)
            xs = line[x] * 10 ** shift if logx else line[x] + shift * max(span, 1)
            marked = c in (unfitted or {}).get(p, {})
            ax.plot(xs, line["mean"], label=curve_label.format(c), **{**style, **({"ls": "--"} if marked else {})})
            drawn.setdefault(curve_label.format(c), plt.Line2D([], [], **style))  # the curve's own style
            if line["ci_low"].notna().any():
                ax.errorbar(xs, line["mean"], yerr=[line["mean"] - line["ci_low"], line["ci_high"] - line["mean"]],
                            fmt="none", ecolor=style["color"], elinewidth=0.8, capsize=1.5, alpha=0.6)
        if vlines and p in vlines:
            ax.axvline(vlines[p], color="0.4", ls="--", lw=1)
        if spans and p in spans:
            ax.axvspan(*spans[p], color="0.85", alpha=0.6, lw=0, zorder=0)
        if chance is not None:
            handle = ax.axhline(chance, color="0.5", ls=":", lw=1, label="chance")
            drawn.setdefault("chance", handle)
        if logx:
            ax.set_xscale("log")
            ticks = sorted(sub[x].unique())
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.minorticks_off()
        notes = (unfitted or {}).get(p, {})
        if notes:
            handle = plt.Line2D([], [], color="0.3", ls="--", label=unfitted_label)
            drawn.setdefault(unfitted_label, handle)
        names = [f"{curve_label.format(c)} {note}" for c, note in notes.items()]
        rows = [", ".join(names[i:i + 2]) for i in range(0, len(names), 2)]
        ax.set_title(panel_label.format(p) + (f"\n{unfitted_title}: " + "\n".join(rows) if rows else ""),
                     fontsize=8 if rows else 9)
        ax.set_xlabel((xlabels or {}).get(p, xlabel), fontsize=8)
        ax.tick_params(labelsize=MIN_TEXT_POINTS)
        ax.set_ylim(-0.04, 1.04)
        ax.grid(alpha=0.3)
        if i % ncols == 0:
            ax.set_ylabel(ylabel, fontsize=8)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    per_row = min(4, len(drawn)) or 1
    fig.legend(list(drawn.values()), list(drawn), loc="lower center", ncol=per_row, frameon=False, fontsize=8)
    if title:
        fig.suptitle(title, fontsize=9)
    legend_height = 0.2 * math.ceil(len(drawn) / per_row) + 0.1  # inches
    fig.tight_layout(rect=(0, legend_height / fig.get_figheight(), 1, 1))
    return fig


def plot_heatmaps(summary: pd.DataFrame, panel: str, row: str, col: str, value: str = "mean", *,
                  panel_label: str = "{}", row_label: str = "", col_label: str = "", title: str = "",
                  vmin: float = 0.5, vmax: float = 1.0, fmt=lambda v: f"{100 * v:.0f}",
                  boxes: dict | None = None, marked_rows: dict | None = None, marked_label: str = "",
                  box_label: str = "", colorbar_label: str = "", noted_rows: dict | None = None,
                  noted_label: str = "", ncols: int = 2):
    """One grid per panel value (rows ``row``, columns ``col``, colour and text = ``value``),
    ``ncols`` panels to a row. ``boxes`` maps a panel to the (rows, cols) it outlines (e.g. what
    the model was trained on); ``marked_rows`` to rows to hatch (e.g. sparsities never trained
    on); ``noted_rows`` to {row: note} for rows to flag (e.g. sparsities not every seed fitted):
    the note joins the row's label, in red, and the row's boxed cells are outlined in dashes. A
    cell without a value is left grey."""
    panels = sorted(summary[panel].unique(), key=_sort_key)
    rows = sorted(summary[row].unique(), key=_sort_key)
    cols = sorted(summary[col].unique(), key=_sort_key)
    ncols = min(ncols, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    height = 0.3 * len(rows) + 1.1
    fig, axes = plt.subplots(nrows, ncols, figsize=(FIGURE_WIDTH, 0.9 + height * nrows), squeeze=False)
    cmap = plt.cm.viridis.with_extremes(bad="0.9")
    image = None
    for i, (ax, p) in enumerate(zip(axes.flat, panels)):
        grid = (summary[summary[panel] == p].pivot_table(index=row, columns=col, values=value, aggfunc="first")
                .reindex(index=rows, columns=cols))
        data = grid.to_numpy(float)
        image = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
        for (r, c), v in np.ndenumerate(data):
            if np.isfinite(v):
                level = (min(max(v, vmin), vmax) - vmin) / (vmax - vmin)
                ax.text(c, r, fmt(v), ha="center", va="center", fontsize=MIN_TEXT_POINTS,
                        color="white" if level < 0.6 else "black")
        for r in (marked_rows or {}).get(p, []):
            if r in rows:
                k = rows.index(r)
                ax.add_patch(plt.Rectangle((-0.5, k - 0.5), len(cols), 1, fill=False, hatch="////", lw=0,
                                           edgecolor="0.85", alpha=0.4))
        if boxes and p in boxes:
            in_rows, in_cols = boxes[p]
            ri = [rows.index(r) for r in rows if r in in_rows]
            ci = [cols.index(c) for c in cols if c in in_cols]
            if ri and ci:
                ax.add_patch(plt.Rectangle((min(ci) - 0.5, min(ri) - 0.5), max(ci) - min(ci) + 1,
                                           max(ri) - min(ri) + 1, fill=False, lw=2.2, edgecolor="#d62728"))
        notes = (noted_rows or {}).get(p, {})
        for r in notes:
            if r in rows and boxes and p in boxes:
                ci = [cols.index(c) for c in cols if c in boxes[p][1]]
                if ci:
                    ax.add_patch(plt.Rectangle((min(ci) - 0.5 + NOTE_INSET, rows.index(r) - 0.5 + NOTE_INSET),
                                               max(ci) - min(ci) + 1 - 2 * NOTE_INSET, 1 - 2 * NOTE_INSET,
                                               fill=False, lw=1.6, ls="--", edgecolor=NOTE_COLOR))
        ax.set_xticks(range(len(cols)), [str(c) for c in cols], fontsize=MIN_TEXT_POINTS)
        ax.set_yticks(range(len(rows)), [f"{r} ({notes[r]})" if r in notes else str(r) for r in rows],
                      fontsize=MIN_TEXT_POINTS)
        for label, r in zip(ax.get_yticklabels(), rows):
            if r in (marked_rows or {}).get(p, []):
                label.set_color("0.45")
                label.set_fontstyle("italic")
            if r in notes:
                label.set_color(NOTE_COLOR)
        ax.set_title(panel_label.format(p), fontsize=9)
        ax.set_xlabel(col_label, fontsize=8)
        if i % ncols == 0:
            ax.set_ylabel(row_label, fontsize=8)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    handles = []
    if boxes:
        handles.append(plt.Rectangle((0, 0), 1, 1, fill=False, lw=2.2, edgecolor="#d62728", label=box_label))
    if marked_rows and any(marked_rows.values()):
        handles.append(plt.Rectangle((0, 0), 1, 1, fill=False, hatch="////", edgecolor="0.5", lw=0,
                                     label=marked_label))
    if noted_rows and any(noted_rows.values()):
        handles.append(plt.Rectangle((0, 0), 1, 1, fill=False, lw=1.6, ls="--", edgecolor=NOTE_COLOR,
                                     label=noted_label))
    if title:
        fig.suptitle(title, fontsize=9)
    per_row = min(2, len(handles)) or 1  # three labels in a row are wider than the figure
    legend_rows = math.ceil(len(handles) / per_row) if handles else 0
    fig.tight_layout(rect=(0, (0.1 + 0.2 * legend_rows if handles else 0) / fig.get_figheight(), 0.9, 1))
    if image is not None:
        bar = fig.colorbar(image, ax=axes.ravel().tolist(), fraction=0.03, pad=0.02)
        bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt(v)))  # the cells' unit
        bar.set_label(colorbar_label, fontsize=8)
        bar.ax.tick_params(labelsize=MIN_TEXT_POINTS)
    if handles:
        fig.legend(handles=handles, loc="lower center", ncol=per_row, frameon=False, fontsize=8)
    return fig


def readable_text(fig, dpi: int = PNG_DPI, width_px: float = FIGURE_WIDTH * PNG_DPI) -> list[tuple[str, float]]:
    """(text, size in CSS px) of every visible text of ``fig`` smaller than MIN_TEXT_POINTS as the
    report shows it: the PNG at ``dpi``, scaled to at most ``width_px``; empty when all read."""
    fig.set_dpi(dpi)
    fig.canvas.draw()
    bbox = fig.get_tightbbox(fig.canvas.get_renderer())
    scale = min(1.0, width_px / (bbox.width * dpi))
    small = []
    for t in fig.findobj(matplotlib.text.Text):
        if t.get_visible() and t.get_text().strip() and t.get_fontsize() * scale < MIN_TEXT_POINTS - 1e-9:
            small.append((t.get_text(), t.get_fontsize() * scale * dpi / 72))
    return small


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

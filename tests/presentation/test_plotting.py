"""Figure layout: what a reader must be able to read is not drawn over (the slices' figures at
the paper's grid: test_figures.py)."""

import matplotlib

matplotlib.use("Agg")
import pandas as pd  # noqa: E402

from sparselen.presentation.plotting import PNG_DPI, plot_heatmaps, plot_panels  # noqa: E402

LENGTHS = [20, 30, 40, 50, 70, 100, 150, 200, 300, 400, 500]


def boxes(fig):
    fig.set_dpi(PNG_DPI)  # as save_figure writes the PNG: text is laid out again at that resolution
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def test_the_legend_sits_under_every_panel_and_its_labels():
    summary = pd.DataFrame([{"task": t, "scheme": s, "size": n, "mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}
                            for t in "abcde" for s in ("nope", "rope", "coupled", "ppc", "pose") for n in LENGTHS])
    fig = plot_panels(summary, "task", "scheme", x="size", title="a title over the panels", chance=0.5)
    renderer = boxes(fig)
    legend = fig.legends[0].get_window_extent(renderer)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 5
    for ax in panels:
        labels = [ax.xaxis.label, *(t for t in ax.get_xticklabels() if t.get_text())]
        assert all(legend.y1 <= t.get_window_extent(renderer).y0 for t in labels)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["coupled", "nope", "pose", "ppc", "rope", "chance"]


def test_heatmap_panels_and_the_colorbar_do_not_overlap():
    summary = pd.DataFrame([{"K": K, "k": k, "n": n, "mean": 0.7} for K in (4, 6, 8) for k in (4, 8, 12, 16)
                            for n in LENGTHS])
    fig = plot_heatmaps(summary, "K", "k", "n", boxes={4: ([4], [20, 30])}, marked_rows={4: [8, 12, 16]},
                        box_label="trained", marked_label="never trained on", colorbar_label="accuracy")
    renderer = boxes(fig)
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    bar = next(ax for ax in fig.axes if ax.get_ylabel() == "accuracy")
    extents = [ax.get_tightbbox(renderer) for ax in panels]
    right = bar.get_window_extent(renderer)
    assert all(e.x1 <= right.x0 for e in extents)  # the colour bar right of every panel
    first, second = extents[0], extents[1]
    assert first.x1 <= second.x0  # neighbours in a row do not meet
    legend = fig.legends[0].get_window_extent(renderer)
    assert all(legend.y1 <= e.y0 for e in extents)

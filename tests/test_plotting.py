"""Figure layout: what a reader must be able to read is not drawn over."""

import matplotlib

matplotlib.use("Agg")
import pandas as pd  # noqa: E402

from sparselen.plotting import PNG_DPI, plot_panels  # noqa: E402

LONG = "P1 not tested: 2 fitted k_test <= K_train [1, 2], 0 seeds with 3 fitted cells"


def test_panel_notes_sit_below_the_axis_labels_and_apart_from_each_other():
    lengths = [20, 30, 40, 50, 70, 100, 150, 200, 300, 400, 500]
    summary = pd.DataFrame([{"K_train": K, "k_test": k, "length": n, "mean": 0.9, "ci_low": 0.8, "ci_high": 1.0}
                            for K in (2, 3) for k in (1, 2, 3) for n in lengths])
    notes = {K: f"{LONG}\nP2 +0.41 [+0.02, +0.80] inconclusive\n{LONG.replace('P1', 'P3')}" for K in (2, 3)}
    fig = plot_panels(summary, "K_train", "k_test", xlabel="sample length 2l", title="a title over the panels",
                      notes=notes)
    fig.set_dpi(PNG_DPI)  # as save_figure writes the PNG: text is laid out again at that resolution
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = []
    for ax in fig.axes:
        box = next(t for t in ax.texts if t.get_text().startswith("P1")).get_window_extent(renderer)
        labels = [ax.xaxis.label, *(t for t in ax.get_xticklabels() if t.get_text())]
        assert all(box.y1 <= t.get_window_extent(renderer).y0 for t in labels)  # under every label
        boxes.append(box)
    assert boxes[0].x1 <= boxes[1].x0  # the first panel's notes end before the second's begin

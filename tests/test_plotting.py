"""Figure layout: what a reader must be able to read is not drawn over."""

import io

import matplotlib

matplotlib.use("Agg")
import pandas as pd  # noqa: E402

from sparselen.plotting import plot_panels  # noqa: E402


def test_panel_notes_sit_below_the_axis_label_and_ticks():
    lengths = [20, 30, 40, 50, 70, 100, 150, 200, 300, 400, 500]
    summary = pd.DataFrame([{"K_train": 4, "k_test": k, "length": n, "mean": 0.9, "ci_low": 0.8, "ci_high": 1.0}
                            for k in (1, 2, 3) for n in lengths])
    fig = plot_panels(summary, "K_train", "k_test", xlabel="sample length 2l", title="a title over the panels",
                      notes={4: "P1 -1.00 [-1.00, -1.00] holds\nP2 +0.41 [+0.02, +0.80] inconclusive\nP3 +1.00"})
    fig.savefig(io.BytesIO(), format="png", dpi=150, bbox_inches="tight")  # as save_figure draws it
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    note = next(t for t in ax.texts if t.get_text().startswith("P1"))
    box = note.get_window_extent(renderer)
    above = [ax.xaxis.label.get_window_extent(renderer)] + [t.get_window_extent(renderer)
                                                          for t in ax.get_xticklabels() if t.get_text()]
    assert all(box.y1 <= b.y0 for b in above)  # the notes' top is under every label's bottom

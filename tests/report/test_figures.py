"""The figures at the paper's grid, as the report shows them: no text below the minimum size at
the PNG's resolution and the report's width, every scheme visible, marks where the claims do
not read a panel, intervals in log space; and, in headless Chromium (which the test command
installs: tests/extras.py), the report's own text and figures at a readable size."""

import math
import re
import subprocess

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from extras import chromium  # noqa: E402

from sparselen.presentation import plotting  # noqa: E402
from sparselen.presentation.plotting import MIN_TEXT_POINTS, PNG_DPI, readable_text  # noqa: E402

PARITY_LENGTHS = [20, 30, 40, 50, 70, 100, 150, 200, 300, 400, 500]


@pytest.fixture
def drawn(monkeypatch):
    """The figures a slice's figure function draws, instead of saving them."""
    figs = []
    monkeypatch.setattr(plotting, "save_figure", lambda fig, *a, **k: figs.append(fig))
    return figs


def parity_table():
    rows = [{"K_train": K, "scheme": "pose", "k_test": k, "length": n, "mean": 1 - 0.02 * k * math.log2(n / 20),
             "ci_low": 0.5, "ci_high": 1.0, "n_seeds": 3, "n_samples": 600}
            for K in (4, 6, 8, 10, 12) for k in range(4, 17, 2) for n in PARITY_LENGTHS]
    return pd.DataFrame(rows)


def parity_evals(Ks=(4, 6, 8, 10, 12), ks=range(4, 17, 2), lengths=PARITY_LENGTHS, seeds=range(3), accuracy=None):
    """Per-run evaluation rows: ``accuracy(K, seed, k, n)`` (by default every run fits its trained
    sparsities and falls with length beyond)."""
    accuracy = accuracy or (lambda K, seed, k, n: 1.0 if n <= 50 else max(0.5, 1 - 0.02 * k * math.log2(n / 50)))
    return pd.DataFrame([{"K_train": K, "scheme": "pose", "seed": seed, "k_test": k, "length": n, "n": 200,
                          "correct": round(200 * accuracy(K, seed, k, n)),
                          "accuracy": round(200 * accuracy(K, seed, k, n)) / 200, "config_hash": "x"}
                         for K in Ks for seed in seeds for k in ks for n in lengths])


def draw_parity(tmp_path, table, evals, train_lengths=(20, 50)):
    from types import SimpleNamespace

    from sparselen.parity.report import figure

    table.to_csv(tmp_path / "t.csv", index=False)
    evals.to_csv(tmp_path / "e.csv", index=False)
    figure(tmp_path / "t.csv", [tmp_path / "e.csv"], {"train_lengths": train_lengths},
           SimpleNamespace(png=None, pdf=None, heatmap_png=None, heatmap_pdf=None))


def test_parity_at_the_papers_grid_is_a_curve_per_k_test_and_a_readable_heatmap_per_k_train(tmp_path, drawn):
    draw_parity(tmp_path, parity_table(), parity_evals())
    curves, heatmap = drawn
    panels = [ax for ax in curves.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == [f"K_train = {K}" for K in (4, 6, 8, 10, 12)]  # every seed fits
    assert readable_text(curves) == []
    ax = panels[0]  # K_train 4: one line per k_test 4..16, accuracy against length on a log axis
    lines = [line for line in ax.get_lines() if line.get_label().startswith("k_test")]
    assert [line.get_label() for line in lines] == [f"k_test = {k}" for k in range(4, 17, 2)]
    assert all(list(line.get_xdata()) == PARITY_LENGTHS for line in lines) and ax.get_xscale() == "log"
    assert lines[0].get_linestyle() == "-" and {line.get_linestyle() for line in lines[1:]} == {":"}  # k_test > 4
    assert ax.get_xlabel() == "sample length 2l" and ax.get_ylabel() == "accuracy"
    labels = [t.get_text() for t in curves.legends[0].get_texts()]
    assert labels[:7] == [f"k_test = {k}" for k in range(4, 17, 2)] and "a seed that did not fit" in labels
    panels = [ax for ax in heatmap.axes if ax.get_title().startswith("K_train")]
    assert [ax.get_title() for ax in panels] == [f"K_train = {K}" for K in (4, 6, 8, 10, 12)]
    assert readable_text(heatmap) == []
    ax = panels[0]  # K_train 4: k_test 4 trained (boxed), 6..16 never trained on (hatched, grey labels)
    assert len([t for t in ax.texts]) == 7 * 11  # every cell's value written in it
    boxes = [p for p in ax.patches if not p.get_fill() and not p.get_hatch()]
    assert len(boxes) == 1 and boxes[0].get_width() == 4 and boxes[0].get_height() == 1  # 2l in [20, 50], k = 4
    assert len([p for p in ax.patches if p.get_hatch()]) == 6
    assert [t.get_color() for t in ax.get_yticklabels()][:2] == ["black", "0.45"]
    bar = next(a for a in heatmap.axes if a.get_ylabel().startswith("accuracy"))
    heatmap.canvas.draw()
    ticks = [t.get_text() for t in bar.get_yticklabels() if t.get_text()]
    assert ticks and all(t.isdigit() and 50 <= int(t) <= 100 for t in ticks), ticks  # percent, as the cells


def half_fitted_parity(tmp_path):
    """K_train 2: k_test 1 fits on all 3 seeds; k_test 2 on seed 0 only (0.91 on average: it looks
    learned); k_test 3 is never trained on."""
    def accuracy(K, seed, k, n):
        return 1.0 if k == 1 else (0.99 if seed == 0 else 0.87) if k == 2 else 0.5 + 0.1 * seed

    evals = parity_evals(Ks=(2,), ks=(1, 2, 3), lengths=(20, 50, 100), accuracy=accuracy)
    evals.to_csv(tmp_path / "e.csv", index=False)
    return [tmp_path / "e.csv"]


def test_a_parity_curve_averages_the_seeds_that_fit_and_marks_the_others(tmp_path, drawn):
    from types import SimpleNamespace

    from sparselen.parity.report import curves, figure, seed_curves, table

    evals = half_fitted_parity(tmp_path)
    mean = curves(seed_curves(evals, {"train_lengths": (20, 50)})).set_index(["k_test", "length"])
    assert mean.loc[(2, 20), "mean"] == pytest.approx(0.99)  # seed 0 alone: not the 0.91 of all three
    assert mean.loc[(2, 20), "n_counted"] == 1 and mean.loc[(2, 20), "kind"] == "fitted"
    assert mean.loc[(3, 20), "mean"] == pytest.approx(0.6) and mean.loc[(3, 20), "kind"] == "untrained"
    t = table(evals, tmp_path / "t.csv", tmp_path / "t.md", {"train_lengths": (20, 50)})
    assert t.query("k_test == 2")["mean"].iloc[0] == pytest.approx(0.91)  # the table keeps the mean of all seeds
    figure(tmp_path / "t.csv", evals, {"train_lengths": (20, 50)},
           SimpleNamespace(png=None, pdf=None, heatmap_png=None, heatmap_pdf=None))
    ax = drawn[0].axes[0]
    assert ax.get_title() == "K_train = 2\n(k_test 2: 1/3 fit)"
    line = {line.get_label(): line for line in ax.get_lines()}["k_test = 2"]
    assert list(line.get_ydata()) == pytest.approx([0.99, 0.99, 0.99]) and line.get_linestyle() == "-"
    crosses = [c for c in ax.collections if c.get_linewidths()[0] > 0]  # the seeds' dots are drawn without edges
    assert sum(len(c.get_offsets()) for c in crosses) == 2 * 3  # seeds 1 and 2 at each of the 3 lengths
    assert readable_text(drawn[0]) == []


def test_a_trained_sparsity_not_every_seed_fitted_is_marked_in_the_heatmap_and_table(tmp_path, drawn):
    from types import SimpleNamespace

    from sparselen.parity.report import figure, paper_tables, table

    evals = half_fitted_parity(tmp_path)
    t = table(evals, tmp_path / "t.csv", tmp_path / "t.md", {"train_lengths": (20, 50)})
    assert dict(t.groupby("k_test")["n_fit"].first()) == {1: 3, 2: 1, 3: 0}
    assert "| 2 (1/3 fit) |" in "\n".join(paper_tables(t))  # k_test 3 > K_train: untrained, not flagged
    figure(tmp_path / "t.csv", evals, {"train_lengths": (20, 50)},
           SimpleNamespace(png=None, pdf=None, heatmap_png=None, heatmap_pdf=None))
    ax = drawn[1].axes[0]
    labels = {t.get_text(): t.get_color() for t in ax.get_yticklabels()}
    assert labels["2 (1/3 fit)"] == plotting.NOTE_COLOR and labels["1"] == "black"
    dashed = [p for p in ax.patches if p.get_linestyle() == "--"]  # the two trained lengths of k_test 2
    assert len(dashed) == 1 and dashed[0].get_width() == pytest.approx(2 - 2 * plotting.NOTE_INSET)
    assert readable_text(drawn[1]) == []


def test_a_trained_sparsity_no_seed_fitted_is_dashed_over_all_seeds(tmp_path):
    from sparselen.parity.report import curves, seed_curves

    evals = parity_evals(Ks=(2,), ks=(1, 2), lengths=(20, 50), accuracy=lambda K, seed, k, n: 1.0 if k == 1 else 0.6)
    evals.to_csv(tmp_path / "e.csv", index=False)
    mean = curves(seed_curves([tmp_path / "e.csv"], {"train_lengths": (20, 50)})).set_index(["k_test", "length"])
    assert mean.loc[(2, 20), "kind"] == "none fit" and mean.loc[(2, 20), "n_counted"] == 3
    assert mean.loc[(1, 20), "kind"] == "fitted" and mean.loc[(1, 20), "n_fit"] == 3


def ppc_table():
    rows = []
    for task in ("copy_repeat", "addition", "variable_assignment", "pointer_copy"):
        for scheme in ("nope", "rope", "rope_base10000", "pose", "coupled", "ppc"):
            for size in (5, 10, 20, 30, 40):
                mean = 1.0 if scheme in ("coupled", "ppc") else max(0.0, 1 - size / 20)
                rows.append({"task": task, "scheme": scheme, "metric": "exact_match", "size": size, "mean": mean,
                             "ci_low": mean, "ci_high": mean, "n_seeds": 4, "prompt_tokens": 10, "n_samples": 800})
                if scheme == "ppc":
                    rows.append({**rows[-1], "metric": "position_ids"})
    return pd.DataFrame(rows)


def test_ppc_draws_every_scheme_apart_at_its_own_size_and_lists_only_lines_it_drew(tmp_path, drawn):
    from sparselen.ppc.report import caption, figure
    from sparselen.presentation.plotting import MAX_DODGE

    ppc_table().to_csv(tmp_path / "t.csv", index=False)
    figure(tmp_path / "t.csv", {"copy_repeat": 10, "addition": 8, "variable_assignment": 8, "pointer_copy": 8},
           None, None)
    fig = drawn[0]
    assert readable_text(fig) == []
    legend = fig.legends[0]
    labels = [t.get_text() for t in legend.get_texts()]
    # ppc's id diagnostics are the table's rows, not lines on top of coupled and ppc at 1.0
    assert labels == ["nope", "rope", "rope_base10000", "pose", "coupled", "ppc"]
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
    assert set(lines) == set(labels)
    # coupled and ppc both score 1.0 everywhere: coupled's hollow rings stay visible around ppc's
    # smaller filled points, at x positions of their own
    coupled, ppc = (lines[name] for name in ("coupled", "ppc"))
    assert coupled.get_markerfacecolor() == "none" and ppc.get_markerfacecolor() != "none"
    assert coupled.get_markersize() >= 2 * ppc.get_markersize() and coupled.get_linewidth() > ppc.get_linewidth()
    assert ax.get_lines().index(coupled) < ax.get_lines().index(ppc)  # ppc drawn on top, inside the rings
    assert len({tuple(np.round(line.get_xdata(), 6)) for line in (coupled, ppc)}) == 2
    # no point moves towards another size: size 10 stays at the training line, 40 near 40
    sizes = np.array([5, 10, 20, 30, 40])
    for line in lines.values():
        assert np.all(np.abs(np.log10(line.get_xdata() / sizes)) <= MAX_DODGE + 1e-9)
    text = caption("ppc", ppc_table())
    assert "rope_base10000" in text and "first lookup is longer" not in text and "4 seeds" in text
    assert "id accuracy" in text  # the table has ppc's position ids
    assert "id accuracy" not in caption("ppc", ppc_table().query("metric == 'exact_match'"))


def test_ppc_marks_the_runs_that_did_not_fit_dashed_and_named_in_their_panel(tmp_path, drawn):
    from sparselen.ppc.report import UNFITTED, figure, table, unfitted

    # copy_repeat, trained on sizes 5-10: rope fits on no seed, pose on 1 of 3, the others on all
    def accuracy(scheme, seed, size):
        if size > 10:
            return 0.2
        return 0.3 if scheme == "rope" else 0.5 if scheme == "pose" and seed > 0 else 1.0

    rows = [{"task": "copy_repeat", "scheme": scheme, "seed": seed, "size": size, "n": 100, "split": "test",
             "correct": round(100 * accuracy(scheme, seed, size)), "accuracy": accuracy(scheme, seed, size),
             "prompt_tokens": 10, "config_hash": "x"}
            for scheme in ("nope", "rope", "pose", "coupled", "ppc") for seed in range(3) for size in (5, 10, 20)]
    pd.DataFrame(rows).to_csv(tmp_path / "e.csv", index=False)
    t = table([tmp_path / "e.csv"], tmp_path / "t.csv", tmp_path / "t.md", {"copy_repeat": [5, 10]})
    fits = t[t["metric"] == "exact_match"].drop_duplicates("scheme").set_index("scheme")["n_fit"]
    assert fits.to_dict() == {"coupled": 3, "nope": 3, "pose": 1, "ppc": 3, "rope": 0}
    assert unfitted(t) == {"copy_repeat": {"pose": "(1/3 fit)", "rope": "(0/3 fit)"}}
    figure(tmp_path / "t.csv", {"copy_repeat": 10}, None, None)
    fig = drawn[0]
    ax = fig.axes[0]
    styles = {line.get_label(): line.get_linestyle() for line in ax.get_lines() if not line.get_label().startswith("_")}
    assert styles["rope"] == styles["pose"] == "--" and styles["nope"] == styles["coupled"] == "-"
    assert "did not fit" in ax.get_title() and "rope (0/3 fit)" in ax.get_title()
    legend = {t.get_text(): h for t, h in zip(fig.legends[0].get_texts(), fig.legends[0].legend_handles)}
    assert legend["rope"].get_linestyle() == "-" and legend[UNFITTED].get_linestyle() == "--"
    assert readable_text(fig) == []


def test_the_per_seed_figure_shows_every_seed_at_the_largest_size_hollow_where_it_did_not_fit(tmp_path, drawn):
    from sparselen.ppc import seeds_figure
    from sparselen.ppc.seeds_figure import task_roles
    from sparselen.ppc.report import table

    # copy_repeat trained on sizes 5-10: coupled fits on every seed and generalizes on two of three
    def accuracy(scheme, seed, size):
        if scheme == "coupled":
            return 1.0 if size <= 10 or seed else 0.0
        return 0.3 if scheme == "rope" else 1.0 if size <= 10 else 0.1

    rows = [{"task": "copy_repeat", "scheme": scheme, "seed": seed, "size": size, "n": 100, "split": "test",
             "correct": round(100 * accuracy(scheme, seed, size)), "accuracy": accuracy(scheme, seed, size),
             "prompt_tokens": 10, "config_hash": "x"}
            for scheme in ("rope", "pose", "coupled") for seed in range(3) for size in (5, 10, 20)]
    pd.DataFrame(rows).to_csv(tmp_path / "e.csv", index=False)
    table([tmp_path / "e.csv"], tmp_path / "t.csv", tmp_path / "t.md", {"copy_repeat": [5, 10]}, tmp_path / "s.csv")
    seeds = pd.read_csv(tmp_path / "s.csv").set_index(["scheme", "seed"])
    assert len(seeds) == 9 and (seeds["size"] == 20).all()
    assert seeds.loc["coupled", "largest"].tolist() == [0.0, 1.0, 1.0]  # the seed a mean hides
    assert not seeds.loc["rope", "fit"].any() and seeds.loc["pose", "fit"].all()

    section = {"tasks": ["copy_repeat", "parity_scratchpad"],
               "copy_repeat": {"train_sizes": [5, 10], "eval_sizes": [5, 10, 20]},
               "parity_scratchpad": {"train_sizes": [3, 7], "eval_sizes": [3, 7, 70]}}
    roles = task_roles(section)
    assert roles["copy_repeat"]["role"] == "decides C1" and roles["parity_scratchpad"]["role"] == "decides C2"
    seeds_figure.figure(tmp_path / "s.csv", roles, None, None)
    ax = drawn[0].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["rope", "pose", "coupled"]
    points = [c for c in ax.collections if isinstance(c, matplotlib.collections.PathCollection)]
    filled = sum(len(c.get_offsets()) for c in points if len(c.get_facecolors()))
    hollow = sum(len(c.get_offsets()) for c in points if not len(c.get_facecolors()))
    assert (filled, hollow) == (6, 3)  # rope's three seeds did not fit
    assert "decides C1" in ax.get_title() and "size 20" in ax.get_title()
    assert readable_text(drawn[0]) == []


def test_theory_is_two_rows_with_intervals_in_log_space(tmp_path, drawn):
    from sparselen.theory.report import figure, log_summary

    rows = [{"ratio": r, "length": 8 * r, "n": 100, "log_loss": loss * r, "error": 0.1, "model": m,
             "distribution": d, "k": k, "seed": s, "n_values": 4}
            for m in ("sfa", "gpt") for d in ("local", "nonlocal", "coupled") for k in (2, 3)
            for s, loss in enumerate((1e-4, 1e-2)) for r in (1, 2, 4, 8)]
    evals = pd.DataFrame(rows)
    one = log_summary(evals, floor=1e-6).query("model == 'sfa' and distribution == 'local' and k == 2 and ratio == 1")
    assert one["mean"].iloc[0] == pytest.approx(1e-3)  # the geometric mean of 1e-4 and 1e-2
    assert one["ci_low"].iloc[0] > 0 and one["ci_low"].iloc[0] * one["ci_high"].iloc[0] == pytest.approx(1e-6)
    evals.to_csv(tmp_path / "e.csv", index=False)
    figure([tmp_path / "e.csv"], 8, 1e-6, None, None)
    fig = drawn[0]
    assert readable_text(fig) == []
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 6 and len({round(ax.get_position().y0, 3) for ax in panels}) == 2


def test_the_theory_table_shows_the_figures_statistic_and_the_accuracy_the_claims_read(tmp_path):
    from types import SimpleNamespace

    from sparselen.theory.report import caption, paper_tables, table

    rows = [{"ratio": r, "length": 8 * r, "n": 100, "log_loss": loss * r, "error": 0.25, "model": "sfa",
             "distribution": d, "k": 2, "seed": s, "n_values": 2, "config_hash": "x"}
            for d in ("local", "nonlocal", "coupled") for s, loss in enumerate((1e-4, 1e-2, 1e-3)) for r in (1, 2)]
    pd.DataFrame(rows).to_csv(tmp_path / "e.csv", index=False)
    out = SimpleNamespace(**{k: tmp_path / f"{k}.{k.split('_')[-1] if '_' in k else k}"
                             for k in ("csv", "md", "slopes_csv", "slopes_md")})
    t = table([tmp_path / "e.csv"], out, 1e-6)
    at_L = t.query("distribution == 'local' and ratio == 1").iloc[0]
    assert at_L["mean"] == pytest.approx(1e-3)  # geometric, as the figure: not the arithmetic 3.7e-3
    assert (t["ci_low"] > 0).all()  # a log-scale interval stays within the loss's range
    text = "\n".join(paper_tables(t))
    assert "geometric mean" in text and "accuracy at Lbar (%)" in text and "| 75 |" in text
    assert "GPT" not in caption("theory", t) and "idealized model (SFA)" in caption("theory", t)
    assert "(row 2)" in caption("theory", pd.concat([t, t.assign(model="gpt")]))


def test_the_theory_figure_and_table_average_the_runs_t2_quotes(tmp_path, drawn):
    """Three of four local runs fit at L; the fourth (at chance, a loss 1000x larger) is left
    out of the figure's line and the table's mean, as T2 leaves it out; a law no run fits is
    dashed over all its runs."""
    from types import SimpleNamespace

    from sparselen.report.headline import theory_growth_line
    from sparselen.statistics.verdicts import Settings
    from sparselen.theory.report import figure, table

    def row(d, s, r):
        fits = d == "local" and s < 3
        return {"ratio": r, "length": 8 * r, "n": 100, "model": "gpt", "distribution": d, "k": 2, "seed": s,
                "n_values": 2, "config_hash": "x", "error": 0.0 if fits else 0.5,
                "log_loss": (1e-4 * (s + 1) if fits else 0.7) * r}

    evals = pd.DataFrame([row(d, s, r) for d in ("local", "nonlocal") for s in range(4) for r in (1, 2, 4)])
    evals.to_csv(tmp_path / "e.csv", index=False)
    floor = 1e-6
    brief = theory_growth_line({"evals": evals}, Settings(facts={"floor": floor}), "gpt k=2")
    at_L, at_max = re.fullmatch(r"local law \(gpt k=2, 3 runs fit\): log loss (\S+) at L, (\S+) at 4L; accuracy "
                                r"100% to 100%", brief).groups()
    figure([tmp_path / "e.csv"], 8, floor, None, None)
    local, nonlocal_ = drawn[0].axes[:2]
    line = next(line for line in local.get_lines() if line.get_label() == "k = 2")
    assert f"{line.get_ydata()[0]:.2g}" == at_L and f"{line.get_ydata()[-1]:.2g}" == at_max
    assert line.get_ydata()[0] == pytest.approx((1e-4 * 2e-4 * 3e-4) ** (1 / 3))  # not the run at chance
    assert line.get_linestyle() == "-" and "k=2: 3/4 fit" in local.texts[0].get_text()
    assert next(line for line in nonlocal_.get_lines() if line.get_label() == "k = 2").get_linestyle() == "--"
    out = SimpleNamespace(**{k: tmp_path / f"{k}.{k.split('_')[-1] if '_' in k else k}"
                             for k in ("csv", "md", "slopes_csv", "slopes_md")})
    t = table([tmp_path / "e.csv"], out, floor).set_index(["distribution", "ratio"])
    assert f"{t.loc[('local', 1), 'mean']:.2g}" == at_L and t.loc[("local", 1), "error_mean"] == 0
    assert (t.loc[("local", 1), "n_fit"], t.loc[("local", 1), "n_runs"], t.loc[("local", 1), "n_seeds"]) == (3, 4, 3)
    assert t.loc[("nonlocal", 1), "n_seeds"] == 4  # none fit: every run
    assert readable_text(drawn[0]) == []


def _boxes_overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_language_panels_the_claims_do_not_read_say_so_and_why_without_covering_a_line():
    from sparselen.language.figures import LABELS, length_figure, sparsity_figure

    why = ("not read by the claims: positive control: 3 planted repeats with a long-context benefit (needs 20): the "
           "model does not use a copy beyond its short window")
    table = pd.DataFrame([{"method": m, "k": k, "n_tokens": 100, "median": 0.4 * k, "ci_low": 0.2 * k,
                           "ci_high": 0.6 * k} for m in ("greedy", "random", "greedy_planted") for k in (1, 2, 4)])
    screened = pd.DataFrame({"benefit": np.linspace(-1, 2, 4000), "analysed": np.linspace(-1, 2, 4000) > 0.25})
    fig = sparsity_figure(table, screened, 0.25, 32, 128, why)
    a, b = fig.axes[0], fig.axes[1]
    assert not a.texts  # no stamp over the data
    title = a.get_title().replace("\n", " ")
    assert title.startswith("not read by the claims") and "3 planted repeats" in title and "(needs 20)" in title
    assert "above 1" in a.get_ylabel() and readable_text(fig) == []
    # the controls are dashed in the plot and in the legend
    legend = {t.get_text(): h for t, h in zip(a.get_legend().get_texts(), a.get_legend().legend_handles)}
    assert legend[LABELS["greedy_planted"]].get_linestyle() == "--" and legend["greedy"].get_linestyle() == "-"
    assert a.get_legend().handlelength >= 3
    # the histogram's log axis labels its decades only
    fig.canvas.draw()
    labels = [t.get_text() for t in b.get_yticklabels(minor=True) if t.get_text()]
    assert labels == []
    position = pd.DataFrame([{"context": c, "scheme": "rope", "position": p, "mean": 5.0, "ci_low": 4.9,
                              "ci_high": 5.1} for c in (32, 128) for p in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)])
    gen = pd.DataFrame([{"context": c, "scheme": "rope", "sparsity": s, "order": i, "mean": 0.1, "ci_low": 0.0,
                         "ci_high": 0.2} for c in (32, 128) for i, s in enumerate(("1", "2", ">16"))])
    fig = length_figure(position, gen, 32, 128, "")
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["1", "32", "128", "512"]
    assert not fig.axes[1].texts and readable_text(fig) == []
    # each panel its own legend; the title over both panels fits the figure and covers no panel title
    assert all(ax.get_legend() is not None for ax in fig.axes[:2])
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    title = fig._suptitle.get_window_extent(renderer)
    assert title.x0 >= 0 and title.x1 <= fig.bbox.width
    assert not any(_boxes_overlap(title, ax.title.get_window_extent(renderer)) for ax in fig.axes[:2])


def test_text_smaller_than_the_minimum_is_found():
    fig = plotting.plt.figure(figsize=(plotting.FIGURE_WIDTH, 2))
    fig.text(0.1, 0.5, "small", fontsize=MIN_TEXT_POINTS - 2)
    fig.text(0.5, 0.5, "fine", fontsize=MIN_TEXT_POINTS)
    assert [t for t, _ in readable_text(fig)] == ["small"]
    wide = plotting.plt.figure(figsize=(2 * plotting.FIGURE_WIDTH, 2))  # shown at half its size in the report
    wide.text(0.1, 0.5, "shrunk", fontsize=MIN_TEXT_POINTS + 2)
    wide.text(0.9, 0.5, "x", fontsize=MIN_TEXT_POINTS + 2)
    assert [t for t, _ in readable_text(wide)] == ["shrunk", "x"]


# ----------------------------------------------------------------------------- the report in a browser

MIN_CSS_PX = 12.0  # no text of the report renders smaller
CHROMIUM, NO_CHROMIUM = chromium()
MEASURE = """<script>
window.addEventListener('load', () => {
  let min = 1e9;
  for (const el of document.body.querySelectorAll('*')) {
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    if (own && el.offsetParent !== null) min = Math.min(min, parseFloat(getComputedStyle(el).fontSize));
  }
  const scales = [...document.images].map(i => i.getBoundingClientRect().width / i.naturalWidth);
  document.body.insertAdjacentHTML('beforeend',
    `<pre id="measured">${min} ${Math.min(...scales)} ${scales.length}</pre>`);
});
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_the_report_reads_at_its_size_in_a_browser(tmp_path):
    from types import SimpleNamespace

    from sparselen.parity.report import figure
    from sparselen.report import render

    parity_table().to_csv(tmp_path / "t.csv", index=False)
    parity_evals().to_csv(tmp_path / "e.csv", index=False)
    figures = tmp_path / "results/figures"
    figure(tmp_path / "t.csv", [tmp_path / "e.csv"], {"train_lengths": (20, 50)},
           SimpleNamespace(png=figures / "parity.png", pdf=figures / "parity.pdf",
                           heatmap_png=figures / "parity_heatmap.png", heatmap_pdf=figures / "parity_heatmap.pdf"))
    md = "\n".join(["# Report", "", "## The answer", "", "- **P1** **holds** *A claim.* Its number.", "",
                    "| a | b |", "|---|---|", "| 1 | 2 |", "", "![parity](../figures/parity.png)", "",
                    "*Its caption.*", ""])
    (tmp_path / "results/report").mkdir()
    page = render.to_html(md, tmp_path / "results/report").replace("</body>", MEASURE + "</body>")
    assert "data:image/png;base64," in page
    path = tmp_path / "report.html"
    path.write_text(page)
    out = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,900",
                          "--virtual-time-budget=5000", "--dump-dom", path.as_uri()],
                         capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="measured">([\d.e+]+) ([\d.e+]+) (\d+)</pre>', out.stdout)
    assert found, out.stdout[-2000:]
    smallest, scale, images = float(found.group(1)), float(found.group(2)), int(found.group(3))
    assert images == 1 and smallest >= MIN_CSS_PX
    assert MIN_TEXT_POINTS * PNG_DPI / 72 * scale >= MIN_CSS_PX  # the figure's smallest text, as shown

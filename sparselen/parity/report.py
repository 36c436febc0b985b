"""The sparse parity table (mean and 95% t-interval over seeds per cell) and figure."""

from __future__ import annotations

import pandas as pd

from sparselen.provenance import provenance
from sparselen.tables import read_tables, runs_provenance, summary_table, write_table

CELL = ["K_train", "scheme", "k_test", "length"]


def table(eval_csvs, out_csv, out_md) -> pd.DataFrame:
    df = read_tables(eval_csvs)
    t = summary_table(df, CELL)
    prov = runs_provenance(df)
    write_table(t, out_csv, out_md, "Sparse parity: accuracy by K_train, k_test and length "
                "(mean and 95% t-interval over seeds)", prov)
    return t


def figure(table_csv, eval_csvs, facts: dict, out_png, out_pdf) -> None:
    """Accuracy against 2l, one panel per K_train, one curve per k_test (seed-level t bands), the
    training range shaded, and under each panel the parity claims measured on it (``facts``:
    the parity claims' facts of the config run)."""
    from sparselen.plotting import plot_panels, save_figure  # matplotlib only where a figure is drawn

    t = pd.read_csv(table_csv)
    seeds = int(t["n_seeds"].max())
    fig = plot_panels(t, "K_train", "k_test", panel_label="K_train = {}", curve_label="k_test = {}",
                      xlabel="sample length 2l", chance=0.5,
                      spans={K: facts["train_lengths"] for K in t["K_train"].unique()},
                      notes=claim_notes(read_tables(eval_csvs), facts),
                      title=f"Sparse parity: accuracy vs length (mean, 95% t interval over {seeds} seeds; "
                            f"shaded: training lengths)")
    save_figure(fig, out_png, out_pdf, provenance(None, None, table=str(table_csv)))


def claim_notes(evals: pd.DataFrame, facts: dict) -> dict:
    """Per K_train, each parity claim's value, interval and group verdict on these runs (the
    report adds stability over seed resamples, which can make a verdict inconclusive)."""
    from sparselen.parity.claims import CLAIMS
    from sparselen.verdicts import Settings

    notes: dict = {}
    for claim in CLAIMS:
        for r in claim.test({"evals": evals}, Settings(facts=facts)):
            K = int(r.group.split("=")[1])
            value = (f"not tested: {r.reason.split(';')[0].split(' (')[0]}" if not r.tested else
                     f"{r.value:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}] {r.verdict}")
            notes.setdefault(K, []).append(f"{claim.id} {value}")
    footer = "(this K_train's verdicts; the report's also need stability over seed resamples)"
    return {K: "\n".join([*lines, footer]) for K, lines in notes.items()}

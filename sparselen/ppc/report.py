"""The PPC table (mean and 95% t-interval over seeds per task, scheme, metric and size, on the
test samples) and figure."""

from __future__ import annotations

import pandas as pd

from sparselen.ppc.tasks import task_module
from sparselen.provenance import provenance
from sparselen.stats import summarize
from sparselen.tables import read_tables, runs_provenance, write_table

SCHEME_STYLES = {"nope": {"color": "tab:gray"}, "rope": {"color": "tab:orange"}, "pose": {"color": "tab:purple"},
                 "coupled": {"color": "tab:blue"}, "ppc": {"color": "tab:green"}}
# metric -> (the per-run column, the schemes that have it); exact match first, then the
# per-step id diagnostics (sparselen.ppc.evaluate): ppc's ids, and exact match split by the
# first lookup's distance, within the training sizes' or beyond, for the coupled schemes
METRICS = {"exact_match": ("accuracy", None), "position_ids": ("position_accuracy", ("ppc",)),
           "first_id": ("first_id_accuracy", ("ppc",)), "later_ids": ("later_id_accuracy", ("ppc",)),
           "first_id_within": ("first_id_accuracy_within", ("ppc",)),
           "first_id_beyond": ("first_id_accuracy_beyond", ("ppc",)),
           "exact_match_within": ("accuracy_within", ("coupled", "ppc")),
           "exact_match_beyond": ("accuracy_beyond", ("coupled", "ppc"))}
# the curves of the figure besides exact match: ppc's ids, dashed, and its first id, dash-dot
FIGURE_METRICS = {"position_ids": (" (position ids)", "--"), "first_id": (" (first id)", "-.")}


def run_style(name: str) -> dict:
    """A run's curve style: its scheme's colour; a variant (``<scheme>_<what>``, e.g.
    ``rope_base10000``) dotted in the colour of the scheme its name starts with."""
    if name in SCHEME_STYLES:
        return SCHEME_STYLES[name]
    base = next((s for s in SCHEME_STYLES if name.startswith(s + "_")), None)
    return {**SCHEME_STYLES[base], "ls": ":"} if base else {}


def table(eval_csvs, out_csv, out_md) -> pd.DataFrame:
    """Per (task, scheme, metric, size) on the test samples: ``exact_match`` for every run, and
    the id diagnostics (``METRICS``) where a run has them; ``beyond_lookup``: the share of the
    cell's samples whose first lookup is longer than any of the training sizes'."""
    df = read_tables(eval_csvs)
    if "split" in df:
        df = df[df["split"] == "test"]
    by = ["task", "scheme", "size"]
    parts = []
    for metric, (column, schemes) in METRICS.items():
        runs = df if schemes is None else df[df["scheme"].isin(schemes)]
        runs = runs.dropna(subset=[column]) if column in runs else runs.iloc[:0]
        if not runs.empty:
            parts.append(summarize(runs, by, column).assign(metric=metric))
    counts = df.groupby(by).agg(n_samples=("n", "sum"), prompt_tokens=("prompt_tokens", "first")).reset_index()
    if "n_beyond" in df:
        beyond = df.groupby(by)[["n_beyond", "n"]].sum()
        counts = counts.merge((beyond["n_beyond"] / beyond["n"]).rename("beyond_lookup").reset_index(), on=by)
    t = pd.concat(parts, ignore_index=True).merge(counts, on=by)
    order = {m: i for i, m in enumerate(METRICS)}
    t = t.sort_values(["task", "metric", "scheme", "size"], key=lambda c: c.map(order) if c.name == "metric" else c)
    t = t[["task", "scheme", "metric", "size", "prompt_tokens", *(["beyond_lookup"] if "beyond_lookup" in t else []),
           "mean", "ci_low", "ci_high", "n_seeds", "n_samples"]]
    prov = runs_provenance(df)
    write_table(t, out_csv, out_md, "Position coupling and PPC: exact-match accuracy by task, scheme and input "
                "size, and PPC's id diagnostics (first response id, later ids, first id and exact match by the first "
                "lookup's distance: within the training sizes' or beyond; beyond_lookup: the share of samples beyond) "
                "(mean and 95% t-interval over seeds, test samples)", prov)
    return t


def figure(table_csv, train_max_sizes: dict, out_png, out_pdf) -> None:
    """One panel per task, one curve per run (PPC's position ids dashed, its first id
    dash-dot); dashed grey line = longest training size; under each panel, from which size
    first lookups go beyond the training sizes' distances."""
    from sparselen.plotting import plot_panels, save_figure  # matplotlib only where a figure is drawn

    t = pd.read_csv(table_csv)
    shown = ["exact_match", *FIGURE_METRICS]
    t = t[t["metric"].isin(shown)].copy()
    t["curve"] = t["scheme"] + t["metric"].map(lambda m: FIGURE_METRICS.get(m, ("",))[0])
    styles = {}
    runs = sorted(set(t["scheme"]) - set(SCHEME_STYLES))
    order = [r for s in SCHEME_STYLES for r in [s, *(v for v in runs if v.startswith(s + "_"))]]
    for run in order + [r for r in runs if r not in order]:  # each variant after its scheme
        styles |= {run: run_style(run), **{run + label: {**run_style(run), "ls": ls}
                                           for label, ls in FIGURE_METRICS.values()}}
    seeds = int(t["n_seeds"].max())
    tasks = t["task"].unique()
    fig = plot_panels(t, "task", "curve", x="size", xlabel="input size", ylabel="exact-match accuracy",
                      styles=styles, xlabels={name: task_module(name).SIZE for name in tasks},
                      vlines={name: train_max_sizes[name] for name in tasks if name in train_max_sizes},
                      notes=_beyond_notes(t),
                      title=f"Position coupling and PPC: accuracy vs input size (mean, 95% interval over "
                            f"{seeds} seeds; dashed: longest training size)")
    save_figure(fig, out_png, out_pdf, provenance(None, None, table=str(table_csv)))


def _beyond_notes(t: pd.DataFrame) -> dict:
    """Per task: the share of first lookups beyond the training sizes' distances, by size, where any are."""
    if "beyond_lookup" not in t:
        return {}
    notes = {}
    for task, g in t.groupby("task"):
        share = g.groupby("size")["beyond_lookup"].first()
        if share.gt(0).any():
            notes[task] = "first lookups beyond the training sizes', by size: " + ", ".join(
                f"{size}: {s:.0%}" for size, s in share.items() if s > 0)
    return notes

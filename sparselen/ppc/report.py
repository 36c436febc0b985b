"""The PPC table (mean and 95% t-interval over seeds per task, scheme and size), its figure and
its layout in the report (scheme x size per task)."""

from __future__ import annotations

import pandas as pd

from sparselen.ppc.tasks import TASKS
from sparselen.layout import grid as layout, percent, seeds
from sparselen.provenance import provenance
from sparselen.stats import summarize
from sparselen.tables import read_tables, runs_provenance, write_table

SCHEME_STYLES = {"nope": {"color": "tab:gray"}, "rope": {"color": "tab:orange"}, "pose": {"color": "tab:purple"},
                 "coupled": {"color": "tab:blue"}, "ppc": {"color": "tab:green"}}
IDS_ONLY = " (position ids only)"
CAPTIONS = {"ppc": "Position coupling and Predictive Position Coupling. Exact match of the whole generated answer "
                   "against the input size, one panel per task, one line per position scheme: nope (no positions), "
                   "rope, pose, coupled (the task's coupled ids, given at test time) and ppc (the model predicts "
                   "each answer token's id itself; a wrong id is an error), with variants of a scheme dotted in its "
                   "colour. The black dotted line is the share of ppc's answers whose predicted ids are all right. Lines "
                   "are moved sideways a little so that equal values stay visible; bars: 95% interval over "
                   "seeds. Models were trained on sizes up to the dashed vertical line."}


def run_style(name: str) -> dict:
    """A run's curve style: its scheme's colour; a variant (``<scheme>_<what>``, e.g.
    ``rope_base10000``) dotted in the colour of the scheme its name starts with."""
    if name in SCHEME_STYLES:
        return SCHEME_STYLES[name]
    base = next((s for s in SCHEME_STYLES if name.startswith(s + "_")), None)
    return {**SCHEME_STYLES[base], "ls": ":"} if base else {}


def table(eval_csvs, out_csv, out_md) -> pd.DataFrame:
    """Per (task, scheme, size), with a ``metric`` column: ``exact_match`` for every scheme,
    and ``position_ids`` (predicted ids all right) for ppc."""
    df = read_tables(eval_csvs)
    by = ["task", "scheme", "size"]
    parts = [summarize(df, by, "accuracy").assign(metric="exact_match")]
    ppc = df[df["scheme"] == "ppc"]
    if not ppc.empty:
        parts.append(summarize(ppc, by, "position_accuracy").assign(metric="position_ids"))
    counts = df.groupby(by)[["n", "prompt_tokens"]].agg({"n": "sum", "prompt_tokens": "first"}).reset_index()
    t = pd.concat(parts, ignore_index=True).merge(counts.rename(columns={"n": "n_samples"}), on=by)
    t = t[["task", "scheme", "metric", "size", "prompt_tokens", "mean", "ci_low", "ci_high",
           "n_seeds", "n_samples"]].sort_values(["task", "metric", "scheme", "size"])
    prov = runs_provenance(df)
    write_table(t, out_csv, out_md, "Position coupling and PPC: exact-match accuracy by task, scheme and "
                "input size (mean and 95% t-interval over seeds)", prov)
    return t


def figure(table_csv, train_max_sizes: dict, out_png, out_pdf) -> None:
    """One panel per task, one curve per scheme (and the ppc position-id accuracy, dotted);
    dashed grey line = longest training size."""
    from sparselen.plotting import plot_panels, save_figure  # matplotlib only where a figure is drawn

    t = pd.read_csv(table_csv)
    t["curve"] = t["scheme"].where(t["metric"] == "exact_match", t["scheme"] + IDS_ONLY)
    styles = {}
    runs = sorted(set(t["scheme"]) - set(SCHEME_STYLES))
    order = [r for s in SCHEME_STYLES for r in [s, *(v for v in runs if v.startswith(s + "_"))]]
    for run in order + [r for r in runs if r not in order]:  # each variant after its scheme
        styles |= {run: run_style(run), run + IDS_ONLY: {"color": "black", "ls": ":", "marker": "x"}}
    seeds = int(t["n_seeds"].max())
    fig = plot_panels(t, "task", "curve", x="size", xlabel="input size", ylabel="exact match",
                      styles=styles, xlabels={name: module.SIZE for name, module in TASKS.items()},
                      vlines={name: train_max_sizes[name] for name in t["task"].unique() if name in train_max_sizes},
                      title=f"Exact match by input size (mean and 95% interval over {seeds} seed{'s' * (seeds != 1)}; "
                            "dashed: longest training size)")
    save_figure(fig, out_png, out_pdf, provenance(None, None, table=str(table_csv)))


def paper_tables(t: pd.DataFrame) -> list[str]:
    """Exact match (%) per task as a scheme x size grid."""
    lines = []
    t = t.assign(row=t["scheme"].where(t["metric"] == "exact_match", t["scheme"] + IDS_ONLY))
    for task, g in t.groupby("task", sort=True):
        grid = g.pivot_table(index="row", columns="size", values="mean", aggfunc="first")
        order = [r for s in SCHEME_STYLES for r in grid.index if r == s or r.startswith(s + "_") or r == s + IDS_ONLY]
        grid = grid.reindex(list(dict.fromkeys(order + list(grid.index))))
        head = ["scheme", *(str(c) for c in grid.columns)]
        rows = [[r, *(percent(v) for v in grid.loc[r])] for r in grid.index]
        size = TASKS[task].SIZE if task in TASKS else "size"
        lines += [f"{task}: exact match (%) by scheme (rows) and {size} (columns), mean over "
                  f"{seeds(g['n_seeds'].max())}.", "", layout(head, rows), ""]
    return lines

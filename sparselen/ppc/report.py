"""The PPC table (mean and 95% t-interval over seeds per task, scheme, metric and size, on the
test samples), its figure and its layout in the report (scheme x size per task)."""

from __future__ import annotations

import pandas as pd

from sparselen.ppc.tasks import task_module
from sparselen.presentation.layout import grid as layout
from sparselen.presentation.layout import percent, seeds
from sparselen.presentation.tables import read_tables, runs_provenance, write_table
from sparselen.runtime import io
from sparselen.runtime.provenance import provenance
from sparselen.statistics.stats import summarize

# coupled's markers are large and hollow, ppc's small and filled: where both score the same, coupled
# shows as a ring around ppc's points
SCHEME_STYLES = {"nope": {"color": "tab:gray"}, "rope": {"color": "tab:orange"}, "pose": {"color": "tab:purple"},
                 "coupled": {"color": "tab:blue", "marker": "o", "mfc": "none", "mew": 1.4, "ms": 8, "lw": 2.6},
                 "ppc": {"color": "tab:green", "marker": "o", "ms": 3.5, "lw": 1.2}}
UNFITTED = "dashed in a run's colour: did not fit"  # fewer than MIN_FITTED_RUNS seeds fit the training sizes: the claims leave it out
# metric -> (the per-run column, the runs that have it: those of these schemes and their
# variants); exact match first, then the share of responses that end where the target ends, then
# the per-step id diagnostics (sparselen.ppc.evaluate): ppc's ids, where its first wrong id is,
# its tokens given the oracle's ids, and exact match split by the first lookup's distance,
# within the training sizes' or beyond, for the coupled schemes
METRICS = {"exact_match": ("accuracy", None), "end": ("end_accuracy", None),
           "position_ids": ("position_accuracy", ("ppc",)),
           "first_id": ("first_id_accuracy", ("ppc",)), "later_ids": ("later_id_accuracy", ("ppc",)),
           "first_error_at_first_id": ("first_error_at_first_id", ("ppc",)),
           "first_error_at_later_id": ("first_error_at_later_id", ("ppc",)),
           "first_error_at_end_id": ("first_error_at_end_id", ("ppc",)),
           "tokens_given_oracle_ids": ("forced_token_accuracy", ("ppc",)),
           "first_id_within": ("first_id_accuracy_within", ("ppc",)),
           "first_id_beyond": ("first_id_accuracy_beyond", ("ppc",)),
           "exact_match_within": ("accuracy_within", ("coupled", "ppc")),
           "exact_match_beyond": ("accuracy_beyond", ("coupled", "ppc"))}
# metrics over every sample of a cell (intervals floored at their binomial noise); the others
# are shares of a subset (first lookups within or beyond the trained distances, later ids)
OVER_ALL_SAMPLES = {"accuracy", "end_accuracy", "position_accuracy", "first_id_accuracy", "first_error_at_first_id",
                    "first_error_at_later_id", "first_error_at_end_id", "forced_token_accuracy"}
# ppc's id diagnostics: rows of the report's table below the figure (the figure shows exact match)
FIGURE_METRICS = {"position_ids": (" (position ids)", "--"), "first_id": (" (first id)", "-.")}


def caption(name: str, t: pd.DataFrame) -> str:
    """The figure's caption from the table it was drawn from: the runs and what the table
    beside it holds (the per-seed figure's is fixed)."""
    if name != "ppc":
        return CAPTIONS[name]
    runs = list(dict.fromkeys(r for s in SCHEME_STYLES for r in sorted(set(t["scheme"]))
                              if r == s or r.startswith(s + "_")))
    n = int(t["n_seeds"].max())
    text = ("Position coupling and Predictive Position Coupling. Exact match of the whole generated answer against "
            f"the input size, one panel per task, one line per run ({', '.join(runs)}; a variant of a scheme dotted "
            "in its colour): nope has no positions, coupled is given the task's coupled ids at test time, ppc "
            "predicts each answer token's id itself (a wrong id is an error). Mean over "
            f"{n} seed{'s' * (n != 1)}, bars: 95% interval; lines at equal values are told apart by marker and "
            "width (coupled's hollow rings show around ppc's points where both score the same), each moved sideways by "
            "at most 2%. Models were trained on sizes up to the dashed vertical line.")
    marked = unfitted(t)
    if marked:
        text += (" A run dashed in its colour, and named under its panel's title with the seeds that fit, did not fit "
                 "its training sizes (exact match >= 90% at each) on enough seeds: the claims leave it out.")
    if set(t["metric"]) & set(FIGURE_METRICS):
        text += (" The table below adds ppc's id accuracy (all of an answer's ids right, and its first id) as rows; "
                 "table.md splits them by the first lookup's distance.")
    return text


CAPTIONS = {"ppc": "Position coupling and Predictive Position Coupling: exact match against the input size, one "
                   "panel per task, one line per run.",
            "ppc_seeds": "The same runs seed by seed: exact match at the largest evaluated size, one point per "
                         "training seed and run, one panel per task (what it decides in its title); filled: the run "
                         "fits its training sizes and the claims count it; hollow: it did not fit and the claims "
                         "leave it out; bar: the mean of the fitted seeds; dotted: the task's exact-match chance "
                         "level."}

def run_style(name: str) -> dict:
    """A run's curve style: its scheme's colour; a variant (``<scheme>_<what>``, e.g.
    ``rope_base10000``) dotted in the colour of the scheme its name starts with."""
    if name in SCHEME_STYLES:
        return SCHEME_STYLES[name]
    base = next((s for s in SCHEME_STYLES if name.startswith(s + "_")), None)
    return {**SCHEME_STYLES[base], "ls": ":"} if base else {}


def table(eval_csvs, out_csv, out_md, train_sizes: dict | None = None, out_seeds=None) -> pd.DataFrame:
    """Per (task, scheme, metric, size) on the test samples: ``exact_match`` for every run, and
    the id diagnostics (``METRICS``) where a run has them; ``beyond_lookup``: the share of the
    cell's samples whose first lookup is longer than any of the training sizes'; with
    ``train_sizes`` (task -> [low, high]), ``n_fit``: the seeds whose run fits its training sizes,
    as the claims count them (``sparselen.ppc.claims.run_scores``), and, to ``out_seeds``, each
    run's fit and exact match at its task's largest size per seed (the per-seed figure's)."""
    df = read_tables(eval_csvs)
    if "split" in df:
        df = df[df["split"] == "test"]
    by = ["task", "scheme", "size"]
    parts = []
    for metric, (column, schemes) in METRICS.items():
        runs = df if schemes is None else df[df["scheme"].map(lambda r: any(r == sc or r.startswith(sc + "_")
                                                                           for sc in schemes))]
        runs = runs.dropna(subset=[column]) if column in runs else runs.iloc[:0]
        if not runs.empty:
            parts.append(summarize(runs, by, column, n_col="n" if column in OVER_ALL_SAMPLES else None)
                         .assign(metric=metric))
    counts = df.groupby(by).agg(n_samples=("n", "sum"), prompt_tokens=("prompt_tokens", "first")).reset_index()
    if "n_beyond" in df:
        beyond = df.groupby(by)[["n_beyond", "n"]].sum()
        counts = counts.merge((beyond["n_beyond"] / beyond["n"]).rename("beyond_lookup").reset_index(), on=by)
    t = pd.concat(parts, ignore_index=True).merge(counts, on=by)
    order = {m: i for i, m in enumerate(METRICS)}
    t = t.sort_values(["task", "metric", "scheme", "size"], key=lambda c: c.map(order) if c.name == "metric" else c)
    if train_sizes is not None:
        from sparselen.ppc.claims import run_scores
        from sparselen.statistics.verdicts import Settings

        scores = run_scores(df, Settings(facts={"train_sizes": train_sizes}))
        fit = scores.groupby(["task", "scheme"])["fit"].sum().astype(int).rename("n_fit").reset_index()
        t = t.merge(fit, on=["task", "scheme"], how="left")
        if out_seeds is not None:
            io.write_csv(scores[["task", "scheme", "seed", "size", "fit", "in", "largest"]], out_seeds)
    t = t[["task", "scheme", "metric", "size", "prompt_tokens", *(["beyond_lookup"] if "beyond_lookup" in t else []),
           "mean", "ci_low", "ci_high", "n_seeds", *(["n_fit"] if "n_fit" in t else []), "n_samples"]]
    prov = runs_provenance(df)
    write_table(t, out_csv, out_md, "Position coupling and PPC: exact-match accuracy by task, scheme and input "
                "size, the share of responses that end where the target ends, and PPC's id diagnostics (first "
                "response id, later ids, where the first wrong id is: the first, a later one or one that ends the "
                "response, the tokens right when fed the oracle's ids, first id and exact match by the first "
                "lookup's distance: within the training sizes' or beyond; beyond_lookup: the share of samples beyond) "
                "(mean and 95% t-interval over seeds, test samples; floored at the evaluation noise of the samples "
                "every run shares where a metric is over all of them)", prov)
    return t


def figure(table_csv, train_max_sizes: dict, out_png, out_pdf) -> None:
    """One panel per task, one curve per run's exact match; dashed grey line = longest
    training size. PPC's id diagnostics are the table's (they sat on the lines at 1.0)."""
    from sparselen.presentation.plotting import plot_panels, save_figure  # matplotlib only where a figure is drawn

    t = pd.read_csv(table_csv)
    t = t[t["metric"] == "exact_match"].assign(curve=lambda d: d["scheme"])
    runs = sorted(set(t["scheme"]) - set(SCHEME_STYLES))
    order = [r for s in SCHEME_STYLES for r in [s, *(v for v in runs if v.startswith(s + "_"))]]
    styles = {run: run_style(run) for run in order + [r for r in runs if r not in order]}  # variants after their scheme
    n_seeds = int(t["n_seeds"].max())
    tasks = t["task"].unique()
    fig = plot_panels(t, "task", "curve", x="size", xlabel="input size", ylabel="exact match",
                      styles=styles, unfitted=unfitted(t), unfitted_label=UNFITTED, xlabels={name: task_module(name).SIZE for name in tasks},
                      vlines={name: train_max_sizes[name] for name in tasks if name in train_max_sizes},
                      title=f"Exact match by input size (mean and 95% interval over {n_seeds} "
                            f"seed{'s' * (n_seeds != 1)}; dashed: longest training size)")
    save_figure(fig, out_png, out_pdf, provenance(None, None, table=str(table_csv)))


def unfitted(t: pd.DataFrame) -> dict:
    """Per task, {run: "n/N fit"} for the runs with fewer than MIN_FITTED_RUNS seeds that fit their
    training sizes: the claims leave them out (the table's ``n_fit``; none without it)."""
    from sparselen.statistics.verdicts import MIN_FITTED_RUNS

    if "n_fit" not in t:
        return {}
    rows = t[t["n_fit"].notna() & (t["n_fit"] < MIN_FITTED_RUNS)].drop_duplicates(["task", "scheme"])
    out: dict = {}
    for r in rows.itertuples():
        out.setdefault(r.task, {})[r.scheme] = f"({int(r.n_fit)}/{int(r.n_seeds)} fit)"
    return out


def paper_tables(t: pd.DataFrame) -> list[str]:
    """Exact match (%) per task as a run x size grid, with ppc's id accuracies as rows of their own."""
    lines = []
    t = t[t["metric"].isin(["exact_match", *FIGURE_METRICS])]
    t = t.assign(row=t["scheme"] + t["metric"].map(lambda m: FIGURE_METRICS.get(m, ("",))[0]))
    for task, g in t.groupby("task", sort=True):
        grid = g.pivot_table(index="row", columns="size", values="mean", aggfunc="first")
        order = [r for s in SCHEME_STYLES for r in grid.index if r == s or r.startswith(s + "_") or r.startswith(s + " (")]
        grid = grid.reindex(list(dict.fromkeys(order + list(grid.index))))
        head = ["run", *(str(c) for c in grid.columns)]
        rows = [[r, *(percent(v) for v in grid.loc[r])] for r in grid.index]
        lines += [f"{task}: exact match (%) by run (rows) and {task_module(task).SIZE} (columns), mean over "
                  f"{seeds(g['n_seeds'].max())}.", "", layout(head, rows), ""]
    return lines

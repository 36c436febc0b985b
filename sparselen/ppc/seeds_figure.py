"""C1's and C2's evidence seed by seed: each run's exact match at the largest evaluated size,
one point per training seed, filled where the run fits its training sizes (the runs the claims
count) and hollow where it does not. A mean can hide a seed at chance; this figure cannot."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparselen.interface.variants import run_scheme
from sparselen.ppc.claims import PREDICTED, facts
from sparselen.ppc.report import SCHEME_STYLES, run_style
from sparselen.runtime.provenance import provenance

JITTER = 0.12  # half the sideways spread of a run's points, in runs (seeds drawn apart, never onto the next run)


def run_order(runs) -> list[str]:
    """Runs in the order of their schemes (``SCHEME_STYLES``), each variant after its scheme."""
    runs = sorted(set(runs))
    order = [r for s in SCHEME_STYLES for r in runs if r == s or r.startswith(s + "_")]
    return list(dict.fromkeys(order + runs))


def task_roles(section: dict) -> dict:
    """Per task, what it is to the claims (``role``: "decides C1", "decides C2", or why it is
    shown aside) and its exact-match chance level at its largest evaluated size (``chance``)."""
    out = {}
    for task, f in facts(section)["tasks"].items():
        if f["control"]:
            role = f"control: {f['control']}"
        elif not f["ids_depend_on_input"]:
            role = "decides C1"
        else:
            role = "decides C2" if f["origin"] == "paper" else "extension [ours]"
        chance = f["chance"].get(max(f["chance"])) if f["chance"] else None
        out[task] = {"role": role, "chance": chance}
    return out


def claims_reading(section: dict, task: str, run: str) -> set[str]:
    """The claims that read run ``run`` of ``task`` (the rounds train a run's next seeds only for
    an undecided one): the claim its task decides, C1 all but the runs of scheme ppc (it compares
    oracle coupling with the baselines), C2 every run."""
    role = task_roles(section)[task]["role"]
    if not role.startswith("decides "):
        return set()
    claim = role.removeprefix("decides ")
    return set() if claim == "C1" and run_scheme(section, run) == PREDICTED else {claim}


def figure(seeds_csv, roles: dict, out_png, out_pdf) -> None:
    """One panel per task of ``seeds_csv`` (per task, run and seed: ``fit``, ``largest``,
    ``size``; ``sparselen.ppc.claims.run_scores``); ``roles``: task -> {"role": what it decides,
    "chance": exact-match chance at its largest size} (``task_roles``)."""
    import matplotlib.pyplot as plt

    from sparselen.presentation.plotting import FIGURE_WIDTH, MIN_TEXT_POINTS, save_figure

    t = pd.read_csv(seeds_csv)
    tasks = sorted(t["task"].unique(), key=lambda task: (roles.get(task, {}).get("role", "~"), task))
    ncols = min(3, len(tasks))
    nrows = -(-len(tasks) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(FIGURE_WIDTH, 0.6 + 2.5 * nrows), sharey=True, squeeze=False)
    rng = np.random.default_rng(0)  # the jitter only: the same figure every time
    for ax, task in zip(axes.flat, tasks):
        g = t[t["task"] == task]
        runs = run_order(g["scheme"])
        for i, run in enumerate(runs):
            r = g[g["scheme"] == run]
            color = run_style(run).get("color", "0.3")
            xs = i + rng.uniform(-JITTER, JITTER, len(r))
            fit = r["fit"].astype(bool).to_numpy()
            ax.scatter(xs[fit], r["largest"][fit], s=16, color=color, zorder=3)
            ax.scatter(xs[~fit], r["largest"][~fit], s=16, facecolors="none", edgecolors=color, zorder=3)
            if fit.any():
                ax.hlines(r["largest"][fit].mean(), i - 2 * JITTER, i + 2 * JITTER, color=color, lw=2, zorder=2)
        info = roles.get(task, {})
        if info.get("chance") is not None:
            ax.axhline(info["chance"], color="0.5", ls=":", lw=1)
        ax.set_xticks(range(len(runs)), runs, rotation=30, ha="right", fontsize=MIN_TEXT_POINTS)
        ax.tick_params(axis="y", labelsize=MIN_TEXT_POINTS)
        size = int(g["size"].max())
        ax.set_title(f"{task}, size {size}" + (f"\n{info['role']}" if info.get("role") else ""), fontsize=8)
        ax.set_ylim(-0.04, 1.04)
        ax.grid(axis="y", alpha=0.3)
    for ax in axes.flat[:: ncols]:
        ax.set_ylabel("exact match, largest size", fontsize=8)
    for ax in axes.flat[len(tasks):]:
        ax.set_visible(False)
    fig.suptitle("Per seed at the largest size (filled: fits its training sizes; hollow: did not; "
                 "bar: mean of the fitted)", fontsize=9)
    fig.tight_layout()
    save_figure(fig, out_png, out_pdf, provenance(None, None, table=str(seeds_csv)))

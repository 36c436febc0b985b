"""A decided claim's numbers as a reader takes them in without the docs: the absolute values
that were compared, where (the length as a multiple of the longest training length) and on how
many fitted runs, e.g. "coupled 100% vs rope 0% exact match at size 40, 4x the longest training
size; 10 and 9 fitted runs". The verdict rests on the claim's own test (its difference and
interval); this line reads the same per-run tables and the same fit gate.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from sparselen.verdicts import FIT, Settings


def _pct(values) -> str:
    return f"{pd.Series(values, dtype=float).mean():.0%}"


def ppc_line(data: dict, s: Settings, group: str, schemes: tuple[str, ...]) -> str | None:
    """``schemes`` (with "best" for the baseline best on validation samples) at the task's
    largest size: mean exact match over fitted runs, the size's ratio to the longest training
    size and the fitted runs behind each."""
    from sparselen.ppc.claims import TaskRuns, run_scores

    task = str(group).split()[0]
    scores = run_scores(data["evals"], s)
    scores = scores[scores["task"] == task]
    if scores.empty:
        return None
    t = TaskRuns(task, scores, s)
    names = [t.best_baseline() if sc == "best" else sc for sc in schemes]
    if not all(n in t.fitted for n in names):
        return None
    longest = max(s.facts.get("train_sizes", {}).get(task, [0]))
    where = f"size {t.size}" + (f", {t.size / longest:.3g}x the longest training size" if longest else "")
    values = " vs ".join(f"{n} {_pct(t.fitted[n])}" for n in names)
    runs = " and ".join(str(len(t.fitted[n])) for n in names)
    return f"{values} exact match at {where}; {runs} fitted runs"


def theory_line(data: dict, s: Settings, group: str) -> str | None:
    """T1's group ("sfa k=2"): mean accuracy of the fitted runs of each law at the largest
    Lbar/L, and how many runs of each law fit (local and coupled decide; nonlocal is the
    reference)."""
    runs = data["evals"]
    model, _, k = str(group).partition(" k=")
    mine = runs[(runs["model"] == model) & (runs["k"].astype(str) == k.split(":")[0])]
    if mine.empty:
        return None
    acc = mine.assign(acc=1 - mine["error"]).pivot_table(index=["distribution", "seed"], columns="ratio",
                                                          values="acc", aggfunc="mean")
    fitted, rmax = acc[acc[1] >= FIT], max(acc.columns)
    laws = [law for law in ("coupled", "local", "nonlocal") if law in fitted.index.get_level_values(0)]
    if not {"coupled", "local"} <= set(laws):
        return None
    values = ", ".join(f"{law} {_pct(fitted.loc[law, rmax])}" for law in laws)
    fit = "/".join(str(len(fitted.loc[law])) for law in laws)
    return f"accuracy at {rmax:g}x the training length: {values} ({group}, {fit} runs fit)"


def parity_cells(data: dict, s: Settings, group: str):
    """K_train's fitted (seed, k_test) cells with their accuracy at the longest length, that
    length and its ratio to the longest training length; None without them."""
    from sparselen.parity.claims import accuracies

    K = int(str(group).partition("=")[2] or 0)
    acc = accuracies(data["evals"], s).reset_index()
    cells = acc[(acc["K_train"] == K) & (acc["k_test"] <= K) & acc["fit"]]
    lengths = [c for c in acc.columns if isinstance(c, (int, np.integer))]  # the per-length columns
    if cells.empty or not lengths:
        return None
    longest = max(lengths)
    return K, cells, longest, longest / max(s.facts["train_lengths"])


def parity_rank_line(data: dict, s: Settings, group: str) -> str | None:
    """P1: mean accuracy of the fitted seeds per k_test at the longest length."""
    found = parity_cells(data, s, group)
    if found is None:
        return None
    K, cells, longest, ratio = found
    per_k = cells.groupby("k_test")[longest].agg(["mean", "size"])
    values = ", ".join(f"k={k} {m:.0%}" for k, m in per_k["mean"].items())
    return f"K_train={K} at 2l = {longest:g} ({ratio:.3g}x the longest trained), accuracy {values}"


def parity_kept_line(data: dict, s: Settings, group: str) -> str | None:
    """P2: accuracy at k_test = K_train in distribution and at the longest length, fitted seeds."""
    found = parity_cells(data, s, group)
    if found is None:
        return None
    K, cells, longest, ratio = found
    own = cells[cells["k_test"] == K]
    if own.empty:
        return None
    return (f"k_test = K_train = {K}: {own['in'].mean():.0%} on training lengths, {own[longest].mean():.0%} at 2l = "
            f"{longest:g}, {ratio:.3g}x the longest; {len(own)} seeds fit")


HEADLINES: dict[str, Callable[[dict, Settings, str], str | None]] = {
    "P1": parity_rank_line,
    "P2": parity_kept_line,
    "C1": lambda data, s, group: ppc_line(data, s, group, ("coupled", "best")),
    "C2": lambda data, s, group: ppc_line(data, s, group, ("ppc", "coupled", "best")),
    "T1": theory_line,
}


def headline(claim: str, data: dict | None, s: Settings, group: str) -> str | None:
    """The claim's absolute numbers on its deciding group, or None where it has no such line
    (or its tables lack what the line needs)."""
    line = HEADLINES.get(claim)
    return line(data, s, group) if line and "evals" in (data or {}) else None  # each line reads the per-run evals

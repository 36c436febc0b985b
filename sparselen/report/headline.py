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

from sparselen.statistics.verdicts import FIT, Settings


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


def theory_group(runs: pd.DataFrame, group: str) -> pd.DataFrame:
    """The rows of a theory group ("sfa k=2", or "gpt k=3: ...")."""
    model, _, k = str(group).partition(" k=")
    return runs[(runs["model"] == model) & (runs["k"].astype(str) == k.split(":")[0])]


def theory_line(data: dict, s: Settings, group: str) -> str | None:
    """T1's group ("sfa k=2"): mean accuracy of the fitted runs of each law at the largest
    Lbar/L, and how many runs of each law fit (local and coupled decide; nonlocal is the
    reference)."""
    mine = theory_group(data["evals"], group)
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
    """P1: the margin above chance each k_test keeps at the longest length (``retained_margin``,
    mean of the fitted seeds): what P1 ranks."""
    from sparselen.parity.claims import retained_margin

    found = parity_cells(data, s, group)
    if found is None:
        return None
    K, cells, longest, ratio = found
    kept = cells.assign(kept=retained_margin(cells[longest], cells["in"])).groupby("k_test")["kept"].mean()
    values = ", ".join(f"k={k} {m:.0%}" for k, m in kept.items())
    return f"K_train={K} at 2l = {longest:g} ({ratio:.3g}x the longest trained), margin kept {values}"


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


def parity_fall_line(data: dict, s: Settings, group: str) -> str | None:
    """P3: the margin above chance each k_test loses per doubling of length beyond training
    (``fall_rate``, mean of the fitted seeds) on the lengths P3 reads."""
    from sparselen.parity.claims import fall_lengths, fall_rate

    found = parity_cells(data, s, group)
    if found is None:
        return None
    K, cells, _, _ = found
    train_max = s.facts["train_lengths"][1]
    lengths = fall_lengths(cells, train_max)
    if not lengths:
        return None
    rates = cells.assign(rate=fall_rate(cells, train_max, lengths)).groupby("k_test")["rate"].mean()
    values = ", ".join(f"k={k} {r:.0%}" for k, r in rates.items())
    return f"K_train={K}, 2l = {lengths[0]:g}-{lengths[-1]:g}: margin lost per doubling of length, {values}"


def theory_growth_line(data: dict, s: Settings, group: str) -> str | None:
    """T2's group: the local law's loss (geometric mean, the theory figure's and table's statistic)
    and mean accuracy at L and at the largest Lbar/L over its fitted runs."""
    from sparselen.theory.claims import evaluated_ratios, per_run

    table = theory_group(per_run(data["evals"], s), group)
    runs = table[(table["distribution"] == "local") & table["fit"]]
    if runs.empty:
        return None
    rmax = max(evaluated_ratios(runs, "loss"))

    def geometric(column):
        return float(np.exp(np.log(runs[column].to_numpy(float)).mean()))

    acc = runs[("acc", 1)].mean()
    return (f"local law ({group}, {len(runs)} runs fit): log loss {geometric(('loss', 1)):.2g} at L, "
            f"{geometric(('loss', rmax)):.2g} "
            f"at {rmax:g}L; accuracy {acc:.0%} to {runs[('acc', rmax)].mean():.0%}")


def language_recovered_line(data: dict, s: Settings, group: str) -> str | None:
    """L1: the median share of the long-context benefit that greedy's k far tokens recover,
    beside the null control's, in the benefit's own units."""
    deps, screen = data["deps"], data["screen"]
    k = int(str(group).rpartition("=")[2] or 0)
    real = deps[(deps["method"] == "greedy") & (deps["k"] == k)]
    null = deps[(deps["method"] == "greedy_null") & (deps["k"] == k)]
    if real.empty:
        return None
    control = f"null control {null['recovered'].median():.0%}; " if len(null) else ""
    return (f"{k} far tokens recover a median {real['recovered'].median():.0%} of the benefit ({control}benefit "
            f"{screen['benefit'].mean():.3f} nats)")


def language_gain_line(data: dict, s: Settings, group: str) -> str | None:
    """L2: the PoSE model's mean long-context gain over the reference's benefit, sparse tokens
    against dense ones, pooled over the seeds (unadjusted: the verdict compares them within
    documents at equal benefit, with another seed's benefit)."""
    from sparselen.language.claims import short_pose, with_sparsity

    tokens = with_sparsity(short_pose(data["transfer"])[1], data["deps"], s)
    if tokens.empty:
        return None
    x = tokens["gain"] / tokens["ref_benefit"]
    sparse = tokens["sparse"].astype(bool)
    return (f"gain / benefit: sparse tokens {x[sparse].mean():.2f}, dense {x[~sparse].mean():.2f} "
            f"({int(sparse.sum())} vs {int((~sparse).sum())} tokens, unadjusted)")


NEEDS = {"L1": ("deps", "screen"), "L2": ("deps", "transfer")}  # the others read the per-run evals
HEADLINES: dict[str, Callable[[dict, Settings, str], str | None]] = {
    "P1": parity_rank_line,
    "P2": parity_kept_line,
    "C1": lambda data, s, group: ppc_line(data, s, group, ("coupled", "best")),
    "C2": lambda data, s, group: ppc_line(data, s, group, ("ppc", "coupled", "best")),
    "P3": parity_fall_line,
    "T1": theory_line,
    "T2": theory_growth_line,
    "L1": language_recovered_line,
    "L2": language_gain_line,
}


def headline(claim: str, data: dict | None, s: Settings, group: str) -> str | None:
    """The claim's absolute numbers on its deciding group, or None where it has no such line
    (or its tables lack what the line needs)."""
    line, needs = HEADLINES.get(claim), NEEDS.get(claim, ("evals",))
    return line(data, s, group) if line and all(key in (data or {}) for key in needs) else None

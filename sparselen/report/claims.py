"""The paper's claims (SPEC.md section 1) as tests on the measured tables.

Every claim is one ``Claim`` in ``CLAIMS`` below: the statement, where SPEC.md states it,
the criterion with its tolerance, and the test that measures it. The criteria were written
before looking at any result and live here only (not in the figure code), so a reviewer
reads and changes them in one place.

A test measures one value per group (e.g. per K_train) with a bootstrap interval and says
whether the criterion holds for that group. Per-run evaluation tables are resampled
hierarchically: training seeds with replacement, then each cell's correct count from a
binomial at its measured accuracy, so the interval reflects both the spread over training
runs and the finite evaluation set (and exists with one seed). The natural-language claims
read the slice's aggregated tables, whose intervals are already bootstraps over tokens. A
claim holds when every measured group holds, does not hold when one group does not, and is
"not run" when its slice (or the schemes/cells it needs) was not run.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
from scipy.stats import norm, rankdata

HOLDS, FAILS, NOT_RUN = "holds", "does not hold", "not run"

# Tolerances (absolute accuracy). Chosen before looking at results; see each criterion.
CHANCE = 0.5  # sparse parity is a balanced binary label
ABOVE_CHANCE = 0.10  # "generalizes": the interval's low end at least this far above chance
INPUT_DEPENDENT_TASKS = ("variable_assignment",)  # PPC tasks whose coupled ids depend on the input
MIN_RECOVERED = 0.5  # language: k far tokens recover at least half of the long-context benefit


@dataclass(frozen=True)
class Result:
    group: str
    value: float
    ci_low: float
    ci_high: float
    verdict: str
    note: str = ""


@dataclass(frozen=True)
class Settings:
    """Bootstrap and experiment facts a test needs (from the config actually run)."""

    n_boot: int = 2000
    seed: int = 0
    level: float = 0.95
    parity_train_max_length: int | None = None

    def rng(self, *key) -> np.random.Generator:
        """A generator per (claim, group): stable across processes (crc32, not hash())."""
        return np.random.default_rng([self.seed, *[zlib.crc32(str(k).encode()) for k in key]])

    def interval(self, boot: np.ndarray) -> tuple[float, float]:
        a = (1 - self.level) / 2
        return float(np.quantile(boot, a)), float(np.quantile(boot, 1 - a))


@dataclass(frozen=True)
class Claim:
    id: str
    slice: str  # the experiment whose tables the test reads
    statement: str  # what the paper says
    source: str  # where SPEC.md says it
    criterion: str  # the test, with its tolerance, in words
    test: Callable[[pd.DataFrame, Settings], list[Result]]
    data: str | None = None  # the input the test reads, when not the slice's main table


# ----------------------------------------------------------------------------- statistics


def resample_accuracy(runs: pd.DataFrame, cells: list[str], s: Settings, *key):
    """Cell accuracies of per-run rows (columns ``cells`` + seed, n, correct): the point
    estimate (pooled over seeds) and ``n_boot`` hierarchical bootstrap replicates.
    Returns (index of cells, point [cells], boot [cells, n_boot])."""
    c = runs.pivot_table(index=cells, columns="seed", values="correct", aggfunc="sum").dropna()
    n = runs.pivot_table(index=cells, columns="seed", values="n", aggfunc="sum").loc[c.index]
    C, N = c.to_numpy(float), n.to_numpy(float)
    point = C.sum(1) / N.sum(1)
    rng = s.rng(*key)
    idx = rng.integers(0, C.shape[1], size=(s.n_boot, C.shape[1]))
    Nb = N[:, idx]  # cells x boot x seeds
    draws = rng.binomial(Nb.astype(np.int64), (C / N)[:, idx])
    return c.index, point, draws.sum(-1) / Nb.sum(-1)


def spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman rho of ``x`` [m] with each column of ``y`` [m] or [m, B]; 0 when y is constant."""
    y2 = y.reshape(len(y), -1)
    rx = rankdata(x)
    ry = rankdata(y2, axis=0)
    rx, ry = rx - rx.mean(), ry - ry.mean(0)
    den = np.sqrt((rx**2).sum() * (ry**2).sum(0))
    rho = np.divide((rx[:, None] * ry).sum(0), den, out=np.zeros(y2.shape[1]), where=den > 0)
    return rho if y.ndim > 1 else rho[0]


def overall(results: list[Result]) -> str:
    verdicts = {r.verdict for r in results}
    if FAILS in verdicts:
        return FAILS
    return HOLDS if HOLDS in verdicts else NOT_RUN


# ----------------------------------------------------------------------------- sparse parity


def _parity_groups(runs: pd.DataFrame):
    for K, g in runs.groupby("K_train", sort=True):
        yield f"K_train={K}", int(K), g


def parity_rank(runs: pd.DataFrame, s: Settings) -> list[Result]:
    out = []
    for name, K, g in _parity_groups(runs):
        longest = g["length"].max()
        cells, point, boot = resample_accuracy(g[g["length"] == longest], ["k_test"], s, "P1", K)
        if len(point) < 2:
            out.append(Result(name, np.nan, np.nan, np.nan, NOT_RUN, "fewer than 2 k_test at the longest length"))
            continue
        k = cells.to_numpy(float)
        rho, (lo, hi) = spearman(k, point), s.interval(spearman(k, boot))
        out.append(Result(name, rho, lo, hi, HOLDS if hi < 0 else FAILS, f"length {longest}, k_test {list(cells)}"))
    return out


def parity_sparse_generalizes(runs: pd.DataFrame, s: Settings) -> list[Result]:
    out = []
    for name, K, g in _parity_groups(runs):
        longest = g["length"].max()
        at = g[(g["length"] == longest) & (g["k_test"] <= K)]
        if at.empty:
            out.append(Result(name, np.nan, np.nan, np.nan, NOT_RUN, f"no k_test <= {K} at length {longest}"))
            continue
        k = int(at["k_test"].min())
        _, point, boot = resample_accuracy(at[at["k_test"] == k], ["k_test"], s, "P2", K)
        lo, hi = s.interval(boot[0])
        out.append(Result(name, point[0], lo, hi, HOLDS if lo > CHANCE + ABOVE_CHANCE else FAILS,
                          f"k_test={k}, length {longest}"))
    return out


def parity_denser_falls_faster(runs: pd.DataFrame, s: Settings) -> list[Result]:
    out = []
    for name, K, g in _parity_groups(runs):
        inside = g.loc[g["length"] <= (s.parity_train_max_length or 0), "length"]
        longest = g["length"].max()
        g = g[g["k_test"] <= K]
        if inside.empty or longest <= inside.max():
            out.append(Result(name, np.nan, np.nan, np.nan, NOT_RUN, "no evaluated length inside and beyond training"))
            continue
        short = inside.max()
        ks = sorted(set(g.loc[g["length"] == short, "k_test"]) & set(g.loc[g["length"] == longest, "k_test"]))
        if len(ks) < 2:
            out.append(Result(name, np.nan, np.nan, np.nan, NOT_RUN, f"fewer than 2 k_test <= {K} at both lengths"))
            continue
        sel = g[g["k_test"].isin(ks) & g["length"].isin([short, longest])]
        cells, point, boot = resample_accuracy(sel, ["k_test", "length"], s, "P3", K)
        frame = pd.DataFrame(np.column_stack([point, boot]), index=cells)
        drop = frame.xs(short, level="length") - frame.xs(longest, level="length")
        k = drop.index.to_numpy(float)
        rho = spearman(k, drop[0].to_numpy())
        lo, hi = s.interval(spearman(k, drop.iloc[:, 1:].to_numpy()))
        out.append(Result(name, rho, lo, hi, HOLDS if lo > 0 else FAILS,
                          f"drop from length {short} to {longest}, k_test {ks}"))
    return out


# ----------------------------------------------------------------------------- PPC


def _ppc_gain(runs: pd.DataFrame, s: Settings, better: str, baselines: tuple[str, ...], tasks=None,
              key: str = "") -> list[Result]:
    """Per task, at its largest evaluated size: accuracy of ``better`` minus the best of
    ``baselines`` (the best baseline is chosen per bootstrap replicate)."""
    out = []
    for task, g in runs.groupby("task", sort=True):
        if tasks is not None and task not in tasks:
            continue
        size = g["size"].max()
        g = g[g["size"] == size]
        present = [b for b in baselines if b in set(g["scheme"])]
        if better not in set(g["scheme"]) or not present:
            out.append(Result(task, np.nan, np.nan, np.nan, NOT_RUN,
                              f"needs schemes {better} and one of {list(baselines)}"))
            continue
        cells, point, boot = resample_accuracy(g[g["scheme"].isin([better, *present])], ["scheme"], s, key, task)
        i = list(cells).index(better)
        rest = [j for j in range(len(cells)) if j != i]
        gain = point[i] - point[rest].max()
        lo, hi = s.interval(boot[i] - boot[rest].max(0))
        out.append(Result(task, gain, lo, hi, HOLDS if lo > 0 else FAILS,
                          f"size {size}: {better} - max({', '.join(present)})"))
    if not out:
        out.append(Result("-", np.nan, np.nan, np.nan, NOT_RUN, f"no task among {tasks}"))
    return out


def ppc_coupling(runs, s):
    return _ppc_gain(runs, s, "coupled", ("nope", "rope"), key="C1")


def ppc_predicts_ids(runs, s):
    return _ppc_gain(runs, s, "ppc", ("nope", "rope"), INPUT_DEPENDENT_TASKS, key="C2")


# ----------------------------------------------------------------------------- natural language


def language_sparse_dependency(table: pd.DataFrame, s: Settings) -> list[Result]:
    """From the aggregated table (median over analysed tokens, the slice's bootstrap interval)."""
    g = table[table["method"] == "greedy"]
    if g.empty:
        return [Result("-", np.nan, np.nan, np.nan, NOT_RUN, "no greedy rows in the language table")]
    r = g.loc[g["k"].idxmax()]
    return [Result(f"greedy k={int(r['k'])}", r["median"], r["ci_low"], r["ci_high"],
                   HOLDS if r["ci_low"] >= MIN_RECOVERED else FAILS, f"{int(r['n_tokens'])} tokens")]


def language_sparse_generalizes(gen: pd.DataFrame, s: Settings) -> list[Result]:
    """Normal approximation from the table's per-level intervals (independent token groups)."""
    out = []
    z = float(norm.ppf(0.975))  # the table's intervals are 95% intervals
    short = gen[(gen["context"] == gen["context"].min()) & (gen["sparsity"].astype(str) != "all")]
    for scheme, g in short.groupby("scheme", sort=True):
        g = g.sort_values("order")
        if len(g) < 2:
            out.append(Result(scheme, np.nan, np.nan, np.nan, NOT_RUN, "fewer than 2 sparsity levels"))
            continue
        sparse, dense = g.iloc[0], g.iloc[-1]
        diff = sparse["mean"] - dense["mean"]
        se = np.hypot(*[(r["ci_high"] - r["ci_low"]) / (2 * z) for r in (sparse, dense)])
        half = float(norm.ppf(0.5 + s.level / 2)) * se
        lo, hi = diff - half, diff + half
        out.append(Result(scheme, diff, lo, hi, HOLDS if lo > 0 else FAILS,
                          f"context {int(sparse['context'])}: sparsity {sparse['sparsity']} minus {dense['sparsity']}"))
    return out or [Result("-", np.nan, np.nan, np.nan, NOT_RUN, "no short-context model")]


# ----------------------------------------------------------------------------- theory


def _theory_at_longest(runs: pd.DataFrame, dists: list[str]):
    """Per (model, k): accuracy cells (1 - 0-1 error) of ``dists`` at the largest Lbar/L."""
    runs = runs.assign(correct=((1 - runs["error"]) * runs["n"]).round())
    for (model, k), g in runs.groupby(["model", "k"], sort=True):
        g = g[g["ratio"] == g["ratio"].max()]
        yield f"{model} k={k}", g[g["distribution"].isin(dists)]


def theory_coupling(runs: pd.DataFrame, s: Settings) -> list[Result]:
    out = []
    for name, g in _theory_at_longest(runs, ["coupled", "nonlocal"]):
        if set(g["distribution"]) != {"coupled", "nonlocal"}:
            out.append(Result(name, np.nan, np.nan, np.nan, NOT_RUN, "needs distributions coupled and nonlocal"))
            continue
        cells, point, boot = resample_accuracy(g, ["distribution"], s, "T1", name)
        i, j = list(cells).index("coupled"), list(cells).index("nonlocal")
        lo, hi = s.interval(boot[i] - boot[j])
        out.append(Result(name, point[i] - point[j], lo, hi, HOLDS if lo > 0 else FAILS,
                          f"Lbar/L = {g['ratio'].max()}: coupled - nonlocal"))
    return out or [Result("-", np.nan, np.nan, np.nan, NOT_RUN, "no theory runs")]


def theory_local(runs: pd.DataFrame, s: Settings) -> list[Result]:
    out = []
    for name, g in _theory_at_longest(runs, ["local"]):
        if g.empty:
            out.append(Result(name, np.nan, np.nan, np.nan, NOT_RUN, "no local distribution"))
            continue
        chance = 1 / int(g["n_values"].iloc[0])
        _, point, boot = resample_accuracy(g, ["distribution"], s, "T2", name)
        lo, hi = s.interval(boot[0])
        out.append(Result(name, point[0], lo, hi, HOLDS if lo > chance + ABOVE_CHANCE else FAILS,
                          f"Lbar/L = {g['ratio'].max()}, chance {chance:.2f}"))
    return out or [Result("-", np.nan, np.nan, np.nan, NOT_RUN, "no theory runs")]


# ----------------------------------------------------------------------------- the claims

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "P1", "parity",
        "The smaller k, the better models trained on short sequences do on long ones.",
        "SPEC.md section 1 [paper]; section 3",
        "For every K_train, at the longest evaluated length: Spearman rho of accuracy against k_test "
        "(over the feasible k_test) < 0, with the 95% bootstrap interval's upper end < 0.",
        parity_rank,
    ),
    Claim(
        "P2", "parity",
        "Length generalization happens when each predicted token depends on a small number k of tokens.",
        "SPEC.md section 1 [paper]",
        f"For every K_train, at the longest evaluated length, the accuracy at the smallest k_test <= K_train has a "
        f"95% bootstrap interval whose low end exceeds chance ({CHANCE}) + {ABOVE_CHANCE}.",
        parity_sparse_generalizes,
    ),
    Claim(
        "P3", "parity",
        "Accuracy falls with length, and it falls faster the larger k_test is.",
        "SPEC.md section 3 (what a reader must see)",
        "For every K_train, over k_test <= K_train: Spearman rho of the accuracy drop (longest evaluated length inside "
        "the training range minus the longest evaluated length) against k_test > 0, with the 95% bootstrap interval's "
        "low end > 0.",
        parity_denser_falls_faster,
    ),
    Claim(
        "C1", "ppc",
        "Position coupling removes the locality requirement: coupled ids generalize to longer inputs.",
        "SPEC.md section 1 [paper]; section 4",
        "For every task, at the largest evaluated size: exact-match accuracy of `coupled` (oracle ids) minus the best of "
        "`nope`/`rope` has a 95% bootstrap interval with low end > 0.",
        ppc_coupling,
    ),
    Claim(
        "C2", "ppc",
        "PPC trains the model to predict the coupled ids, so coupling works where the ids depend on the input.",
        "SPEC.md section 1 [paper]; section 4",
        f"For every task whose ids depend on the input ({', '.join(INPUT_DEPENDENT_TASKS)}), at the largest evaluated "
        "size: exact-match accuracy of `ppc` (predicted ids; a wrong id is an error) minus the best of `nope`/`rope` has "
        "a 95% bootstrap interval with low end > 0.",
        ppc_predicts_ids,
    ),
    Claim(
        "L1", "language",
        "A small number of distant tokens predict the current token nearly as well as the whole long context.",
        "SPEC.md section 1 [paper]; section 5 (Figures 2 and 6)",
        f"On held-out tokens with a real long-context benefit, the median fraction of the benefit recovered by the "
        f"largest k (<= 16) greedily chosen distant tokens has a 95% bootstrap interval (over tokens) with low end "
        f">= {MIN_RECOVERED}.",
        language_sparse_dependency,
    ),
    Claim(
        "L2", "language",
        "The sparser a token's dependency, the better a model trained on short contexts does on it at long context.",
        "SPEC.md section 1 [paper]; section 5 [ours] protocol",
        "For every model trained at the short context (rope, pose): its long-minus-short context gain on the sparsest "
        "tokens minus its gain on the densest tokens has a 95% interval (normal approximation from the per-level "
        "bootstrap intervals) with low end > 0.",
        language_sparse_generalizes,
        data="language_generalization",
    ),
    Claim(
        "T1", "theory",
        "Position coupling removes the locality requirement of the length-generalization guarantee.",
        "SPEC.md section 1 [paper]; section 6",
        "For every (model, k), at the largest Lbar/L: accuracy (1 - 0-1 error) on the coupled distribution minus on the "
        "non-local uncoupled one has a 95% bootstrap interval with low end > 0.",
        theory_coupling,
    ),
    Claim(
        "T2", "theory",
        "Local k-sparse planted correlations length-generalize (error bounded in terms of Lbar/L).",
        "SPEC.md section 6 [paper]",
        f"For every (model, k) on the local distribution, at the largest Lbar/L: accuracy has a 95% bootstrap interval "
        f"with low end > chance (1 / n_values) + {ABOVE_CHANCE}.",
        theory_local,
    ),
)


def check(data: dict[str, pd.DataFrame | None], settings: Settings, claims=CLAIMS) -> pd.DataFrame:
    """One row per (claim, group) plus one ``group == "all"`` row per claim with its verdict.
    ``data`` maps a slice name to its table (None or missing: the slice was not run)."""
    rows = []
    for c in claims:
        table = data.get(c.data or c.slice)
        results = c.test(table, settings) if table is not None and len(table) else [
            Result("-", np.nan, np.nan, np.nan, NOT_RUN, f"{c.slice} slice not run")]
        base = {"claim": c.id, "slice": c.slice, "statement": c.statement, "source": c.source,
                "criterion": c.criterion}
        rows.append({**base, "group": "all", "value": np.nan, "ci_low": np.nan, "ci_high": np.nan,
                     "verdict": overall(results), "note": f"{sum(r.verdict == HOLDS for r in results)} of "
                     f"{len(results)} groups hold"})
        rows.extend({**base, **r.__dict__} for r in results)
    return pd.DataFrame(rows)


def verdicts(table: pd.DataFrame) -> dict[str, list[dict]]:
    """Per slice, each claim's verdict and evidence in one line (for figure captions)."""
    out: dict[str, list[dict]] = {}
    for claim, g in table.groupby("claim", sort=False):
        head = g[g["group"] == "all"].iloc[0]
        out.setdefault(head["slice"], []).append(
            {"id": claim, "verdict": head["verdict"], "criterion": head["criterion"], "evidence": evidence(g)})
    return out


def evidence(rows: pd.DataFrame) -> str:
    """A claim's groups in one line: ``K_train=4: -0.90 [-1.00, -0.70] holds; ...``."""
    return "; ".join((f"{r.group}: " if r.group != "-" else "") + fmt_value(r)
                     for r in rows[rows["group"] != "all"].itertuples())


def fmt_value(r) -> str:
    if pd.isna(r.value):
        return r.verdict + (f" ({r.note})" if r.note else "")
    ci = "" if pd.isna(r.ci_low) else f" [{r.ci_low:.2f}, {r.ci_high:.2f}]"
    return f"{r.value:.2f}{ci} {r.verdict}"

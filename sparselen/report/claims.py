"""The paper's claims as tests on the measured tables, with three verdicts.

Every claim is one ``Claim`` in ``CLAIMS``: the paper's words it tests, the criterion with its
tolerances (written in docs/reconstruction.md, "Claims", before the results) and the test.
A test returns one ``Result`` per group (a K_train, a task, a (model, k)), each with a
verdict and its reason:

- **gates** first: only a model that fits its training distribution is evidence about length
  generalization, so runs that do not fit are left out and a group with too few fitted runs
  (or no benefit to explain) is *inconclusive*, saying why and what would resolve it;
- then the **interval**: *holds* when the whole 95% interval is on the claim's side of its
  threshold, *does not hold* when the whole interval is on the other side, *inconclusive*
  when it straddles it (an effect below the resolution of these seeds and samples).

A claim holds when every group holds, does not hold when a group does not, and is
inconclusive otherwise. Its **stability** is the share of resamples of the training runs
(leave one seed out, and bootstrap resamples of the seeds; documents for the language claims,
which analyse one model) whose verdict differs from the full data's; above ``UNSTABLE`` the
claim is reported inconclusive (unstable). A claim whose slice did not run is "not run".
"""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np
import pandas as pd

from sparselen.language.sparsity import token_sparsity as sparsity_of_tokens
from sparselen.stats import ClusterBootstrap, resample_accuracy, spearman, weighted_mean, weighted_median

HOLDS, FAILS, INCONCLUSIVE, NOT_RUN = "holds", "does not hold", "inconclusive", "not run"

# Criteria and gates, fixed before the results (docs/reconstruction.md, "Claims").
CHANCE = 0.5  # sparse parity is a balanced binary label
FIT = 0.9  # a run fits when its in-distribution accuracy is at least this
MIN_FITTED_RUNS = 2  # a group with fewer fitted runs is inconclusive
MIN_RANK_CELLS = 3  # a rank over fewer cells has no power
RETAINED = 0.5  # P2: share of the in-distribution margin above chance kept at the longest length
ORACLE_TOLERANCE = 0.10  # C2: PPC within this of oracle coupling
MIN_RECOVERED = 0.5  # L1: median share of the benefit recovered by the largest k <= 16
MAX_K = 16
SPARSE_K = 2  # L2: a token is sparse when greedy k <= this recovers SPARSE_SHARE of its benefit
SPARSE_SHARE = 0.9
MIN_GROUP_TOKENS = 20  # L2: fewer tokens in a group is inconclusive
BOUND_SLOPE = 2.0  # T2: (Lbar/L)^2
UNSTABLE = 0.10  # a verdict that flips in more than this share of resamples is unstable
STABILITY_REPLICATES = 20  # bootstrap resamples of the seeds (besides leave-one-out)
STABILITY_BOOT = 400  # bootstrap replicates inside each stability resample


@dataclass(frozen=True)
class Result:
    group: str
    value: float
    ci_low: float
    ci_high: float
    verdict: str
    reason: str = ""
    resolve: str = ""  # what would resolve an inconclusive or failed gate


@dataclass(frozen=True)
class Settings:
    """Bootstrap settings and the facts of the experiments run that a test needs."""

    n_boot: int = 2000
    seed: int = 0
    level: float = 0.95
    parity_train_lengths: tuple = (20, 50)
    ppc_train_sizes: dict = field(default_factory=dict)  # task -> [lo, hi]
    ppc_input_dependent: tuple = ("variable_assignment", "pointer_copy")  # tasks whose coupled ids depend on the input
    theory_floor: float = 1e-6

    def rng(self, *key) -> np.random.Generator:
        """A generator per (claim, group): stable across processes (crc32, not hash())."""
        return np.random.default_rng([self.seed, *[zlib.crc32(str(k).encode()) for k in key]])

    def interval(self, boot: np.ndarray) -> tuple[float, float]:
        a = (1 - self.level) / 2
        boot = np.asarray(boot, dtype=float)
        boot = boot[np.isfinite(boot)]
        if boot.size == 0:
            return float("nan"), float("nan")
        return float(np.quantile(boot, a)), float(np.quantile(boot, 1 - a))


@dataclass(frozen=True)
class Claim:
    id: str
    slice: str  # the experiment whose tables the test reads
    statement: str  # the claim, in one line
    quote: str  # the paper's words it tests (docs/reconstruction.md quotes the source)
    criterion: str  # the test, with its tolerances, in words
    test: Callable
    figure: str  # the figure that shows the evidence (results/figures/<figure>.png)
    unit: str = "seed"  # what the stability check resamples
    data: str | None = None  # the input the test reads, when not the slice's per-run table


# ----------------------------------------------------------------------------- verdicts


def decide(lo: float, hi: float, threshold: float, above: bool = True) -> str:
    """The claim side is ``> threshold`` (``above``) or ``< threshold``: holds when the whole
    interval is on it, does not hold when the whole interval is on the other side."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return INCONCLUSIVE
    if above:
        return HOLDS if lo > threshold else FAILS if hi < threshold else INCONCLUSIVE
    return HOLDS if hi < threshold else FAILS if lo > threshold else INCONCLUSIVE


BELOW_RESOLUTION = "the interval includes the threshold: an effect below the resolution of these runs"
MORE_RUNS = "more seeds or evaluation samples"


def interval_result(group: str, value: float, lo: float, hi: float, threshold: float, above: bool = True,
                    note: str = "") -> Result:
    v = decide(lo, hi, threshold, above)
    reason = note if v != INCONCLUSIVE else "; ".join(filter(None, [note, BELOW_RESOLUTION]))
    return Result(group, value, lo, hi, v, reason, MORE_RUNS if v == INCONCLUSIVE else "")


def gate_result(group: str, reason: str, resolve: str) -> Result:
    return Result(group, np.nan, np.nan, np.nan, INCONCLUSIVE, reason, resolve)


def combine(results: list[Result]) -> tuple[str, str]:
    """(verdict, reason) of a claim from its groups' results."""
    verdicts = Counter(r.verdict for r in results)
    if verdicts[FAILS]:
        return FAILS, "; ".join(f"{r.group} does not hold" for r in results if r.verdict == FAILS)
    if verdicts[HOLDS] == len(results):
        return HOLDS, "; ".join(f"{r.group}: {r.reason}" for r in results)
    open_ = [r for r in results if r.verdict != HOLDS]
    return INCONCLUSIVE, "; ".join(f"{r.group}: {r.reason}" for r in open_)


# ----------------------------------------------------------------------------- sparse parity


def parity_fit(runs: pd.DataFrame, s: Settings) -> pd.DataFrame:
    """Per (K_train, seed, k_test): whether the run fits that cell (accuracy >= FIT at every
    evaluated training length)."""
    lo, hi = s.parity_train_lengths
    inside = runs[runs["length"].between(lo, hi)]
    fit = inside.groupby(["K_train", "seed", "k_test"])["accuracy"].min().ge(FIT)
    return fit.rename("fit").reset_index()


def _fitted_cells(g: pd.DataFrame, fit: pd.DataFrame, K: int) -> tuple[pd.DataFrame, list[int], str]:
    """Rows of fitted runs for the cells k_test <= K that have at least MIN_FITTED_RUNS of them;
    the fitted k_test; and a note of the runs left out."""
    f = fit[(fit["K_train"] == K) & (fit["k_test"] <= K)]
    counts = f.groupby("k_test")["fit"].agg(["sum", "size"])
    ks = [int(k) for k, c in counts.iterrows() if c["sum"] >= MIN_FITTED_RUNS]
    left_out = [f"k_test={k}: {int(c['sum'])} of {int(c['size'])} seeds fit" for k, c in counts.iterrows()
                if c["sum"] < c["size"]]
    keep = f[f["fit"] & f["k_test"].isin(ks)][["seed", "k_test"]]
    return g.merge(keep, on=["seed", "k_test"]), ks, "; ".join(left_out)


def _parity_groups(runs: pd.DataFrame, s: Settings):
    fit = parity_fit(runs, s)
    for K, g in runs.groupby("K_train", sort=True):
        rows, ks, note = _fitted_cells(g, fit, int(K))
        yield f"K_train={K}", int(K), rows, ks, note


NOT_LEARNED = "train longer or a larger model until every k_test <= K_train fits (configs/paper.yaml: the paper's sizes)"


def _margins(rows: pd.DataFrame, s: Settings, *key) -> tuple:
    """Per fitted k_test: (k values, acc at the longest length [point, boot], acc on the
    training lengths [point, boot])."""
    lo, hi = s.parity_train_lengths
    longest = rows["length"].max()
    where = np.where(rows["length"].between(lo, hi), "in", np.where(rows["length"] == longest, "long", ""))
    sel = rows.assign(where=where)
    sel = sel[sel["where"] != ""]
    cells, point, boot = resample_accuracy(sel, ["k_test", "where"], s, *key)
    frame = pd.DataFrame(np.column_stack([point, boot]), index=cells)
    long_ = frame.xs("long", level="where")
    in_ = frame.xs("in", level="where").loc[long_.index]
    return long_.index.to_numpy(float), long_.to_numpy(), in_.to_numpy(), longest


def _too_few_to_rank(name: str, ks: list[int], note: str) -> Result:
    return gate_result(name, f"{len(ks)} fitted k_test <= K_train (a rank needs {MIN_RANK_CELLS})"
                       + (f"; {note}" if note else ""), f"K_train >= {MIN_RANK_CELLS} with every k_test <= K_train "
                       "learned (configs/paper.yaml: K_train 4 to 12)")


def parity_rank(runs: pd.DataFrame, s: Settings) -> list[Result]:
    """P1: accuracy at the longest length falls with k_test, over the fitted k_test <= K_train."""
    out = []
    for name, K, rows, ks, note in _parity_groups(runs, s):
        if len(ks) < MIN_RANK_CELLS:
            out.append(_too_few_to_rank(name, ks, note))
            continue
        k, long_, _, longest = _margins(rows, s, "P1", K)
        rho = spearman(k, long_[:, 0])
        lo, hi = s.interval(spearman(k, long_[:, 1:]))
        out.append(interval_result(name, rho, lo, hi, 0.0, above=False,
                                   note=f"length {longest}, k_test {ks}" + (f"; left out: {note}" if note else "")))
    return out


def parity_retained(runs: pd.DataFrame, s: Settings) -> list[Result]:
    """P2: at k_test = K_train, the share of the in-distribution margin above chance kept at the
    longest length exceeds RETAINED."""
    out = []
    for name, K, rows, ks, note in _parity_groups(runs, s):
        if K not in ks:
            out.append(gate_result(name, f"k_test = K_train = {K} not learned in distribution ({note})", NOT_LEARNED))
            continue
        k, long_, in_, longest = _margins(rows[rows["k_test"] == K], s, "P2", K)
        with np.errstate(invalid="ignore", divide="ignore"):
            kept = (long_[0] - CHANCE) / (in_[0] - CHANCE)
        lo, hi = s.interval(kept[1:])
        out.append(interval_result(name, kept[0], lo, hi, RETAINED, note=f"k_test={K}, length {longest}"))
    return out


def parity_denser_falls_faster(runs: pd.DataFrame, s: Settings) -> list[Result]:
    """P3: the normalised drop 1 - (acc - 0.5) / (acc_in - 0.5) grows with k_test."""
    out = []
    for name, K, rows, ks, note in _parity_groups(runs, s):
        if len(ks) < MIN_RANK_CELLS:
            out.append(_too_few_to_rank(name, ks, note))
            continue
        k, long_, in_, longest = _margins(rows, s, "P3", K)
        with np.errstate(invalid="ignore", divide="ignore"):
            drop = 1 - (long_ - CHANCE) / (in_ - CHANCE)
        rho = spearman(k, drop[:, 0])
        lo, hi = s.interval(spearman(k, drop[:, 1:]))
        out.append(interval_result(name, rho, lo, hi, 0.0, note=f"training lengths to {longest}, k_test {ks}"))
    return out


# ----------------------------------------------------------------------------- PPC

ORACLE, PREDICTED = "coupled", "ppc"


def ppc_fit(runs: pd.DataFrame, s: Settings) -> pd.DataFrame:
    """Per (task, scheme, seed): whether the run fits (exact match >= FIT at every evaluated
    training size)."""
    parts = []
    for task, g in runs.groupby("task"):
        lo, hi = s.ppc_train_sizes.get(task, (g["size"].min(), g["size"].min()))
        inside = g[g["size"].between(lo, hi)]
        parts.append(inside.groupby(["task", "scheme", "seed"])["accuracy"].min().ge(FIT).rename("fit"))
    return pd.concat(parts).reset_index() if parts else pd.DataFrame(columns=["task", "scheme", "seed", "fit"])


def _ppc_task(g: pd.DataFrame, fit: pd.DataFrame) -> tuple[pd.DataFrame, dict, int]:
    """Rows of fitted runs at the largest size, runs fitted per scheme (fitted, all), the size."""
    size = g["size"].max()
    f = fit[fit["task"] == g["task"].iloc[0]]
    counts = {sc: (int(x["fit"].sum()), len(x)) for sc, x in f.groupby("scheme")}
    keep = f[f["fit"]][["scheme", "seed"]]
    return g[g["size"] == size].merge(keep, on=["scheme", "seed"]), counts, size


def _fitted(counts: dict, scheme: str) -> bool:
    return counts.get(scheme, (0, 0))[0] >= MIN_FITTED_RUNS


def _fit_note(counts: dict, schemes) -> str:
    return ", ".join(f"{sc} {counts[sc][0]}/{counts[sc][1]}" for sc in schemes if sc in counts)


def _coupling_gain(rows, counts, size, task, s, key):
    """(result of oracle coupling minus the best fitted baseline, point and boot per scheme)."""
    baselines = [sc for sc in counts if sc not in (ORACLE, PREDICTED)]
    fitted = [sc for sc in baselines if _fitted(counts, sc)]
    if not _fitted(counts, ORACLE):
        return gate_result(task, f"oracle coupling did not fit its training sizes ({_fit_note(counts, [ORACLE])})",
                           "train the coupled model until it fits"), None
    if not fitted:
        return gate_result(task, "no baseline fit its training sizes (" + _fit_note(counts, baselines) + ")",
                           "train the baselines until they fit, or a larger model"), None
    schemes = [ORACLE, PREDICTED, *fitted] if _fitted(counts, PREDICTED) else [ORACLE, *fitted]
    cells, point, boot = resample_accuracy(rows[rows["scheme"].isin(schemes)], ["scheme"], s, key, task)
    at = {sc: (point[i], boot[i]) for i, sc in enumerate(cells)}
    best_point = max(at[b][0] for b in fitted)
    best_boot = np.max([at[b][1] for b in fitted], axis=0)
    lo, hi = s.interval(at[ORACLE][1] - best_boot)
    note = f"size {size}: coupled - max({', '.join(fitted)})"
    return interval_result(task, at[ORACLE][0] - best_point, lo, hi, 0.0, note=note), (at, best_point, best_boot)


def ppc_coupling(runs: pd.DataFrame, s: Settings) -> list[Result]:
    """C1: oracle coupling beats the best fitted baseline at the largest size, per task."""
    fit = ppc_fit(runs, s)
    out = []
    for task, g in runs.groupby("task", sort=True):
        rows, counts, size = _ppc_task(g, fit)
        out.append(_coupling_gain(rows, counts, size, task, s, "C1")[0])
    return out


def ppc_predicts_ids(runs: pd.DataFrame, s: Settings) -> list[Result]:
    """C2: on tasks whose ids depend on the input and where coupling matters, PPC beats the best
    fitted baseline and comes within ORACLE_TOLERANCE of oracle coupling."""
    fit = ppc_fit(runs, s)
    out = []
    for task, g in runs.groupby("task", sort=True):
        if task not in s.ppc_input_dependent:
            continue
        rows, counts, size = _ppc_task(g, fit)
        c1, stats = _coupling_gain(rows, counts, size, task, s, "C2")
        if c1.verdict != HOLDS:
            reason = c1.reason if stats is None else (
                f"oracle coupling does not demonstrably beat the best baseline here (coupled - best "
                f"{c1.value:+.2f} [{c1.ci_low:+.2f}, {c1.ci_high:+.2f}]): a control, not a test of PPC")
            out.append(gate_result(task, reason, c1.resolve or "a task whose lookups need coupling"))
            continue
        if not _fitted(counts, PREDICTED):
            out.append(gate_result(task, f"ppc did not fit its training sizes ({_fit_note(counts, [PREDICTED])})",
                                   "train the ppc model until it fits"))
            continue
        at, best_point, best_boot = stats
        gain, gain_lo, gain_hi = at[PREDICTED][0] - best_point, *s.interval(at[PREDICTED][1] - best_boot)
        gap, gap_lo, gap_hi = at[PREDICTED][0] - at[ORACLE][0], *s.interval(at[PREDICTED][1] - at[ORACLE][1])
        v1, v2 = decide(gain_lo, gain_hi, 0.0), decide(gap_lo, gap_hi, -ORACLE_TOLERANCE)
        verdict = FAILS if FAILS in (v1, v2) else HOLDS if v1 == v2 == HOLDS else INCONCLUSIVE
        note = (f"size {size}: ppc - best baseline {gain:.2f} [{gain_lo:.2f}, {gain_hi:.2f}]; "
                f"ppc - coupled {gap:.2f} [{gap_lo:.2f}, {gap_hi:.2f}] (tolerance -{ORACLE_TOLERANCE})")
        reason = note if verdict != INCONCLUSIVE else f"{note}; {BELOW_RESOLUTION}"
        out.append(Result(task, gain, gain_lo, gain_hi, verdict, reason, MORE_RUNS if verdict == INCONCLUSIVE else ""))
    return out or [gate_result("-", "no task whose coupled ids depend on the input was run",
                               f"run one of {list(s.ppc_input_dependent)} (configs/cpu-extended.yaml)")]


# ----------------------------------------------------------------------------- natural language

NO_BENEFIT = "a model that uses its long context (more training tokens or a larger model: configs/paper.yaml)"


def language_benefit(screen: pd.DataFrame, s: Settings) -> Result:
    """The gate: the mean long-context benefit L_short - L_long over random held-out tokens,
    with an interval by document."""
    boot = ClusterBootstrap(screen["doc"], s, "benefit")
    b = screen["benefit"].to_numpy(float)
    mean, lo, hi = boot.interval(float(b.mean()), weighted_mean(b, boot.weights(screen["doc"])))
    if not lo > 0:
        return gate_result("benefit", f"no long-context benefit to explain: mean L_short - L_long = {mean:.3f} "
                           f"[{lo:.3f}, {hi:.3f}] nats", NO_BENEFIT)
    return Result("benefit", mean, lo, hi, HOLDS, f"mean L_short - L_long = {mean:.3f} [{lo:.3f}, {hi:.3f}] nats")


def language_sparse_dependency(data: dict, s: Settings) -> list[Result]:
    """L1: the median share recovered by the largest greedy k <= 16 is at least MIN_RECOVERED and
    above the null control's (greedy over another document's far context)."""
    gate = language_benefit(data["screen"], s)
    if gate.verdict != HOLDS:
        return [gate]
    deps = data["deps"]
    greedy = deps[(deps["method"] == "greedy") & (deps["k"] <= MAX_K)]
    k = int(greedy["k"].max())
    real = greedy[greedy["k"] == k]
    null = deps[(deps["method"] == "greedy_null") & (deps["k"] == k)]
    far = f"k / far tokens = {k}/{int(real['far_tokens'].iloc[0])}" if "far_tokens" in real else f"k = {k}"
    boot = ClusterBootstrap(deps["doc"], s, "L1")
    x = real["recovered"].to_numpy(float)
    med_boot = weighted_median(x, boot.weights(real["doc"]))
    med, lo, hi = boot.interval(float(np.median(x)), med_boot)
    if null.empty:
        return [Result(f"greedy k={k}", med, lo, hi, INCONCLUSIVE, f"median recovered {med:.2f}; no null control run",
                       "run the null control (language.analysis.null_control)")]
    y = null["recovered"].to_numpy(float)
    ex, ex_lo, ex_hi = boot.interval(float(np.median(x) - np.median(y)),
                                     med_boot - weighted_median(y, boot.weights(null["doc"])))
    v1, v2 = decide(lo, hi, MIN_RECOVERED), decide(ex_lo, ex_hi, 0.0)
    verdict = FAILS if FAILS in (v1, v2) else HOLDS if v1 == v2 == HOLDS else INCONCLUSIVE
    note = (f"{far}: median recovered {med:.2f} [{lo:.2f}, {hi:.2f}] (needs >= {MIN_RECOVERED}); minus the null "
            f"control {ex:.2f} [{ex_lo:.2f}, {ex_hi:.2f}] (needs > 0); {gate.reason}")
    control = planted_control(deps, s)
    if control.verdict != HOLDS:
        return [gate_result(f"greedy k={k}", f"{control.reason}; so greedy's shares are not read ({note})",
                            control.resolve)]
    note = f"{note}; {control.reason}"
    reason = note if verdict != INCONCLUSIVE else f"{note}; {BELOW_RESOLUTION}"
    return [Result(f"greedy k={k}", med, lo, hi, verdict, reason, MORE_RUNS if verdict == INCONCLUSIVE else "")]


NO_COPY = ("a model that copies from beyond the short window (the analysis's induction table): more training "
           "tokens or a larger model (configs/paper.yaml)")


def planted_control(deps: pd.DataFrame, s: Settings) -> Result:
    """The positive control, a precondition of reading greedy's shares (L1, L2): on planted
    repeats, whose answer is one far token, greedy k <= SPARSE_K recovers a median of at least
    SPARSE_SHARE of the benefit, over at least MIN_GROUP_TOKENS repeats with a benefit."""
    p = deps[(deps["method"] == "greedy_planted") & (deps["k"] <= SPARSE_K)]
    best = p.groupby(["doc", "t"], as_index=False)["recovered"].max()
    if len(best) < MIN_GROUP_TOKENS:
        return gate_result("planted", f"positive control: {len(best)} planted repeats with a long-context benefit "
                           f"(needs {MIN_GROUP_TOKENS}): the model does not use a copy beyond its short window",
                           NO_COPY)
    x = best["recovered"].to_numpy(float)
    boot = ClusterBootstrap(best["doc"], s, "planted")
    med, lo, hi = boot.interval(float(np.median(x)), weighted_median(x, boot.weights(best["doc"])))
    reason = (f"positive control ({len(x)} planted repeats): greedy k <= {SPARSE_K} recovers a median {med:.2f} "
              f"[{lo:.2f}, {hi:.2f}] (needs >= {SPARSE_SHARE})")
    if med < SPARSE_SHARE:
        return gate_result("planted", reason, "a greedy search that finds the copied token: " + NO_COPY)
    return Result("planted", med, lo, hi, HOLDS, reason)


def token_sparsity(deps: pd.DataFrame) -> pd.DataFrame:
    return sparsity_of_tokens(deps, SPARSE_SHARE)


def language_sparse_generalizes(data: dict, s: Settings) -> list[Result]:
    """L2: for the PoSE model trained at the short context, the long-context gain normalised by
    the reference's benefit is larger on sparse tokens than on dense ones."""
    gate = language_benefit(data["screen"], s)
    if gate.verdict != HOLDS:
        return [gate]
    transfer = data["transfer"]
    short = transfer["context"].min()
    model = transfer[(transfer["context"] == short) & (transfer["scheme"] == "pose")]
    if model.empty:
        return [gate_result("pose", "no PoSE model trained at the short context", "add pose to language.schemes.short")]
    control = planted_control(data["deps"], s)
    if control.verdict != HOLDS:
        return [gate_result("pose", f"{control.reason}; so greedy's sparsity labels are not read", control.resolve)]
    tokens = model.merge(token_sparsity(data["deps"]), on=["doc", "t", "seed"])
    sparse = tokens["sparse"].to_numpy(bool)
    n_sparse, n_dense = int(sparse.sum()), int((~sparse).sum())
    if min(n_sparse, n_dense) < MIN_GROUP_TOKENS:
        return [gate_result("pose", f"{n_sparse} sparse and {n_dense} dense tokens (needs {MIN_GROUP_TOKENS} each)",
                            "analyse more tokens (language.analysis.tokens)")]
    x = (tokens["gain"] / tokens["ref_benefit"]).to_numpy(float)
    boot = ClusterBootstrap(tokens["doc"], s, "L2")
    w = boot.weights(tokens["doc"])
    diff = weighted_mean(x, w * sparse) - weighted_mean(x, w * ~sparse)
    value, lo, hi = boot.interval(float(x[sparse].mean() - x[~sparse].mean()), diff)
    return [interval_result(f"pose, context {short}", value, lo, hi, 0.0,
                            note=f"sparse minus dense normalised gain ({n_sparse} vs {n_dense} tokens)")]


# ----------------------------------------------------------------------------- theory


def theory_fit(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (model, distribution, k, seed): whether the run fits at Lbar = L."""
    at_L = runs[runs["ratio"] == 1]
    return (1 - at_L.groupby(["model", "distribution", "k", "seed"])["error"].mean()).ge(FIT).rename("fit").reset_index()


def _theory_fitted(g: pd.DataFrame, fit: pd.DataFrame, dist: str) -> tuple[pd.DataFrame, int, int]:
    f = fit[(fit["distribution"] == dist) & fit["model"].isin(g["model"].unique()) & fit["k"].isin(g["k"].unique())]
    keep = f[f["fit"]][["model", "distribution", "k", "seed"]]
    return g[g["distribution"] == dist].merge(keep), int(f["fit"].sum()), len(f)


def _theory_gate(name: str, dist: str, n_fit: int, n_all: int) -> Result:
    """Too few fitted runs: either too few seeds, or runs that did not learn at Lbar = L."""
    if n_all < MIN_FITTED_RUNS:
        return gate_result(name, f"{n_all} {dist} run{'s' * (n_all != 1)} (a verdict needs {MIN_FITTED_RUNS} fitted)",
                           "more training seeds (theory.seeds)")
    return gate_result(name, f"the {dist} runs did not fit at Lbar = L ({n_fit} of {n_all})",
                       "train the theory model longer (theory.gpt.train, theory.sfa)")


def theory_coupling(runs: pd.DataFrame, s: Settings) -> list[Result]:
    """T1: for k >= 2, at the largest Lbar/L, accuracy on the coupled law minus the non-local law."""
    fit, out = theory_fit(runs), []
    runs = runs.assign(correct=((1 - runs["error"]) * runs["n"]).round())
    for (model, k), g in runs.groupby(["model", "k"], sort=True):
        name = f"{model} k={k}"
        if k < 2:
            continue  # the three laws coincide at k = 1
        rows = {}
        for dist in ("coupled", "nonlocal"):
            r, n_fit, n_all = _theory_fitted(g, fit, dist)
            rows[dist] = r
            if n_fit < MIN_FITTED_RUNS:
                out.append(_theory_gate(name, dist, n_fit, n_all))
                break
        else:
            both = pd.concat(rows.values())
            both = both[both["ratio"] == both["ratio"].max()]
            cells, point, boot = resample_accuracy(both, ["distribution"], s, "T1", name)
            i, j = list(cells).index("coupled"), list(cells).index("nonlocal")
            lo, hi = s.interval(boot[i] - boot[j])
            out.append(interval_result(name, point[i] - point[j], lo, hi, 0.0,
                                       note=f"Lbar/L = {both['ratio'].max()}: coupled - nonlocal"))
    return out or [gate_result("-", "no theory run with k >= 2", "theory.k or theory.gpt.k with values >= 2")]


def loss_slopes(losses: np.ndarray, ratios: np.ndarray, floor: float) -> np.ndarray:
    """Least-squares slope of log(log loss) on log(Lbar/L) for each row of ``losses``
    [..., ratios] (losses floored at ``floor``)."""
    x = np.log(ratios) - np.log(ratios).mean()
    y = np.log(np.maximum(losses, floor))
    return (y * x).sum(-1) / (x**2).sum()


def theory_local(runs: pd.DataFrame, s: Settings) -> list[Result]:
    """T2: on the local law, the error grows no faster than (Lbar/L)^2 (slope <= 2)."""
    fit, out = theory_fit(runs), []
    for (model, k), g in runs.groupby(["model", "k"], sort=True):
        name = f"{model} k={k}"
        rows, n_fit, n_all = _theory_fitted(g, fit, "local")
        if n_all == 0:
            continue
        if n_fit < MIN_FITTED_RUNS:
            out.append(_theory_gate(name, "local", n_fit, n_all))
            continue
        per_seed = rows.pivot_table(index="seed", columns="ratio", values="log_loss", aggfunc="mean")
        ratios, L = per_seed.columns.to_numpy(float), per_seed.to_numpy(float)
        draws = s.rng("T2", name).integers(0, len(L), size=(s.n_boot, len(L)))
        lo, hi = s.interval(loss_slopes(L[draws].mean(1), ratios, s.theory_floor))
        out.append(interval_result(name, float(loss_slopes(L.mean(0), ratios, s.theory_floor)), lo, hi, BOUND_SLOPE,
                                   above=False, note=f"slope of log(log loss) on log(Lbar/L), {n_fit} fitted runs"))
    return out or [gate_result("-", "no run on the local law", "add local to theory.distributions")]


# ----------------------------------------------------------------------------- the claims

CLAIMS: tuple[Claim, ...] = (
    Claim("P1", "parity", "Sparser tasks length-generalize better.",
          "length generalization occurs as long as each predicted token depends on a small (fixed) number of "
          "previous tokens",
          f"For every K_train, over the fitted k_test <= K_train (at least {MIN_RANK_CELLS}), at the longest "
          "evaluated length: Spearman's rho of accuracy against k_test < 0 (interval's upper end < 0).",
          parity_rank, "parity"),
    Claim("P2", "parity", "A trained sparsity generalizes to samples ten times longer.",
          "length generalization occurs as long as each predicted token depends on a small (fixed) number of "
          "previous tokens",
          f"For every K_train, at k_test = K_train and the longest evaluated length: (acc - 0.5) / (acc_in - 0.5), "
          f"acc_in on the training lengths, has an interval whose low end > {RETAINED}.",
          parity_retained, "parity"),
    Claim("P3", "parity", "Accuracy falls faster with length the larger k is.",
          "a key factor driving length generalization is a 'sparse' dependency structure of each token on the "
          "previous ones",
          f"For every K_train, over at least {MIN_RANK_CELLS} fitted k_test <= K_train: Spearman's rho of the "
          "normalised drop 1 - (acc - 0.5) / (acc_in - 0.5) against k_test > 0 (interval's low end > 0).",
          parity_denser_falls_faster, "parity"),
    Claim("C1", "ppc", "Position coupling generalizes where plain positions do not.",
          "our theoretical model justifies certain techniques to modify positional embeddings which have been "
          "introduced to improve length generalization, such as position coupling",
          "For every task, at the largest evaluated size: exact match of coupled (oracle ids) minus the best baseline "
          "that fits its training sizes, interval's low end > 0.",
          ppc_coupling, "ppc"),
    Claim("C2", "ppc", "Predictive Position Coupling makes coupling work where the ids depend on the input.",
          "Predictive Position Coupling thereby allows us to broaden the array of tasks to which position coupling "
          "can successfully be applied",
          "On every task whose coupled ids depend on the input and where coupling matters, at the largest size: ppc "
          f"minus the best fitted baseline > 0, and ppc minus coupled > -{ORACLE_TOLERANCE} (interval low ends).",
          ppc_predicts_ids, "ppc"),
    Claim("L1", "language", "A few distant tokens carry the long-context benefit.",
          "of the tokens in the longer context window, a small number of them can be used to predict the current "
          "token x_i nearly as well as all of the long-distance tokens",
          f"Given a long-context benefit (its interval by document > 0) and a passed positive control (greedy "
          f"k <= {SPARSE_K} recovers a median >= {SPARSE_SHARE} on >= {MIN_GROUP_TOKENS} planted repeats): the median "
          f"share recovered by the largest "
          f"greedy k <= {MAX_K} has an interval low end >= {MIN_RECOVERED}, and exceeds the null control's "
          "(greedy over another document's far context), interval low end > 0.",
          language_sparse_dependency, "language_sparsity", unit="doc", data="language"),
    Claim("L2", "language", "Tokens with sparse dependency generalize better from short-context training.",
          "To ensure nontrivial length generalization performance, we combined RoPE with PoSE",
          f"Given L1's two gates, for the PoSE model trained at the short context: its long-context gain normalised "
          f"by the reference's "
          f"benefit, on sparse tokens (greedy k <= {SPARSE_K} recovers {SPARSE_SHARE}) minus dense ones, interval "
          "(by document) low end > 0.",
          language_sparse_generalizes, "language_length", unit="doc", data="language"),
    Claim("T1", "theory", "Coupling removes the locality requirement of the length-generalization bound.",
          "a task-specific position ID re-assignment, Position Coupling, can resolve the issue",
          "For every (model, k >= 2) with fitted runs, at the largest Lbar/L: accuracy on the coupled law minus the "
          "non-local law, interval's low end > 0.",
          theory_coupling, "theory"),
    Claim("T2", "theory", "Local sparse planted correlations generalize with error growing at most like (Lbar/L)^2.",
          "we can decrease our overall error bound from O(eta_L eta_Lbar L Lbar^2 delta) to O((Lbar/L)^2 delta)",
          f"For every (model, k) on the local law with fitted runs: the slope of log(log loss) on log(Lbar/L) has an "
          f"interval whose upper end <= {BOUND_SLOPE}.",
          theory_local, "theory"),
)


# ----------------------------------------------------------------------------- checking


def resample_units(data, unit: str, draw: np.ndarray):
    """``data`` (a table, or a dict of tables) with the units ``draw`` (values of ``unit``,
    repeats allowed); a repeated unit gets a new label so it counts as another unit."""
    if isinstance(data, dict):
        return {name: resample_units(t, unit, draw) for name, t in data.items()}
    parts = [data[data[unit] == u].assign(**{unit: f"{u}#{i}" if unit != "seed" else i})
             for i, u in enumerate(draw)]
    return pd.concat(parts, ignore_index=True)


def units_of(data, unit: str) -> np.ndarray:
    table = next(iter(data.values())) if isinstance(data, dict) else data
    return np.array(sorted(table[unit].unique()))


def stability(claim: Claim, data, s: Settings, verdict: str) -> tuple[float, int]:
    """(share of resamples whose verdict differs from ``verdict``, number of resamples):
    leave-one-unit-out and bootstrap resamples of the units."""
    units = units_of(data, claim.unit)
    if len(units) < 2:
        return float("nan"), 0
    rng = s.rng("stability", claim.id)
    draws = [np.delete(units, i) for i in range(len(units))] if claim.unit == "seed" else []
    draws += [rng.choice(units, len(units)) for _ in range(STABILITY_REPLICATES)]
    small = replace(s, n_boot=STABILITY_BOOT)
    flips = [combine(claim.test(resample_units(data, claim.unit, d), small))[0] != verdict for d in draws]
    return float(np.mean(flips)), len(draws)


def check(data: dict, settings: Settings, claims=CLAIMS) -> pd.DataFrame:
    """One row per (claim, group) plus one ``group == "all"`` row per claim with its verdict,
    reason, stability and the figure that shows the evidence. ``data`` maps a slice name (or a
    claim's ``data`` name) to its tables; absent: the slice was not run."""
    rows = []
    for c in claims:
        table = data.get(c.data or c.slice)
        base = {"claim": c.id, "slice": c.slice, "statement": c.statement, "quote": c.quote,
                "criterion": c.criterion, "figure": c.figure}
        if table is None or (isinstance(table, pd.DataFrame) and table.empty):
            rows.append({**base, "group": "all", "verdict": NOT_RUN, "reason": f"the {c.slice} slice was not run",
                         "stability": np.nan, "resamples": 0})
            continue
        results = c.test(table, settings)
        verdict, reason = combine(results)
        share, n = stability(c, table, settings, verdict)
        if verdict != INCONCLUSIVE and share > UNSTABLE:
            verdict, reason = INCONCLUSIVE, (f"unstable: the verdict ({verdict}) changes in {share:.0%} of {n} "
                                             f"resamples of the {c.unit}s; {reason}")
        resolve = "; ".join(dict.fromkeys(r.resolve for r in results if r.resolve and r.verdict != HOLDS))
        if verdict == INCONCLUSIVE and reason.startswith("unstable"):
            resolve = "; ".join(filter(None, ["more seeds (a second seed set: seed_offset)", resolve]))
        head = results[0] if len(results) == 1 else None
        rows.append({**base, "group": "all", "verdict": verdict, "reason": reason, "resolve": resolve,
                     "stability": share, "resamples": n,
                     "value": head.value if head else np.nan, "ci_low": head.ci_low if head else np.nan,
                     "ci_high": head.ci_high if head else np.nan})
        rows.extend({**base, **r.__dict__} for r in results)
    return pd.DataFrame(rows)


def evidence(rows: pd.DataFrame) -> str:
    """A claim's groups in one line: ``K_train=4: -0.90 [-1.00, -0.70] holds; ...``."""
    return "; ".join((f"{r.group}: " if r.group != "-" else "") + fmt_value(r)
                     for r in rows[rows["group"] != "all"].itertuples())


def fmt_value(r) -> str:
    if pd.isna(r.value):
        return r.verdict
    ci = "" if pd.isna(r.ci_low) else f" [{r.ci_low:.2f}, {r.ci_high:.2f}]"
    return f"{r.value:.2f}{ci} {r.verdict}"

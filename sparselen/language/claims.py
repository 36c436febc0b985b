"""The natural-language slice's claims (L1, L2): criteria, constants and gates, tested on the
per-token tables of the analysed model (docs/reconstruction.md, "Claims"). Their unit of
resampling is the document; L2's unit of replication is the training seed, its interval by
betting over seeds (``sparselen.statistics.betting``) on a seed's value capped to
``GAIN_RANGE``."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparselen.language.adjusted import swapped_in_pairs, within_difference, within_shuffled
from sparselen.language.sparsity import SPARSE_K, TOKEN, token_sparsity
from sparselen.statistics import betting, power
from sparselen.statistics.stats import ClusterBootstrap, weighted_mean, weighted_median
from sparselen.statistics.verdicts import (FAILS, HOLDS, INCONCLUSIVE, Claim, Result, Settings, both, decide,
                                           gate_result, verdict_result)

READS = ("screen", "deps", "transfer")  # per-token tables (RUN_TABLES["language"] in the rules)

# Criteria (docs/reconstruction.md, "Claims").
MIN_RECOVERED = 0.5  # L1: "nearly as well" read as at least half of the benefit, by the median token
MAX_K = 16  # L1: the largest k of the paper's sweep (language.analysis.k)
MIN_GROUP_TOKENS = 20  # L2 and the positive control: fewer tokens in a group is not tested
SHUFFLES = 1000  # L2's null: the sparsity labels swapped within pairs of tokens of adjacent benefit
MIN_SEEDS = 2  # L2: training seeds, each a reference analysed and a PoSE model (another seed's benefit normalises)
# L2: a seed's sparse - dense normalised gain as tested, capped at the whole benefit either way (a
# normalised gain is the share of the benefit a token recovers), so that its bound holds for any
# spread of the seeds
GAIN_RANGE = (-1.0, 1.0)


def facts(section: dict) -> dict:
    """What the tests need of the config run (``language``): the share of a token's benefit
    that makes it sparse (``sparselen.language.sparsity``), and the benefit a token needs to be
    analysed (L2 asks it of the other seed's benefit too)."""
    a = section["analysis"]
    return {"sparse_share": a["sparse_fraction"], "min_benefit": a["min_benefit"]}


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
                       "run the null control (language.analysis.null_control)", tested=False)]
    y = null["recovered"].to_numpy(float)
    ex, ex_lo, ex_hi = boot.interval(float(np.median(x) - np.median(y)),
                                     med_boot - weighted_median(y, boot.weights(null["doc"])))
    verdict = both(decide(lo, hi, MIN_RECOVERED), decide(ex_lo, ex_hi, 0.0))
    note = (f"{far}: median recovered {med:.2f} [{lo:.2f}, {hi:.2f}] (needs >= {MIN_RECOVERED}); minus the null "
            f"control {ex:.2f} [{ex_lo:.2f}, {ex_hi:.2f}] (needs > 0); {gate.reason}")
    control = planted_control(deps, s)
    if control.verdict != HOLDS:
        return [gate_result(f"greedy k={k}", f"{control.reason}; so greedy's shares are not read ({note})",
                            control.resolve)]
    return [verdict_result(f"greedy k={k}", med, lo, hi, verdict, f"{note}; {control.reason}")]


NO_COPY = ("a model that copies from beyond the short window (the analysis's induction table): more training "
           "tokens or a larger model (configs/paper.yaml)")


def planted_control(deps: pd.DataFrame, s: Settings) -> Result:
    """The positive control, a precondition of reading greedy's shares (L1, L2): on planted
    repeats, whose answer is one far token, greedy k <= SPARSE_K recovers a median of at least
    the sparse share of the benefit, over at least MIN_GROUP_TOKENS repeats with a benefit."""
    share = s.facts["sparse_share"]
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
              f"[{lo:.2f}, {hi:.2f}] (needs >= {share})")
    if med < share:
        return gate_result("planted", reason, "a greedy search that finds the copied token: " + NO_COPY)
    return Result("planted", med, lo, hi, HOLDS, reason)


def short_pose(transfer: pd.DataFrame) -> tuple[int, pd.DataFrame]:
    """The PoSE model trained at the short context L2 reads: (that context, its token rows)."""
    short = transfer["context"].min()
    return short, transfer[(transfer["context"] == short) & (transfer["scheme"] == "pose")]


def with_sparsity(tokens: pd.DataFrame, deps: pd.DataFrame, s: Settings) -> pd.DataFrame:
    """``tokens`` with greedy's sparsity label (and the reference's benefit) of each."""
    return tokens.merge(token_sparsity(deps, s.facts["sparse_share"]), on=TOKEN)


def other_benefit(screen: pd.DataFrame, seed, seeds: list) -> tuple[object, pd.DataFrame]:
    """(the reference seed after ``seed`` in ``seeds``, cyclically; its benefit on every token it
    screened, as ``benefit``): a measurement of each token's benefit independent of the one
    that labels its sparsity."""
    other = seeds[(seeds.index(seed) + 1) % len(seeds)]
    return other, screen.loc[screen["seed"] == other, ["doc", "t", "benefit"]]


def language_sparse_generalizes(data: dict, s: Settings) -> list[Result]:
    """L2: for the PoSE model trained at the short context, the long-context gain normalised by
    the benefit is larger on sparse tokens than on dense ones of the same document at equal
    benefit, on each training seed: the sparse label from that seed's reference model, the
    benefit that normalises and adjusts from another seed's (``other_benefit``), so that one
    measurement's noise does not enter both sides. The seeds' mean, each seed's value capped to
    GAIN_RANGE, has an interval by betting over seeds moved out by the documents' resampling
    (shared by every seed), and is larger than with the labels swapped within pairs of tokens of
    adjacent benefit."""
    gate = language_benefit(data["screen"], s)
    if gate.verdict != HOLDS:
        return [gate]
    short, model = short_pose(data["transfer"])
    if model.empty:
        return [gate_result("pose", "no PoSE model trained at the short context", "add pose to language.schemes.short")]
    control = planted_control(data["deps"], s)
    if control.verdict != HOLDS:
        return [gate_result("pose", f"{control.reason}; so greedy's sparsity labels are not read", control.resolve)]
    screen = data["screen"]
    refs = sorted(set(screen["seed"]) & set(data["deps"]["seed"]))
    seeds = sorted(set(model["seed"]) & set(refs))
    group = f"pose, context {short}"
    if len(seeds) < MIN_SEEDS or len(refs) < 2:
        return [gate_result(group, f"{len(seeds)} training seed(s) with a PoSE model and an analysed reference "
                            f"(needs {MIN_SEEDS}: the benefit that normalises the gain is another seed's reference, "
                            "and the seeds' spread enters the interval)", "run two or more seeds (language.seeds)")]
    boot = ClusterBootstrap(screen["doc"], s, "L2")
    values, reps, nulls, counts = [], [], [], []
    for seed in seeds:
        other, benefit = other_benefit(screen, seed, refs)
        tokens = with_sparsity(model[model["seed"] == seed], data["deps"], s).merge(benefit, on=["doc", "t"])
        tokens = tokens[tokens["benefit"] >= s.facts["min_benefit"]]
        sparse = tokens["sparse"].to_numpy(bool)
        mixed = tokens.groupby("doc")["sparse"].transform("nunique").to_numpy() > 1
        n_sparse, n_dense = int((sparse & mixed).sum()), int((~sparse & mixed).sum())
        counts.append(f"seed {seed} (benefit from seed {other}): {n_sparse} vs {n_dense}")
        if min(n_sparse, n_dense) < MIN_GROUP_TOKENS:
            return [gate_result(group, f"seed {seed}: {n_sparse} sparse and {n_dense} dense tokens in documents "
                                f"that have both, with seed {other}'s benefit >= {s.facts['min_benefit']} (needs "
                                f"{MIN_GROUP_TOKENS} each)", "analyse more tokens (language.analysis.tokens)")]
        b = tokens["benefit"].to_numpy(float)
        x = tokens["gain"].to_numpy(float) / b
        doc = tokens["doc"].to_numpy()
        values.append(float(within_difference(x, sparse, b, doc)[0]))
        reps.append(within_difference(x, sparse, b, doc, boot.weights(doc)))
        shuffled = swapped_in_pairs(sparse, b, SHUFFLES, s.rng("L2", "shuffled", seed))
        nulls.append(within_shuffled(x, shuffled, b, doc))
    documents = np.nanvar(np.mean(reps, axis=0))  # every seed's tokens are of the same documents
    capped = np.clip(values, *GAIN_RANGE)
    value, lo, hi = betting.interval(capped, GAIN_RANGE, s.level, noise=[documents])
    null_lo, null_hi = np.quantile(np.mean(nulls, axis=0), [0.025, 0.975])
    # the shuffles are a condition for holding, not evidence against: their spread is the labels'
    # alone, narrower than the seeds', so a mean below them does not show the claim false
    beyond_null = HOLDS if value > null_hi else INCONCLUSIVE
    note = (f"sparse minus dense normalised gain within documents at equal benefit, mean of {len(values)} seeds "
            f"({', '.join(f'{v:+.3f}' for v in values)}; each capped to [{GAIN_RANGE[0]:g}, {GAIN_RANGE[1]:g}], the "
            f"interval by betting over seeds moved out by the documents' resampling, sd {np.sqrt(documents):.3f}); sparse vs dense tokens in documents with both: "
            f"{'; '.join(counts)}; labels swapped within pairs of adjacent benefit: 95% of shuffles in "
            f"[{null_lo:+.3f}, {null_hi:+.3f}]")
    return [verdict_result(group, value, lo, hi, both(decide(lo, hi, 0.0), beyond_null), note)]


def _design(section: dict, claim: str) -> str:
    """"" when the config runs what the claim reads: the controls (L1, L2), the null control (L1),
    a PoSE model at the short context on seeds that give L2 its power at the assumed spread (L2)."""
    a = section["analysis"]
    if not a["planted"]["tokens"]:
        return "no positive control (language.analysis.planted.tokens = 0)"
    if claim == "L1" and not a["null_control"]:
        return "no null control (language.analysis.null_control)"
    if claim == "L2" and "pose" not in section["schemes"]["short"]:
        return "no PoSE model at the short context"
    if claim == "L2" and len(section["seeds"]) < MIN_SEEDS:
        return (f"{len(section['seeds'])} language seed (L2 needs {MIN_SEEDS}: another seed's reference measures the "
                "benefit, and the seeds' spread enters the interval)")
    if claim == "L2" and _power(section) < power.TARGET:
        need = power.seeds_needed("L2", 1, a["tokens"])
        return (f"{len(section['seeds'])} language seeds give {_power(section):.0%} power at the assumed spread"
                + (f"; about {need} needed" if need else ""))
    return ""


def _power(section: dict) -> float:
    """L2's power at the assumed effect and spread (``power.SPREADS``), at the config's seeds and
    analysed tokens."""
    return power.claim_power("L2", len(section["seeds"]), 1, section["analysis"]["tokens"])


# A criterion's {sparse_share} is the config's share, filled in when the claims are checked.
CLAIMS = (
    Claim("L1", "language", "A few distant tokens carry the long-context benefit.",
          "of the tokens in the longer context window, a small number of them can be used to predict the current "
          "token x_i nearly as well as all of the long-distance tokens",
          f"Given a long-context benefit (its interval by document > 0) and a passed positive control (greedy "
          f"k <= {SPARSE_K} recovers a median >= {{sparse_share}} on >= {MIN_GROUP_TOKENS} planted repeats): the "
          f"median share recovered by the largest greedy k <= {MAX_K} has an interval low end >= {MIN_RECOVERED}, and "
          "exceeds the null control's (greedy over another document's far context), interval low end > 0.",
          language_sparse_dependency, "language_sparsity", lambda section: _design(section, "L1"), unit="doc"),
    Claim("L2", "language", "Tokens with sparse dependency generalize better from short-context training.",
          "a key factor driving length generalization is a 'sparse' dependency structure of each token on the "
          "previous ones",
          f"Given L1's two gates and at least {MIN_SEEDS} training seeds, for the PoSE model trained at the short "
          "context, on each seed: its long-context gain normalised by the benefit, on sparse tokens (greedy k <= "
          f"{SPARSE_K} on that seed's reference recovers {{sparse_share}}) minus dense ones of the same document at "
          "equal benefit (the coefficient of the sparse label in a least-squares fit of the normalised gain on it, a "
          "restricted cubic spline of log benefit, 5 knots, and a fixed effect per document), the benefit that "
          "normalises and adjusts measured by the next seed's reference (tokens where it is >= the analysis's "
          f"min_benefit); the mean over seeds of that value capped to [{GAIN_RANGE[0]:g}, {GAIN_RANGE[1]:g}] has a 95% interval low end > 0 (by betting "
          "over seeds, valid for any spread of the seeds' values in that range, moved out by the documents' "
          "resampling, which every seed shares), and lies above 97.5% of the "
          f"same mean with the labels swapped at random within pairs of tokens of adjacent benefit ({SHUFFLES} "
          "shuffles); it does not hold where the interval's high end is < 0 (the shuffles only hold a verdict "
          "back).",
          language_sparse_generalizes, "language_length", lambda section: _design(section, "L2"), unit="doc",
          power=_power, stability_rule=False),
)

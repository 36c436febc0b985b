"""The certifying nulls (``sparselen.calibration``, kind ``CERTIFYING``): for each condition a
claim's verdict tests, tables where that condition's true value sits exactly at its threshold
and every other condition clearly holds, so that any "holds" is a false one and the rate is the
criterion's own at its boundary. They are kept apart from the counterexamples the criteria were
developed on (``sparselen.calibration.scenarios``); the verdict lines cite the worst of them.

Each condition in two per-seed forms, both with the mean at the threshold:

- **normal seeds**: a run's value drawn around the threshold with the spread measured here;
- **bimodal seeds**: most seeds succeed, a share ``FAIL_SHARE`` fail (a run that fit and did not
  generalize), the successes placed so that the mean is at the threshold. With n seeds, none
  fails with probability (1 - FAIL_SHARE)^n, and the seeds then agree on a value above it.

In both, every run of a cell is scored on one evaluation item set (``shared_items``): the set's
draw moves the accuracy of every run of a (scheme or law, cell) by one deviation, of the
binomial size its n samples give, which the runs' spread cannot show. Where a claim compares
measured quantities (P1, P3: the in-distribution difficulty of a denser k_test; L2: a document
factor and a benefit measured with noise), the confounder is in the null too.

Sizes: each config's seeds per group (PPC's, parity's, the GPT's and the idealized model's
``theory.sfa_seeds``, the language seeds), evaluation samples and analysed tokens; a claim
decided on several groups is put at the threshold on the one with the fewest seeds, the others
clearly holding (every group must hold, so this is its worst null)."""

from __future__ import annotations

import numpy as np

from sparselen.calibration import CERTIFYING, DEVELOPED, FALSE, KINDS, Scenario, Sizes
from sparselen.calibration.scenarios import (C1_TASK, C2_TASK, FITS, HARDER_IN_DISTRIBUTION, PARITY_K, TOKENS_PER_DOC,
                                             chance, failing, normal, scenarios)
from sparselen.calibration.tables import parity_runs, ppc_runs, replicated_language_tables, theory_runs
from sparselen.parity import claims as parity_claims
from sparselen.ppc import claims as ppc_claims

FAIL_SHARE = 0.14  # bimodal seeds: the share that fail
NORMAL, BIMODAL = "normal seeds", "bimodal seeds"
FORMS = (NORMAL, BIMODAL)
PPC_SD = 0.11  # the tested scheme's spread over seeds at the largest size (pointer_copy, configs/README.md)
OTHER_SD = 0.05  # the scheme it is compared with: a narrower spread, the harder null for a difference


def success_level(mean: float, failed: float) -> float:
    """Bimodal seeds: the value of the seeds that do not fail, so that the mean is ``mean`` with
    ``failed`` on FAIL_SHARE of them."""
    return (mean - FAIL_SHARE * failed) / (1 - FAIL_SHARE)


def at(mean: float, sd: float, failed: float, form: str):
    """A run's value, mean ``mean``: normal (sd ``sd``) or bimodal (``failed`` on FAIL_SHARE of
    the seeds, the rest at ``success_level``)."""
    return normal(mean, sd) if form == NORMAL else failing(success_level(mean, failed), failed, FAIL_SHARE)


def shared_items(n: int, rng: np.random.Generator):
    """The one evaluation item set every run of a cell is scored on: ``moved(key, a)`` is a run's
    accuracy ``a`` moved by the set's deviation for cell ``key`` (one standard normal per key,
    scaled to the binomial sd of n samples at a)."""
    z = {}

    def moved(key, a: float) -> float:
        if key not in z:
            z[key] = rng.normal()
        p = min(1.0, max(0.0, a))
        return a + z[key] * np.sqrt(p * (1 - p) / n)

    return moved


def name_of(claim: str, condition: str, form: str) -> str:
    return f"at the threshold: {condition}, {form}, one item set for all runs"


# ----------------------------------------------------------------------------- PPC


def ppc_null(claim: str, condition: str, form: str, task: str, levels) -> Scenario:
    """``levels(sizes, form)``: scheme -> draw of a run's exact match at the largest size; every
    run fits its training sizes (FITS); one item set per (scheme, size)."""
    def draw(sizes: Sizes, rng: np.random.Generator):
        section = sizes.ppc_tasks[task]
        lo, hi = section["train_sizes"]
        largest = max(section["eval_sizes"])
        level = levels(sizes, form)
        moved, runs = shared_items(sizes.ppc_n, rng), {}

        def acc(_, scheme, size, seed):
            if size != largest:
                return moved((scheme, size), FITS)
            if (scheme, seed) not in runs:
                runs[scheme, seed] = level[scheme](rng)
            return moved((scheme, size), runs[scheme, seed])

        evals = ppc_runs(acc, tasks=(task,), schemes=tuple(level), seeds=tuple(range(sizes.ppc_seeds)), sd=0,
                         n=sizes.ppc_n, sizes=(lo, hi, largest), rng=rng)
        return {"ppc": {"evals": evals}}, {"ppc": ppc_claims.facts({"tasks": [task], task: section})}

    return Scenario(claim, name_of(claim, condition, form), FALSE, draw, CERTIFYING, condition, form)


def kept_level(task: str, sizes: Sizes, share: float) -> float:
    """The exact match at the largest size that keeps ``share`` of a fitted run's margin above chance."""
    c = chance(task, sizes)
    return c + share * (FITS - c)


def c1(form: str) -> list[Scenario]:
    t = C1_TASK
    top = 0.7  # coupled = pose: their difference at 0, coupled's kept margin clearly above 0.5
    return [
        ppc_null("C1", "coupled - best baseline > 0 (at 0)", form, t, lambda sizes, f: {
            "nope": normal(0.0), "pose": at(top, OTHER_SD, 0.0, NORMAL), "coupled": at(top, PPC_SD, 0.0, f),
            "ppc": at(top, OTHER_SD, 0.0, NORMAL)}),
        ppc_null("C1", "coupled's kept margin > 0.5 (at 0.5)", form, t, lambda sizes, f: {
            "nope": normal(0.0), "pose": normal(0.0), "ppc": normal(0.0),
            "coupled": at(kept_level(t, sizes, 0.5), PPC_SD, chance(t, sizes), f)}),
    ]


def c2(form: str) -> list[Scenario]:
    """On parity_scratchpad (exact-match chance 0.23 at its largest size): a failed ppc seed is
    at chance."""
    t = C2_TASK
    return [
        ppc_null("C2", "ppc - best baseline > 0 (at 0)", form, t, lambda sizes, f: {
            "nope": normal(0.0), "pose": at(0.8, OTHER_SD, 0.0, NORMAL), "coupled": at(0.8, OTHER_SD, 0.0, NORMAL),
            "ppc": at(0.8, PPC_SD, chance(t, sizes), f)}),
        ppc_null("C2", "ppc - coupled > -0.1 (at -0.1)", form, t, lambda sizes, f: {
            "nope": normal(0.0), "pose": at(0.3, OTHER_SD, 0.0, NORMAL), "coupled": at(0.9, OTHER_SD, 0.0, NORMAL),
            "ppc": at(0.8, PPC_SD, chance(t, sizes), f)}),
        ppc_null("C2", "ppc's kept margin > 0.5 (at 0.5)", form, t, lambda sizes, f: {
            "nope": normal(0.0), "pose": normal(0.0),
            "coupled": at(kept_level(t, sizes, 0.5), OTHER_SD, 0.0, NORMAL),
            "ppc": at(kept_level(t, sizes, 0.5), PPC_SD, chance(t, sizes), f)}),
    ]


# ----------------------------------------------------------------------------- sparse parity


def parity_null(claims: tuple, condition: str, form: str, kept, fits=lambda k: FITS) -> list[Scenario]:
    """Sparse parity at K_train = PARITY_K on the config's lengths, seeds and samples, as
    ``scenarios.parity``: ``kept(k, seed_failed, rng)`` is a run's margin kept at the longest
    length (``seed_failed``: the seed is one of the bimodal form's failures, on every k_test);
    ``fits(k)`` its accuracy on the training lengths; one item set per (k_test, length)."""
    def draw(sizes: Sizes, rng: np.random.Generator):
        section = sizes.sections["parity"]
        lo, hi = section["train"]["lengths"]
        lengths = tuple(section["eval"]["lengths"])
        span = np.log(max(lengths) / hi)
        moved, kept_by, failed = shared_items(sizes.parity_n, rng), {}, {}

        def acc(K, k, length, seed):
            if k > K:
                return moved((k, length), 0.5)
            if length <= hi:
                return moved((k, length), fits(k))
            if seed not in failed:
                failed[seed] = form == BIMODAL and rng.random() < FAIL_SHARE
            if (k, seed) not in kept_by:
                kept_by[k, seed] = kept(k, failed[seed], rng)
            share = 1 - (1 - kept_by[k, seed]) * np.log(length / hi) / span
            return moved((k, length), 0.5 + (fits(k) - 0.5) * share)

        runs = parity_runs(acc, seeds=tuple(range(sizes.parity_seeds)), n=sizes.parity_n, lengths=lengths,
                           K_train=(PARITY_K,), sd=0, rng=rng)
        return {"parity": {"evals": runs}}, {"parity": parity_claims.facts(section)}

    return [Scenario(c, name_of(c, condition, form), FALSE, draw, CERTIFYING, condition, form) for c in claims]


P2_SD = 0.28  # the retained margin's spread over seeds at k_test = K_train (parity K_train = 3, configs/README.md)
SAME_SD = 0.1  # P1, P3: every k_test keeps the same share of its margin, 0.75 +- this per run


def p_claims(form: str) -> list[Scenario]:
    success = (0.5 - FAIL_SHARE * 0.0) / (1 - FAIL_SHARE)

    def p2_kept(k, failed, rng):
        if k != PARITY_K:
            return 0.75
        if form == NORMAL:
            return 0.5 + rng.normal(0, P2_SD)
        return 0.0 if failed else success

    def same(k, failed, rng):  # a failed seed keeps nothing on every k_test: its rank is noise
        return 0.0 if failed else 0.75 + rng.normal(0, SAME_SD)

    return [*parity_null(("P1",), "rho of kept margin against k_test < 0 (at 0), denser k_test harder in "
                         "distribution", form, same, fits=HARDER_IN_DISTRIBUTION.get),
            *parity_null(("P3",), "rho of fall rate against k_test > 0 (at 0), denser k_test harder in "
                         "distribution", form, same, fits=HARDER_IN_DISTRIBUTION.get),
            *parity_null(("P2",), "kept margin at k_test = K_train > 0.5 (at 0.5)", form, p2_kept)]


# ----------------------------------------------------------------------------- theory

THEORY_SHARED_SD = 0.05  # the shared sample set's factor on the log loss at each ratio
T1_SD = 0.09  # coupled's accuracy at the largest Lbar over GPT seeds (half the difference's 0.18, configs/README.md)
T2_SD = 0.065  # the growth exponent's spread over runs (power.SPREADS["T2"])
KEPT_SD = 0.1  # the local law's accuracy at the largest Lbar over seeds, T2's kept-margin null
FIT_AT_L = 0.98


def theory_null(claim: str, condition: str, form: str, at_threshold: str, acc, loss) -> Scenario:
    """The theory runs at k = 2 on the config's ratios and samples, the idealized model on
    ``theory.sfa_seeds``, the GPT (where the config runs it at k >= 2) on ``theory.seeds``:
    ``acc(model, dist, ratio, own)`` and ``loss(model, dist, ratio, own)``, ``own`` the run's
    draw of ``form`` (model ``at_threshold``'s runs only: the others' is None); one sample set
    per (law, ratio) for accuracy and log loss."""
    def draw(sizes: Sizes, rng: np.random.Generator):
        section = sizes.sections["theory"]
        models = ("sfa", "gpt") if max(section["gpt"]["k"], default=0) >= 2 else ("sfa",)
        seeds = {"sfa": tuple(range(sizes.sfa_seeds or sizes.theory_seeds)), "gpt": tuple(range(sizes.theory_seeds))}
        moved, own = shared_items(sizes.theory_n, rng), {}

        def draw_own(model, dist, seed):
            if model != at_threshold:
                return None
            if (model, dist, seed) not in own:
                own[model, dist, seed] = rng.random() < FAIL_SHARE if form == BIMODAL else rng.normal()
            return own[model, dist, seed]

        def run_acc(model, dist, seed, ratio):
            return moved((dist, ratio), acc(model, dist, ratio, draw_own(model, dist, seed)))

        def run_loss(model, dist, seed, ratio):
            return loss(model, dist, ratio, draw_own(model, dist, seed))

        runs = theory_runs(run_acc, run_loss, seeds=seeds, n=sizes.theory_n, ratios=tuple(section["eval"]["ratios"]),
                           length=section["train"]["lengths"][0], rng=rng, models=models, shared=THEORY_SHARED_SD,
                           per_run=True)
        return {"theory": {"evals": runs}}, {"theory": {"floor": section["floor"]}}

    return Scenario(claim, name_of(claim, condition, form), FALSE, draw, CERTIFYING, condition, form)


def two_point(own, mean: float, sd: float, failed: float, form: str) -> float:
    """A run's value from its draw ``own`` (a standard normal, or whether the seed failed)."""
    if form == NORMAL:
        return mean + sd * own
    return failed if own else success_level(mean, failed)


def t_claims(form: str) -> list[Scenario]:
    def t1_acc(model, dist, ratio, own):
        if ratio == 1:
            return FIT_AT_L
        if dist == "nonlocal":
            return 0.5
        local = 0.9
        if dist == "coupled" and own is not None:
            return two_point(own, local - 0.1, T1_SD, 0.5, form)
        return local

    def t2_growth_loss(model, dist, ratio, own):
        b = 1.0 if own is None or dist != "local" else two_point(own, 2.0, T2_SD, 2.5, form)
        return 1e-3 * ratio**b

    def t2_kept_acc(model, dist, ratio, own):
        if ratio == 1:
            return FIT_AT_L
        if own is None or dist != "local":
            return FIT_AT_L
        return two_point(own, 0.5 + 0.5 * (FIT_AT_L - 0.5), KEPT_SD, 0.5, form)

    plain_loss = lambda model, dist, ratio, own: 1e-3 * ratio  # noqa: E731
    steady = lambda model, dist, ratio, own: FIT_AT_L  # noqa: E731
    return [theory_null("T1", "coupled - local accuracy at the largest Lbar > -0.1 (at -0.1), GPT", form, "gpt",
                        t1_acc, plain_loss),
            theory_null("T2", "growth exponent < 2 (at 2), idealized model", form, "sfa", steady, t2_growth_loss),
            theory_null("T2", "local law's kept margin > 0.5 (at 0.5), idealized model", form, "sfa", t2_kept_acc,
                        plain_loss)]


# ----------------------------------------------------------------------------- language

L2_SD = 0.05  # the sparse - dense gain between training seeds (power.SPREADS["L2"])
L2_FAILED = -0.3  # bimodal: a seed whose sparse tokens gain this x their benefit less


def l2(form: str) -> list[Scenario]:
    """Sparse tokens gain nothing more, on average over training seeds (a seed's lift normal
    around 0, or bimodal), with both confounders (a document factor, sd 0.15, that raises recovery
    and the gain; each reference measuring the benefit with noise, sd 0.1 nats); every seed
    analyses the same documents."""
    if form == NORMAL:
        def lift(rng):
            return rng.normal(0, L2_SD)
    else:
        success = -FAIL_SHARE * L2_FAILED / (1 - FAIL_SHARE)

        def lift(rng):
            return L2_FAILED if rng.random() < FAIL_SHARE else success

    def draw(sizes: Sizes, rng: np.random.Generator):
        docs = max(2, round(sizes.tokens / TOKENS_PER_DOC))
        data = replicated_language_tables(seeds=sizes.language_seeds, docs=docs, per_doc=TOKENS_PER_DOC,
                                          seed=int(rng.integers(2**31)), doc_sd=0.15, benefit_noise=0.1, lift=lift)
        return data, {"language": {"sparse_share": 0.9, "min_benefit": 0.5}}

    condition = "sparse - dense normalised gain > 0 (at 0), document factor and noisy benefit"
    return [Scenario("L2", name_of("L2", condition, form), FALSE, draw, CERTIFYING, condition, form)]


MAKERS = (c1, c2, p_claims, t_claims, l2)


def thresholds(claims=None) -> list[Scenario]:
    """Every certifying null, or those of ``claims`` (ids)."""
    return [s for form in FORMS for make in MAKERS for s in make(form) if claims is None or s.claim in claims]


def catalog(claims=None, kinds=KINDS) -> list[Scenario]:
    """The scenarios of ``kinds`` (developed-on: ``scenarios.scenarios``; certifying: these), or
    those of ``claims`` (ids)."""
    return ((scenarios(claims) if DEVELOPED in kinds else [])
            + (thresholds(claims) if CERTIFYING in kinds else []))

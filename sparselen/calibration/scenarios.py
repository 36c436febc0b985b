"""The known truths each claim is calibrated on (``sparselen.calibration``): per claim, tables
where it is false (no effect, models at chance, models that did not fit, the failure modes its
criterion must not credit) and where it is true (the effect the paper states, or the one
measured here, at the spread measured here: configs/README.md, "Seed power").

Every draw is one experiment at a config's sizes: its seeds, its evaluation samples (binomial
counts), its analysed tokens. A run's accuracy at the largest size is drawn per seed around the
scenario's mean with its spread over seeds; on the training sizes every run fits (0.99) unless
the scenario says otherwise."""

from __future__ import annotations

import numpy as np

from sparselen.calibration import FALSE, TRUE, Scenario, Sizes
from sparselen.calibration.tables import (parity_runs, ppc_runs, replicated_language_tables,
                                          shared_denominator_tables, theory_runs)
from sparselen.parity import claims as parity_claims
from sparselen.ppc import claims as ppc_claims
from sparselen.ppc.tasks import sampler_params, task_module

FITS, UNFIT = 0.99, 0.8  # a run's exact match on its training sizes: fits (>= 0.9), does not


def normal(mean: float, sd: float = 0.0):
    """A run's accuracy at the largest size: mean +- sd over seeds (clipped to [0, 1] by the counts)."""
    return lambda rng: mean + (rng.normal(0, sd) if sd else 0.0)


def failing(mean: float, failed_at: float, rate: float):
    """``mean`` on most seeds, ``failed_at`` on a share ``rate`` of them (a run that fit and did
    not generalize)."""
    return lambda rng: failed_at if rng.random() < rate else mean


def chance(task: str, sizes: Sizes) -> float:
    """The task's exact-match chance level at its largest size, from its module."""
    section = sizes.ppc_tasks[task]
    return task_module(task).chance_exact_match(max(section["eval_sizes"]), **sampler_params(section))


def ppc(claim: str, name: str, truth: str, task: str, levels, fit: dict | None = None) -> Scenario:
    """A PPC scenario on ``task`` at a config's sizes: ``levels`` (scheme -> draw of a run's
    accuracy at the largest size, or a function of the sizes giving one), ``fit`` (scheme ->
    exact match on the training sizes, FITS by default)."""
    def draw(sizes: Sizes, rng: np.random.Generator):
        section = sizes.ppc_tasks[task]
        lo, hi = section["train_sizes"]
        largest = max(section["eval_sizes"])
        at = {sc: lv(sizes) if getattr(lv, "by_sizes", False) else lv for sc, lv in levels.items()}
        runs = {}

        def acc(_, scheme, size, seed):
            if size != largest:
                return (fit or {}).get(scheme, FITS)
            if (scheme, seed) not in runs:
                runs[scheme, seed] = at[scheme](rng)
            return runs[scheme, seed]

        evals = ppc_runs(acc, tasks=(task,), schemes=tuple(levels), seeds=tuple(range(sizes.ppc_seeds)), sd=0,
                         n=sizes.ppc_n, sizes=(lo, hi, largest), rng=rng)
        return {"ppc": {"evals": evals}}, {"ppc": ppc_claims.facts({"tasks": [task], task: section})}

    return Scenario(claim, name, truth, draw)


def by_sizes(f):
    """Marks a level that depends on the config's sizes (e.g. the task's chance level)."""
    f.by_sizes = True
    return f


# The spreads measured here (configs/README.md, "Seed power"): pointer_copy over 16 seeds,
# coupled 0.95 (sd 0.11), ppc 0.68 (0.11), pose 0.62 (0.29); copy_repeat, oracle coupling at 1.00
# against baselines at 0.00, failing to generalize on 1 seed in 12 (0.025).
C1_TASK, C2_TASK = "copy_repeat", "parity_scratchpad"
BELOW_CHANCE = 0.05  # a baseline's exact match when its format breaks at length


def c1() -> list[Scenario]:
    t = C1_TASK
    return [
        ppc("C1", "no effect: coupled = pose, 0.60 (sd 0.11)", FALSE, t,
            {"nope": normal(0.0), "pose": normal(0.6, 0.11), "coupled": normal(0.6, 0.11), "ppc": normal(0.6, 0.11)}),
        ppc("C1", "coupled does not generalize: 0.03, baselines 0.00", FALSE, t,
            {"nope": normal(0.0), "pose": normal(0.0), "coupled": normal(0.03, 0.01), "ppc": normal(0.03, 0.01)}),
        ppc("C1", "coupled did not fit its training sizes", FALSE, t,
            {"nope": normal(0.0), "pose": normal(0.0), "coupled": normal(0.95, 0.05), "ppc": normal(0.9)},
            fit={"coupled": UNFIT}),
        ppc("C1", "measured on copy_repeat: coupled 1.00 (0.025 on 1 seed in 12), baselines 0.00", TRUE, t,
            {"nope": normal(0.0), "pose": normal(0.0), "coupled": failing(1.0, 0.025, 1 / 12), "ppc": normal(1.0)}),
        ppc("C1", "measured on pointer_copy: coupled 0.95 (sd 0.11), pose 0.62 (sd 0.29)", TRUE, t,
            {"nope": normal(0.0), "pose": normal(0.62, 0.29), "coupled": normal(0.95, 0.11),
             "ppc": normal(0.68, 0.11)}),
    ]


def c2() -> list[Scenario]:
    t = C2_TASK
    at_chance = by_sizes(lambda sizes: normal(chance(t, sizes), 0.02))
    return [
        ppc("C2", "no effect: ppc = coupled = pose, 0.90 (sd 0.05)", FALSE, t,
            {"nope": normal(0.0), "pose": normal(0.9, 0.05), "coupled": normal(0.9, 0.05), "ppc": normal(0.9, 0.05)}),
        ppc("C2", "at chance: ppc and coupled at the task's chance level, baselines below it (0.05)", FALSE, t,
            {"nope": normal(BELOW_CHANCE), "pose": normal(BELOW_CHANCE), "coupled": at_chance, "ppc": at_chance}),
        ppc("C2", "measured on pointer_copy: ppc 0.68, coupled 0.95 (sd 0.11), pose 0.62 (sd 0.29)", FALSE, t,
            {"nope": normal(0.0), "pose": normal(0.62, 0.29), "coupled": normal(0.95, 0.11),
             "ppc": normal(0.68, 0.11)}),
        ppc("C2", "ppc did not fit its training sizes", FALSE, t,
            {"nope": normal(0.0), "pose": normal(0.3), "coupled": normal(0.95), "ppc": normal(0.95)},
            fit={"ppc": UNFIT}),
        ppc("C2", "the paper's effect at pointer_copy's spreads: ppc = coupled 0.95 (sd 0.11), pose 0.62 (sd 0.29)",
            TRUE, t, {"nope": normal(0.0), "pose": normal(0.62, 0.29), "coupled": normal(0.95, 0.11),
                      "ppc": normal(0.95, 0.11)}),
    ]


TOKENS_PER_DOC = 6  # analysed tokens per document in the language scenarios


def language(claim: str, name: str, truth: str, effect: float) -> Scenario:
    """``shared_denominator_tables`` at the config's analysed tokens and language seeds: sparsity
    and the normalised gain share their denominator, and sparse tokens gain ``effect`` x their
    benefit more."""
    def draw(sizes: Sizes, rng: np.random.Generator):
        docs = max(2, round(sizes.tokens / TOKENS_PER_DOC))
        data = shared_denominator_tables(docs=docs, per_doc=TOKENS_PER_DOC, effect=effect,
                                         seed=int(rng.integers(2**31)), seeds=sizes.language_seeds)
        return data, {"language": {"sparse_share": 0.9, "min_benefit": 0.3}}

    return Scenario(claim, name, truth, draw)


def replicated(claim: str, name: str, truth: str, **kind) -> Scenario:
    """``replicated_language_tables`` at the config's analysed tokens and language seeds, with
    ``kind`` (a document confounder, a benefit measured with noise, an effect)."""
    def draw(sizes: Sizes, rng: np.random.Generator):
        docs = max(2, round(sizes.tokens / TOKENS_PER_DOC))
        data = replicated_language_tables(seeds=sizes.language_seeds, docs=docs, per_doc=TOKENS_PER_DOC,
                                          seed=int(rng.integers(2**31)), **kind)
        return data, {"language": {"sparse_share": 0.9, "min_benefit": 0.5}}

    return Scenario(claim, name, truth, draw)


def l2() -> list[Scenario]:
    return [language("L2", "no effect: sparsity and gain share only the benefit as denominator", FALSE, 0.0),
            replicated("L2", "no effect: a document factor (sd 0.15) raises both recovery and the gain", FALSE,
                       doc_sd=0.15),
            replicated("L2", "no effect: each reference measures the benefit with noise (sd 0.1 nats), recovery and "
                       "the gain follow the true one", FALSE, benefit_noise=0.1),
            language("L2", "sparse tokens gain 0.3 x their benefit more (ours: L2 never measured)", TRUE, 0.3),
            replicated("L2", "sparse tokens gain 0.3 x their benefit more within documents, 0.05 between seeds, "
                       "with both confounders (assumed: L2 never measured)", TRUE, effect=0.3, seed_sd=0.05,
                       doc_sd=0.15, benefit_noise=0.1)]


# ----------------------------------------------------------------------------- sparse parity

PARITY_K = 4  # the paper's smallest K_train; k_test 1-4 and 6 evaluated


def parity(claims: tuple, name: str, truth: str, longest_kept, fits=lambda k: FITS) -> list[Scenario]:
    """Sparse parity at K_train = 4 on the config's evaluated lengths, seeds and samples: every
    k_test <= 4 fits (``fits(k)`` on the training lengths, 0.99 unless the scenario makes a
    denser k_test harder in distribution); beyond them a run keeps a share of its margin above
    chance that falls linearly in log length to ``longest_kept(k, rng)`` at the longest length
    (drawn per run); k_test 6 > K_train at chance."""
    def draw(sizes: Sizes, rng: np.random.Generator):
        section = sizes.sections["parity"]
        lo, hi = section["train"]["lengths"]
        lengths = tuple(section["eval"]["lengths"])
        span = np.log(max(lengths) / hi)
        kept = {}

        def acc(K, k, length, seed):
            if k > K:
                return 0.5
            if length <= hi:
                return fits(k)
            if (k, seed) not in kept:
                kept[k, seed] = longest_kept(k, rng)
            share = 1 - (1 - kept[k, seed]) * np.log(length / hi) / span
            return 0.5 + (fits(k) - 0.5) * share

        runs = parity_runs(acc, seeds=tuple(range(sizes.parity_seeds)), n=sizes.parity_n, lengths=lengths,
                           K_train=(PARITY_K,), sd=0, rng=rng)
        return {"parity": {"evals": runs}}, {"parity": parity_claims.facts(section)}

    return [Scenario(c, name, truth, draw) for c in claims]


# A denser k_test harder on the training lengths only: what raw accuracy at the longest length
# ranks at every length, and no length generalization at all.
HARDER_IN_DISTRIBUTION = {1: 0.995, 2: 0.98, 3: 0.96, 4: 0.94}


def harder_in_distribution(claims: tuple) -> list[Scenario]:
    """k_test 1-4 learned to HARDER_IN_DISTRIBUTION on the training lengths and flat in length:
    every run keeps all of its margin at every length."""
    return parity(claims, "harder in distribution, flat in length: k_test 1-4 at 0.995 / 0.98 / 0.96 / 0.94 at "
                  "every length", FALSE, lambda k, rng: 1.0, fits=HARDER_IN_DISTRIBUTION.get)


# Measured at K_train = 3 (configs/README.md, "Seed power"): the retained margin at the longest
# length 0.61 (sd 0.28) at k_test = K_train, the sparser k_test keeping more (rho -1 on most seeds).
MEASURED_KEPT, MEASURED_SD, SPARSER_KEEP = 0.61, 0.28, 0.15


def p_claims() -> list[Scenario]:
    same = lambda k, rng: 0.75 + rng.normal(0, 0.1)  # noqa: E731
    measured = lambda k, rng: min(1.0, MEASURED_KEPT + SPARSER_KEEP * (PARITY_K - k) + rng.normal(0, MEASURED_SD))  # noqa: E731
    return [*parity(("P1", "P3"), "no effect of sparsity: every k_test keeps 0.75 (sd 0.1) of its margin", FALSE,
                    same),
            *harder_in_distribution(("P1",)),
            *parity(("P2",), "at chance beyond the training lengths", FALSE, lambda k, rng: 0.0),
            *parity(("P1", "P2", "P3"), "measured at K_train = 3: k_test = K keeps 0.61 (sd 0.28), each sparser "
                    "k_test 0.15 more", TRUE, measured)]


# ----------------------------------------------------------------------------- theory


def theory(claims: tuple, name: str, truth: str, acc, loss=lambda d, r: 1e-3 * r,
           shared: float = 0.0) -> list[Scenario]:
    """The idealized model, and the GPT where the config runs it at k >= 2 (T1 is decided on it),
    at k = 2 on the config's ratios, seeds (the idealized model's ``theory.sfa_seeds``) and
    samples: ``acc(law, ratio)`` and ``loss(law, ratio)`` per run (the loss jittered by a factor exp(N(0, 0.1)) per run, and by exp(N(0, ``shared``))
    per ratio for every run at once: the one sample set they are all scored on)."""
    def draw(sizes: Sizes, rng: np.random.Generator):
        section = sizes.sections["theory"]
        models = ("sfa", "gpt") if max(section["gpt"]["k"], default=0) >= 2 else ("sfa",)
        seeds = {"sfa": tuple(range(sizes.sfa_seeds or sizes.theory_seeds)), "gpt": tuple(range(sizes.theory_seeds))}
        runs = theory_runs(acc, loss, seeds=seeds, n=sizes.theory_n,
                           ratios=tuple(section["eval"]["ratios"]), length=section["train"]["lengths"][0], rng=rng,
                           models=models, shared=shared)
        return {"theory": {"evals": runs}}, {"theory": {"floor": section["floor"]}}

    return [Scenario(c, name, truth, draw) for c in claims]


SHARED_SD, JUST_ABOVE = 0.3, 2.1  # a shared sample set's factor on every run's loss; an exponent just above T2's 2


def shared_sample_factor() -> list[Scenario]:
    """The loss grows like (Lbar/L)^JUST_ABOVE, with every run of a (law, k) scored on one sample
    set per ratio whose draw moves all their losses by one factor, exp(N(0, SHARED_SD)): the
    runs agree on an exponent the draw has moved, which their spread cannot show."""
    return theory(("T2",), f"shared per-ratio sample factor (sd {SHARED_SD:g} on the log loss), exponent just above "
                  f"2: {JUST_ABOVE:g}", FALSE, lambda d, r: 0.98, loss=lambda d, r: 1e-3 * r**JUST_ABOVE,
                  shared=SHARED_SD)


def t_claims() -> list[Scenario]:
    def paper_like(d, r):
        return 0.5 if d == "nonlocal" and r > 1 else 0.98

    return [*theory(("T1",), "coupled as bad as the non-local law (at chance beyond L)", FALSE,
                    lambda d, r: 0.5 if d != "local" and r > 1 else 0.98),
            *theory(("T1", "T2"), "every law at chance beyond L", FALSE, lambda d, r: 0.5 if r > 1 else 0.98,
                    loss=lambda d, r: 0.05 if r == 1 else np.log(2)),
            *theory(("T2",), "the loss grows like (Lbar/L)^4", FALSE, lambda d, r: 0.98, loss=lambda d, r: 1e-4 * r**4),
            *shared_sample_factor(),
            *theory(("T1", "T2"), "the paper's: coupled and local generalize, non-local at chance", TRUE, paper_like)]


SCENARIOS = {"L2": l2, "C1": c1, "C2": c2, "P": p_claims, "T": t_claims}


def scenarios(claims=None) -> list[Scenario]:
    """Every developed-on scenario, or those of ``claims`` (ids); with the certifying nulls:
    ``sparselen.calibration.thresholds.catalog``."""
    return [s for make in SCENARIOS.values() for s in make() if claims is None or s.claim in claims]

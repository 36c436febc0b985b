"""Result tables whose truth is known, in the layout of each slice's per-run tables: what the
claims' tests (``tests/report/test_claims.py``) and their calibration (``sparselen.calibration``) feed
the claims' own code.

Two kinds of noise. Without ``rng`` a table is fixed: a run's deviation is set by its key
(``jitter``) and its correct count is the accuracy rounded (the unit tests' hand-made tables).
With ``rng`` it is one draw of an experiment: each run deviates at random and each cell's
correct count is binomial on its samples (the calibration's replicates)."""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import pandas as pd

# enough that seeds which all agree decide by betting on [-1, 1] (a kept margin at chance 0.5 needs about 30)
SEEDS = tuple(range(24))


def jitter(sd, *key) -> float:
    """A run's own deviation, fixed by its key (seed, cell): runs differ by seed."""
    return float(np.random.default_rng([zlib.crc32(str(key).encode())]).normal(0, sd)) if sd else 0.0


def counts(a: float, n: int, rng: np.random.Generator | None = None) -> tuple[int, float]:
    """(correct, accuracy) of a cell of ``n`` samples at accuracy ``a``: rounded, or binomial with ``rng``."""
    p = min(1.0, max(0.0, a))
    c = int(rng.binomial(n, p)) if rng is not None else round(p * n)
    return c, c / n


def _deviation(sd, rng, *key) -> float:
    return float(rng.normal(0, sd)) if rng is not None and sd else jitter(sd, *key)


# ----------------------------------------------------------------------------- sparse parity


def parity_runs(acc, seeds=SEEDS, n=400, lengths=(20, 50, 100), K_train=(4,), sd=0.01, k_test=(1, 2, 3, 4, 6),
                rng=None):
    """Per-run eval rows; ``acc(K, k, length, seed)`` is a cell's accuracy before the run's
    jitter (training length 20)."""
    rows = []
    for K in K_train:
        for seed in seeds:
            for length in lengths:
                for k in k_test:
                    c, a = counts(acc(K, k, length, seed) + _deviation(sd, rng, seed, K, k, length), n, rng)
                    rows.append({"K_train": K, "seed": seed, "scheme": "pose", "k_test": k, "length": length,
                                 "n": n, "correct": c, "accuracy": a})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- PPC


def ppc_runs(acc, tasks=("parity_scratchpad", "copy_repeat"), schemes=("nope", "pose", "coupled", "ppc"),
             seeds=SEEDS, sd=0.01, validation=None, n=200, sizes=(2, 4, 16), rng=None):
    """``acc(task, scheme, size)`` (or, with ``rng``, ``acc(task, scheme, size, seed)``): training
    sizes ``sizes[:2]``, test size ``sizes[2]``, per run jittered there; a validation row at the
    test size per run, ``validation(task, scheme)`` (by default as at the test size, jittered
    apart; with ``rng``, the same run's accuracy on other samples); ppc and coupled runs carry id
    diagnostics at the test size (half of the first lookups beyond the training sizes', the first
    id as often right as the whole response)."""
    largest, rows = sizes[-1], []
    for task in tasks:
        for scheme in schemes:
            for seed in seeds:
                level = {}
                for size in sizes:
                    base = acc(task, scheme, size, seed) if rng is not None else acc(task, scheme, size)
                    level[size] = base + (_deviation(sd, rng, task, scheme, seed) if size == largest else 0)
                    c, a = counts(level[size], n, rng)
                    row = {"task": task, "scheme": scheme, "seed": seed, "size": size, "n": n, "correct": c,
                           "accuracy": a, "split": "test"}
                    if size == largest and scheme in ("coupled", "ppc"):
                        row |= {"first_lookup_limit": 9, "n_beyond": n // 2, "accuracy_within": min(1.0, a + 0.05),
                                "accuracy_beyond": max(0.0, a - 0.05)}
                    if size == largest and scheme == "ppc":
                        row |= {"first_id_accuracy": a, "later_id_accuracy": 1.0, "first_id_accuracy_within": 1.0,
                                "first_id_accuracy_beyond": max(0.0, 2 * a - 1)}
                    rows.append(row)
                if rng is not None:
                    v = level[largest]
                else:
                    v = (validation(task, scheme) if validation
                         else acc(task, scheme, largest) + jitter(sd, task, scheme, seed, "v"))
                c, a = counts(v, n, rng)
                rows.append({"task": task, "scheme": scheme, "seed": seed, "size": largest, "n": n, "correct": c,
                             "accuracy": a, "split": "validation"})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- theory


def theory_runs(acc, loss=lambda dist, ratio: 1e-3 * ratio, ks=(2,), seeds=SEEDS, sd=0.1, n=256,
                ratios=(1, 2, 4, 8), length=12, rng=None, models=("sfa",), shared=0.0, per_run=False):
    """``acc(dist, ratio)`` and ``loss(dist, ratio)`` per run of each of ``models`` (``sfa``, the
    idealized model; ``gpt``, on which T1 is decided), the loss jittered by a factor
    exp(N(0, sd)) per run and ratio, and by exp(N(0, ``shared``)) per (law, k, ratio) for every
    run and model at once: the draw of the one sample set they are all scored on. Each row's
    ``log_loss_sd``, the spread of its per-sample losses, is the one that gives its mean that
    shared noise: sd(log mean) = sd / (sqrt(n) mean). ``seeds``: the seeds of every model, or per
    model a dict of them (the idealized model's ``theory.sfa_seeds``). ``per_run``: ``acc`` and
    ``loss`` take (model, dist, seed, ratio), a run's own level."""
    rows = []
    common = {key: _deviation(shared, rng, "shared", *key) for key in
              itertools.product(ks, ("local", "nonlocal", "coupled"), ratios)}
    for model, k in itertools.product(models, ks):
        for dist in ("local", "nonlocal", "coupled"):
            for seed in (seeds[model] if isinstance(seeds, dict) else seeds):
                for ratio in ratios:
                    key = (model, dist, seed, ratio) if per_run else (dist, ratio)
                    _, a = counts(acc(*key) + _deviation(sd / 10, rng, "acc", k, dist, seed, ratio), n, rng)
                    own = _deviation(sd, rng, k, dist, seed, ratio)
                    mean = loss(*key) * np.exp(own + common[k, dist, ratio])
                    rows.append({"ratio": ratio, "length": length * ratio, "n": n, "log_loss": mean,
                                 "log_loss_sd": shared * np.sqrt(n) * mean, "error": 1 - a, "model": model,
                                 "distribution": dist, "k": k, "seed": seed, "n_values": 2})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- natural language


def language_tables(benefit=0.5, recovered=0.9, null=0.2, sparse_gain=0.8, dense_gain=0.2, docs=30, per_doc=4,
                    planted=0.95, seeds=(0,)):
    """Per-token tables of ``seeds`` analysed models (a reference and a PoSE model each): half
    the tokens of every document sparse (greedy k = 1 recovers ``recovered``), half dense
    (recovered only at k = 16); a small document-level spread, drawn apart for each seed; one
    planted repeat per token whose copy greedy k <= 2 recovers ``planted`` of (None: no repeat
    had a benefit)."""
    screen, deps, transfer = [], [], []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        for d in range(docs):
            shift = rng.normal(0, 0.05)
            for t in range(per_doc):
                sparse = t % 2 == 0
                b = benefit + shift
                screen.append({"doc": d, "t": t, "seed": seed, "benefit": b})
                for method, top in (("greedy", recovered), ("greedy_null", null)):
                    for k in (1, 2, 16):
                        r = top if (sparse and method == "greedy") or k == 16 else top * 0.3
                        labels = sparse and method == "greedy" and k <= 2  # what makes the token sparse
                        deps.append({"doc": d, "t": t, "seed": seed, "method": method, "k": k,
                                     "recovered": r + (abs(shift) if labels else shift), "L_short": 3.0,
                                     "L_long": 3.0 - b})
                if planted is not None:
                    deps += [{"doc": d, "t": 100 + t, "seed": seed, "method": "greedy_planted", "k": k,
                              "recovered": planted + shift, "L_short": 3.0, "L_long": 2.0} for k in (1, 2)]
                for scheme in ("rope", "pose"):
                    g = (sparse_gain if sparse else dense_gain) * b + shift
                    transfer.append({"doc": d, "t": t, "seed": seed, "context": 32, "scheme": scheme, "gain": g})
    return {"language": {"screen": pd.DataFrame(screen), "deps": pd.DataFrame(deps),
                         "transfer": pd.DataFrame(transfer)}}


def shared_denominator_tables(docs=40, per_doc=6, effect=0.0, seed=3, seeds=1):
    """Per-token tables in which sparsity and the normalised gain share only their denominator:
    each token's benefit b ~ U(0.3, 2) nats; greedy's two best far tokens recover 0.5 +- 0.2 nats
    (the share recovered, that over b, makes small-benefit tokens sparse); the PoSE model gains
    0.3 +- 0.05 nats whatever the token (gain / b is large where b is small), plus ``effect``
    x b on sparse tokens. ``seeds`` training seeds measure the same tokens, each PoSE model
    with its own noise."""
    rng = np.random.default_rng(seed)
    screen, deps, transfer = [], [], []
    tokens = [(d, t, rng.uniform(0.3, 2.0), rng.uniform(0.3, 0.7)) for d in range(docs) for t in range(per_doc)]
    for s in range(seeds):
        for d, t, b, near in tokens:
            screen.append({"doc": d, "t": t, "seed": s, "benefit": b})
            deps += [{"doc": d, "t": t, "seed": s, "method": "greedy", "k": k, "recovered": min(1.0, near * k / b),
                      "L_short": 3.0, "L_long": 3.0 - b} for k in (1, 2, 16)]
            deps += [{"doc": d, "t": 100 + t, "seed": s, "method": "greedy_planted", "k": k, "recovered": 0.95,
                      "L_short": 3.0, "L_long": 2.0} for k in (1, 2)]
            gain = 0.3 + rng.normal(0, 0.05) + effect * b * (near * 2 / b >= 0.9)
            transfer.append({"doc": d, "t": t, "seed": s, "context": 32, "scheme": "pose", "gain": gain})
    return {"language": {"screen": pd.DataFrame(screen), "deps": pd.DataFrame(deps),
                         "transfer": pd.DataFrame(transfer)}}


def replicated_language_tables(seeds=3, docs=334, per_doc=6, effect=0.0, doc_sd=0.0, benefit_noise=0.0,
                               seed_sd=0.0, seed=0, lift=None):
    """Per-token tables of ``seeds`` training seeds (a reference model, its analysis and a PoSE
    model at the short context each), every seed analysing the same ``docs`` x ``per_doc``
    tokens. Each token has a true benefit b ~ U(0.5, 2) nats and a true share rho ~ U(0.5, 1.3)
    of it that greedy's two best far tokens recover; the PoSE model gains 0.4 b (+- 0.05 nats).
    Three departures, each at 0 by default:

    - ``doc_sd``: a document factor u ~ N(0, doc_sd) that raises both rho and the PoSE gain
      (by u b) of every token of its document;
    - ``benefit_noise``: each reference seed measures b with its own noise N(0, benefit_noise),
      which its benefit, and so the share recovered (rho b over the measured benefit), carry,
      while recovery and the gain follow the true b;
    - ``effect``: tokens whose true rho is at least 0.9 gain ``effect`` x b more, within every
      document, by ``effect`` + N(0, ``seed_sd``) on each seed (``lift(rng)``, where given: each
      seed's own draw of it)."""
    rng = np.random.default_rng(seed)
    n = docs * per_doc
    doc = np.repeat(np.arange(docs), per_doc)
    t = np.tile(np.arange(per_doc), docs)
    u = rng.normal(0, doc_sd, docs)[doc] if doc_sd else np.zeros(n)
    b = rng.uniform(0.5, 2.0, n)
    rho = rng.uniform(0.5, 1.3, n) + u
    sparse = rho >= 0.9
    screen, deps, transfer = [], [], []
    for s in range(seeds):
        measured = b + (rng.normal(0, benefit_noise, n) if benefit_noise else 0.0)
        share = rho * b / measured
        screen.append(pd.DataFrame({"doc": doc, "t": t, "seed": s, "benefit": measured, "analysed": True}))
        for k, part in ((1, 0.7), (2, 1.0), (16, 1.0)):
            deps.append(pd.DataFrame({"doc": doc, "t": t, "seed": s, "method": "greedy", "k": k,
                                      "recovered": np.maximum(share * part, 0.95) if k == 16 else share * part,
                                      "L_short": 3.0, "L_long": 3.0 - measured}))
        deps.append(pd.DataFrame({"doc": np.arange(30), "t": 10_000, "seed": s, "method": "greedy_planted", "k": 1,
                                  "recovered": 0.95, "L_short": 3.0, "L_long": 2.0}))
        own = lift(rng) if lift is not None else effect + (rng.normal(0, seed_sd) if seed_sd else 0.0)
        gain = (0.4 + u + own * sparse) * b + rng.normal(0, 0.05, n)
        transfer.append(pd.DataFrame({"doc": doc, "t": t, "seed": s, "context": 32, "scheme": "pose", "gain": gain}))
    return {"language": {"screen": pd.concat(screen, ignore_index=True), "deps": pd.concat(deps, ignore_index=True),
                         "transfer": pd.concat(transfer, ignore_index=True)}}

"""L2's comparison of sparse and dense tokens at equal benefit.

The sparse label and the normalised gain both divide by the reference's benefit b, so they are
related through b whatever the model does. Comparing them within a few strata of b leaves the
relation inside each stratum (tokens of smaller b are both likelier sparse and of larger gain /
b), and a shuffle of the labels within the strata is centred on 0 by construction, so it cannot
see it. Here b is adjusted for continuously: the normalised gain is regressed on a restricted
cubic spline of log b and the sparse label, and the label's coefficient is the difference at
equal benefit (``adjusted_difference``). Its null shuffles the labels within pairs of tokens of
adjacent benefit (``swapped_in_pairs``), which keeps the labels' relation to b."""

from __future__ import annotations

import numpy as np

KNOT_QUANTILES = (0.05, 0.275, 0.5, 0.725, 0.95)  # Harrell's placement of 5 knots


def spline_basis(v) -> np.ndarray:
    """[rows, p]: intercept, v and the restricted cubic spline terms of ``v`` with knots at
    KNOT_QUANTILES (linear beyond the outer knots); fewer terms where knots coincide."""
    v = np.asarray(v, dtype=float)
    knots = np.unique(np.quantile(v, KNOT_QUANTILES))
    cols = [np.ones_like(v), v]
    if len(knots) >= 3:
        t, last, prev = knots, knots[-1], knots[-2]
        cube = lambda u: np.clip(u, 0, None) ** 3  # noqa: E731
        scale = (last - t[0]) ** 2
        for tj in t[:-2]:
            cols.append((cube(v - tj) - cube(v - prev) * (last - tj) / (last - prev)
                         + cube(v - last) * (prev - tj) / (last - prev)) / scale)
    return np.stack(cols, axis=1)


def adjusted_difference(x, label, basis, w=None) -> np.ndarray:
    """The coefficient of ``label`` in the least-squares fit of ``x`` on ``basis`` and ``label``
    (weighted by each row of ``w`` [replicates, rows]; None: one unweighted fit): the difference
    between labelled and other rows at equal values of what ``basis`` spans, one per row of
    ``w``. NaN where the fit cannot separate it."""
    x, label = np.asarray(x, dtype=float), np.asarray(label, dtype=float)
    X = np.concatenate([basis, label[:, None]], axis=1)
    w = np.ones((1, len(x))) if w is None else np.atleast_2d(np.asarray(w, dtype=float))
    p = X.shape[1]
    xtx = (w @ (X[:, :, None] * X[:, None, :]).reshape(len(x), p * p)).reshape(len(w), p, p)
    xty = w @ (X * x[:, None])
    out = np.full(len(w), np.nan)
    ok = np.linalg.matrix_rank(xtx) == X.shape[1]
    if ok.any():
        out[ok] = np.linalg.solve(xtx[ok], xty[ok][..., None])[:, -1, 0]
    return out


def shuffled_difference(x, labels, basis) -> np.ndarray:
    """``adjusted_difference`` for each row of ``labels`` [shuffles, rows], unweighted: by
    Frisch-Waugh, the shuffled labels' residuals on ``basis`` against ``x``."""
    q, _ = np.linalg.qr(basis)
    labels = np.asarray(labels, dtype=float)
    resid = labels - (labels @ q) @ q.T
    with np.errstate(invalid="ignore", divide="ignore"):
        return (resid @ np.asarray(x, dtype=float)) / (resid**2).sum(1)


def swapped_in_pairs(label, order, n: int, rng: np.random.Generator) -> np.ndarray:
    """[n, rows]: ``label`` with each pair of rows adjacent in ``order`` (ranks of the benefit)
    swapped or not at random; with an odd count the last row stays."""
    label = np.asarray(label, dtype=bool)
    by_rank = np.argsort(order, kind="stable")
    pairs = by_rank[: len(by_rank) // 2 * 2].reshape(-1, 2)
    out = np.tile(label, (n, 1))
    swap = rng.random((n, len(pairs))) < 0.5
    a, b = pairs[:, 0], pairs[:, 1]
    out[:, a] = np.where(swap, label[b], label[a])
    out[:, b] = np.where(swap, label[a], label[b])
    return out


def within(values, groups) -> np.ndarray:
    """``values`` [..., rows] minus the mean of their group (``groups``, one per row) along the
    last axis: what a fit with a fixed effect per group leaves of them."""
    _, codes = np.unique(np.asarray(groups), return_inverse=True)
    v = np.asarray(values, dtype=float)
    if not len(codes):
        return v
    order = np.argsort(codes, kind="stable")
    starts = np.flatnonzero(np.diff(codes[order], prepend=-1))
    means = np.add.reduceat(v[..., order], starts, axis=-1) / np.diff(np.append(starts, len(codes)))
    return v - means[..., codes]


def within_basis(benefit, groups) -> np.ndarray:
    """The spline of log ``benefit`` (``spline_basis``) within ``groups``: the intercept, and any
    term constant within every group, left out (the groups' fixed effects span them)."""
    basis = within(spline_basis(np.log(benefit)).T, groups).T
    scale = np.abs(spline_basis(np.log(benefit))).max(0)
    return basis[:, np.abs(basis).max(0) > 1e-9 * np.maximum(scale, 1.0)]


def within_difference(x, label, benefit, groups, w=None) -> np.ndarray:
    """``adjusted_difference`` within ``groups`` (a fixed effect per group, e.g. the document):
    the label's coefficient in the fit of ``x`` on it, a restricted cubic spline of log
    ``benefit`` and the groups, one per row of ``w`` (weights constant within a group, as a
    resample of whole groups gives; None: one unweighted fit). Groups whose rows all carry one
    label add nothing to it."""
    return adjusted_difference(within(x, groups), within(np.asarray(label, dtype=float), groups),
                               within_basis(benefit, groups), w)


def within_shuffled(x, labels, benefit, groups) -> np.ndarray:
    """``within_difference`` for each row of ``labels`` [shuffles, rows], unweighted."""
    return shuffled_difference(within(x, groups), within(labels, groups), within_basis(benefit, groups))

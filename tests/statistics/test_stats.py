import math

import numpy as np
import pandas as pd
import pytest

from sparselen.statistics.stats import (binomial_noise, ratio_noise, shuffled_within, stratified_difference, summarize,
                                        t_interval, welch_interval)


def test_t_interval_known_values():
    mean, lo, hi = t_interval([0.0, 1.0])
    # t(0.975, 1) = 12.706; sd = 0.7071; se = 0.5
    assert mean == 0.5 and hi - mean == pytest.approx(12.7062 * 0.5, rel=1e-4)
    m1, lo1, hi1 = t_interval([0.7])
    assert m1 == 0.7 and math.isnan(lo1) and math.isnan(hi1)


def test_summarize_groups_and_clips():
    df = pd.DataFrame({"k": [1, 1, 1, 2, 2, 2], "seed": [0, 1, 2] * 2, "acc": [1, 1, 0.9, 0.5, 0.4, 0.6]})
    out = summarize(df, ["k"], "acc").set_index("k")
    assert out.loc[1, "mean"] == pytest.approx(0.9667, abs=1e-4)
    assert out.loc[1, "ci_high"] == 1.0  # clipped to [0, 1]
    assert out.loc[2, "ci_low"] < 0.5 < out.loc[2, "ci_high"]
    assert (out["n_seeds"] == 3).all()
    assert np.isfinite(out["ci_low"]).all()


def test_a_table_of_seeds_that_all_score_one_keeps_their_evaluation_noise():
    """Four seeds at exact match 1.00 on 200 samples each: a table's interval is floored at the
    samples' binomial noise when it knows their count, as the claims' intervals are."""
    df = pd.DataFrame({"size": [5] * 4, "seed": range(4), "accuracy": [1.0] * 4, "n": [200] * 4})
    floored = summarize(df, ["size"], "accuracy", n_col="n").iloc[0]
    assert floored["mean"] == 1.0 and 0.982 < floored["ci_low"] < 0.99 and floored["ci_high"] == 1.0  # clipped
    bare = summarize(df, ["size"], "accuracy").iloc[0]
    assert bare["ci_low"] == bare["ci_high"] == 1.0


def test_four_seeds_at_one_give_an_interval_of_nonzero_width():
    """Four runs at exact match 1.00 on 200 samples each: every seed agrees, but each value
    carries the noise of its 200 samples, so the interval is not [1.00, 1.00]."""
    ones = [1.0] * 4
    mean, lo, hi = t_interval(ones, noise=binomial_noise(ones, 200))
    assert mean == 1.0 and 0.982 < lo < 0.99 and 1.0 < hi
    diff, lo, hi = welch_interval(ones, [0.0] * 4, noise_a=binomial_noise(ones, 200),
                                  noise_b=binomial_noise([0.0] * 4, 200))
    assert diff == 1.0 and lo < 1.0 < hi
    assert t_interval(ones) == (1.0, 1.0, 1.0)  # without the floor: zero width


def test_the_noise_floor_shrinks_p_away_from_0_and_1_and_only_floors_the_spread():
    z2 = 1.959964**2  # Agresti-Coull: z^2/2 successes and failures added
    assert binomial_noise(1.0, 200) == pytest.approx((200 + z2 / 2) * (z2 / 2) / (200 + z2) ** 3, rel=1e-5)
    assert binomial_noise(0.5, 200) == pytest.approx(0.25 / (200 + z2), rel=1e-5)
    spread = [0.2, 0.5, 0.8]  # a spread over seeds far above the noise: the floor changes nothing
    assert t_interval(spread, noise=binomial_noise(spread, 200)) == t_interval(spread)
    # a ratio's noise: var(a/b) ~ var(a)/b^2 + a^2 var(b)/b^4
    assert ratio_noise(0.25, 0.5, 1e-4, 1e-4) == pytest.approx(1e-4 / 0.25 + 0.0625 * 1e-4 / 0.0625)


def test_a_stratified_difference_removes_what_the_strata_explain():
    """x rises with the stratum and the label is commoner in the high stratum: the plain
    difference is mostly the strata's; within them the labels differ by exactly 0.1."""
    strata = np.array([0] * 4 + [1] * 4)
    label = np.array([1, 0, 0, 0, 1, 1, 1, 0], dtype=bool)
    x = strata * 1.0 + 0.1 * label
    assert stratified_difference(x, label, strata) == pytest.approx(0.1)
    assert stratified_difference(x, label, np.zeros(8)) == pytest.approx(x[label].mean() - x[~label].mean())
    assert stratified_difference(x, label, np.zeros(8)) > 0.4
    w = np.array([[1.0] * 8, [0, 1, 1, 1, 1, 1, 1, 1]])  # weights per replicate; the second drops a stratum's label
    assert stratified_difference(x, label, strata, w) == pytest.approx([0.1, 0.1])
    shuffled = shuffled_within(label, strata, 50, np.random.default_rng(0))
    assert shuffled.shape == (50, 8)
    assert (shuffled[:, :4].sum(1) == 1).all() and (shuffled[:, 4:].sum(1) == 3).all()  # counts kept per stratum


def test_a_sample_set_shared_by_every_run_is_counted_once():
    """Every run of a cell is scored on the same evaluation samples, so their binomial noise
    does not average out over runs: the floor is one sample set's noise, whatever the number of
    runs. 10 runs at 1.00 on 200 samples gave [0.9975, 1.0025]; the exact interval of 200/200
    is [0.982, 1]. 1.00 against 0.995 (one sample in 200) on every seed was inconclusive at 4
    seeds and decided at 10 and 16."""
    one_set = math.sqrt(binomial_noise(1.0, 200))
    for runs in (4, 10, 16):
        ones = [1.0] * runs
        _, lo, _ = t_interval(ones, noise=binomial_noise(ones, 200))
        assert 0.982 < lo < 1.0 - 1.9 * one_set < 0.99  # one sample set's width at any number of runs
        lower = [0.995] * runs
        _, lo, hi = welch_interval(ones, lower, noise_a=binomial_noise(ones, 200), noise_b=binomial_noise(lower, 200))
        assert lo < 0 < hi, runs
    table = pd.DataFrame({"size": [5] * 10, "seed": range(10), "accuracy": [1.0] * 10, "n": [200] * 10})
    assert summarize(table, ["size"], "accuracy", n_col="n").iloc[0]["ci_low"] < 1.0 - 1.9 * one_set
    spread = [0.2, 0.5, 0.8]  # a spread over seeds far above one sample set's noise: the floor changes nothing
    assert t_interval(spread, noise=binomial_noise(spread, 200)) == t_interval(spread)


def test_the_theory_table_never_gives_a_negative_log_loss(tmp_path):
    """Log losses near 0 that vary by seed: a t interval around their arithmetic mean goes below
    0, which no log loss can be; the table's interval, on the log scale of its geometric mean (the
    figure's statistic), stays above 0, and the 0-1 error's within [0, 1]."""
    from types import SimpleNamespace

    from sparselen.theory import report

    rows = [{"model": "sfa", "distribution": "local", "k": 2, "ratio": 1, "length": 12, "n_values": 2, "n": 256,
             "seed": seed, "log_loss": loss, "error": 0.0} for seed, loss in enumerate([1e-4, 1e-4, 0.05])]
    pd.DataFrame(rows).to_csv(tmp_path / "evals.csv", index=False)
    out = SimpleNamespace(**{k: tmp_path / f"{k}.{k.split('_')[-1]}" for k in ("csv", "md", "slopes_csv", "slopes_md")})
    t = report.table([tmp_path / "evals.csv"], out, 1e-6).iloc[0]
    losses = np.array([1e-4, 1e-4, 0.05])
    assert losses.mean() - 4.30 * losses.std(ddof=1) / np.sqrt(3) < 0  # the arithmetic t interval (2 d.o.f.)
    assert 0 < t["ci_low"] < t["mean"] < t["ci_high"]
    assert t["error_ci_low"] == 0 and 0 < t["error_ci_high"] < 0.05

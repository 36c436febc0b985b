"""Bounds by betting (``sparselen.statistics.betting``): they cover where the t interval does
not (a share of failed seeds), at every number of seeds at once, and they decide where the
values leave no doubt."""

import numpy as np
import pytest

from sparselen.statistics import betting
from sparselen.statistics.stats import t_interval

ALPHA = 0.025
DRAWS = 4000


def bimodal(rng, n: int, mean: float = 0.5, failed: float = 0.0, share: float = 0.14) -> np.ndarray:
    """Seeds of which ``share`` fail (at ``failed``) and the rest sit where the mean is ``mean``."""
    good = (mean - share * failed) / (1 - share)
    return np.where(rng.random((DRAWS, n)) < share, failed, good)


@pytest.mark.parametrize("n", [6, 10, 20, 70])
def test_a_share_of_failed_seeds_does_not_hold_where_the_t_interval_does(n):
    """At a mean exactly at the threshold with 14% of seeds failed, the lower bound clears the
    threshold at most ALPHA of the time; the t interval (here only for contrast) clears it
    whenever no seed failed, about 0.86^n of the time."""
    values = bimodal(np.random.default_rng(n), n)
    by_betting = betting.holds_above(values, 0.5, (0.0, 1.0), ALPHA).mean()
    by_t = np.mean([t_interval(v)[1] > 0.5 for v in values[:400]])
    assert by_betting <= ALPHA
    if n <= 10:
        assert by_t > 0.1  # the failure the bound exists for


def test_the_bound_covers_at_every_number_of_seeds_at_once():
    """Ville's inequality: the chance that the lower bound is above the mean after any of 1..40
    seeds (rounds of seeds, each tested) is at most ALPHA; here on skewed values at the mean."""
    rng = np.random.default_rng(1)
    values = rng.beta(0.5, 2.0, (DRAWS, 40))  # mean 0.2
    y = values
    bets = betting.plug_in_bets(y, ALPHA, 40)
    ever = np.zeros(DRAWS, bool)
    for t in range(2, 41):
        ever |= betting.rejects(y[:, :t], 0.2, ALPHA, bets[:, :t])
    assert ever.mean() <= ALPHA


def test_bounds_are_inside_the_range_and_around_the_mean():
    rng = np.random.default_rng(2)
    v = rng.uniform(-1, 1, 30)
    mean, lo, hi = betting.interval(v, (-1.0, 1.0))
    assert -1.0 <= lo < mean < hi <= 1.0
    assert betting.lower_bound(v, (-1.0, 1.0), ALPHA) == pytest.approx(-betting.upper_bound(-v, (-1.0, 1.0), ALPHA))


def test_seeds_that_all_generalize_decide_with_few_of_them():
    """Ten seeds at 1.0 on [0, 1]: the mean is above 0.6 whatever the distribution. Against 0.5
    the wealth grows by 1.75x a seed at most, so four seeds (9.4x) cannot reach 1/ALPHA."""
    assert betting.lower_bound(np.ones(10), (0.0, 1.0), ALPHA) > 0.6
    assert betting.lower_bound(np.ones(4), (0.0, 1.0), ALPHA) < 0.5


def test_the_shared_samples_noise_moves_each_end_out_in_a_union_bound():
    """With the runs' evaluation noise, half of each end's 2.5% goes to the seeds' bound and half
    to the noise of the sample set every run shares: the end moves out by z(1.25%) x its sd."""
    v = np.full(20, 0.9)
    _, lo, _ = betting.interval(v, (0.0, 1.0))
    seeds_half = betting.lower_bound(v, (0.0, 1.0), ALPHA / 2)
    _, lo_noisy, _ = betting.interval(v, (0.0, 1.0), noise=np.full(20, 0.05**2))
    assert seeds_half < lo and lo_noisy == pytest.approx(seeds_half - 2.241403 * 0.05, abs=1e-5)


def test_a_difference_is_bounded_by_its_two_sets():
    a, b = np.full(12, 1.0), np.zeros(12)
    diff, lo, hi = betting.difference(a, b, (0.0, 1.0))
    assert diff == 1.0 and 0 < lo < 1 and hi == pytest.approx(1.0)
    assert np.isnan(betting.difference(a[:1], b, (0.0, 1.0))[1])


def test_values_outside_their_declared_range_are_an_error():
    with pytest.raises(ValueError, match="outside their declared range"):
        betting.lower_bound([0.5, 1.5], (0.0, 1.0), ALPHA)

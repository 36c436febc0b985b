import math

import numpy as np
import pandas as pd
import pytest

from sparselen.stats import summarize, t_interval


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

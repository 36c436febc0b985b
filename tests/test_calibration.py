"""The claims' tests calibrated on known truths (``sparselen.calibration``): at the sizes of every
shipped config, no claim says "holds" where it is false more often than 5%."""

import pytest

from conftest import ROOT
from sparselen.calibration import FALSE, HOLDS, false_holds_limit, run, sizes_of
from sparselen.calibration.scenarios import scenarios
from sparselen.config import load
from sparselen.stats import Resampling

REPLICATES = 30  # per scenario and config; false_holds_limit(30) = 5: a rate of 5% exceeds it 0.3% of the time
RES = Resampling(n_boot=400, seed=20250224)


@pytest.fixture(scope="module")
def shipped():
    paper = load([ROOT / "configs/paper.yaml"])
    configs = {"config.yaml": load([ROOT / "config.yaml"]), "cpu-extended.yaml": load([ROOT / "configs/cpu-extended.yaml"]),
               "paper.yaml": paper}
    return [sizes_of(name, cfg, paper) for name, cfg in configs.items()]


def test_no_claim_holds_where_it_is_false(shipped):
    """Every scenario where a claim is false (no effect, models at chance, models that did not
    fit, the failure modes its criterion must not credit), at each shipped config's seeds,
    samples and tokens: at most ``false_holds_limit`` "holds" in REPLICATES draws, through the
    claim's own code with its gates and stability. A draw stops once a scenario is over."""
    limit = false_holds_limit(REPLICATES)
    over = []
    for sizes in shipped:
        for sc in scenarios():
            if sc.truth != FALSE:
                continue
            r = run(sc, sizes, REPLICATES, RES, stop_above=limit)
            if r["holds"] * r["replicates"] > limit:
                over.append(f"{sc.claim} on {sizes.config}: {round(r['holds'] * r['replicates'])} of "
                            f"{r['replicates']} hold ({sc.name})")
    assert not over, "; ".join(over)

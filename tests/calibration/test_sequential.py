"""Seeds in rounds, calibrated (``sparselen.calibration.sequential``): stopping at the first
round that decides keeps a claim's false "holds" at its nominal rate, and stops early where the
claim is true."""

import pandas as pd
import pytest
from conftest import ROOT

from sparselen.calibration import FALSE, TRUE, false_holds_limit, run, sizes_of
from sparselen.calibration.scenarios import scenarios
from sparselen.calibration.sequential import first_seeds, run_rounds, through
from sparselen.calibration.thresholds import BIMODAL, thresholds
from sparselen.interface.config import load
from sparselen.interface.rounds import Rounds
from sparselen.statistics.stats import Resampling

RES = Resampling(n_boot=400, seed=20250224)
NULL_REPLICATES = 150  # false_holds_limit(150) = 14: a rate of 5% exceeds it 1% of the time


@pytest.fixture(scope="module")
def default_sizes():
    return sizes_of("config.yaml", load([ROOT / "config.yaml"]), load([ROOT / "configs/paper.yaml"]))


@pytest.mark.parametrize("condition", [s.condition for s in thresholds(["C1"]) if s.form == BIMODAL])
def test_stopping_at_the_first_decided_round_keeps_the_false_holds(default_sizes, condition):
    """C1's certifying null with bimodal seeds, 4 seeds a round up to 10 rounds, decided after
    every round and stopped at the first decided one: at most ``false_holds_limit`` "holds"."""
    null = next(s for s in thresholds(["C1"]) if s.form == BIMODAL and s.condition == condition)
    r = run_rounds(null, default_sizes, Rounds(4, 10), NULL_REPLICATES, RES)
    assert r["truth"] == FALSE and r["replicates"] == NULL_REPLICATES
    holds = round(r["holds"] * NULL_REPLICATES)
    assert holds <= false_holds_limit(NULL_REPLICATES), f"{holds} of {NULL_REPLICATES} hold ({null.name})"


def test_a_true_claim_stops_early(default_sizes):
    """C1 as measured on copy_repeat: it holds, and on clearly fewer seeds than the cap's 40."""
    true = next(s for s in scenarios(["C1"]) if s.truth == TRUE and "copy_repeat" in s.name)
    r = run_rounds(true, default_sizes, Rounds(4, 10), 20, RES)
    assert r["power"] >= 0.9
    assert r["max seeds"] == 40 and r["expected seeds"] <= 0.6 * r["max seeds"], r["expected seeds"]
    assert r["mean rounds"] == r["expected seeds"] / 4


def test_the_first_seeds_are_kept_by_each_models_own_seeds():
    """The n lowest seeds of each group (here the model), whatever the rows' order; a table
    without seeds, and the other slices, untouched."""
    runs = pd.DataFrame({"model": ["sfa"] * 4 + ["gpt"] * 3 + ["sfa"], "seed": [5, 2, 9, 7, 30, 10, 20, 2],
                         "ratio": [1, 1, 1, 1, 1, 1, 1, 2]})
    kept = first_seeds(runs, 2, by=("model",))
    assert sorted(kept[kept["model"] == "sfa"]["seed"]) == [2, 2, 5]
    assert sorted(kept[kept["model"] == "gpt"]["seed"]) == [10, 20]
    assert sorted(first_seeds(runs, 2)["seed"]) == [2, 2, 5]  # one list for all
    assert len(first_seeds(runs, 9, by=("model",))) == len(runs)
    facts = pd.DataFrame({"k": [2]})
    data = through({"theory": {"evals": runs, "facts": facts}, "ppc": {"evals": runs}}, "theory", 1)
    assert sorted(data["theory"]["evals"]["seed"]) == [2, 2, 10]
    assert data["theory"]["facts"] is facts and data["ppc"]["evals"] is runs


def test_one_round_of_every_seed_is_the_calibration_at_one_count(default_sizes):
    """One round of the config's seeds: the same draws and verdicts as ``calibration.run``."""
    true = next(s for s in scenarios(["C1"]) if s.truth == TRUE and "copy_repeat" in s.name)
    sequential = run_rounds(true, default_sizes, Rounds(default_sizes.ppc_seeds, 1), 20, RES, seed=3)
    once = run(true, default_sizes, 20, RES, seed=3)
    assert 0 < sequential["holds"] < 1  # both verdicts occur: a count that can differ
    assert (sequential["holds"], sequential["does not hold"]) == (once["holds"], once["does not hold"])
    assert sequential["mean rounds"] == 1 and sequential["expected seeds"] == default_sizes.ppc_seeds

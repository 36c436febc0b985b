"""Seeds in rounds without the workflow: a round's seeds, the config's checks, a round's decision
on generated tables, and how the report words the rounds a claim took."""

import pandas as pd
import pytest

from sparselen.calibration.tables import ppc_runs
from sparselen.interface import rounds
from sparselen.jobs.checks import semantic_errors
from sparselen.ppc import claims as ppc_claims
from sparselen.report import rounds as decisions
from sparselen.statistics.stats import Resampling

RES = Resampling(n_boot=200, seed=0, level=0.95)


def test_a_rounds_seeds_are_fixed_by_their_place_in_the_list():
    r = rounds.Rounds(size=3, max=2)
    seeds = [10, 11, 12, 13, 14, 15, 16]
    assert r.seeds(seeds, 0) == [10, 11, 12] and r.seeds(seeds, 1) == [13, 14, 15]
    assert rounds.Rounds(size=3, max=3).seeds(seeds, 2) == [16]  # a last round takes what the list has left
    assert r.through(seeds, 1) == [10, 11, 12, 13, 14, 15]
    assert rounds.Rounds(size=3, max=3).seeds(seeds, 1) == r.seeds(seeds, 1)  # a raised cap only adds rounds
    assert rounds.of({"seeds": seeds}) is None


@pytest.mark.parametrize("section, message", [
    ({"seeds": [0, 1], "rounds": {"size": 2, "max": 2}},
     "ppc.rounds = {size: 2, max: 2} needs more than 2 seeds (a seed at least in its last round), but ppc.seeds "
     "lists 2"),
    ({"seeds": [0, 1, 2, 3], "stack": 3, "rounds": {"size": 2, "max": 2}},
     "ppc.rounds.size = 2 is not a multiple of ppc.stack = 3"),
    ({"seeds": [0, 1, 2, 3], "copy_repeat": {"seeds": [0, 1]}, "rounds": {"size": 2, "max": 2}},
     "but ppc.copy_repeat.seeds lists 2"),
    ({"seeds": [0, 1, 2], "rounds": {"size": 2, "max": 2}}, ""),  # the last round short
    ({"seeds": [0, 1, 2, 3, 4], "rounds": {"size": 2, "max": 2}}, "ppc.seeds lists 5 seeds, more than"),
])
def test_rounds_the_seed_lists_cannot_hold_are_named_before_any_job(section, message):
    from sparselen.interface.rounds import seed_lists

    errors = rounds.errors("ppc", section, seed_lists("ppc", section))
    assert any(message in e for e in errors) if message else errors == [], errors


def test_the_config_check_runs_the_rounds_check():
    from conftest import smoke_config

    cfg = smoke_config()
    cfg["parity"] = {**cfg["parity"], "rounds": {"size": 2, "max": 3}}
    assert any("parity.rounds = {size: 2, max: 3} needs more than 4 seeds" in e for e in semantic_errors(cfg))


TASK = {"train_sizes": [2, 10], "eval_sizes": [5, 10, 40]}
FACTS = ppc_claims.facts({"tasks": ["copy_repeat"], "copy_repeat": TASK})


def tables(coupled: float, seeds: int) -> dict:
    def acc(task, scheme, size):
        return 0.99 if size <= 10 else coupled if scheme == "coupled" else 0.0

    return {"evals": ppc_runs(acc, tasks=("copy_repeat",), schemes=("nope", "coupled"), seeds=tuple(range(seeds)),
                              sd=0, sizes=(2, 10, 40))}


def test_a_round_decides_each_claim_and_keeps_the_open_ones_open():
    """coupled generalizes on every seed: C1 holds at 10 seeds and is decided; at 2 seeds its bound
    cannot hold yet and C1 stays open; C2 has no task of its kind and is settled at once."""
    gaps = {"C1": "", "C2": "no task of the kind the claim is decided on"}
    early = decisions.decide("ppc", 0, tables(1.0, 2), RES, FACTS, gaps, {"ppc.seeds": [0, 1]})
    assert early["open"] == ["C1"] and early["claims"]["C2"]["decided"]
    assert decisions.due(early, cap=3) and not decisions.due(early, cap=1)
    later = decisions.decide("ppc", 1, tables(1.0, 10), RES, FACTS, gaps, {"ppc.seeds": list(range(10))})
    assert later["open"] == [] and later["claims"]["C1"]["verdict"] == "holds"
    assert not decisions.due(later, cap=3)
    said = decisions.summary([early, later], cap=3)
    assert said["C1"] == "decided in round 2 of at most 3 (10 seeds): holds"
    assert said["C2"].startswith("decided in round 1 of at most 3 (2 seeds): not decidable")
    assert decisions.summary([early], cap=1)["C1"].startswith("undecided after 1 rounds, the cap (2 seeds)")


def test_a_claim_open_at_the_cap_says_how_many_seeds_would_decide_it(monkeypatch):
    """At the spread now measured, by the claim's own test on draws of the seeds run: coupled
    generalizing on both of 2 seeds is decided at a count the rounds' next seeds could reach;
    coupled failing on one of 2 seeds keeps half its margin, exactly the threshold, and no count
    decides it."""
    monkeypatch.setattr(decisions, "NEED_DRAWS", 20)
    gaps = {"C1": "", "C2": "no task"}
    clear = decisions.decide("ppc", 0, tables(1.0, 2), RES, FACTS, gaps, {"ppc.seeds": [0, 1]})
    need = clear["claims"]["C1"]["seeds_needed"]
    assert need is not None and 2 < need <= 10
    assert f"about {need} seeds would decide it" in decisions.summary([clear], cap=1)["C1"]
    failed = tables(0.0, 1)["evals"].assign(seed=1)
    half = {"evals": pd.concat([tables(1.0, 1)["evals"], failed], ignore_index=True)}
    split = decisions.decide("ppc", 0, half, RES, FACTS, gaps, {"ppc.seeds": [0, 1]})
    assert split["claims"]["C1"]["seeds_needed"] is None
    assert "no count up to 400 seeds would decide it" in decisions.summary([split], cap=1)["C1"]
    assert "seeds_needed" not in split["claims"]["C2"]


def test_c1s_later_rounds_leave_out_the_runs_it_does_not_read():
    """A run of a C1 task is read by C1 unless its scheme is ppc (C1 compares oracle coupling with
    the baselines); a C2 task's every run by C2; a control's by no claim."""
    from sparselen.ppc.seeds_figure import claims_reading

    section = {"tasks": ["copy_repeat"], "copy_repeat": TASK, "schemes": ["nope", "coupled", "ppc", "ppc_offset"],
               "variants": {"ppc_offset": {"scheme": "ppc", "model": {"position_target": "offset"}}}}
    assert claims_reading(section, "copy_repeat", "coupled") == claims_reading(section, "copy_repeat", "nope") == {"C1"}
    assert claims_reading(section, "copy_repeat", "ppc") == claims_reading(section, "copy_repeat", "ppc_offset") == set()

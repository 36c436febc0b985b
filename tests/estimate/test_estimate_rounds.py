"""Seeds in rounds in the estimate (``sparselen.estimate.rounds``): each round's hours from the
plan cut at its seeds, the chance it runs from the claims' power, the power model at effects twice
as far and left as it was."""

import contextlib
from functools import partial

import pytest
from conftest import ROOT

from sparselen.estimate import plan, profiles, rounds, tables
from sparselen.estimate.display import hm
from sparselen.interface import rounds as config_rounds
from sparselen.interface.config import load
from sparselen.ppc import claims as ppc_claims
from sparselen.statistics import power


def small_config() -> dict:
    """config.yaml on GPUs with PPC's 20 seeds in 4 rounds of 5."""
    cfg = load(())
    cfg["gpus_per_job"] = 1
    cfg["ppc"] = {**cfg["ppc"], "seeds": list(range(20)), "rounds": {"size": 5, "max": 4}}
    return cfg


@pytest.fixture(scope="module")
def priced(tmp_path_factory):
    gpu, cpu = profiles.resolve("h100", 0.4, None)
    with contextlib.chdir(tmp_path_factory.mktemp("dag")):
        return rounds.round_hours(small_config(), partial(rounds.price, gpu=gpu, cpu=cpu))


@pytest.fixture
def c1_alone(monkeypatch):
    """PPC read by C1 alone (config.yaml runs no task C2 is decided on: its power is 0)."""
    monkeypatch.setattr(ppc_claims, "CLAIMS", tuple(c for c in ppc_claims.CLAIMS if c.id == "C1"))


def test_section_through_cuts_every_seed_list():
    section = {"seeds": list(range(20)), "rounds": {"size": 5, "max": 4}, "tasks": ["a", "b"],
               "a": {"seeds": list(range(100, 120))}, "b": {"k": 1}}
    cut = config_rounds.section_through(section, 1)
    assert cut["seeds"] == list(range(10)) and cut["a"]["seeds"] == list(range(100, 110)) and "rounds" not in cut
    assert cut["b"] == {"k": 1} and len(section["a"]["seeds"]) == 20 and "rounds" in section  # a copy
    cfg = small_config()
    assert config_rounds.through(cfg, 7)["ppc"]["seeds"] == list(range(20))
    assert config_rounds.through(cfg, 0)["parity"] is cfg["parity"]


def test_round_hours_add_up_to_the_cap(priced):
    hours, cap = priced
    assert len(hours["ppc"]) == 4 and min(hours["ppc"]) > 0
    assert sum(hours["ppc"]) == pytest.approx(cap.hours["ppc"])
    assert {"parity", "language"} <= set(cap.hours) and cap.unit == "GPU" and set(cap.wall_h) == {8}
    look = rounds.outlook(small_config(), hours, cap)
    assert look.maximum == pytest.approx(sum(cap.hours.values()))
    # C2 has no task of its kind on config.yaml: settled in round 0, so the chances follow C1's power
    chances = [r.chance for r in look.rounds]
    assert chances[0] == 1.0 and chances == sorted(chances, reverse=True) and chances[-1] < 1.0
    assert look.expected() < look.maximum and look.wall(look.maximum) == cap.wall_h


def test_chance_falls_where_the_claims_have_power(priced, c1_alone):
    look = rounds.outlook(small_config(), *priced)
    near, far = [r.chance for r in look.rounds], [r.chance_far for r in look.rounds]
    assert near[0] == 1.0 and all(a >= b for a, b in zip(near, near[1:])) and near[-1] < 0.5
    assert all(f <= n for f, n in zip(far, near)) and sum(far) < sum(near)
    assert look.expected(far=True) <= look.expected() < look.maximum
    wall = look.wall(look.expected())
    assert look.cap.chain_h <= wall[8] < look.cap.wall_h[8]


def test_paper_parity_chances_fall():
    """paper.yaml's parity (P1, P2, P3 on 5 K_train) in its 5 rounds of 56: power only, no plan."""
    section = load((ROOT / "configs/paper.yaml",))["parity"]
    assert section["rounds"] == {"size": 56, "max": 5}
    near = rounds.chances("parity", section)
    with rounds.farther():
        far = rounds.chances("parity", section)
    assert near[0] == far[0] == 1.0 and all(a >= b for a, b in zip(near, near[1:])) and near[-1] < 0.9
    assert far[2] < 0.1 < near[2]


def test_moved_twice_as_far():
    for sp in [*power.SPREADS.values(), *(s for parts in power.CONDITIONS.values() for s in parts)]:
        m = rounds.moved(sp)
        lo, hi = sp.bounds
        if sp.fail:
            assert m.effect == min(max(2 * sp.effect - sp.threshold, lo), hi)
        else:
            assert m.effect - sp.threshold == pytest.approx(2 * (sp.effect - sp.threshold))
        if sp.parts:
            (ma, _), (mb, _) = sp.parts
            (na, _), (nb, _) = m.parts
            assert na - nb - sp.threshold == pytest.approx(2 * (ma - mb - sp.threshold)) and lo <= na <= hi


def test_power_model_restored(c1_alone, priced):
    spreads, conditions = power.SPREADS, dict(power.CONDITIONS)
    before = power.claim_power("C1", 10, 1, 200)
    with rounds.farther():
        assert power.SPREADS is not spreads and power.claim_power("C1", 10, 1, 200) > before
    assert power.claim_power("C1", 10, 1, 200) == before  # its caches too
    rounds.outlook(small_config(), *priced)
    with pytest.raises(RuntimeError), rounds.farther():
        raise RuntimeError
    assert power.SPREADS is spreads and power.CONDITIONS == conditions
    assert power.claim_power("C1", 10, 1, 200) == before


def test_the_estimate_prints_its_rounds_only_with_rounds(monkeypatch, capsys, tmp_path, priced):
    """``sparselen estimate``: the rounds' section after the tables (its plans stubbed by the
    fixture's), nothing of it without rounds."""
    from sparselen.cli import main
    from sparselen.estimate import dag
    from sparselen.interface import config

    monkeypatch.chdir(tmp_path)
    jobs = dag.workflow_jobs(())
    monkeypatch.setattr(dag, "workflow_jobs", lambda files: jobs)
    monkeypatch.setattr(rounds, "round_hours", lambda cfg, price: priced)
    args = ["estimate", "--gpu", "h100", "--cpu-profile", "builtin", "--gpus-available", "8"]
    plain = {**small_config(), "ppc": {k: v for k, v in small_config()["ppc"].items() if k != "rounds"}}
    for cfg in (small_config(), plain):
        monkeypatch.setattr(config, "load", lambda files, cfg=cfg: cfg)
        main(args)
        out = capsys.readouterr().out
        if cfg is not plain:
            section = out.split("\nSeeds in rounds")[1]
            assert section.count("| ppc (5 a round, at most 4) |") == 4
            most = hm(rounds.outlook(cfg, *priced).maximum)
            assert f"at most (every round): {most} GPU-hours, wall clock " in section
    assert "Seeds in rounds" not in out and "Per slice" in out
    # unpacked (paper.yaml's stacks): every GPU job's own hours, as the estimate's total
    gpu, cpu = profiles.resolve("h100", 0.4, None)
    unpacked = {**plain, "packing": {**plain["packing"], "jobs_per_gpu": 1}}
    p = rounds.price(unpacked, gpu, cpu, clock=False)
    df = tables.estimate(unpacked, plan.plan(unpacked, jobs), gpu, cpu)
    assert p.hours["ppc"] == pytest.approx(df.loc[(df["device"] == "gpu") & (df["slice"] == "ppc"),
                                                  "device_seconds"].sum() / 3600) and p.wall_h == {}

"""The pilot (sparselen/estimate/pilot.py) at smoke sizes on the CPU: every distinct training shape of
the config runs a few steps through the real trainer, its table shows what a campaign needs to
know, and the device profile it writes is what `sparselen estimate --gpu` then prices with."""

import contextlib
import json

import pytest
from conftest import SMOKE, smoke_config

from sparselen.estimate import dag, pilot, plan, profiles
from sparselen.interface.config import load


@pytest.fixture(scope="module")
def smoke_dag(tmp_path_factory):
    with contextlib.chdir(tmp_path_factory.mktemp("dag")):
        return dag.workflow_jobs(SMOKE)


def test_the_recipe_check():
    assert pilot.loss_fell([2.0] * 5 + [1.0] * 5) == (2.0, 1.0, True)
    first, last, fell = pilot.loss_fell([0.6931] * 10)  # parity at chance: flat
    assert not fell and first == last


def test_the_pilot_on_the_smoke_config(tmp_path, monkeypatch, capsys, smoke_dag):
    from sparselen.cli import main

    monkeypatch.chdir(tmp_path)  # no results/language/tokens here: the language shapes get random tokens
    monkeypatch.setattr(dag, "workflow_jobs", lambda files: smoke_dag)
    out = tmp_path / "pilot.json"
    result = pilot.pilot(SMOKE, steps=8, out=str(out), peak_tflops=0.1)
    table = result["table"]
    cfg = smoke_config()
    # one row per distinct shape: parity's runs share one; PPC's differ by task and position head
    assert set(table["slice"]) == {"parity", "ppc", "language", "theory"}
    assert (table["slice"] == "parity").sum() == 1
    assert (table["slice"] == "ppc").sum() == 2 * len(cfg["ppc"]["tasks"])
    assert (table[["step_ms", "tokens_per_s", "mfu", "peak_mem_gib"]] > 0).all().all()
    assert (table["mfu"] < 1).all()
    # the memory model's prediction beside the measured peak (tracker): the same scale at these sizes
    assert ((table["predicted_gib"] / table["peak_mem_gib"]).between(0.5, 2.0)).all(), table
    assert table.loc[table["slice"] == "language", "loss_fell"].isna().all()  # random tokens: not checked
    assert table.loc[table["slice"] != "language", "loss_fell"].isin([True, False]).all()
    printed = capsys.readouterr().out
    assert "step_ms" in printed and f"wrote {out}" in printed

    prof = profiles.load_profile(out)
    assert prof == result["profile"] and prof.device == "cpu" and "sparselen pilot" in prof.source
    # the estimate prices model jobs with it: as the profile says, and not as the datasheet GPU
    gpus = tmp_path / "gpus.yaml"
    gpus.write_text("gpus_per_job: 1\n")
    assert main(["estimate", "--configfile", *map(str, SMOKE), str(gpus), "--gpu", str(out),
                 "--jobs-csv", str(tmp_path / "pilot.csv"), "--cpu-profile", "builtin"]) == 0
    assert main(["estimate", "--configfile", *map(str, SMOKE), str(gpus), "--gpu", "h100",
                 "--jobs-csv", str(tmp_path / "h100.csv"), "--cpu-profile", "builtin"]) == 0
    import pandas as pd

    mine, h100 = (pd.read_csv(tmp_path / f"{n}.csv").set_index("bench") for n in ("pilot", "h100"))
    train = mine[mine["rule"] == "parity_train"].index[0]
    assert mine.loc[train, "seconds"] != pytest.approx(h100.loc[train, "seconds"])
    job = next(j for j in plan.plan(load([*SMOKE, gpus]), smoke_dag) if j.dag.bench == train)
    assert mine.loc[train, "seconds"] == pytest.approx(profiles.seconds(job.work, prof)["seconds"])
    assert json.loads(out.read_text())["name"].endswith("(pilot)")


def test_the_pilot_measures_a_stack(tmp_path, monkeypatch, smoke_dag):
    """With parity.stack 2, the pilot also trains a stack of 2 of the parity shape's runs: its
    step and peak memory beside the estimate's, and more memory than one run."""
    from sparselen.interface import config as config_module

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(dag, "workflow_jobs", lambda files: [j for j in smoke_dag if j.slice == "parity"])
    loaded = config_module.load
    monkeypatch.setattr(config_module, "load", lambda files: {**(c := loaded(files)), "parity": {**c["parity"], "stack": 2}})
    table = pilot.pilot(SMOKE, steps=8, out=str(tmp_path / "pilot.json"), print_=lambda *a: None)["table"]
    one, stack = (table[table["stack"] == s].iloc[0] for s in (1, 2))
    assert stack["slice"] == "parity" and stack["step_ms"] > 0 and stack["predicted_ms"] > 0
    assert 0.7 < stack["predicted_gib"] / stack["peak_mem_gib"] < 1.3, stack
    assert stack["peak_mem_gib"] > 1.5 * one["peak_mem_gib"]
    assert stack["tokens_per_s"] > 0 and one["predicted_ms"] > 0

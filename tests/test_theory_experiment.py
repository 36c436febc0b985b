"""The theory experiment glue (sparselen/theory/experiment.py, sparselen/experiments/theory.py)."""

import copy
import json

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from conftest import ROOT
from sparselen.experiments import theory as cli
from sparselen.theory import experiment as ex
from sparselen.theory.planted import PlantedConfig


def smoke_theory() -> dict:
    """The default theory section with the smoke overrides on top (as Snakemake merges them)."""
    base = yaml.safe_load((ROOT / "config.yaml").read_text())["theory"]
    smoke = yaml.safe_load((ROOT / "tests/smoke/config.yaml").read_text())["theory"]

    def merge(a, b):
        for key, v in b.items():
            a[key] = merge(a.get(key, {}), v) if isinstance(v, dict) and isinstance(a.get(key), dict) else v
        return a

    t = merge(copy.deepcopy(base), smoke)
    t["floor"] = t.get("floor", 1e-6)
    t["sfa"] = {"window": 2, "d_embed": 8, "d_head": 16, "log_every": 5, **t["sfa"]}
    t["gpt"]["pose"] = {"chunks": 2}
    return t


def test_slopes_recover_a_power_law():
    rows = [{"model": "sfa", "distribution": d, "k": 2, "ratio": r, "n_values": 2, "mean": c * r ** p,
             "error_mean": 0.1} for d, c, p in (("local", 1e-3, 2.0), ("nonlocal", 0.5, 0.5)) for r in (1, 2, 4, 8)]
    slopes = ex.fit_slopes(pd.DataFrame(rows), floor=1e-9).set_index("distribution")
    assert slopes.loc["local", "slope"] == pytest.approx(2.0)
    assert slopes.loc["local", "error_ratio"] == pytest.approx(64.0)
    assert slopes.loc["nonlocal", "slope"] == pytest.approx(0.5)
    assert slopes.loc["local", "within_bound_shape"] and slopes.loc["nonlocal", "within_bound_shape"]
    steeper = pd.DataFrame([{**r, "mean": 1e-3 * r["ratio"] ** 3} for r in rows[:4]])
    assert not ex.fit_slopes(steeper, 1e-9)["within_bound_shape"].item()


def test_the_default_config_is_valid_and_bad_values_are_named():
    config = {"theory": smoke_theory()}
    assert cli.config_errors(config) == []
    bad = copy.deepcopy(config)
    bad["theory"]["eval"]["ratios"] = [2, 4]
    assert any(e.startswith("theory.eval.ratios") and "must contain 1" in e for e in cli.config_errors(bad))
    bad = copy.deepcopy(config)
    bad["theory"]["train"]["lengths"] = [5, 7]
    bad["theory"]["k"] = [3]
    errors = cli.config_errors(bad)
    assert any("theory.eval.ratios: Lbar = 1 * L = 7" in e and "multiple of 3" in e for e in errors), errors
    bad["theory"]["train"]["lengths"] = [8, 6]
    assert cli.config_errors(bad)[0].startswith("theory.train.lengths = [8, 6]")
    bad = copy.deepcopy(config)
    bad["theory"]["task"]["offsets"] = "random"
    assert any(e.startswith("theory.task") and "planted.offsets" in e for e in cli.config_errors(bad))


def test_coupled_gpt_batches_keep_the_coupling_under_the_random_shifts():
    pc = PlantedConfig(k=2, positions="coupled")
    batch = ex.gpt_batches(pc, [12], 64, seed=0, coupled=True, max_id=97)(3)
    ids = batch.position_ids
    assert int(ids.max()) <= 97 and int(ids.min()) >= 0
    assert torch.equal(ids[:, :6], ids[:, 6:12])  # the two blocks share their ids
    assert (ids[:, -1] > ids[:, :-1].max(dim=1).values).all()  # the query comes after them
    assert len(set(ids[:, 0].tolist())) > 10  # shifted at random
    assert (batch.labels[:, :-1] == -100).all() and batch.labels[:, -1].le(1).all()


def test_sfa_on_a_local_law_generalizes_and_on_a_nonlocal_one_does_not():
    torch.set_num_threads(1)
    cfg = {"window": 2, "d_embed": 16, "d_head": 32, "steps": 200, "batch_size": 64, "lr": 1e-2}
    out = {}
    for law in ("local", "nonlocal"):
        pc = PlantedConfig(k=2, positions=law)
        window = ex.sfa_window(pc, 2, [12])
        model, _ = ex.train_sfa(pc, cfg, [12], seed=0, window=window)
        out[law] = ex.evaluate(ex.sfa_predict(model), pc, {1: 12, 4: 48}, 128, eval_seed=1, batch_size=64)
    local, nonlocal_ = out["local"].set_index("ratio"), out["nonlocal"].set_index("ratio")
    assert local.loc[1, "error"] == 0 and local.loc[4, "error"] == 0
    assert nonlocal_.loc[4, "error"] > 0.3  # the planted pair is out of the window at 4 L


def test_runs_table_and_figure_end_to_end(tmp_path):
    t = smoke_theory()
    shared = {key: t[key] for key in ("task", "train", "eval")}
    evals = []
    for model, k in (("sfa", 1), ("sfa", 2), ("gpt", 2)):
        d = tmp_path / model / f"k{k}"
        cfg = shared | ({"sfa": t["sfa"]} if model == "sfa" else
                        {"gpt": {key: v for key, v in t["gpt"].items() if key != "k"}, "compile": False})
        df = cli.run(cfg, model, "coupled", k, 0, d / "model.pt", d / "log.csv", d / "eval.csv",
                     d / "train_summary.json", checkpoint=d / "ckpt.pt", device="cpu")
        assert set(df["ratio"]) == set(t["eval"]["ratios"])
        summary = json.loads((d / "train_summary.json").read_text())
        assert (summary["model"], summary["k"], summary["seed"]) == (model, k, 0) and summary["config_hash"]
        assert np.isfinite(df["log_loss"]).all() and df["error"].between(0, 1).all()
        evals.append(d / "eval.csv")
    table = cli.make_table(evals, tmp_path / "t.csv", tmp_path / "t.md", tmp_path / "s.csv", tmp_path / "s.md", 1e-6)
    assert len(table) == 3 * len(t["eval"]["ratios"])
    slopes = pd.read_csv(tmp_path / "s.csv")
    assert set(slopes["model"]) == {"sfa", "gpt"} and np.isfinite(slopes["slope"]).all()
    cli.make_figure(tmp_path / "t.csv", t["train"]["lengths"][1], 1e-6, tmp_path / "f.png", tmp_path / "f.pdf")
    assert (tmp_path / "f.png").stat().st_size > 5000 and (tmp_path / "f.pdf").stat().st_size > 1000

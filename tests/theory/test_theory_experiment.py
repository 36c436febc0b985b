"""The theory slice: slopes, config checks, GPT batches, SFA generalization, and its steps
end to end as the workflow runs them."""

import copy
import json

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import smoke_config

from sparselen.interface.job import Job
from sparselen.jobs.dispatch import run
from sparselen.theory.checks import config_errors
from sparselen.theory.evaluate import evaluate, sfa_predict
from sparselen.theory.report import fit_slopes
from sparselen.theory.runs import law_gpt
from sparselen.theory.sfa import sfa_window, train_sfa
from sparselen.theory.task import PlantedConfig, gpt_batches


def smoke_theory() -> dict:
    """The theory section the smoke runs use (the default with the smoke overlay)."""
    return smoke_config()["theory"]


def test_slopes_recover_a_power_law():
    rows = [{"model": "sfa", "distribution": d, "k": 2, "ratio": r, "n_values": 2, "mean": c * r ** p,
             "error_mean": 0.1} for d, c, p in (("local", 1e-3, 2.0), ("nonlocal", 0.5, 0.5)) for r in (1, 2, 4, 8)]
    slopes = fit_slopes(pd.DataFrame(rows), floor=1e-9).set_index("distribution")
    assert slopes.loc["local", "slope"] == pytest.approx(2.0)
    assert slopes.loc["local", "error_ratio"] == pytest.approx(64.0)
    assert slopes.loc["nonlocal", "slope"] == pytest.approx(0.5)
    assert slopes.loc["local", "within_bound_shape"] and slopes.loc["nonlocal", "within_bound_shape"]
    steeper = pd.DataFrame([{**r, "mean": 1e-3 * r["ratio"] ** 3} for r in rows[:4]])
    assert not fit_slopes(steeper, 1e-9)["within_bound_shape"].item()


def test_the_default_config_is_valid_and_bad_values_are_named():
    t = smoke_theory()
    assert config_errors(t) == []
    bad = copy.deepcopy(t)
    bad["eval"]["ratios"] = [2, 4]
    assert any(e.startswith("theory.eval.ratios") and "must contain 1" in e for e in config_errors(bad))
    bad = copy.deepcopy(t)
    bad["train"]["lengths"] = [5, 7]
    bad["k"] = [3]
    errors = config_errors(bad)
    assert any("theory.eval.ratios: Lbar = 1 * L = 7" in e and "multiple of 3" in e for e in errors), errors
    bad["train"]["lengths"] = [8, 6]
    assert config_errors(bad)[0].startswith("theory.train.lengths = [8, 6]")
    bad = copy.deepcopy(t)
    bad["task"]["offsets"] = "random"
    assert any(e.startswith("theory.task") and "planted.offsets" in e for e in config_errors(bad))


def test_law_train_replaces_steps_and_lr_of_that_law_only():
    gpt = copy.deepcopy(smoke_config()["theory"]["gpt"])
    gpt["law_train"] = {"coupled": {"steps": 77, "lr": 0.5}}
    coupled, local = law_gpt(gpt, "coupled"), law_gpt(gpt, "local")
    assert coupled["train"]["steps"] == 77 and coupled["train"]["optimizer"]["lr"] == 0.5
    assert coupled["train"]["optimizer"]["weight_decay"] == gpt["train"]["optimizer"]["weight_decay"]
    assert local["train"] == gpt["train"] and "law_train" not in local and "k" not in local
    assert gpt["train"]["steps"] != 77  # the section itself is left as it was


def test_coupled_gpt_batches_keep_the_coupling_under_the_random_shifts():
    pc = PlantedConfig(k=2, positions="coupled")
    batch = gpt_batches(pc, [12], 64, seed=0, coupled=True, max_id=97)(3)
    ids = batch.position_ids
    assert int(ids.max()) <= 97 and int(ids.min()) >= 0
    assert torch.equal(ids[:, :6], ids[:, 6:12])  # the two blocks share their ids
    assert (ids[:, -1] > ids[:, :-1].max(dim=1).values).all()  # the query comes after them
    assert len(set(ids[:, 0].tolist())) > 10  # shifted at random
    assert (batch.labels[:, :-1] == -100).all() and batch.labels[:, -1].le(1).all()


def test_sfa_on_a_local_law_generalizes_and_on_a_nonlocal_one_does_not():
    torch.set_num_threads(1)
    cfg = {"window": 2, "d_embed": 16, "d_head": 32, "steps": 200, "batch_size": 64, "lr": 1e-2,
           "weight_decay": 0.0, "log_every": 50}
    out = {}
    for law in ("local", "nonlocal"):
        pc = PlantedConfig(k=2, positions=law)
        window = sfa_window(pc, 2, [12])
        model, _ = train_sfa(pc, cfg, [12], seed=0, window=window)
        out[law] = evaluate(sfa_predict(model), pc, {1: 12, 4: 48}, 128, eval_seed=1, batch_size=64)
    local, nonlocal_ = out["local"].set_index("ratio"), out["nonlocal"].set_index("ratio")
    assert local.loc[1, "error"] == 0 and local.loc[4, "error"] == 0
    assert nonlocal_.loc[4, "error"] > 0.3  # the planted pair is out of the window at 4 L


def test_a_killed_sfa_run_resumes_from_its_checkpoint_as_if_unbroken(tmp_path, monkeypatch):
    """Hours on one thread at paper scale: a run killed mid-way resumes at its last checkpoint
    and ends with the weights and log of an unbroken run; another run's checkpoint is ignored."""
    import sparselen.theory.sfa as sfa

    torch.set_num_threads(1)
    cfg = {"window": 2, "d_embed": 8, "d_head": 8, "steps": 6, "batch_size": 8, "lr": 1e-2, "weight_decay": 0.0,
           "log_every": 1}
    pc = PlantedConfig(k=2, positions="local")
    unbroken, unbroken_log = train_sfa(pc, cfg, [12], seed=0, window=2)

    ckpt, calls, real_sample = tmp_path / "checkpoint.pt", [], sfa.sample

    def killed_at_step_4(*args):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt("time limit")
        return real_sample(*args)

    monkeypatch.setattr(sfa, "sample", killed_at_step_4)
    with pytest.raises(KeyboardInterrupt):
        train_sfa(pc, cfg, [12], seed=0, window=2, checkpoint=ckpt, checkpoint_minutes=0, run_key="a")
    monkeypatch.setattr(sfa, "sample", real_sample)
    assert ckpt.exists()
    resumed, log = train_sfa(pc, cfg, [12], seed=0, window=2, checkpoint=ckpt, run_key="a")
    assert log == unbroken_log
    assert all(torch.equal(a, b) for a, b in zip(resumed.state_dict().values(), unbroken.state_dict().values()))
    # a finished checkpoint of another run (another config hash): trained from the start, not resumed
    other, other_log = train_sfa(pc, {**cfg, "lr": 2e-2}, [12], seed=0, window=2, checkpoint=ckpt, run_key="b")
    assert len(other_log) == 6 and other_log != unbroken_log


def test_runs_table_and_figure_end_to_end(tmp_path):
    t = smoke_theory()
    shared = {key: t[key] for key in ("task", "train", "eval")}
    evals = []
    for model, k in (("sfa", 1), ("sfa", 2), ("gpt", 2)):
        d = tmp_path / model / f"k{k}"
        own = {"sfa": t["sfa"]} if model == "sfa" else {"gpt": {key: v for key, v in t["gpt"].items() if key != "k"},
                                                        "checkpoint": d / "ckpt.pt"}
        run(Job.of(f"theory_run_{model}", wildcards={"distribution": "coupled", "k": k, "seed": 0}, params={**shared, **own},
                   output={"model": d / "model.pt", "log_csv": d / "log.csv", "eval": d / "eval.csv",
                           "summary": d / "train_summary.json"}))
        df = pd.read_csv(d / "eval.csv")
        assert set(df["ratio"]) == set(t["eval"]["ratios"])
        summary = json.loads((d / "train_summary.json").read_text())
        assert (summary["distribution"], summary["k"], summary["seed"]) == ("coupled", k, 0) and summary["config_hash"]
        assert np.isfinite(df["log_loss"]).all() and df["error"].between(0, 1).all()
        assert (df["log_loss_sd"] >= 0).all()  # the shared samples' noise T2 carries
        assert model == "gpt" or (d / "checkpoint.pt").exists()  # a rerun after a kill resumes; onsuccess cleans it
        evals.append(d / "eval.csv")
    run(Job.of("theory_table", input={"evals": evals}, params={"floor": 1e-6},
               output={"csv": tmp_path / "t.csv", "md": tmp_path / "t.md", "slopes_csv": tmp_path / "s.csv",
                       "slopes_md": tmp_path / "s.md"}))
    assert len(pd.read_csv(tmp_path / "t.csv")) == 3 * len(t["eval"]["ratios"])
    slopes = pd.read_csv(tmp_path / "s.csv")
    assert set(slopes["model"]) == {"sfa", "gpt"} and np.isfinite(slopes["slope"]).all()
    run(Job.of("theory_figure", input={"evals": evals}, output={"png": tmp_path / "f.png",
               "pdf": tmp_path / "f.pdf"}, params={"train_max_length": t["train"]["lengths"][1], "floor": 1e-6}))
    assert (tmp_path / "f.png").stat().st_size > 5000 and (tmp_path / "f.pdf").stat().st_size > 1000

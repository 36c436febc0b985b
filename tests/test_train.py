"""Training: schedule, atomic outputs, and resume after SIGKILL to identical final weights."""

import copy
import json
import logging
import signal
import subprocess
import time

import pytest
import torch

from conftest import PYTHON, ROOT, subprocess_env
from sparselen.jobs import Job, run
from sparselen.modelfile import load_state, save_state
from sparselen.train import OptimConfig, lr_lambda

PARAMS = {
    "model": {"n_layer": 1, "n_head": 2, "d_model": 32, "d_ff": 64, "rotary_pct": 1.0, "rotary_base": 10000.0,
              "layer_norm_eps": 1e-5},
    "scheme": "pose",
    "pose": {"chunks": 2, "target_length": 101},
    "train": {"lengths": [10, 20], "one_length_per_batch": True, "steps": 600, "batch_size": 16,
              "checkpoint_every": 10, "log_every": 10,
              "optimizer": {"lr": 3e-3, "weight_decay": 0.1, "betas": [0.9, 0.999], "eps": 1e-8,
                            "warmup_steps": 10, "schedule": "linear", "grad_clip": 1.0}},
}


def train_job(out, steps=600, checkpoint_every=10, compile=False, **runtime) -> dict:
    """The parity_train job of one model (K_train 2, seed 0) writing under ``out``."""
    params = copy.deepcopy(PARAMS)
    params["train"].update(steps=steps, checkpoint_every=checkpoint_every)
    return {"rule": "parity_train", "wildcards": {"K_train": 2, "seed": 0},
            "output": {"model": str(out / "model.pt"), "log_csv": str(out / "log.csv"),
                       "summary": str(out / "summary.json")},
            "params": {**params, "checkpoint": str(out / "ckpt.pt")},
            "config": {"device": "cpu", "compile": compile, "threads": 1, **runtime}}


def train_cmd(out, **kw):
    return [PYTHON, str(ROOT / "tests/run_job.py"), json.dumps(train_job(out, **kw))]


def run_job(spec: dict) -> None:
    spec = dict(spec)
    run(Job.of(spec.pop("rule"), **spec))


def kill_after_checkpoint(cmd, checkpoint) -> None:
    """Start a training process and SIGKILL it once it has written its first checkpoint."""
    proc = subprocess.Popen(cmd, env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not checkpoint.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.05)  # let it run past the checkpoint a little (600 steps take seconds)
    assert proc.poll() is None, "training finished before it could be killed; make it longer"
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_linear_schedule_with_warmup():
    f = lr_lambda(OptimConfig(warmup_steps=10), total_steps=110)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)
    assert f(60) == pytest.approx(0.5) and f(110) == 0.0


def test_sigkill_then_resume_gives_identical_weights(tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    straight.mkdir(), killed.mkdir()
    subprocess.run(train_cmd(straight), check=True, env=subprocess_env(), capture_output=True)

    kill_after_checkpoint(train_cmd(killed), killed / "ckpt.pt")
    # a killed job leaves no final output, and no half-written file under an output's name
    assert not (killed / "model.pt").exists() and not (killed / "summary.json").exists()
    resumed_at = load_state(killed / "ckpt.pt")["step"]
    assert 0 < resumed_at < 600

    result = subprocess.run(train_cmd(killed), check=True, env=subprocess_env(), capture_output=True, text=True)
    assert f"resumed from {killed / 'ckpt.pt'} at step {resumed_at}" in result.stderr
    a = load_state(straight / "model.pt")
    b = load_state(killed / "model.pt")
    assert a["model"].keys() == b["model"].keys()
    for name in a["model"]:
        assert torch.equal(a["model"][name], b["model"][name]), name
    assert [r["loss"] for r in a["log"]] == [r["loss"] for r in b["log"]] and len(a["log"]) == 60
    assert load_state(killed / "ckpt.pt")["step"] == 600  # kept (last step) until the workflow cleans up
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["config_hash"] and summary["seed"] == 0 and summary["versions"]["torch"].startswith("2.13")
    assert a["log"][-1]["loss"] < a["log"][0]["loss"]  # it learned something


def test_checkpoint_of_another_config_is_ignored(tmp_path, caplog):
    save_state(tmp_path / "ckpt.pt", {"config_hash": "not-this-one", "step": 10})
    run_job(train_job(tmp_path, steps=20))
    assert "ignoring checkpoint" in caplog.text
    assert len(load_state(tmp_path / "model.pt")["log"]) == 2


def test_runtime_knobs_keep_the_checkpoint(tmp_path, caplog):
    """device, compile and threads are not part of a run's identity: a checkpoint written
    under one setting resumes under another."""
    caplog.set_level(logging.INFO)
    killed = tmp_path / "killed"
    killed.mkdir()
    kill_after_checkpoint(train_cmd(killed), killed / "ckpt.pt")
    at = load_state(killed / "ckpt.pt")["step"]
    run_job(train_job(killed, compile=True, threads=2))
    assert f"resumed from {killed / 'ckpt.pt'} at step {at}" in caplog.text
    assert (killed / "model.pt").exists()


def test_summary_is_written_before_the_last_checkpoint_and_it_is_kept(tmp_path, monkeypatch):
    """Every output, the summary included, exists before anything could remove the checkpoint:
    the job never removes it (the workflow does, after recording the job)."""
    from pathlib import Path

    outputs = [tmp_path / name for name in ("model.pt", "log.csv", "summary.json")]
    removed = []
    unlink = Path.unlink

    def watched_unlink(self, *args, **kwargs):
        if self.name == "ckpt.pt":
            removed.append([p.exists() for p in outputs])
        return unlink(self, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", watched_unlink)
    run_job(train_job(tmp_path, steps=20, checkpoint_every=5))
    assert removed == [] and load_state(tmp_path / "ckpt.pt")["step"] == 20
    assert json.loads(outputs[2].read_text())["K_train"] == 2


def test_a_param_added_to_the_rule_makes_the_checkpoint_another_runs(tmp_path, caplog):
    """A run's identity is its rule's params and wildcards (sparselen.run): the same job resumes
    its checkpoint, and the job with one more param (one the step does not even read) does not."""
    caplog.set_level(logging.INFO)
    summary = tmp_path / "summary.json"
    run_job(train_job(tmp_path, steps=20))
    assert json.loads(summary.read_text())["resumed_from_step"] == 0
    run_job(train_job(tmp_path, steps=20))
    assert json.loads(summary.read_text())["resumed_from_step"] == 20  # same identity: nothing left to train
    grown = train_job(tmp_path, steps=20)
    grown["params"]["new_setting"] = 1
    run_job(grown)
    assert json.loads(summary.read_text())["resumed_from_step"] == 0
    assert "ignoring checkpoint" in caplog.text and "its config differ" in caplog.text


def test_a_name_used_by_a_param_and_a_wildcard_is_refused(tmp_path):
    spec = train_job(tmp_path, steps=20)
    spec["params"]["seed"] = 1
    with pytest.raises(ValueError, match=r"\['seed'\] name both a param and a wildcard"):
        run_job(spec)

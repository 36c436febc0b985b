"""Training: schedule, atomic outputs, and resume after SIGKILL to identical final weights."""

import json
import signal
import subprocess
import time

import pytest
import torch

from conftest import PYTHON, subprocess_env
from sparselen.train import OptimConfig, lr_lambda

CONFIG = {
    "model": {"n_layer": 1, "n_head": 2, "d_model": 32, "d_ff": 64, "position": "pose"},
    "pose": {"chunks": 2, "target_length": 101},
    "train": {"lengths": [10, 20], "steps": 600, "batch_size": 16, "checkpoint_every": 10, "log_every": 10,
              "optimizer": {"lr": 3e-3, "warmup_steps": 10}},
}


def train_cmd(out, seed=0):
    return [PYTHON, "-m", "sparselen", "parity", "train", "--config", json.dumps(CONFIG), "--K", "2",
            "--seed", str(seed), "--model", str(out / "model.pt"), "--log-csv", str(out / "log.csv"),
            "--summary", str(out / "summary.json"), "--checkpoint", str(out / "ckpt.pt"),
            "--device", "cpu", "--threads", "1"]


def test_linear_schedule_with_warmup():
    f = lr_lambda(OptimConfig(warmup_steps=10), total_steps=110)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)
    assert f(60) == pytest.approx(0.5) and f(110) == 0.0


def test_sigkill_then_resume_gives_identical_weights(tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    straight.mkdir(), killed.mkdir()
    subprocess.run(train_cmd(straight), check=True, env=subprocess_env(), capture_output=True)

    proc = subprocess.Popen(train_cmd(killed), env=subprocess_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (killed / "ckpt.pt").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.05)  # let it run past the checkpoint a little (600 steps take seconds)
    assert proc.poll() is None, "training finished before it could be killed; make it longer"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # a killed job leaves no final output, and no half-written file under an output's name
    assert not (killed / "model.pt").exists() and not (killed / "summary.json").exists()
    resumed_at = torch.load(killed / "ckpt.pt", weights_only=False)["step"]
    assert 0 < resumed_at < 600

    result = subprocess.run(train_cmd(killed), check=True, env=subprocess_env(), capture_output=True, text=True)
    assert f"resumed from {killed / 'ckpt.pt'} at step {resumed_at}" in result.stderr
    a = torch.load(straight / "model.pt", weights_only=False)
    b = torch.load(killed / "model.pt", weights_only=False)
    assert a["model"].keys() == b["model"].keys()
    for name in a["model"]:
        assert torch.equal(a["model"][name], b["model"][name]), name
    assert [r["loss"] for r in a["log"]] == [r["loss"] for r in b["log"]] and len(a["log"]) == 60
    assert not (killed / "ckpt.pt").exists()  # the checkpoint is removed once the run is done
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["config_hash"] and summary["seed"] == 0 and summary["versions"]["torch"].startswith("2.13")
    assert a["log"][-1]["loss"] < a["log"][0]["loss"]  # it learned something


def test_checkpoint_of_another_config_is_ignored(tmp_path, caplog):
    from sparselen.experiments.parity import run_training

    cfg = json.loads(json.dumps(CONFIG))
    cfg["train"]["steps"] = 20
    torch.save({"config_hash": "not-this-one", "step": 10}, tmp_path / "ckpt.pt")
    run_training(cfg, 2, 0, tmp_path / "m.pt", tmp_path / "l.csv", tmp_path / "s.json", tmp_path / "ckpt.pt", "cpu")
    assert "ignoring checkpoint" in caplog.text
    assert len(torch.load(tmp_path / "m.pt", weights_only=False)["log"]) == 2


def test_every_output_exists_before_the_checkpoint_goes(tmp_path, monkeypatch):
    """A kill between the last output and the checkpoint's removal must still be resumable."""
    from pathlib import Path

    from sparselen.experiments.parity import run_training

    cfg = json.loads(json.dumps(CONFIG))
    cfg["train"].update(steps=20, checkpoint_every=5)
    outputs = [tmp_path / name for name in ("m.pt", "l.csv", "s.json")]
    seen = []
    unlink = Path.unlink

    def checked_unlink(self, *args, **kwargs):
        if self.name == "ckpt.pt":
            seen.append([p.exists() for p in outputs])
        return unlink(self, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", checked_unlink)
    run_training(cfg, 2, 0, *outputs, tmp_path / "ckpt.pt", "cpu")
    assert seen == [[True, True, True]]
    assert json.loads(outputs[2].read_text())["K_train"] == 2

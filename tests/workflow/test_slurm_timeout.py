"""SLURM time limits on a real SLURM: a training killed at its time limit is resubmitted by the
profile's retries with a longer limit (runtime x attempt), resumes from its checkpoint and ends
with the weights of an uninterrupted run.

One parity training asks for ``resources.runtime: 1`` minute (SLURM's minimum) and needs about
2.5 minutes of wall time, checkpointing every few seconds (the step time is probed first: the
machine may be shared). The test cluster keeps SLURM's defaults OverTimeLimit=0 and KillWait=30:
slurmctld checks limits about every 30 s, sends SIGTERM, then SIGKILL 30 s later, so attempt 1
(1 min) ends after 60-90 s and attempt 2 (2 min) resumes and finishes. The target is the model
file alone: with the evaluation in the same group submission the group would ask for more time.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pandas as pd
import pytest
import torch
import yaml
from conftest import PYTHON, ROOT, smoke_config, subprocess_env
from test_slurm import REPO, SMOKE, TEST_CLUSTER_ARGS, scontrol, slurm_cluster  # noqa: F401

from sparselen.training.modelfile import load_state

TARGET = "results/parity/K2/seed0/model.pt"
WALL = 150.0  # seconds of training: longer than a 1-minute attempt, shorter than 1 + 2 minutes


def overlay(tmp_path, steps: int, every: int):
    """An overlay over the smoke config: one bigger parity model, 1-minute runtime."""
    p = smoke_config()["parity"]
    model = {**p["model"], "n_layer": 2, "n_head": 4, "d_model": 64, "d_ff": 256}
    train = {**p["train"], "steps": steps, "checkpoint_every": every, "log_every": every, "lengths": [20, 50]}
    cfg = {"resources": {"runtime": 1, "mem_mb": 2000}, "checkpoint_minutes": 0,
           "parity": {"K_train": [2], "seeds": [0], "model": model, "train": train,
                      "pose": {**p["pose"], "target_length": 51}}}
    path = tmp_path / f"overlay-{steps}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def snakemake(workdir, configfile, *args, timeout=1500):
    cmd = ["timeout", "-k", "30", str(timeout), sys.executable, "-m", "snakemake", TARGET, "-s", str(REPO / "Snakefile"),
           "--directory", str(workdir), *args, "--configfile", *map(str, SMOKE), str(configfile)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 60)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return proc


def seconds_per_step(tmp_path) -> float:
    """Wall seconds per training step now, from a short probe run's own log (tokens/s between
    log rows, start-up excluded)."""
    from sparselen.interface.config import load

    p = load([*SMOKE, overlay(tmp_path, 80, 10)])["parity"]
    spec = {"rule": "parity_train", "wildcards": {"K_train": 2, "seed": 0},
            "output": {"model": str(tmp_path / "p.pt"), "log_csv": str(tmp_path / "p.csv"),
                       "summary": str(tmp_path / "p.json")},
            "params": {**{k: p[k] for k in ("model", "scheme", "pose", "train")}, "checkpoint": str(tmp_path / "pc.pt")}}
    subprocess.run([PYTHON, str(ROOT / "tests/run_job.py"), json.dumps(spec)], check=True, capture_output=True,
                   env=subprocess_env())
    tokens_per_step = p["train"]["batch_size"] * (sum(p["train"]["lengths"]) / 2 + 1)
    return tokens_per_step / float(pd.read_csv(tmp_path / "p.csv")["tokens_per_s"].iloc[1:].median())


@pytest.mark.slurm
@pytest.mark.skipif(os.environ.get("SPARSELEN_SLURM_TIMELIMIT") != "1",
                    reason="opt-in (about 5 minutes of timing-sensitive SLURM work): SPARSELEN_SLURM_TIMELIMIT=1")
def test_time_limit_kill_resubmit_resume(slurm_cluster, tmp_path):  # noqa: F811
    per_step = max(seconds_per_step(tmp_path), 1e-3)
    every = max(5, int(3.0 / per_step) // 5 * 5)  # a checkpoint every ~3 s
    steps = max(every * 10, int(WALL / per_step) // every * every)
    cfg = overlay(tmp_path, steps, every)

    t0 = time.monotonic()
    snakemake(tmp_path / "local", cfg, "--cores", "1")
    local_wall = time.monotonic() - t0
    t0 = time.monotonic()
    proc = snakemake(tmp_path / "slurm", cfg, "--profile", str(REPO / "workflow/profiles/slurm"), *TEST_CLUSTER_ARGS)
    slurm_wall = time.monotonic() - t0
    out = proc.stdout + proc.stderr

    ids = [i for i, _ in re.findall(r"submitted with SLURM jobid (\d+) \(log: (\S+)\)", out)]
    info = {i: scontrol(i) for i in ids}
    states = [re.search(r"JobState=(\w+)", info[i]).group(1) for i in ids]
    limits = [re.search(r"TimeLimit=(\S+)", info[i]).group(1) for i in ids]
    print(f"\n{steps} steps (checkpoint every {every}); local run {local_wall:.0f} s wall; SLURM run "
          f"{slurm_wall:.0f} s wall; jobs {ids}: {states}, limits {limits}")
    assert len(ids) >= 2, f"the training was not resubmitted:\n{out[-3000:]}"
    assert states[0] == "TIMEOUT" and limits[0] == "00:01:00"
    assert states[-1] == "COMPLETED" and all(s == "TIMEOUT" for s in states[:-1])
    assert limits[1:] == [f"00:0{a}:00" for a in range(2, len(ids) + 1)]  # runtime x attempt
    # the last attempt resumed from the one before's checkpoint: mid-training, or at the last
    # step when an attempt finished its work but was killed before the job step reported it
    log = (tmp_path / "slurm/logs/parity/train/K2_seed0.log").read_text()
    resumed = re.search(r"resumed from \S+ at step (\d+)", log)
    assert resumed and 0 < int(resumed.group(1)) <= steps, log[-2000:]
    print(f"last attempt resumed at step {resumed.group(1)} of {steps}")

    a = load_state(tmp_path / "local" / TARGET)
    b = load_state(tmp_path / "slurm" / TARGET)
    assert a["model"].keys() == b["model"].keys()
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"]), "weights differ after resume"
    assert [r["loss"] for r in a["log"]] == [r["loss"] for r in b["log"]]

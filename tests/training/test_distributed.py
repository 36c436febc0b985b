"""Data-parallel training (torchrun, gloo on CPU): the ``language_train`` step with
``language.parallel.processes: 2`` (it starts torchrun itself) ends with the weights of one
process on the combined batch (float tolerance; the DDP run in micro-steps of its rows), and a
killed 2-process job resumes to the weights of an uninterrupted one. The default run launches
torchrun twice (DDP, FSDP2); the kill/resume checks (three more launches) are marked slow."""

import json
import os
import signal
import subprocess
import time

import pytest
import torch
from conftest import PYTHON, ROOT, subprocess_env
from specs import MODEL, STEPS, TOLERANCE, job_spec

from sparselen.interface.job import Job
from sparselen.jobs.dispatch import run
from sparselen.nn.batch import IGNORE, Batch
from sparselen.training import modelfile
from sparselen.training.distributed import DataParallel, label_counts
from sparselen.training.train import loss_fn

DDP_MICRO = 2 * 32  # the DDP runs' micro-batches: 2 rows, so each rank's 4 rows take 2 micro-steps


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    from sparselen.runtime import io

    g = torch.Generator().manual_seed(0)
    path = tmp_path_factory.mktemp("tokens") / "tokens.pt"
    stream = torch.randint(1, 64, (20000,), generator=g)
    stream[::97] = 0  # EOS
    io.torch_save({"train": stream.to(torch.int32), "eval": [], "vocab_size": 64}, path)
    return path


def job_cmd(out, tokens, strategy="ddp"):
    """The 2-process DDP job (in micro-steps, as the ``ddp`` fixture) in a process of its own, as
    Snakemake's ``script:`` runs it."""
    return [PYTHON, str(ROOT / "tests/run_job.py"), json.dumps(job_spec(out, tokens, 2, strategy, DDP_MICRO))]


def launch(cmd):
    t0 = time.time()
    out = subprocess.run(cmd, env=subprocess_env(), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    return out, time.time() - t0


def in_process(out, tokens, processes=1, strategy="auto", micro_tokens=0):
    spec = job_spec(out, tokens, processes, strategy, micro_tokens)
    t0 = time.time()
    run(Job.of(spec.pop("rule"), **spec))
    return time.time() - t0


def weights(out):
    return modelfile.load_state(out / "model.pt")


def max_weight_diff(a, b) -> float:
    assert a["model"].keys() == b["model"].keys()
    return max(float((a["model"][k] - b["model"][k]).abs().max()) for k in a["model"])


@pytest.fixture(scope="module")
def single(tmp_path_factory, tokens):
    out = tmp_path_factory.mktemp("single")
    print(f"\n1 process (in-process): {in_process(out, tokens):.1f} s wall")
    return out


@pytest.fixture(scope="module")
def ddp(tmp_path_factory, tokens):
    out = tmp_path_factory.mktemp("ddp")
    print(f"\n2 processes (DDP, micro-steps): {in_process(out, tokens, 2, 'ddp', DDP_MICRO):.1f} s wall")
    return out


@pytest.fixture(scope="module")
def fsdp(tmp_path_factory, tokens):
    out = tmp_path_factory.mktemp("fsdp")
    print(f"\n2 processes (FSDP2): {in_process(out, tokens, 2, 'fsdp'):.1f} s wall")
    return out


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_processes_match_one_on_the_combined_batch(request, tokens, single, strategy):
    out = request.getfixturevalue(strategy)
    a, b = weights(single), weights(out)
    diff = max_weight_diff(a, b)
    losses = [(r["loss"], s["loss"]) for r, s in zip(a["log"], b["log"])]
    print(f"{strategy}: max |weight diff| vs 1 process after {STEPS} steps = {diff:.2e}; "
          f"max |logged loss diff| = {max(abs(x - y) for x, y in losses):.2e}")
    assert diff < TOLERANCE
    assert len(losses) == STEPS // 10 and all(abs(x - y) < 1e-4 for x, y in losses)
    assert losses[-1][0] < losses[0][0]  # it learned something
    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["parallel"] == strategy
    assert summary["parameters"] == json.loads((single / "summary.json").read_text())["parameters"]
    # the model file loads like any other (one process, no torchrun)
    from sparselen.training.train import load_model

    model, prov = load_model(out / "model.pt")
    assert type(model).__name__ == "Olmo" and prov["world_size"] == 2


def kill_after_checkpoint(cmd, checkpoint) -> None:
    """Start a 2-process job and SIGKILL its process group after the first checkpoint:
    torchrun's workers run in sessions of their own and must die with it
    (``sparselen.training.distributed.die_with_parent``), or they would finish the run."""
    proc = subprocess.Popen(cmd, env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 300
    while not checkpoint.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.2)
    assert proc.poll() is None, "training finished before it could be killed; make it longer"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.mark.slow
def test_killed_two_process_run_resumes_to_identical_weights(tmp_path, tokens, ddp):
    kill_after_checkpoint(job_cmd(tmp_path, tokens), tmp_path / "ckpt.pt")
    time.sleep(1.0)  # orphaned workers, if any, would write on
    assert not (tmp_path / "model.pt").exists()
    resumed_at = modelfile.read_metadata(tmp_path / "ckpt.pt")["step"]
    assert 0 < resumed_at < STEPS
    out, _ = launch(job_cmd(tmp_path, tokens))
    assert f"resumed from {tmp_path / 'ckpt.pt'} at step {resumed_at}" in out.stderr
    a, b = weights(ddp), weights(tmp_path)
    diff = max_weight_diff(a, b)
    print(f"\nDDP killed at step >= {resumed_at}, resumed: max |weight diff| vs uninterrupted = {diff:.1e}")
    assert diff == 0.0
    assert [r["loss"] for r in a["log"]] == [r["loss"] for r in b["log"]]


@pytest.mark.slow
def test_ddp_checkpoint_resumes_in_one_process(tmp_path, tokens, single):
    """DDP checkpoints have the single-process format: a killed 2-process run finishes in one
    process (a retry on a smaller allocation, say), near the weights of a 1-process run."""
    kill_after_checkpoint(job_cmd(tmp_path, tokens), tmp_path / "ckpt.pt")
    in_process(tmp_path, tokens)
    diff = max_weight_diff(weights(single), weights(tmp_path))
    print(f"\nDDP checkpoint finished in 1 process: max |weight diff| vs 1 process = {diff:.2e}")
    assert diff < TOLERANCE


def test_rows_and_loss_scaling_reproduce_the_global_mean():
    """Unit check of the arithmetic, no processes: ranks with different numbers of labelled
    tokens; the mean over ranks of their scaled losses (and gradients) is the global mean's."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(11, 8), torch.nn.Linear(8, 11))
    fwd = lambda ids, pos: (model(ids), None)  # noqa: E731
    ids = torch.randint(0, 11, (4, 6))
    labels = torch.randint(0, 11, (4, 6))
    labels[:2, :4] = IGNORE  # rank 0 has fewer labels
    batch = Batch(ids, labels)
    full, _ = loss_fn(fwd, batch)
    (g_full,) = torch.autograd.grad(full, model[1].weight)
    n, m = label_counts(batch)
    total, grads = 0.0, []
    for r in range(2):
        dp = DataParallel(rank=r, world_size=2, local_rank=r, device=torch.device("cpu"))
        loss, parts = dp.loss_fn(fwd, dp.rows(batch), n, m, 1.0)
        total += float(parts["token_loss"])
        grads.append(torch.autograd.grad(loss, model[1].weight)[0])
    assert total == pytest.approx(float(full.detach()), rel=1e-6)
    torch.testing.assert_close((grads[0] + grads[1]) / 2, g_full, atol=1e-7, rtol=1e-5)
    with pytest.raises(ValueError, match="multiple of the number of processes"):
        DataParallel(rank=0, world_size=3, local_rank=0, device=torch.device("cpu")).rows(batch)


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_micro_steps_reduce_gradients_once_per_step(tmp_path, monkeypatch, strategy):
    """In a process group of one (gloo, in this process), DDP and FSDP2 training in micro-steps
    reduces only in each step's last micro-step (``DataParallel.no_sync`` around the others)
    and ends at the weights of the one-pass step."""
    import torch.distributed as dist

    from sparselen.interface.job import Runtime
    from sparselen.interface.run import Run, RunFiles
    from sparselen.nn.architectures import model_config
    from sparselen.training.train import OptimConfig, TrainConfig, train

    mc = model_config(MODEL, 64, scheme="rope")
    stream = torch.randint(1, 64, (8, 17), generator=torch.Generator().manual_seed(0))

    def batches(step):
        x = stream.roll(step, 0)
        return Batch(x[:, :-1], torch.where(torch.arange(16) % (step + 2) == 0, IGNORE, x[:, 1:]))

    local = []
    no_sync = DataParallel.no_sync
    monkeypatch.setattr(DataParallel, "no_sync", lambda self, module: local.append(1) or no_sync(self, module))
    weights = {}
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'group'}", rank=0, world_size=1)
    try:
        for micro in (0, 2):
            out = tmp_path / str(micro)
            files = RunFiles(out / "model.pt", out / "log.csv", out / "summary.json", out / "ckpt.pt")
            cfg = TrainConfig(steps=3, batch_size=8, micro_batch=micro, optim=OptimConfig(lr=3e-3, warmup_steps=1))
            parallel = DataParallel(rank=0, world_size=1, local_rank=0, device=torch.device("cpu"), strategy=strategy)
            train(mc, cfg, batches, Run({"micro": micro}, {}, files, Runtime(torch.device("cpu"), False, 1)), parallel)
            weights[micro] = modelfile.load_state(files.model)["model"]
    finally:
        dist.destroy_process_group()
    assert len(local) == 3 * (8 // 2 - 1)  # per step, every micro-step but the last
    diff = max(float((weights[0][k] - weights[2][k]).abs().max()) for k in weights[0])
    assert 0 < diff < TOLERANCE, diff


def test_no_torchrun_means_single_process(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert DataParallel.from_env("cpu") is None
    with pytest.raises(ValueError, match="strategy 'zero3'"):
        DataParallel.from_env("cpu", "zero3")


def test_a_worker_holding_gpus_finds_none_and_says_so(monkeypatch):
    """A torchrun worker of a job that holds GPUs (gpus_per_job > 0) and finds no CUDA device
    fails before the process group, unless the config asks for the CPU (the SLURM test's
    GPUs are CPUs: tests/workflow/test_slurm.py)."""
    from sparselen.runtime.device import NoGpu

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setattr("sparselen.training.distributed.die_with_parent", lambda: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    inits = []
    monkeypatch.setattr("torch.distributed.init_process_group", lambda *a, **k: inits.append(a))
    monkeypatch.setattr("torch.distributed.is_initialized", lambda: False)
    for device in ("auto", "cuda"):
        with pytest.raises(NoGpu, match=f"device = '{device}' with gpus_per_job = 1"):
            DataParallel.from_env(device, "ddp", gpus=1)
    assert not inits
    parallel = DataParallel.from_env("cpu", "ddp", gpus=1)
    assert parallel.device == torch.device("cpu") and inits == [("gloo",)]


def test_processes_must_split_the_rows_and_scale_the_job_resources(tmp_path):
    """The config check names a process count that does not divide a step's rows; the
    training rule asks for processes x the GPUs, CPUs and memory, the other rules do not."""
    import re

    import yaml
    from conftest import SMOKE, snakemake

    from sparselen.interface.config import load
    from sparselen.jobs.checks import semantic_errors

    cfg = load(SMOKE)
    cfg["language"]["parallel"]["processes"] = 5
    assert any("processes = 5 x nodes = 1" in e for e in semantic_errors(cfg))
    overlay = tmp_path / "procs.yaml"
    overlay.write_text(yaml.safe_dump({"gpus_per_job": 1, "language": {"parallel": {"processes": 2}}}))
    out = snakemake(tmp_path, "-n", "results/language/ctx24/rope/seed0/loss_by_position.csv",
                    configfile=[*SMOKE, overlay])
    text = out.stdout + out.stderr
    train = re.search(r"rule language_train:.*?resources: ([^\n]*)", text, re.S).group(1)
    evaluate = re.search(r"rule language_loss_by_position:.*?resources: ([^\n]*)", text, re.S).group(1)
    assert "gpu=2" in train and "cpus_per_task=2" in train
    assert "gpu=1" in evaluate and "cpus_per_task=1" in evaluate


def test_several_nodes_ask_slurm_for_nodes_and_refuse_to_run_elsewhere(tmp_path, monkeypatch):
    """nodes = 2: the training rule asks SLURM for two nodes of one task, GPUs per node and the
    executor's `mpi` mode (the job runs in the batch script and starts its own srun); the
    launch command is one srun task per node; outside a SLURM job the step refuses, naming the
    key, before starting anything."""
    import re

    import yaml
    from conftest import SMOKE, snakemake

    from sparselen.training import distributed

    overlay = tmp_path / "nodes.yaml"
    overlay.write_text(yaml.safe_dump({"gpus_per_job": 1, "language": {"parallel": {"processes": 2, "nodes": 2}}}))
    out = snakemake(tmp_path, "-n", "results/language/ctx24/rope/seed0/model.pt", configfile=[*SMOKE, overlay])
    train = re.search(r"rule language_train:.*?resources: ([^\n]*)", out.stdout + out.stderr, re.S).group(1)
    for part in ("nodes=2", "tasks=2", "mpi=srun", "cpus_per_task=2", "--ntasks-per-node=1 --gpus-per-node=2"):
        assert part in train, train
    assert not re.search(r"(^|, )gpu=", train), train  # --gpus would be a total across nodes

    spec = tmp_path / "job.json"
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(RuntimeError, match="language.parallel.nodes = 2: this job runs outside a SLURM job"):
        distributed.node_launch_command(2, 4, spec, cpus=8, gpus=4)
    monkeypatch.setenv("SLURM_JOB_ID", "123")
    cmd = distributed.node_launch_command(2, 4, spec, cpus=8, gpus=4)
    assert cmd[:7] == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--kill-on-bad-exit=1",
                       "--cpus-per-task=8", "--gpus-per-node=4"]
    assert cmd[-5:-3] == ["--node", str(spec)] and cmd[-1] == "4"

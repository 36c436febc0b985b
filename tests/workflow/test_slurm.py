"""Cluster execution: the smoke config through `snakemake --executor slurm` on a real
two-node SLURM (tests/slurm/cluster.sh, Debian's packages), with the project's profile.

The SLURM run asks for GPUs (config gpus_per_job=1) and packs the small models (config
packing): the parity models' training+evaluation groups share one submission that requests one
GPU, scheduled on one of the cluster's two fake GPUs, two of them side by side, each in a slot
of it (the jobs run on a simulated GPU: SPARSELEN_SIMULATE_CUDA), while the data and
aggregation submissions request none; `sparselen estimate` predicts those submissions. Its
outputs must equal a local run's. Runs when root and the packages are installable, else skips
with the reason.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from sparselen.runtime import simulated_cuda
from sparselen.training.modelfile import load_state

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "tests" / "slurm" / "cluster.sh"
SMOKE = (REPO / "config.yaml", REPO / "tests" / "smoke" / "config.yaml")
TARGET = "fig_parity"  # one slice: data, model and aggregate groups; the other slices add cost, not coverage
TIMEOUT = 900  # seconds for one Snakemake run; `timeout -k` kills it if the plugin hangs
# Without accounting, sacct never reports a job as finished: poll with squeue (MinJobAge=600
# in the test cluster keeps finished jobs listed), and start polling after 1 s, not 40 s.
TEST_CLUSTER_ARGS = ["--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "1",
                     "--slurm-keep-successful-logs"]


def snakemake(workdir: Path, *args: str, target: str = TARGET, overlays: tuple = (),
              env: dict | None = None) -> subprocess.CompletedProcess:
    configfiles = [*SMOKE, *overlays]
    cmd = ["timeout", "-k", "30", str(TIMEOUT), sys.executable, "-m", "snakemake", target,
           "-s", str(REPO / "Snakefile"), "--directory", str(workdir), "--workflow-profile", "none", *args,
           "--configfile", *map(str, configfiles)]  # no default profile: dry runs list every job
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT + 60, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return proc


def resources_by_rule(dry_run_output: str) -> dict[str, str]:
    """rule name -> its `resources:` line in a dry run (the same for every job of a rule here)."""
    out, rule = {}, None
    for line in dry_run_output.splitlines():
        if m := re.match(r"\s*(?:local)?rule (\w+):", line):
            rule = m.group(1)
        elif (m := re.match(r"\s*resources: (.*)", line)) and rule:
            out[rule] = m.group(1)
    return out


def test_gpu_requests_follow_the_config(tmp_path):
    """Training/evaluation ask for a GPU only when gpus_per_job > 0 (parity's, a slot of a shared
    one: tests/estimate/test_packing.py); data and aggregation never."""
    res = {gpus: resources_by_rule(snakemake(tmp_path, "-n", "--config", f"gpus_per_job={gpus}").stdout)
           for gpus in (0, 1)}
    for rule in ("parity_train", "parity_evaluate"):
        assert "gres=gpu:1" in res[1][rule] and "runtime=" in res[1][rule] and "mem_mb=" in res[1][rule], res[1][rule]
        assert "gpu" not in res[0][rule], res[0][rule]
    for rule in ("parity_eval_data", "parity_table", "parity_figure"):
        assert "gpu=" not in res[1].get(rule, ""), res[1][rule]


@pytest.fixture(scope="module")
def slurm_cluster():
    """A running test cluster; stopped afterwards if this fixture started it."""
    if os.geteuid() != 0:
        pytest.skip("SLURM test needs root (tests/slurm/cluster.sh installs packages and runs slurmd)")
    up = subprocess.run([str(CLUSTER), "up"], capture_output=True, text=True, timeout=600)
    if up.returncode == 3:
        pytest.skip(f"no SLURM on this machine: {up.stderr.strip().splitlines()[-1]}")
    assert up.returncode == 0, f"cluster.sh up failed:\n{up.stderr}"
    yield
    if "already up" not in up.stderr:
        subprocess.run([str(CLUSTER), "down"], check=True, timeout=120)


def group_of(log_dir: str) -> str:
    """The group of a submission from its log folder (``group_<group>_<its rules>``)."""
    return next(g for g in ("packed_model", "model", "aggregate", "data", "cpu_train")
                if log_dir == f"group_{g}" or log_dir.startswith(f"group_{g}_"))


def scontrol(job_id: str) -> str:
    return subprocess.run(["scontrol", "show", "job", "-d", job_id], capture_output=True, text=True,
                          check=True).stdout


def equal_outputs(a: Path, b: Path, n_models: int) -> None:
    """Deterministic outputs match: trained weights, per-model evaluations, the table."""
    models = sorted(p.relative_to(a) for p in (a / "results" / "parity").glob("K*/seed*/model.pt"))
    assert len(models) == n_models
    for rel in models:
        wa = load_state(a / rel)["model"]
        wb = load_state(b / rel)["model"]
        assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa), f"weights differ: {rel}"
        ev = rel.with_name("eval.csv")
        assert (a / ev).read_bytes() == (b / ev).read_bytes(), f"evaluation differs: {ev}"
    table = Path("results/parity/table.csv")
    assert (a / table).read_bytes() == (b / table).read_bytes()


@pytest.mark.slurm
def test_smoke_config_on_slurm_matches_local_run(slurm_cluster, tmp_path):
    from sparselen.estimate import plan, profiles, tables, timeline
    from sparselen.estimate.dag import workflow_jobs
    from sparselen.interface.config import load

    smoke = yaml.safe_load(SMOKE[1].read_text())["parity"]
    n_models = len(smoke["K_train"]) * len(smoke["seeds"])
    packed = tmp_path / "packed.yaml"  # 2 jobs a GPU, on the simulated GPU of each job
    packed.write_text(yaml.safe_dump({"device": "auto", "gpus_per_job": 1, "packing": {"jobs_per_gpu": 2},
                                      "resources": {"mem_mb": 1000}}))
    env = {simulated_cuda.ENV: "1"}

    snakemake(tmp_path / "local", "--cores", "2", overlays=(packed,), env=env)
    start = time.monotonic()
    proc = snakemake(tmp_path / "slurm", "--profile", str(REPO / "workflow" / "profiles" / "slurm"),
                     *TEST_CLUSTER_ARGS, overlays=(packed,), env=env)
    elapsed = time.monotonic() - start

    # The plugin's log: one sbatch per group component, each with its SLURM job id and log.
    submitted = re.findall(r"submitted with SLURM jobid (\d+) \(log: (\S+)\)", proc.stdout + proc.stderr)
    groups = {job_id: Path(log).parent.name for job_id, log in submitted}
    print(f"\nSLURM run: {elapsed:.0f} s wall; job ids: {groups}")
    kinds = sorted(group_of(name) for name in groups.values())
    assert kinds == ["aggregate", "data", "packed_model"], groups  # the parity models: one submission
    for job_id, log in submitted:
        assert Path(log).is_file(), f"no SLURM log {log}"

    # what `sparselen estimate` predicts the workflow submits for this target: the same
    files = [*SMOKE, packed]
    with contextlib.chdir(tmp_path):
        dag_jobs = workflow_jobs(files, targets=(TARGET,))
    subs = tables.submissions(tables.estimate(load(files), plan.plan(load(files), dag_jobs), None,
                                              profiles.CPU_DEFAULT), jobs_per_gpu=2)
    assert subs["packed"].sum() == 1 and subs.loc[subs["packed"], "runs"].item() == n_models

    # SLURM's own record (MinJobAge keeps finished jobs): each completed, one GPU where asked.
    listed = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i %T", "-j", ",".join(groups)],
                            capture_output=True, text=True, check=True).stdout.split()
    assert dict(zip(listed[::2], listed[1::2])) == {job_id: "COMPLETED" for job_id in groups}
    for job_id, name in groups.items():
        info = scontrol(job_id)
        assert "JobState=COMPLETED" in info and "ExitCode=0:0" in info, info
        wants_gpu = name.startswith("group_packed_model")
        assert ("JOB_GRES=gpu:1" in info) == wants_gpu, f"job {job_id} ({name}):\n{info}"
        if wants_gpu:  # one GPU, and a CPU for each of the two jobs side by side
            assert "NumCPUs=2" in info, info
            packed_id = job_id

    # the 4 trainings ran in that one allocation, one after another: the plugin runs a group
    # job's members in turn (sparselen.estimate.timeline.SLURM_GROUP_AT_ONCE, which the estimate
    # follows); side by side they would hold slots 0 and 1 of its GPU
    slots = []
    for log in (tmp_path / "slurm/logs/parity/train").glob("*.log"):
        m = re.search(r"using GPU 0 \(CUDA id \w+\), slot (\d) of 2 \(\S+/slurm-(\d+)\)", log.read_text())
        assert m, log.read_text()[-2000:]
        slots.append(m.groups())
    at_once = timeline.SLURM_GROUP_AT_ONCE
    assert len(slots) == n_models and {job for _, job in slots} == {packed_id}
    assert {s for s, _ in slots} == {str(i) for i in range(at_once)}, (slots, "SLURM_GROUP_AT_ONCE is out of date")

    equal_outputs(tmp_path / "local", tmp_path / "slurm", n_models)
    assert (tmp_path / "slurm" / "results" / "figures" / "parity.png").stat().st_size > 0


@pytest.mark.slurm
def test_one_language_model_trains_across_two_slurm_nodes(slurm_cluster, tmp_path):
    """language.parallel.nodes = 2: the training is one SLURM job of two nodes (one task and one
    GPU each), its own srun starts a torchrun per node, the two ranks train the model together,
    and the weights equal one local process's on the whole batch (float summation order only)."""
    from specs import TOLERANCE

    lang = yaml.safe_load(SMOKE[1].read_text())["language"]
    model = f"results/language/ctx{lang['contexts']['long']}/{lang['schemes']['long'][0]}/seed0/model.pt"
    overlay = tmp_path / "nodes2.yaml"
    overlay.write_text(yaml.safe_dump({"language": {"parallel": {"nodes": 2}}}))

    snakemake(tmp_path / "local", "--cores", "2", target=model)
    start = time.monotonic()
    proc = snakemake(tmp_path / "slurm", "--profile", str(REPO / "workflow" / "profiles" / "slurm"),
                     *TEST_CLUSTER_ARGS, "--config", "gpus_per_job=1", target=model, overlays=(overlay,))
    elapsed = time.monotonic() - start

    submitted = re.findall(r"submitted with SLURM jobid (\d+) \(log: (\S+)\)", proc.stdout + proc.stderr)
    model_jobs = [job_id for job_id, log in submitted if Path(log).parent.name.startswith("group_model")]
    assert len(model_jobs) == 1, submitted
    info = scontrol(model_jobs[0])
    run_time = re.search(r"RunTime=(\S+)", info).group(1)
    print(f"\n2-node training job {model_jobs[0]}: RunTime {run_time}; {elapsed:.0f} s wall for the whole run")
    assert "JobState=COMPLETED" in info and "ExitCode=0:0" in info, info
    assert "NumNodes=2" in info and "NumTasks=2" in info, info
    assert "NodeList=sl[1-2]" in info and "TresPerNode=gres:gpu:1" in info and "JOB_GRES=gpu:2" in info, info
    train_log = next((tmp_path / "slurm" / "logs" / "language" / "train").glob("*.log")).read_text()
    assert "launching 2 x 1 data-parallel processes" in train_log and "srun --nodes=2" in train_log, train_log[-3000:]
    assert "data-parallel rank 1 of 2" in train_log, train_log[-3000:]

    a = load_state(tmp_path / "local" / model)["model"]
    b = load_state(tmp_path / "slurm" / model)["model"]
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    print(f"max |weight difference|, 2 nodes vs 1 process: {diff:.2e}")
    assert a.keys() == b.keys() and diff < TOLERANCE

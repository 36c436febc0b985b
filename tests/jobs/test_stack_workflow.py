"""A slice's `stack` knob in the DAG: one job trains a chunk of a cell's seeds as one model,
each run's files at its per-run path with the weights of the run trained alone, one job
evaluates the chunk's runs to the rows each run's own evaluation writes, and changing the knob
retrains nothing (real Snakemake runs and dry runs on a tiny config)."""

import os
import shutil
import signal
import subprocess
import time

import pandas as pd
import pytest
from conftest import PYTHON, ROOT, SMOKE, dry_run_jobs, smoke_config, snakemake, subprocess_env

from sparselen.training.modelfile import load_state

SEEDS = (0, 1, 2)
# Three seeds of one cell per slice; parity trains long enough to be killed between checkpoints.
TINY = """
checkpoint_minutes: 0
parity: {K_train: [2], seeds: [0, 1, 2], train: {steps: 400, checkpoint_every: 50, log_every: 50}}
ppc: {tasks: [variable_assignment], schemes: [ppc], seeds: [0, 1, 2]}
theory: {distributions: [coupled], seeds: [0, 1, 2], gpt: {k: [2]}}
"""
STACKS = "parity: {stack: 2}\nppc: {stack: 3}\ntheory: {stack: 2}\n"  # chunks [0, 1], [2] and [0, 1, 2]
RUNS = {"parity": "results/parity/K2/seed{}", "ppc": "results/ppc/variable_assignment/ppc/seed{}",
        "theory": "results/theory/gpt/coupled/k2/seed{}"}
FILES = {"parity": ("model.pt", "eval.csv"), "ppc": ("model.pt", "eval.csv"), "theory": ("model.pt", "eval.csv")}
TARGETS = [f"{RUNS[s].format(seed)}/{f}" for s in RUNS for seed in SEEDS for f in FILES[s]]
TOLERANCE = 5e-5  # tests/training/test_stacked.py's: float summation order of batched products
EVALUATION_RULES = {"alone": {"parity_evaluate", "ppc_evaluate"},
                    "stacked": {"parity_evaluate_stack0", "parity_evaluate_stack1", "ppc_evaluate_stack0"}}
REEVALUATED = {"alone": EVALUATION_RULES["alone"], "stacked": {"parity_evaluate_stack0", "ppc_evaluate_stack0"}}


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    """{"alone": stack 1, "stacked": STACKS}: the smoke config with TINY over it."""
    d = tmp_path_factory.mktemp("configs")
    (d / "tiny.yaml").write_text(TINY)
    (d / "stacks.yaml").write_text(STACKS)
    return {"alone": [*SMOKE, d / "tiny.yaml"], "stacked": [*SMOKE, d / "tiny.yaml", d / "stacks.yaml"]}


@pytest.fixture(scope="module")
def trained(tmp_path_factory, configs):
    """Every run of TARGETS trained once per run ("alone") and once in stacks ("stacked")."""
    dirs = {}
    for name, files in configs.items():
        dirs[name] = tmp_path_factory.mktemp(name)
        t0 = time.time()
        snakemake(dirs[name], "--cores", "2", *TARGETS, configfile=files)
        print(f"\n{name}: {time.time() - t0:.0f} s")
    return dirs


def max_weight_diff(a, b) -> float:
    ma, mb = load_state(a)["model"], load_state(b)["model"]
    assert ma.keys() == mb.keys()
    return max(float((ma[k] - mb[k]).abs().max()) for k in ma)


def test_a_stack_job_writes_each_runs_files_with_the_weights_of_the_run_alone(trained):
    """One training and one evaluation job per chunk (logs and benchmarks named by the chunk's
    seeds), each run's files at its per-run path, weights within TOLERANCE of the per-run
    job's, the theory's evaluation rows at the same cells with the same numbers to 1e-4."""
    alone, stacked = trained["alone"], trained["stacked"]
    for log in ("parity/train/K2_seeds0-1", "parity/train/K2_seeds2-2", "ppc/train/variable_assignment_ppc_seeds0-2",
                "theory/gpt/coupled_k2_seeds0-1", "theory/gpt/coupled_k2_seeds2-2", "parity/evaluate/K2_seeds0-1",
                "parity/evaluate/K2_seeds2-2", "ppc/evaluate/variable_assignment_ppc_seeds0-2"):
        assert (stacked / "logs" / f"{log}.log").exists() and (stacked / "results/benchmarks" / f"{log}.tsv").exists()
    for slice_, run in RUNS.items():
        for seed in SEEDS:
            a, b = alone / run.format(seed), stacked / run.format(seed)
            assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
            diff = max_weight_diff(a / "model.pt", b / "model.pt")
            assert diff < TOLERANCE, (slice_, seed, diff)
            summary = pd.read_json(b / "train_summary.json", typ="series")
            assert summary["stacked_runs"] == (3 if slice_ == "ppc" else 1 if seed == 2 else 2)
            if slice_ == "theory":
                ea, eb = pd.read_csv(a / "eval.csv"), pd.read_csv(b / "eval.csv")
                assert list(ea.columns) == list(eb.columns) and ea["length"].tolist() == eb["length"].tolist()
                assert (ea["config_hash"] == eb["config_hash"]).all() and (eb["seed"] == seed).all()
                for column in ("log_loss", "error"):
                    assert eb[column].tolist() == pytest.approx(ea[column].tolist(), rel=1e-4, abs=1e-6), column


@pytest.mark.parametrize("slice_", ["parity", "ppc"])
def test_an_evaluation_stack_writes_each_runs_rows_as_its_own_evaluation(trained, tmp_path, slice_):
    """Each run's evaluation CSV from its chunk's evaluation job equals, frame for frame, the
    per-run step's evaluation of the same model file."""
    import importlib

    from sparselen.interface.job import Job

    evaluate = importlib.import_module(f"sparselen.{slice_}.jobs").evaluate
    params = {"parity": {"batch_tokens": smoke_config()["parity"]["eval"]["batch_tokens"]},
              "ppc": {"batch_size": smoke_config()["ppc"]["eval"]["batch_size"]}}[slice_]
    for seed in SEEDS:
        run = trained["stacked"] / RUNS[slice_].format(seed)
        out = tmp_path / f"seed{seed}.csv"
        wildcards = {"task": "variable_assignment", "run": "ppc"} if slice_ == "ppc" else {"K_train": 2}
        evaluate(Job.of(f"{slice_}_evaluate", input={"model": run / "model.pt", "eval_set": run.parents[1] / "eval_set.pt"},
                        output={"eval": out}, params=params, wildcards={**wildcards, "seed": seed}))
        pd.testing.assert_frame_equal(pd.read_csv(run / "eval.csv"), pd.read_csv(out))


def test_changing_stack_retrains_nothing(trained, configs):
    """Under Snakemake's default rerun triggers (all of them: mtime, params, input,
    software-env, code; the shipped profiles use a subset), models trained per run are done
    for the stacked config and the other way round. Evaluations of parity and PPC rerun where a
    chunk has several runs: an evaluation stack reads all its runs' models, so the input files
    recorded for its outputs differ from a per-run evaluation's (a chunk of one run reads what a
    per-run evaluation reads, and is done)."""
    for done, config in (("alone", "stacked"), ("stacked", "alone")):
        rules = {rule for rule, _ in dry_run_jobs(trained[done], *TARGETS, configfile=configs[config])}
        assert rules == REEVALUATED[config], (done, config, rules)


def test_a_missing_run_reruns_only_its_stack(trained, configs):
    """One run's model file gone: the stacked config reruns the job of its chunk alone, the
    per-run config that run alone, whichever trained it."""
    for where in ("alone", "stacked"):
        model = trained[where] / RUNS["parity"].format(1) / "model.pt"
        aside = model.with_name("aside.pt")
        shutil.move(model, aside)
        try:
            stacked = dry_run_jobs(trained[where], *TARGETS, configfile=configs["stacked"])
            assert ("parity_train_stack0", {"K_train": "2"}) in stacked
            assert {rule for rule, _ in stacked} - EVALUATION_RULES["stacked"] == {"parity_train_stack0"}
            alone = dry_run_jobs(trained[where], *TARGETS, configfile=configs["alone"])
            assert [job for job in alone if job[0] not in EVALUATION_RULES["alone"]] == [
                ("parity_train", {"K_train": "2", "seed": "1"})]
        finally:
            shutil.move(aside, model)


def test_a_killed_stack_job_resumes_every_run_to_the_uninterrupted_weights(tmp_path, trained, configs):
    """SIGKILL to Snakemake and its stack job once every run of the chunk has a checkpoint,
    then the same command: each run ends at the uninterrupted stack job's weights (bit for bit
    when the kill left their checkpoints at one step, else within 1e-3: tests/training/test_stacked.py)
    and within TOLERANCE of the run trained alone."""
    targets = [f"{RUNS['parity'].format(seed)}/model.pt" for seed in (0, 1)]
    files = [str(f) for f in configs["stacked"]]
    base = [PYTHON, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
            "--workflow-profile", "none"]
    cmd = [*base, "--cores", "1", "--rerun-incomplete", *targets, "--configfile", *files]
    last = tmp_path / RUNS["parity"].format(1) / "checkpoint.pt"  # the stack writes seed 0's, then seed 1's
    proc = subprocess.Popen(cmd, env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 300
    while not last.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the stack job finished before it could be killed; train longer"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    at = [load_state(tmp_path / RUNS["parity"].format(seed) / "checkpoint.pt")["step"] for seed in (0, 1)]
    assert all(0 < step < 400 for step in at) and not any((tmp_path / t).exists() for t in targets)

    subprocess.run([*base, "--unlock", "--configfile", *files], check=True, env=subprocess_env(), capture_output=True)
    out = subprocess.run(cmd, env=subprocess_env(), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    log = (tmp_path / "logs/parity/train/K2_seeds0-1.log").read_text()
    for seed, step in zip((0, 1), at):
        assert f"resumed from {RUNS['parity'].format(seed)}/checkpoint.pt at step {step}" in log
        run = RUNS["parity"].format(seed)
        diff = max_weight_diff(trained["stacked"] / run / "model.pt", tmp_path / run / "model.pt")
        assert diff == 0.0 if len(set(at)) == 1 else diff < 1e-3, (at, diff)
        assert max_weight_diff(trained["alone"] / run / "model.pt", tmp_path / run / "model.pt") < TOLERANCE


def test_a_stack_below_one_is_refused_naming_its_key():
    from sparselen.interface.config import schema_errors

    config = smoke_config()
    config["ppc"]["stack"] = 0
    assert schema_errors(config) == ["ppc.stack = 0: 0 is less than the minimum of 1"]

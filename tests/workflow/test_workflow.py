"""The Snakemake DAG: target lists, partial reruns, lint, provenance (smoke config)."""

import collections
import json
import shutil
import subprocess

import pandas as pd
import yaml

from conftest import DEFAULT_CONFIG, PYTHON, ROOT, SMOKE_CONFIG, dry_run_jobs, smoke_config, snakemake


def counts(jobs):
    return collections.Counter(rule for rule, _ in jobs)


def overlay(tmp_path, cfg: dict) -> tuple:
    """The default config with ``cfg`` as its overlay (in place of the smoke overlay), its keys
    in the order given (the order of a key the default lacks is part of its value)."""
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return (DEFAULT_CONFIG, path)


def test_fig_parity_lists_exactly_the_needed_jobs(tmp_path):
    p = smoke_config()["parity"]
    runs = len(p["K_train"]) * len(p["seeds"])
    assert counts(dry_run_jobs(tmp_path, "fig_parity")) == {
        "parity_eval_data": 1, "parity_train": runs, "parity_evaluate": runs,
        "parity_table": 1, "parity_figure": 1, "fig_parity": 1}


def test_smoke_run_outputs(smoke_run):
    p = smoke_config()["parity"]
    table = pd.read_csv(smoke_run / "results/parity/table.csv")
    assert set(table["K_train"]) == set(p["K_train"])
    assert (table["n_seeds"] == len(p["seeds"])).all()
    # impossible cells (k_test > l) are absent, never 0
    assert not ((table["k_test"] > table["length"] // 2)).any()
    assert len(table) == sum(k <= L // 2 for k in p["eval"]["k_test"] for L in p["eval"]["lengths"]) * len(p["K_train"])
    assert table["mean"].between(0, 1).all()
    ev = pd.read_csv(smoke_run / "results/parity/K1/seed0/eval.csv")
    assert {"K_train", "seed", "scheme", "k_test", "length", "n", "accuracy", "config_hash"} <= set(ev.columns)
    summary = json.loads((smoke_run / "results/parity/K1/seed0/train_summary.json").read_text())
    assert {"config_hash", "seed", "versions", "device", "git_commit"} <= set(summary)
    for f in ("results/figures/parity.png", "results/figures/parity.pdf", "results/parity/table.md"):
        assert (smoke_run / f).stat().st_size > 1000
    for rule in ("parity/eval_data", "parity/train/K1_seed0", "parity/evaluate/K1_seed0", "parity/table"):
        assert (smoke_run / f"results/benchmarks/{rule}.tsv").exists()
    assert counts(dry_run_jobs(smoke_run, "all")) == {}  # nothing left to do


def smoke_overlay() -> dict:
    return yaml.safe_load(SMOKE_CONFIG.read_text())


def test_changing_the_length_grid_reruns_evaluation_but_no_training(smoke_run, tmp_path):
    cfg = smoke_overlay()
    cfg["parity"]["eval"]["lengths"] = sorted(cfg["parity"]["eval"]["lengths"] + [30])
    c = counts(dry_run_jobs(smoke_run, "fig_parity", configfile=overlay(tmp_path, cfg)))
    runs = len(cfg["parity"]["K_train"]) * len(cfg["parity"]["seeds"])
    assert c["parity_train"] == 0
    assert c["parity_eval_data"] == 1 and c["parity_evaluate"] == runs
    assert c["parity_table"] == 1 and c["parity_figure"] == 1


def test_adding_one_K_train_trains_only_that_one(smoke_run, tmp_path):
    cfg = smoke_overlay()
    cfg["parity"]["K_train"] = cfg["parity"]["K_train"] + [3]
    jobs = dry_run_jobs(smoke_run, "fig_parity", configfile=overlay(tmp_path, cfg))
    trains = [w for rule, w in jobs if rule == "parity_train"]
    assert sorted(w["seed"] for w in trains) == sorted(str(s) for s in cfg["parity"]["seeds"])
    assert {w["K_train"] for w in trains} == {"3"}
    assert {w["K_train"] for rule, w in jobs if rule == "parity_evaluate"} == {"3"}


def test_one_laws_training_retrains_only_that_laws_gpt_runs(smoke_run, tmp_path):
    cfg = smoke_overlay()
    cfg["theory"]["gpt"]["law_train"] = {"coupled": {"steps": 6}}
    jobs = dry_run_jobs(smoke_run, "fig_theory", configfile=overlay(tmp_path, cfg))
    runs = [w for rule, w in jobs if rule == "theory_run_gpt"]
    assert runs and {w["distribution"] for w in runs} == {"coupled"}
    assert not [w for rule, w in jobs if rule.startswith("theory_run_sfa")]


def test_runtime_knobs_rerun_nothing(smoke_run, tmp_path):
    """device, compile, threads, checkpoint_minutes, peak_tflops and packing are not experiment
    identity: switching them plans no job."""
    cfg = smoke_overlay() | {"device": "auto", "compile": True, "threads": 2, "checkpoint_minutes": 0,
                             "peak_tflops": 100, "packing": {"jobs_per_gpu": 3, "gpu_memory_gib": 24}}
    assert counts(dry_run_jobs(smoke_run, "all", configfile=overlay(tmp_path, cfg))) == {}


def test_a_second_seed_set_is_one_key_away(smoke_run, tmp_path):
    """seed_offset trains every model again on disjoint seeds, on the same evaluation sets."""
    cfg = smoke_overlay() | {"seed_offset": 100}
    jobs = dry_run_jobs(smoke_run, "fig_parity", configfile=overlay(tmp_path, cfg))
    p = smoke_config()["parity"]
    seeds = sorted(int(w["seed"]) for rule, w in jobs if rule == "parity_train")
    assert seeds == sorted(s + 100 for s in p["seeds"] for _ in p["K_train"])
    assert counts(jobs)["parity_eval_data"] == 0


def test_a_task_can_have_its_own_seeds(smoke_run, tmp_path):
    """ppc.<task>.seeds: more seeds for one task train only that task's new runs."""
    cfg = smoke_overlay()
    p = smoke_config()["ppc"]
    cfg["ppc"]["addition"]["seeds"] = [*p["seeds"], 101, 102]
    jobs = dry_run_jobs(smoke_run, "fig_ppc", configfile=overlay(tmp_path, cfg))
    trained = collections.Counter((w["task"], int(w["seed"])) for rule, w in jobs if rule == "ppc_train")
    assert trained == {("addition", 101): len(p["schemes"]), ("addition", 102): len(p["schemes"])}


def test_the_ledger_counts_the_jobs_of_this_dag_only(smoke_run, tmp_path):
    """A benchmark file left by a run of another configuration is not counted."""
    work = tmp_path / "run"
    shutil.copytree(smoke_run, work, symlinks=True)
    bench = work / "results/benchmarks"
    shutil.copy(bench / "parity/train/K1_seed0.tsv", bench / "parity/train/K99_seed0.tsv")
    snakemake(work, "--cores", "1", "--forcerun", "report_ledger", "results/report/ledger_figures.csv")
    ledger = pd.read_csv(work / "results/report/ledger_figures.csv").set_index("slice")
    own = [f for f in bench.rglob("*.tsv") if f.parts[-2:] != ("train", "K99_seed0.tsv")]
    assert ledger.loc["all", "jobs"] == sum(f.relative_to(bench).parts[0] != "report" for f in own)
    p = smoke_config()["parity"]
    rules = pd.read_csv(work / "results/report/ledger_rules.csv").set_index(["slice", "step"])
    assert rules.loc[("parity", "train"), "jobs"] == len(p["K_train"]) * len(p["seeds"])


def test_a_config_file_replaces_the_default_instead_of_merging_over_it(tmp_path):
    """A complete config with the parity slice only: no other slice's job is planned (merged
    over config.yaml, it would inherit every other slice), and the report says 'not run'."""
    cfg = smoke_config()
    path = tmp_path / "parity_only.yaml"
    path.write_text(yaml.safe_dump({"parity": cfg["parity"]}))
    rules = counts(dry_run_jobs(tmp_path, "all", configfile=path))
    assert rules["parity_train"] == len(cfg["parity"]["K_train"]) * len(cfg["parity"]["seeds"])
    assert rules["report_claims"] == 1
    assert not [r for r in rules if r.startswith(("ppc_", "language_", "theory_"))], rules


def test_deleting_the_figure_redraws_only_the_figure(smoke_run, tmp_path):
    work = tmp_path / "copy"
    shutil.copytree(smoke_run, work, symlinks=True)
    (work / "results/figures/parity.png").unlink()
    assert counts(dry_run_jobs(work, "fig_parity")) == {"parity_figure": 1, "fig_parity": 1}


def test_lint_is_clean():
    out = subprocess.run([PYTHON, "-m", "snakemake", "--lint", "-s", str(ROOT / "Snakefile")],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Lints for" not in out.stdout + out.stderr, out.stdout + out.stderr


def test_snakefmt_is_clean():
    files = [str(ROOT / "Snakefile"), *map(str, sorted((ROOT / "workflow/rules").glob("*.smk")))]
    out = subprocess.run([PYTHON, "-m", "snakefmt", "--check", *files], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr

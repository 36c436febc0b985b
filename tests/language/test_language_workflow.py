"""The natural-language DAG (smoke config): jobs per target, outputs, bad corpus paths."""

import collections
import shutil

import pandas as pd
import yaml

from conftest import DEFAULT_CONFIG, SMOKE, SMOKE_CONFIG, dry_run_jobs, smoke_config, snakemake
from sparselen.language.tables import TABLES


def smoke_language():
    return smoke_config()["language"]


def test_fig_language_lists_exactly_the_needed_jobs(tmp_path):
    lang = smoke_language()
    runs = (len(lang["schemes"]["short"]) + len(lang["schemes"]["long"])) * len(lang["seeds"])
    planned = dry_run_jobs(tmp_path, "fig_language")
    jobs = collections.Counter(rule for rule, _ in planned)
    assert jobs == {"language_corpus": 1, "language_tokenizer": 1, "language_tokens": 1, "language_train": runs,
                    "language_loss_by_position": runs, "language_analyze": len(lang["seeds"]),
                    "language_analysis_merge": len(lang["seeds"]),
                    "language_transfer": runs, "language_table": len(TABLES), "language_figures": 1,
                    "fig_language": 1}
    assert {w["table"] for rule, w in planned if rule == "language_table"} == set(TABLES)


def test_the_analysis_in_parts_writes_the_table_of_one_job(tmp_path):
    """language.analysis_parts: 2 on the smoke config (batches of 2 tokens, so both parts have
    some) runs a job per part and seed, whose merge equals the analysis in one job."""
    overlay = tmp_path / "parts.yaml"
    target = "results/language/analysis/seed0/dependency.csv"
    outputs = [target.replace("dependency", name) for name in ("screen", "dependency", "planted")]
    merged = {}
    for parts in (2, 1):
        overlay.write_text(yaml.safe_dump({"language": {"analysis_parts": parts, "analysis": {"batch_size": 2}}}))
        snakemake(tmp_path, target, "--cores", "1", configfile=[*SMOKE, overlay])
        merged[parts] = [(tmp_path / f).read_bytes() for f in outputs]
        analysed = tmp_path / "results/language/analysis"
        assert sorted(p.name for p in (analysed / "seed0").glob("part*")) == [f"part{p}" for p in range(parts)]
        shutil.rmtree(analysed)  # the next run analyses again, from the same trained model
    assert merged[2] == merged[1]


def test_smoke_run_language_outputs(smoke_run):
    lang = smoke_language()
    table = pd.read_csv(smoke_run / "results/language/table.csv")
    assert set(table["method"]) == {"greedy", *lang["analysis"]["selectors"], "greedy_null", "greedy_planted"}
    assert set(table["k"]) == set(lang["analysis"]["k"])
    assert (table["ci_low"] <= table["median"]).all() and (table["median"] <= table["ci_high"]).all()
    deps = pd.read_csv(smoke_run / "results/language/analysis/seed0/dependency.csv")
    greedy = deps[deps["method"] == "greedy"]
    assert greedy["t"].ge(lang["contexts"]["long"]).all()
    assert greedy.groupby(["doc", "t"]).size().eq(len(lang["analysis"]["k"])).all()
    gen = pd.read_csv(smoke_run / "results/language/generalization.csv")
    assert set(zip(gen["context"], gen["scheme"])) == {
        (lang["contexts"][size], s) for size in ("short", "long") for s in lang["schemes"][size]}
    pos = pd.read_csv(smoke_run / "results/language/loss_by_position.csv")
    assert pos["bin_high"].max() == lang["eval"]["length"] and pos["bin_low"].min() == 1
    controls = pd.read_csv(smoke_run / "results/language/controls.csv")
    assert set(controls["control"]) == {"none", "planted", "null_far_context"}
    planted = pd.read_csv(smoke_run / "results/language/analysis/seed0/planted.csv")
    assert set(planted["distance"]) == set(lang["analysis"]["planted"]["distances"])
    assert (planted["analysed"] == planted["beyond"]).all()  # min_benefit -100: every copy beyond the window
    induction = pd.read_csv(smoke_run / "results/language/induction.csv")
    assert len(induction) == len(gen[["context", "scheme"]].drop_duplicates())
    # the scale sweep: every long-context run (the reference and its smaller variant), smallest first
    scale = pd.read_csv(smoke_run / "results/language/model_scale.csv")
    assert list(scale["scheme"]) == lang["schemes"]["long"][::-1]
    assert scale["parameters"].is_monotonic_increasing and scale["tokens"].eq(lang["analysis"]["candidates"]).all()
    assert (scale["gain_low"] <= scale["gain"]).all() and scale["copy1_minus_copy2"].notna().all()
    types = pd.read_csv(smoke_run / "results/language/dependency_types.csv")
    assert {"target_in_far", "distance_bin", "sparsity"} == set(types["split"])
    for name in TABLES:  # every table names the runs it was built from: seeds and config hashes
        assert '"config_hashes"' in (smoke_run / f"results/language/{name}.md").read_text().split("Provenance")[1]
    for f in ("language_sparsity.png", "language_sparsity.pdf", "language_length.png", "language_length.pdf"):
        assert (smoke_run / "results/figures" / f).stat().st_size > 1000


def test_missing_corpus_path_fails_before_any_training(tmp_path):
    cfg = yaml.safe_load(SMOKE_CONFIG.read_text())
    cfg["language"]["corpus"] = {"source": "files", "paths": [str(tmp_path / "no_such_c4")]}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = snakemake(tmp_path / "w", "--cores", "1", "fig_language", configfile=(DEFAULT_CONFIG, path), check=False)
    assert out.returncode != 0
    log = (tmp_path / "w/logs/language/corpus.log").read_text()
    assert "no_such_c4" in log and "does not exist" in log
    assert not (tmp_path / "w/results/language/tokenizer.json").exists()
    assert not list((tmp_path / "w/results/language").glob("ctx*/*/seed*/model.pt"))


def token_files_overlay(tmp_path, train_paths, eval_paths):
    """The smoke overlay with its corpus replaced by OLMo token files (vocabulary 300)."""
    cfg = yaml.safe_load(SMOKE_CONFIG.read_text())
    cfg["language"]["corpus"] = {"source": "token_files", "token_files": {
        "train": train_paths, "eval": eval_paths, "dtype": "uint16", "eos_id": 299, "vocab_size": 300}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return (DEFAULT_CONFIG, path)


def test_a_config_can_name_olmo_token_files(tmp_path):
    """source: token_files trains on the files as they are: no corpus, tokenizer or tokens job."""
    import numpy as np

    from sparselen.language import token_files as tf

    rng = np.random.default_rng(0)
    docs = {split: [rng.integers(0, 299, size=int(rng.integers(60, 120))).tolist() for _ in range(n)]
            for split, n in (("train", 40), ("eval", 12))}
    tf.write_tokens(tmp_path / "c4", docs, eos_id=299, vocab_size=300)
    config = token_files_overlay(tmp_path, [str(tmp_path / "c4/train.npy")], [str(tmp_path / "c4/eval*.npy")])
    jobs = collections.Counter(rule for rule, _ in dry_run_jobs(tmp_path / "w", "fig_language", configfile=config))
    assert jobs["language_token_files"] == 1
    assert not {"language_corpus", "language_tokenizer", "language_tokens"} & set(jobs)
    lang = smoke_language()
    summary = f"results/language/ctx{lang['contexts']['long']}/rope/seed0/train_summary.json"
    snakemake(tmp_path / "w", "--cores", "1", summary, configfile=config)
    meta = pd.read_json(tmp_path / "w/results/language/tokens.json", typ="series")
    assert meta["train_tokens"] == sum(len(d) + 1 for d in docs["train"]) and meta["eval_documents"] == 12
    assert (tmp_path / "w" / summary).exists()


def test_missing_token_files_fail_before_any_job(tmp_path):
    config = token_files_overlay(tmp_path, [str(tmp_path / "no_such_tokens/*.npy")], [str(tmp_path)])
    out = snakemake(tmp_path / "w", "--cores", "1", "fig_language", configfile=config, check=False)
    assert out.returncode != 0 and "language.corpus.token_files" in out.stderr and "no_such_tokens" in out.stderr
    assert not (tmp_path / "w/results").exists()

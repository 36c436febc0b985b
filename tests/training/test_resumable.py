"""No crash window: the checkpoint outlives the job (the workflow removes it after recording
every job), so a job killed at any point, even after writing all its outputs, resumes; one
killed after training resumes with nothing left to train."""

import logging
import os
from importlib import import_module

import pytest
import torch
from conftest import smoke_config
from test_train import train_job

from sparselen.interface.job import Job
from sparselen.parity import TRAINING_CODE
from sparselen.jobs.dispatch import run
from sparselen.training.modelfile import load_state
from sparselen.training.resumable import clean


def parity(tmp):
    spec = train_job(tmp, steps=20, checkpoint_every=5)
    spec["params"]["checkpoint"] = str(tmp / "checkpoint.pt")
    spec["output"]["summary"] = str(tmp / "train_summary.json")
    rule = spec.pop("rule")
    outs = [tmp / "model.pt", tmp / "log.csv", tmp / "train_summary.json"]
    return outs, lambda: run(Job.of(rule, **spec))


def theory_gpt(tmp):
    t = smoke_config()["theory"]
    params = {**{k: t[k] for k in ("task", "train", "eval")},
              "gpt": {k: v for k, v in t["gpt"].items() if k != "k"}, "checkpoint": tmp / "checkpoint.pt"}
    outs = [tmp / "model.pt", tmp / "log.csv", tmp / "eval.csv", tmp / "train_summary.json"]
    output = {"model": outs[0], "log_csv": outs[1], "eval": outs[2], "summary": outs[3]}
    return outs, lambda: run(Job.of("theory_run_gpt", wildcards={"distribution": "local", "k": 2, "seed": 0},
                                    params=params, output=output))


def weights(path):
    return load_state(path)["model"]


def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("make", [parity, theory_gpt], ids=["parity", "theory_gpt"])
def test_job_killed_before_it_is_recorded_resumes_at_the_end(make, tmp_path, caplog):
    """All outputs written, the job then treated as failed (killed before Snakemake records
    it): Snakemake deletes the outputs, and the rerun resumes at the last step with the same
    weights. The workflow's cleanup removes only checkpoints beside finished outputs."""
    ckpt = tmp_path / "checkpoint.pt"
    outs, job = make(tmp_path)
    job()
    assert all(p.exists() for p in outs)
    steps = load_state(ckpt)["step"]  # the summary is written and the checkpoint still there
    first = weights(outs[0])
    for p in outs:
        p.unlink()
    caplog.set_level(logging.INFO)
    job()
    assert f"resumed from {ckpt} at step {steps}" in caplog.text
    assert same(first, weights(outs[0])) and all(p.exists() for p in outs)
    unfinished = tmp_path / "other" / "checkpoint.pt"
    unfinished.parent.mkdir()
    unfinished.write_bytes(ckpt.read_bytes())
    assert clean(tmp_path) == [ckpt]
    assert not ckpt.exists() and unfinished.exists()


def test_kill_during_the_evaluation_after_training(tmp_path, monkeypatch, caplog):
    """The theory slice evaluates after training, in the same job: a crash there keeps the
    final checkpoint, and the rerun trains nothing."""
    from sparselen.theory import jobs

    ckpt = tmp_path / "checkpoint.pt"
    outs, job = theory_gpt(tmp_path)
    real = jobs.evaluate

    def crash(*a, **k):
        raise KeyboardInterrupt("killed during the evaluation")

    monkeypatch.setattr(jobs, "evaluate", crash)
    with pytest.raises(KeyboardInterrupt):
        job()
    steps = smoke_config()["theory"]["gpt"]["train"]["steps"]
    assert load_state(ckpt)["step"] == steps
    first = weights(outs[0])
    for p in outs:
        p.unlink(missing_ok=True)
    monkeypatch.setattr(jobs, "evaluate", real)
    caplog.set_level(logging.INFO)
    job()
    assert f"resumed from {ckpt} at step {steps}" in caplog.text
    assert same(first, weights(outs[0])) and all(p.exists() for p in outs)


def edited_package(tmp_path, monkeypatch):
    """A copy of the package that the fingerprints read, and a function that edits what one of
    its files computes (a statement appended)."""
    import shutil

    from sparselen.training import resumable

    copy = tmp_path / "package"
    shutil.copytree(resumable.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(resumable, "PACKAGE", copy)
    resumable.code_fingerprint.cache_clear()

    def edit(module: str):
        with open(copy / module, "a") as f:
            f.write("\nEDITED = 1\n")
        resumable.code_fingerprint.cache_clear()

    return edit


@pytest.mark.parametrize("module, keeps", [
    ("report/render.py", True), ("estimate/tables.py", True), ("ppc/tasks/copy_repeat.py", True),
    ("parity/evaluate.py", True), ("parity/task.py", False), ("nn/model.py", False), ("training/train.py", False)])
def test_an_edit_discards_checkpoints_only_of_the_code_that_computes_the_run(module, keeps, tmp_path, monkeypatch,
                                                                               caplog):
    """A parity training killed half way, an edit, the rerun: an edit of the report, the
    estimate, another slice or the evaluation resumes the checkpoint; an edit of the slice's
    task, the model or the trainer starts again from step 0 (its checkpoint would be the old
    code's)."""
    from sparselen.training import resumable

    edit = edited_package(tmp_path, monkeypatch)
    work = tmp_path / "run"
    work.mkdir()
    outs, job = parity(work)
    job()
    for p in outs:  # as after a kill at the last step: outputs gone, checkpoint kept
        p.unlink()
    before = load_state(work / "checkpoint.pt")["code"]
    edit(module)
    caplog.set_level(logging.INFO)
    job()
    after = load_state(work / "checkpoint.pt")["code"]
    assert ("resumed from" in caplog.text) == keeps and ("ignoring checkpoint" in caplog.text) == (not keeps)
    assert (before == after) == keeps
    assert after == resumable.code_fingerprint(*TRAINING_CODE)


def test_each_slice_fingerprints_its_own_training_code(tmp_path, monkeypatch):
    from sparselen.interface.config import SLICES
    from sparselen.training import resumable

    edit = edited_package(tmp_path, monkeypatch)
    prints = lambda: {s: resumable.code_fingerprint(*import_module(f"sparselen.{s}").TRAINING_CODE)  # noqa: E731
                      for s in SLICES}
    before = prints()
    assert len(set(before.values())) == len(SLICES)
    edit("ppc/tasks/addition.py")  # a folder in the ppc slice's list stands for its files
    after = prints()
    assert [s for s in SLICES if before[s] != after[s]] == ["ppc"]


def test_a_fingerprint_follows_what_the_code_computes_not_where_it_lives(tmp_path, monkeypatch):
    """Comments, docstrings, where an import stands and the folder a module lives in change no
    fingerprint (a module moved between layers reruns nothing); a changed value does."""
    from sparselen.training import resumable

    copy = tmp_path / "sparselen"
    (copy / "a").mkdir(parents=True)
    (copy / "b").mkdir()
    for d in (copy, copy / "a", copy / "b"):
        (d / "__init__.py").write_text("")
    (copy / "a" / "helper.py").write_text("def f():\n    return 1\n")
    user = copy / "user.py"
    user.write_text("from sparselen.a.helper import f\n\n\ndef g():\n    return f() + 1\n")
    monkeypatch.setattr(resumable, "PACKAGE", copy)
    before = resumable.source_fingerprint("user.py", "a")
    (copy / "a" / "helper.py").rename(copy / "b" / "helper.py")
    user.write_text('"""Doc."""\n\n\ndef g():  # why\n    from sparselen.b.helper import f\n\n    return f() + 1\n')
    assert resumable.source_fingerprint("user.py", "b") == before
    user.write_text("from sparselen.b.helper import f\n\n\ndef g():\n    return f() + 2\n")
    assert resumable.source_fingerprint("user.py", "b") != before
    user.write_text("from sparselen.b.other import f\n\n\ndef g():\n    return f() + 1\n")
    assert resumable.source_fingerprint("user.py", "b") != before


def test_the_last_checkpoint_keeps_the_weights_without_the_moments(tmp_path, monkeypatch, caplog):
    """A run's checkpoints carry AdamW's moments until its last step, whose checkpoint carries
    its weights alone: a finished run leaves a checkpoint of its model file's size (a third of
    one that trains on), for a run alone and for each run of a stack. Killed before Snakemake
    records the job (its outputs deleted), each rerun resumes at the last step and writes the
    same weights."""
    from test_stacked import as_job, parity_job

    import sparselen.training.modelfile as modelfile
    from sparselen.jobs.stacks import train_jobs

    real, saved = modelfile.save_state, []

    def watched(path, state):
        real(path, state)
        if "optimizer" in state:
            saved.append((str(path), state["step"], len(state["optimizer"]["state"]), os.path.getsize(path)))

    monkeypatch.setattr(modelfile, "save_state", watched)
    outs, job = parity(tmp_path / "alone")
    (tmp_path / "alone").mkdir()
    job()
    stack = [parity_job(tmp_path / "stack" / str(s), s) for s in (0, 1)]
    train_jobs([as_job(spec) for spec in stack])
    for ckpt in [tmp_path / "alone/checkpoint.pt"] + [tmp_path / f"stack/{s}/ckpt.pt" for s in (0, 1)]:
        mine = [(step, moments, size) for path, step, moments, size in saved if path == str(ckpt)]
        *training, (last, moments, size) = mine
        assert training and all(m > 0 for _, m, _ in training) and moments == 0, mine
        assert load_state(ckpt)["step"] == last and size < 0.4 * min(s for _, _, s in training)
        assert size < 1.1 * (ckpt.parent / "model.pt").stat().st_size
    first = [weights(p) for p in [outs[0]] + [tmp_path / f"stack/{s}/model.pt" for s in (0, 1)]]
    for p in outs + [tmp_path / f"stack/{s}/{name}" for s in (0, 1) for name in ("model.pt", "log.csv", "summary.json")]:
        p.unlink()
    caplog.set_level(logging.INFO)
    job()
    train_jobs([as_job(spec) for spec in stack])
    assert caplog.text.count("at step 20") == 1 and caplog.text.count("at step 12") == 2
    again = [weights(p) for p in [outs[0]] + [tmp_path / f"stack/{s}/model.pt" for s in (0, 1)]]
    assert all(same(a, b) for a, b in zip(first, again))

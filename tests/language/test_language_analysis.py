"""The language analysis on an accelerator's terms: saliency keeps no parameter gradients, every
forward pass runs under the training's autocast, the job runs on a (simulated) GPU with no
tensor on the wrong device, and it resumes after a kill to exactly the rows of an uninterrupted
run."""

import contextlib
import logging

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from sparselen.interface.job import Job
from sparselen.jobs.dispatch import run
from sparselen.language import analysis, controls, dependency, evaluate
from sparselen.nn.model import GPTNeoX, ModelConfig
from sparselen.training.resumable import ANALYSIS_PROGRESS, clean

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    return GPTNeoX(ModelConfig(vocab_size=50, n_layer=2, n_head=2, d_model=32, d_ff=64)).eval()


def saliency_with_parameter_gradients(model, ctx, tgt, batch_size):
    """Saliency as computed with the parameters still requiring gradients."""
    store, out = {}, []
    hook = model.input_embeddings().register_forward_hook(lambda mod, inp, out: store.update(e=out))
    for ids, y in zip(ctx.split(batch_size), tgt.split(batch_size)):
        with torch.enable_grad():
            h = model.hidden_states(ids, torch.arange(ids.shape[1]).expand_as(ids), last_only=True)[:, -1]
            (grad,) = torch.autograd.grad(F.cross_entropy(model.lm_head(h).float(), y, reduction="sum"), store["e"])
        out.append((grad * store["e"]).sum(-1).abs().detach())
    hook.remove()
    return torch.cat(out)


def test_saliency_takes_no_parameter_gradient_and_restores_requires_grad(tiny_model):
    ctx = torch.randint(0, 50, (5, 16), generator=torch.Generator().manual_seed(1))
    tgt = torch.randint(0, 50, (5,), generator=torch.Generator().manual_seed(2))
    reference = saliency_with_parameter_gradients(tiny_model, ctx, tgt, 2)
    for p in tiny_model.parameters():
        p.grad = None
    frozen_before = tiny_model.lm_head.weight
    frozen_before.requires_grad_(False)  # a setting of the caller's, restored as it was
    during = []
    hook = tiny_model.input_embeddings().register_forward_pre_hook(
        lambda mod, args: during.append(any(p.requires_grad for p in tiny_model.parameters())))
    try:
        scores = dependency.saliency_scores(tiny_model, ctx, tgt, batch_size=2, device=CPU)
    finally:
        hook.remove()
        frozen_before.requires_grad_(True)
    assert during == [False] * 3  # three batches, no parameter requiring a gradient in any
    assert all(p.grad is None for p in tiny_model.parameters())
    assert [p.requires_grad for p in tiny_model.parameters()] == [True] * len(list(tiny_model.parameters()))
    assert torch.equal(scores, reference)  # the same numbers on the CPU
    assert scores.shape == (5, 16) and (scores > 0).all() and not scores.requires_grad


def test_a_failing_saliency_pass_restores_requires_grad(tiny_model):
    def fail(mod, args):
        raise RuntimeError("out of memory")

    hook = tiny_model.input_embeddings().register_forward_pre_hook(fail)
    with pytest.raises(RuntimeError, match="out of memory"):
        dependency.saliency_scores(tiny_model, torch.zeros(1, 8, dtype=torch.long), torch.zeros(1, dtype=torch.long),
                                   1, CPU)
    hook.remove()
    assert all(p.requires_grad for p in tiny_model.parameters())


def test_every_analysis_forward_pass_runs_under_the_training_autocast(tiny_model, monkeypatch):
    """Each pass of the analysis, the transfer losses and the probes enters ``autocast(device)``
    (bf16 on CUDA, nothing on CPU): checked by a hook on the embedding of every pass."""
    depth, outside = [0], []

    @contextlib.contextmanager
    def counting_autocast(device):
        depth[0] += 1
        try:
            yield
        finally:
            depth[0] -= 1

    for module in (dependency, controls, evaluate):
        monkeypatch.setattr(module, "autocast", counting_autocast)
    hook = tiny_model.input_embeddings().register_forward_pre_hook(lambda mod, args: outside.append(depth[0] == 0))
    g = torch.Generator().manual_seed(3)
    docs = [torch.randint(0, 50, (80,), generator=g) for _ in range(4)]
    cfg = {"seed": 0, "batch_size": 8, "k": [1, 2], "min_benefit": -100.0, "candidates": 6, "tokens": 3,
           "selectors": list(dependency.SELECTORS), "null_control": True,
           "planted": {"tokens": 3, "span": 4, "distances": [12]}}
    try:
        screened = analysis.screen(tiny_model, docs, cfg, 8, 24, CPU)
        analysis.sparse_dependency(tiny_model, docs, screened, cfg, 8, 24, CPU)
        analysis.planted_control(tiny_model, docs, cfg, 8, 24, CPU)
        analysis.context_losses(tiny_model, docs, [(0, 30)], [8, 24], 4, CPU)
        seqs = controls.induction_sequences(docs, 2, prefix=2, span=6, filler=12, seed=0)
        controls.induction_probe(tiny_model, seqs, 2, 6, 8, 4, CPU)
        evaluate.loss_by_position(tiny_model, docs[0][:33][None], 4, CPU)
    finally:
        hook.remove()
    assert len(outside) > 20 and not any(outside)


# ----------------------------------------------------------------------------- resume
SHORT, LONG = 8, 24
ANALYSIS = {"seed": 3, "candidates": 12, "tokens": 4, "min_benefit": -100.0, "k": [1, 2], "sparse_fraction": 0.9,
            "bootstrap": 50, "selectors": list(dependency.SELECTORS), "batch_size": 64, "null_control": True,
            "planted": {"tokens": 4, "span": 4, "distances": [12, 4]}}


@pytest.fixture(scope="module")
def analysis_inputs(tmp_path_factory):
    """Token files and a briefly trained model file (context 24)."""
    from sparselen.language.token_files import write_tokens

    tmp = tmp_path_factory.mktemp("analysis_inputs")
    rng = np.random.default_rng(0)
    docs = [rng.integers(1, 60, rng.integers(60, 120)).tolist() for _ in range(30)]
    write_tokens(tmp, {"train": docs[:24], "eval": docs[24:]}, eos_id=0, vocab_size=64)
    train = {"steps": 10, "batch_tokens": 192, "checkpoint_every": 10, "log_every": 5,
             "optimizer": {"lr": 3e-3, "warmup_steps": 2}}
    model = {"n_layer": 1, "n_head": 2, "d_model": 32, "d_ff": 64}
    run(Job.of("language_train", input={"tokens": str(tmp / "tokens.json")},
               wildcards={"context": LONG, "run": "rope", "seed": 0},
               output={"model": str(tmp / "model.pt"), "log_csv": str(tmp / "log.csv"),
                       "summary": str(tmp / "summary.json")},
               params={"model": model, "scheme": "rope", "pose": {"chunks": 2, "target_length": 48}, "train": train,
                       "checkpoint": str(tmp / "ckpt.pt")}))
    return {"model": str(tmp / "model.pt"), "tokens": str(tmp / "tokens.json")}


def analyze(inputs, out, config=None, part=None, parts=1, **changes):
    out.mkdir(exist_ok=True)
    outputs = {name: str(out / f"{name}.csv") for name in ("screen", "planted")} | {"deps": str(out / "dependency.csv")}
    wildcards = {"seed": 0} | ({} if part is None else {"part": part})
    run(Job.of("language_analyze", input=inputs, output=outputs, wildcards=wildcards, config=config,
               params={"analysis": {**ANALYSIS, **changes}, "contexts": {"short": SHORT, "long": LONG},
                       "parts": parts}))
    return [out / "screen.csv", out / "dependency.csv", out / "planted.csv"]


@pytest.mark.parametrize("parts,batch_size", [(3, 1), (2, 2)])
def test_the_analysis_in_parts_merges_to_the_analysis_in_one(analysis_inputs, tmp_path, parts, batch_size):
    """Each part analyses its range of tokens (whole batches; a part can be empty), and the
    merged screen, dependency rows and planted control equal one job's, byte for byte."""
    whole = analyze(analysis_inputs, tmp_path / "whole", batch_size=batch_size)
    split = [analyze(analysis_inputs, tmp_path / f"part{p}", part=p, parts=parts, batch_size=batch_size)
             for p in range(parts)]
    greedy = [int(d["method"].eq("greedy").sum()) if "method" in d else 0 for d in (pd.read_csv(f) for _, f, _ in split)]
    assert sum(greedy) == pd.read_csv(whole[1])["method"].eq("greedy").sum() and max(greedy) < sum(greedy)
    merged = tmp_path / "merged"
    names = ("screen", "deps", "planted")
    run(Job.of("language_analysis_merge", input={name: [str(p[i]) for p in split] for i, name in enumerate(names)},
               output={name: str(merged / f) for name, f in zip(names, ("screen.csv", "dependency.csv", "planted.csv"))},
               params={"analysis": {**ANALYSIS, "batch_size": batch_size}}))
    for a in whole:
        assert a.read_bytes() == (merged / a.name).read_bytes(), a.name


def test_the_analysis_on_a_simulated_gpu_gives_the_cpu_rows(analysis_inputs, tmp_path, monkeypatch):
    """Every pass of the analysis with the model on a (simulated) GPU: no tensor on the wrong
    device, and the same rows as on the CPU (the simulation computes on the CPU, no autocast)."""
    from sparselen.runtime import simulated_cuda

    on_cpu = analyze(analysis_inputs, tmp_path / "cpu")
    monkeypatch.setenv(simulated_cuda.ENV, "1")
    on_gpu = analyze(analysis_inputs, tmp_path / "gpu", config={"device": "cuda"})
    for a, b in zip(on_cpu, on_gpu):
        assert a.read_bytes() == b.read_bytes(), a.name


class Killed(Exception):
    pass


def count_greedy(monkeypatch, kill_after=None) -> list:
    """Count the analysis' greedy searches (one per token); raise ``Killed`` at search
    ``kill_after`` + 1, as a job killed at its time limit stops in the middle of one."""
    calls, real = [], dependency.greedy

    def counted(*args, **kwargs):
        if kill_after is not None and len(calls) == kill_after:
            raise Killed
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(analysis, "greedy", counted)
    return calls


@pytest.mark.parametrize("kill_after", [2, 6], ids=["in greedy", "in the null control"])
def test_a_killed_analysis_resumes_to_the_rows_of_an_uninterrupted_one(analysis_inputs, tmp_path, monkeypatch,
                                                                        caplog, kill_after):
    calls = count_greedy(monkeypatch)
    straight = analyze(analysis_inputs, tmp_path / "straight")
    total = len(calls)
    assert total > ANALYSIS["tokens"] * 2  # greedy, the null control and the planted control

    count_greedy(monkeypatch, kill_after=kill_after)
    with pytest.raises(Killed):
        analyze(analysis_inputs, tmp_path / "killed")
    progress = tmp_path / "killed" / ANALYSIS_PROGRESS
    assert progress.exists() and not (tmp_path / "killed/dependency.csv").exists()

    caplog.set_level(logging.INFO)
    calls = count_greedy(monkeypatch)
    resumed = analyze(analysis_inputs, tmp_path / "killed")
    assert len(calls) == total - kill_after  # the tokens searched before the kill are not searched again
    assert f"resuming analysis from {progress}" in caplog.text
    for a, b in zip(straight, resumed):
        assert a.read_bytes() == b.read_bytes(), a.name
    # the workflow's cleanup, once the jobs are recorded
    assert clean(tmp_path) == [tmp_path / run / ANALYSIS_PROGRESS for run in ("killed", "straight")]


def test_the_progress_of_another_analysis_is_not_resumed(analysis_inputs, tmp_path, monkeypatch, caplog):
    count_greedy(monkeypatch, kill_after=3)
    with pytest.raises(Killed):
        analyze(analysis_inputs, tmp_path / "a")
    caplog.set_level(logging.INFO)
    calls = count_greedy(monkeypatch)
    changed = analyze(analysis_inputs, tmp_path / "a", k=[1, 3])
    assert "ignoring analysis progress" in caplog.text and "resuming" not in caplog.text
    fresh_calls = count_greedy(monkeypatch)
    fresh = analyze(analysis_inputs, tmp_path / "b", k=[1, 3])
    assert len(calls) == len(fresh_calls)
    assert changed[1].read_bytes() == fresh[1].read_bytes()


def test_unfinished_analysis_progress_is_kept_by_the_cleanup(tmp_path):
    (tmp_path / ANALYSIS_PROGRESS).write_bytes(b"")
    (tmp_path / "screen.csv").write_text("")
    assert clean(tmp_path) == [] and (tmp_path / ANALYSIS_PROGRESS).exists()

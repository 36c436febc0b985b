"""Training: schedule, atomic outputs, and resume after SIGKILL to identical final weights."""

import copy
import json
import logging
import os
import signal
import subprocess
import time

import pytest
import torch
from conftest import PYTHON, ROOT, subprocess_env
from specs import PARAMS

from sparselen.interface.job import Job, Runtime
from sparselen.interface.run import Run, RunFiles
from sparselen.jobs.dispatch import run
from sparselen.nn.architectures import model_config
from sparselen.nn.batch import IGNORE, Batch
from sparselen.training.modelfile import load_state, save_state
from sparselen.training.train import OptimConfig, TrainConfig, lr_lambda, train


def train_job(out, steps=600, checkpoint_every=10, compile=False, **runtime) -> dict:
    """The parity_train job of one model (K_train 2, seed 0) writing under ``out``."""
    params = copy.deepcopy(PARAMS)
    params["train"].update(steps=steps, checkpoint_every=checkpoint_every)
    return {"rule": "parity_train", "wildcards": {"K_train": 2, "seed": 0},
            "output": {"model": str(out / "model.pt"), "log_csv": str(out / "log.csv"),
                       "summary": str(out / "summary.json")},
            "params": {**params, "checkpoint": str(out / "ckpt.pt")},
            "config": {"device": "cpu", "compile": compile, "threads": 1, "checkpoint_minutes": 0, **runtime}}


def train_cmd(out, **kw):
    return [PYTHON, str(ROOT / "tests/run_job.py"), json.dumps(train_job(out, **kw))]


def run_job(spec: dict) -> None:
    spec = dict(spec)
    run(Job.of(spec.pop("rule"), **spec))


def kill_after_checkpoint(cmd, checkpoint) -> None:
    """Start a training process and SIGKILL it once it has written its first checkpoint."""
    proc = subprocess.Popen(cmd, env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not checkpoint.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.05)  # let it run past the checkpoint a little (600 steps take seconds)
    assert proc.poll() is None, "training finished before it could be killed; make it longer"
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_linear_schedule_with_warmup():
    f = lr_lambda(OptimConfig(warmup_steps=10), total_steps=110)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)
    assert f(60) == pytest.approx(0.5) and f(110) == 0.0


def test_sigkill_then_resume_gives_identical_weights(tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    straight.mkdir(), killed.mkdir()
    subprocess.run(train_cmd(straight), check=True, env=subprocess_env(), capture_output=True)

    kill_after_checkpoint(train_cmd(killed), killed / "ckpt.pt")
    # a killed job leaves no final output, and no half-written file under an output's name
    assert not (killed / "model.pt").exists() and not (killed / "summary.json").exists()
    resumed_at = load_state(killed / "ckpt.pt")["step"]
    assert 0 < resumed_at < 600

    result = subprocess.run(train_cmd(killed), check=True, env=subprocess_env(), capture_output=True, text=True)
    assert f"resumed from {killed / 'ckpt.pt'} at step {resumed_at}" in result.stderr
    a = load_state(straight / "model.pt")
    b = load_state(killed / "model.pt")
    assert a["model"].keys() == b["model"].keys()
    for name in a["model"]:
        assert torch.equal(a["model"][name], b["model"][name]), name
    assert [r["loss"] for r in a["log"]] == [r["loss"] for r in b["log"]] and len(a["log"]) == 60
    assert load_state(killed / "ckpt.pt")["step"] == 600  # kept (last step) until the workflow cleans up
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["config_hash"] and summary["seed"] == 0 and summary["versions"]["torch"].startswith("2.13")
    assert a["log"][-1]["loss"] < a["log"][0]["loss"]  # it learned something


def test_checkpoint_of_another_config_is_ignored(tmp_path, caplog):
    save_state(tmp_path / "ckpt.pt", {"config_hash": "not-this-one", "step": 10})
    run_job(train_job(tmp_path, steps=20))
    assert "ignoring checkpoint" in caplog.text
    assert len(load_state(tmp_path / "model.pt")["log"]) == 2


def test_runtime_knobs_keep_the_checkpoint(tmp_path, caplog, monkeypatch):
    """device, compile, threads and micro-batches are not part of a run's identity: a checkpoint
    written under one setting resumes under another. A compiled job keeps its kernels in the
    campaign's cache under the working directory (``sparselen.runtime.device.share_compile_cache``)."""
    caplog.set_level(logging.INFO)
    killed = tmp_path / "killed"
    killed.mkdir()
    kill_after_checkpoint(train_cmd(killed), killed / "ckpt.pt")
    at = load_state(killed / "ckpt.pt")["step"]
    monkeypatch.chdir(tmp_path)  # the workflow's working directory
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    run_job(train_job(killed, compile=True, threads=2, parity={"micro_batch": 4}))
    assert f"resumed from {killed / 'ckpt.pt'} at step {at}" in caplog.text
    assert (killed / "model.pt").exists()
    cache = tmp_path / ".cache/torchinductor"
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(cache) and any(cache.rglob("*.py"))


def test_summary_is_written_before_the_last_checkpoint_and_it_is_kept(tmp_path, monkeypatch):
    """Every output, the summary included, exists before anything could remove the checkpoint:
    the job never removes it (the workflow does, after recording the job)."""
    from pathlib import Path

    outputs = [tmp_path / name for name in ("model.pt", "log.csv", "summary.json")]
    removed = []
    unlink = Path.unlink

    def watched_unlink(self, *args, **kwargs):
        if self.name == "ckpt.pt":
            removed.append([p.exists() for p in outputs])
        return unlink(self, *args, **kwargs)

    monkeypatch.setattr(Path, "unlink", watched_unlink)
    run_job(train_job(tmp_path, steps=20, checkpoint_every=5))
    assert removed == [] and load_state(tmp_path / "ckpt.pt")["step"] == 20
    assert json.loads(outputs[2].read_text())["K_train"] == 2


def test_a_param_added_to_the_rule_makes_the_checkpoint_another_runs(tmp_path, caplog):
    """A run's identity is its rule's params and wildcards (sparselen.interface.run): the same job resumes
    its checkpoint, and the job with one more param (one the step does not even read) does not."""
    caplog.set_level(logging.INFO)
    summary = tmp_path / "summary.json"
    run_job(train_job(tmp_path, steps=20))
    assert json.loads(summary.read_text())["resumed_from_step"] == 0
    run_job(train_job(tmp_path, steps=20))
    assert json.loads(summary.read_text())["resumed_from_step"] == 20  # same identity: nothing left to train
    grown = train_job(tmp_path, steps=20)
    grown["params"]["new_setting"] = 1
    run_job(grown)
    assert json.loads(summary.read_text())["resumed_from_step"] == 0
    assert "ignoring checkpoint" in caplog.text and "its config differ" in caplog.text


def test_a_name_used_by_a_param_and_a_wildcard_is_refused(tmp_path):
    spec = train_job(tmp_path, steps=20)
    spec["params"]["seed"] = 1
    with pytest.raises(ValueError, match=r"\['seed'\] name both a param and a wildcard"):
        run_job(spec)


MICRO_MODELS = {  # (model section, vocabulary, scheme, position-id head size)
    "gpt_neox_ppc": ({"n_layer": 2, "n_head": 2, "d_model": 32, "d_ff": 64}, 12, "ppc", 40),
    "olmo": ({"architecture": "olmo", "variant": "kempner_c4", "n_layer": 2, "n_head": 2, "d_model": 32,
              "d_ff": 64}, 30, "rope", 0),
}


def micro_train(out, name: str, micro_batch: int, steps: int = 4):
    """``steps`` steps of 8 rows whose labelled tokens (and PPC position labels) are spread
    unevenly over the rows, so micro-batches of rows hold different label counts."""
    model, vocab, scheme, max_id = MICRO_MODELS[name]
    extra = {"max_position_id": max_id, "id_embedding": True} if scheme == "ppc" else {}
    mc = model_config(model, vocab, scheme=scheme, **extra)

    def batch_fn(step):
        g = torch.Generator().manual_seed(step)
        ids = torch.randint(0, vocab, (8, 13), generator=g)
        labels = torch.where(torch.rand(8, 13, generator=g) < torch.linspace(0.1, 0.9, 8)[:, None], ids, IGNORE)
        if scheme != "ppc":
            return Batch(ids, labels)
        pos = torch.arange(13) + torch.randint(0, 20, (8, 1), generator=g)
        return Batch(ids, labels, pos, torch.where(labels == IGNORE, IGNORE, (pos + 1).clamp(max=max_id)))

    cfg = TrainConfig(steps=steps, batch_size=8, checkpoint_every=100, log_every=1, micro_batch=micro_batch,
                      optim=OptimConfig(lr=1e-2, warmup_steps=1))
    files = RunFiles(out / "model.pt", out / "log.csv", out / "summary.json", out / "ckpt.pt")
    train(mc, cfg, batch_fn, Run({"model": name}, {}, files, Runtime(torch.device("cpu"), False, 1)))
    return load_state(files.model)


@pytest.mark.parametrize("name", list(MICRO_MODELS))
def test_micro_steps_give_the_one_pass_step(tmp_path, name):
    """Micro-batches of 2 rows (4 micro-steps) and of 4 end 4 steps at the weights and losses
    of one pass over the 8 rows, up to float summation order; a GPT-NeoX with the PPC position
    head (two losses, each over its own label count) and an OLMo."""
    one = micro_train(tmp_path / "one", name, 0)
    parts = {"loss", "token_loss"} | ({"position_loss"} if name == "gpt_neox_ppc" else set())
    for micro in (2, 4):
        split = micro_train(tmp_path / f"micro{micro}", name, micro)
        diff = max(float((one["model"][k] - split["model"][k]).abs().max()) for k in one["model"])
        assert 0 < diff < 1e-5, (micro, diff)  # not 0: the micro-steps ran, in another summation order
        assert [r["step"] for r in split["log"]] == [r["step"] for r in one["log"]] == [1, 2, 3, 4]
        for a, b in zip(one["log"], split["log"]):
            assert parts <= set(a) and set(a) == set(b)
            assert [b[p] for p in parts] == pytest.approx([a[p] for p in parts], rel=1e-5, abs=1e-6)


def test_the_default_and_a_whole_batch_micro_batch_take_the_one_pass_path(tmp_path, monkeypatch):
    """micro_batch 0 and micro_batch >= the rows run the step as one forward/backward pass
    through ``loss_fn``, as before micro-steps existed; the micro-step path is never entered."""
    import sparselen.training.train as trainer

    passes = []
    loss_fn = trainer.loss_fn
    monkeypatch.setattr(trainer, "loss_fn", lambda *a, **k: passes.append(1) or loss_fn(*a, **k))
    monkeypatch.setattr(trainer, "micro_batches", lambda *a: pytest.fail("micro-step path entered"))
    for micro in (0, 8, 16):
        passes.clear()
        micro_train(tmp_path / str(micro), "olmo", micro, steps=3)
        assert len(passes) == 3
    with pytest.raises(ValueError, match="8 rows does not split into micro-batches of 3 rows"):
        monkeypatch.undo()
        micro_train(tmp_path / "bad", "olmo", 3, steps=1)


def test_a_micro_batch_that_does_not_divide_the_rows_is_named_before_any_job():
    """Each slice's micro-batch against its rows per step (language: tokens, per context and
    process); 0 and the whole batch are one pass."""
    from sparselen.interface.config import load
    from sparselen.jobs.checks import semantic_errors

    cfg = load([ROOT / "configs/paper.yaml"])
    assert semantic_errors(cfg) == []
    cfg["parity"]["micro_batch"], cfg["ppc"]["micro_batch"], cfg["theory"]["micro_batch"] = 64, 0, 48
    cfg["language"]["micro_batch_tokens"], cfg["language"]["parallel"] = 3 * 2048, {"processes": 2}
    assert sorted(semantic_errors(cfg)) == sorted([
        "theory.micro_batch = 48: must divide theory.gpt.train.batch_size = 128 (rows per step), or be 0 for one pass",
        "language.micro_batch_tokens = 6144: its 12 rows of the short context (512 tokens) must divide the 256 rows "
        "per step and process (language.train.batch_tokens // 512 over 2 process(es))",
        "language.micro_batch_tokens = 6144: its 3 rows of the long context (2048 tokens) must divide the 64 rows "
        "per step and process (language.train.batch_tokens // 2048 over 2 process(es))",
    ])
    cfg["parity"]["micro_batch"], cfg["language"]["micro_batch_tokens"] = 5, 1024
    errors = "\n".join(semantic_errors(cfg))
    assert "parity.micro_batch = 5: must divide parity.train.batch_size = 64" in errors
    assert "language.micro_batch_tokens = 1024: below one long-context row (2048 tokens)" in errors


def test_checkpoints_are_at_least_checkpoint_minutes_apart(tmp_path, monkeypatch):
    """checkpoint_every 10 of 40 steps: a checkpoint at each multiple with checkpoint_minutes 0;
    with minutes that no step reaches, only the last step's (so a run of minutes keeps one)."""
    import sparselen.training.modelfile as modelfile

    real = modelfile.save_state
    for minutes, expected in ((0, [10, 20, 30, 40]), (5, [40])):
        saved = []
        monkeypatch.setattr(modelfile, "save_state",
                            lambda path, state: ("optimizer" in state and saved.append(state["step"])) or real(path, state))
        out = tmp_path / f"m{minutes}"
        out.mkdir()
        run_job(train_job(out, steps=40, checkpoint_minutes=minutes))
        assert saved == expected, (minutes, saved)


def test_mfu_is_logged_and_summarised_against_the_given_peak(tmp_path):
    """peak_tflops (a runtime knob) gives MFU on any device: every log row's and the summary's
    model FLOP/s (Decoder.flops_per_token) over the peak; without it a CPU run reports none."""
    import pandas as pd

    from sparselen.nn.model import GPTNeoX, ModelConfig

    run_job(train_job(tmp_path, steps=20, checkpoint_every=20, peak_tflops=0.05))
    summary = json.loads((tmp_path / "summary.json").read_text())
    log_rows = pd.read_csv(tmp_path / "log.csv")
    assert log_rows["mfu"].between(0, 1).all() and (log_rows["mfu"] > 0).all()
    assert summary["peak_flops"] == 0.05e12
    assert summary["mfu"] == pytest.approx(summary["model_flops_per_s"] / 0.05e12)
    assert summary["job_name"] == ""  # a job without a log file (the ledger's key comes from it)
    model = GPTNeoX(ModelConfig(vocab_size=6, scheme="pose", **PARAMS["model"]))
    # sequences of 2l + 1 tokens, 2l in 10..20: the model's FLOPs per token between the extremes
    per_token = summary["model_flops_per_s"] / summary["tokens_per_s"]
    assert model.flops_per_token(11) <= per_token <= model.flops_per_token(21)
    run_job(train_job(tmp_path / "none", steps=10, checkpoint_every=10))
    assert "mfu" not in json.loads((tmp_path / "none/summary.json").read_text())


def test_flops_per_token_is_the_estimates_count():
    """The trainer's MFU and the estimate count the same FLOPs: 3 x the estimate's forward pass
    per token, for a GPT-NeoX with the PPC position head and an OLMo."""
    from sparselen.nn.flops import Shape
    from sparselen.nn.model import GPTNeoX, ModelConfig

    cfg = ModelConfig(vocab_size=40, n_layer=2, n_head=2, d_model=32, d_ff=48, scheme="ppc", max_position_id=63,
                      id_embedding=True)
    shape = Shape(2, 32, 48, 40, extra_head=64)
    assert GPTNeoX(cfg).flops_per_token(17) == pytest.approx(3 * shape.forward_flops_per_token(17))
    olmo = model_config({"architecture": "olmo", "variant": "kempner_c4", "n_layer": 2, "n_head": 2, "d_model": 32,
                         "d_ff": 128}, 50, scheme="rope")
    from sparselen.nn.architectures import build_model

    assert build_model(olmo).flops_per_token(9) == pytest.approx(3 * Shape(2, 32, 128, 50).forward_flops_per_token(9))


def test_a_checkpoint_is_due_on_every_rank_when_one_rank_clock_says_so():
    """Each rank times checkpoints on its own clock; under FSDP writing one is a collective, so a
    rank whose clock is short of ``checkpoint_minutes`` must still write when another's is past."""
    from sparselen.training.train import TrainConfig, checkpoint_due

    class Ranks:  # the other rank's clock is past the interval
        asked = []

        def any_rank(self, flag):
            self.asked.append(flag)
            return True

    cfg = TrainConfig(steps=100, batch_size=8, checkpoint_every=10)
    ranks = Ranks()
    assert checkpoint_due(20, cfg, 30.0, 1.0, ranks) and ranks.asked == [False]
    assert not checkpoint_due(20, cfg, 30.0, 1.0) and checkpoint_due(20, cfg, 61.0, 1.0)
    assert not checkpoint_due(25, cfg, 600.0, 1.0, ranks) and checkpoint_due(100, cfg, 0.0, 1.0, ranks)
    assert checkpoint_due(20, cfg, 0.0, 0.0, ranks) and ranks.asked == [False]  # no interval: no collective

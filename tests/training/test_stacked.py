"""A stack of runs trains each to the weights, logs and files of the run trained alone, and
resumes after SIGKILL to the weights of an uninterrupted stack."""

import copy
import dataclasses
import importlib
import json
import subprocess
import sys

import pandas as pd
import pytest
import torch
from conftest import PYTHON, ROOT, smoke_config, subprocess_env, validated

from sparselen.interface.job import Job
from sparselen.interface.run import Run
from sparselen.jobs.stacks import train_jobs
from sparselen.nn.model import GPTNeoX, ModelConfig
from sparselen.nn.stacked_model import stack_models
from sparselen.training.modelfile import load_state
from sparselen.training.stacked import clip_grad_norm_per_run
from sparselen.training.train import OptimConfig, load_model, make_optimizer, train

SEEDS = (0, 1, 2)
CONFIG = {"device": "cpu", "compile": False, "threads": 1, "checkpoint_minutes": 0}
OPTIMIZER = {"lr": 1e-2, "weight_decay": 0.1, "betas": [0.9, 0.999], "eps": 1e-8, "warmup_steps": 2,
             "schedule": "linear", "grad_clip": 0.5}  # a clip that bites: each run's own norm matters


def parity_job(out, seed, steps=12, checkpoint_every=4):
    """PoSE parity on lengths 10..20, one length per batch: runs' batches differ in length."""
    params = {"model": {"n_layer": 1, "n_head": 2, "d_model": 32, "d_ff": 64}, "scheme": "pose",
              "pose": {"chunks": 2, "target_length": 101},
              "train": {"lengths": [10, 20], "one_length_per_batch": True, "steps": steps, "batch_size": 8,
                        "checkpoint_every": checkpoint_every, "log_every": 2, "optimizer": OPTIMIZER}}
    return job_spec("parity_train", out, {"K_train": 2, "seed": seed}, params)


def ppc_job(out, seed):
    """The PPC scheme with its position head, id embedding and random coupled-id offsets."""
    task = "variable_assignment"
    p = validated(ppc={"tasks": [task], "schemes": ["ppc"], "seeds": list(SEEDS), "max_position_id": 40,
                       "random_offset": True, "id_embedding": ["ppc"], "position_loss_weight": 0.5,
                       "model": {"n_layer": 1, "n_head": 2, "d_model": 16, "d_ff": 32},
                       "train": {"steps": 10, "batch_size": 4, "log_every": 2, "checkpoint_every": 5,
                                 "optimizer": OPTIMIZER},
                       "eval": {"seed": 1, "n": 6, "batch_size": 4},
                       task: {"train_sizes": [2, 4], "eval_sizes": [3, 8]}})["ppc"]
    params = {k: p[k] for k in ("model", "train", "max_position_id", "random_offset", "id_embedding",
                                "position_loss_weight")}
    task_config = {k: v for k, v in p[task].items() if k != "seeds"}
    return job_spec("ppc_train", out, {"task": task, "run": "ppc", "seed": seed},
                    {**params, "task_config": task_config, "variant": None, "pose": None})


def theory_job(out, seed):
    """The theory's GPT on the coupled law (coupled ids shifted per run)."""
    t = smoke_config()["theory"]
    gpt = copy.deepcopy({k: v for k, v in t["gpt"].items() if k not in ("k", "law_train")})
    gpt["train"] = {**gpt["train"], "steps": 10, "log_every": 2, "optimizer": OPTIMIZER}
    return job_spec("theory_run_gpt", out, {"distribution": "coupled", "k": 2, "seed": seed},
                    {**{k: t[k] for k in ("task", "train", "eval")}, "gpt": gpt})


def job_spec(rule, out, wildcards, params):
    return {"rule": rule, "wildcards": wildcards, "config": CONFIG,
            "output": {"model": str(out / "model.pt"), "log_csv": str(out / "log.csv"),
                       "summary": str(out / "summary.json")},
            "params": {**params, "checkpoint": str(out / "ckpt.pt")}}


def as_job(spec: dict) -> Job:
    spec = copy.deepcopy(spec)
    return Job.of(spec.pop("rule"), **spec)


def alone(spec: dict) -> None:
    """The run trained by itself, as its slice's per-run step trains it."""
    job = as_job(spec)
    train(*importlib.import_module(f"sparselen.{job.rule.partition('_')[0]}.jobs").training(job), Run.of(job))


KINDS = {"parity": parity_job, "ppc": ppc_job, "theory": theory_job}


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_stack_of_three_trains_each_run_to_its_weights_alone(tmp_path, kind):
    """Weights within 5e-5 of the separate runs' after 10-12 AdamW steps at lr 1e-2 (measured:
    at most 1.1e-5; float summation order only: batched matrix products, per-run loss sums,
    which AdamW's normalisation amplifies where a gradient is near 0), the same log rows and
    losses, and the same files. A weight-decay or clipping slip would move weights by ~1e-3."""
    specs = {s: {where: KINDS[kind](tmp_path / where / str(s), s) for where in ("alone", "stack")} for s in SEEDS}
    for s in SEEDS:
        alone(specs[s]["alone"])
    summaries = train_jobs([as_job(specs[s]["stack"]) for s in SEEDS])
    assert [x["seed"] for x in summaries] == list(SEEDS) and {x["stacked_runs"] for x in summaries} == {3}
    finals = []
    for s in SEEDS:
        a, b = (tmp_path / where / str(s) for where in ("alone", "stack"))
        assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
        ma, mb = load_state(a / "model.pt"), load_state(b / "model.pt")
        assert ma["model"].keys() == mb["model"].keys() and ma["model_config"] == mb["model_config"]
        diff = max(float((ma["model"][k] - mb["model"][k]).abs().max()) for k in ma["model"])
        assert diff < 5e-5, (s, diff)
        assert ma["provenance"]["config_hash"] == mb["provenance"]["config_hash"]
        model, _ = load_model(b / "model.pt")  # what the evaluations and export-hf read
        assert type(model) is GPTNeoX and torch.equal(model.lm_head.weight, mb["model"]["lm_head.weight"])
        la, lb = pd.read_csv(a / "log.csv"), pd.read_csv(b / "log.csv")
        assert list(la.columns) == list(lb.columns) and la["step"].tolist() == lb["step"].tolist()
        for column in ("loss", "token_loss", "lr") + (("position_loss",) if kind == "ppc" else ()):
            assert lb[column].tolist() == pytest.approx(la[column].tolist(), rel=1e-5, abs=1e-6), column
        sa, sb = json.loads((a / "summary.json").read_text()), json.loads((b / "summary.json").read_text())
        assert set(sb) - set(sa) == {"stacked_runs"} and set(sa) <= set(sb)
        assert sb["seed"] == s and sb["final_loss"] == pytest.approx(sa["final_loss"], rel=1e-5)
        assert sb["tokens_per_s"] > 0 and (lb["tokens_per_s"] > 0).all()  # the run's own tokens
        ca, cb = load_state(a / "ckpt.pt"), load_state(b / "ckpt.pt")
        assert ca.keys() == cb.keys() and ca["step"] == cb["step"] and ca["config_hash"] == cb["config_hash"]
        assert ca["optimizer"]["state"].keys() == cb["optimizer"]["state"].keys()
        finals.append(ma["model"]["lm_head.weight"])
    assert not torch.equal(finals[0], finals[1])  # the runs are different runs


def test_each_run_is_clipped_by_its_own_gradient_norm():
    """The stack's clip scales slice s of every gradient as clip_grad_norm_ scales run s's."""
    cfg = ModelConfig(vocab_size=10, n_layer=1, n_head=2, d_model=16, d_ff=32, scheme="rope")
    models = [GPTNeoX(cfg) for _ in range(3)]
    stack = stack_models(models)
    torch.manual_seed(0)
    for p in stack.parameters():
        p.grad = torch.randn_like(p) * torch.tensor([1e-3, 1.0, 10.0]).view(-1, *[1] * (p.ndim - 1))
    expected = []
    for s in range(3):
        grads = [p.grad[s].clone().requires_grad_(False) for p in stack.parameters()]
        holders = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
        for h, g in zip(holders, grads):
            h.grad = g
        norm = torch.nn.utils.clip_grad_norm_(holders, 0.5)
        expected.append((float(norm), [h.grad for h in holders]))
    norms = clip_grad_norm_per_run(list(stack.parameters()), 0.5)
    for s, (norm, grads) in enumerate(expected):
        assert float(norms[s]) == pytest.approx(norm, rel=1e-6)
        for p, g in zip(stack.parameters(), grads):
            torch.testing.assert_close(p.grad[s], g, rtol=1e-6, atol=0)
    assert float(norms[0]) < 0.5 < float(norms[1])  # one run unclipped, the others clipped


def test_weight_decay_groups_are_a_single_runs():
    """Biases and LayerNorm weights, (S, d) in a stack, stay out of weight decay."""
    cfg = ModelConfig(vocab_size=10, n_layer=1, n_head=2, d_model=16, d_ff=32, scheme="ppc", max_position_id=9,
                      id_embedding=True)
    one, stack = GPTNeoX(cfg), stack_models([GPTNeoX(cfg), GPTNeoX(cfg)])
    names = {id(p): n for n, p in stack.named_parameters()}
    single = {id(p): n for n, p in one.named_parameters()}
    stacked_groups = make_optimizer(stack, OptimConfig(), stack_dims=1).param_groups
    groups = [[names[id(p)] for p in g["params"]] for g in stacked_groups]
    assert groups == [[single[id(p)] for p in g["params"]] for g in make_optimizer(one, OptimConfig()).param_groups]
    assert groups[1] and all(n.endswith("bias") or "norm" in n for n in groups[1])


def test_a_killed_stack_resumes_every_run_to_the_weights_of_an_uninterrupted_one(tmp_path, caplog):
    """SIGKILL after every run's first checkpoint, then the same command: each run ends at the
    uninterrupted stack's weights, bit for bit (runs whose checkpoints stand at different
    steps, a kill between two runs' writes, train as stacks of their own: to 1e-3, the float
    order of another stack's padding). From a copy of the killed checkpoints: one run's
    checkpoint gone (it starts over beside a resumed run) and one run finished alone from the
    stack's checkpoint (the per-run trainer reads it): to 1e-3 (measured: 5e-5)."""
    import logging
    import shutil

    from test_train import kill_after_checkpoint

    def specs(where):
        return [parity_job(tmp_path / where / str(s), s, steps=100, checkpoint_every=10) for s in SEEDS]

    def stack_cmd(jobs):
        return [PYTHON, str(ROOT / "tests/run_stack.py"), json.dumps(jobs)]

    def weight_diffs(where):
        out = []
        for s in SEEDS:
            a, b = load_state(tmp_path / f"straight/{s}/model.pt"), load_state(tmp_path / f"{where}/{s}/model.pt")
            assert [r["step"] for r in a["log"]] == [r["step"] for r in b["log"]] and len(a["log"]) == 50
            out.append(max(float((a["model"][k] - b["model"][k]).abs().max()) for k in a["model"]))
        return out

    train_jobs([as_job(spec) for spec in specs("straight")])
    killed = specs("killed")
    kill_after_checkpoint(stack_cmd(killed), tmp_path / "killed/2/ckpt.pt")  # written last: every run has one
    at = [load_state(tmp_path / f"killed/{s}/ckpt.pt")["step"] for s in SEEDS]
    assert all(0 < step < 100 for step in at) and not any((tmp_path / f"killed/{s}/model.pt").exists() for s in SEEDS)
    shutil.copytree(tmp_path / "killed", tmp_path / "mixed")

    caplog.set_level(logging.INFO)
    train_jobs([as_job(spec) for spec in killed])
    for s in SEEDS:
        assert f"resumed from {tmp_path / f'killed/{s}/ckpt.pt'} at step {at[s]}" in caplog.text
    diffs = weight_diffs("killed")
    assert diffs == [0.0] * 3 if len(set(at)) == 1 else max(diffs) < 1e-3, (at, diffs)

    mixed = specs("mixed")
    (tmp_path / "mixed/1/ckpt.pt").unlink()
    caplog.clear()
    train_jobs([as_job(spec) for spec in mixed[:2]])
    assert f"resumed from {tmp_path / 'mixed/0/ckpt.pt'}" in caplog.text and "mixed/1/ckpt.pt at" not in caplog.text
    alone(mixed[2])
    assert max(weight_diffs("mixed")) < 1e-3
    straight = load_state(tmp_path / "straight/0/model.pt")["log"]
    assert straight[-1]["loss"] < straight[0]["loss"]  # it learned something


@pytest.mark.parametrize("groups", [1, 3])
def test_a_stack_on_the_simulated_gpu_trains_as_on_the_cpu(tmp_path, monkeypatch, groups):
    """The CUDA path (fused AdamW, labelled positions alone unembedded: parity labels one token a
    row, as many in every run; batches drawn in a worker, forked while nothing is on the GPU) on
    the simulated GPU: each run's weights as the CPU stack's; also with ``parity.length_groups``
    (here a pass per run, each unembedding its own run's rows' positions)."""
    from sparselen.runtime.simulated_cuda import simulate

    def specs(where, device):
        out = [parity_job(tmp_path / where / str(s), s, steps=6) for s in SEEDS]
        for spec in out:
            spec["config"] = {**spec["config"], "device": device, "parity": {"length_groups": groups}}
        return out

    import sparselen.training.stacked as stacked

    train_jobs([as_job(spec) for spec in specs("cpu", "cpu")])
    selected, forks = [], []
    copy_positions, draw = stacked.device_copy, stacked.step_batches
    monkeypatch.setattr(stacked, "device_copy", lambda t, d: selected.append(len(t)) or copy_positions(t, d))
    with simulate(1) as gpu:
        monkeypatch.setattr(stacked, "step_batches",
                            lambda *a, ahead: forks.append((ahead, gpu.device_bytes())) or draw(*a, ahead=ahead))
        train_jobs([as_job(spec) for spec in specs("cuda", "cuda")])
    assert forks == [(stacked.PREFETCH_STEPS, 0)]  # one worker, forked before any byte was on the GPU
    for s in SEEDS:
        a, b = load_state(tmp_path / f"cpu/{s}/model.pt"), load_state(tmp_path / f"cuda/{s}/model.pt")
        assert b["provenance"]["device"].startswith("cuda")
        diff = max(float((a["model"][k] - b["model"][k]).abs().max()) for k in a["model"])
        assert diff < 5e-5, (s, diff)
    assert selected == [3 // groups * 8] * 6 * groups  # every pass unembedded one position per row


def test_labelled_positions_stay_grouped_by_run_only_when_every_run_has_as_many():
    from sparselen.nn.stacked_model import equal_share

    rows, T = 6, 5  # 3 runs of 2 rows
    last = torch.arange(rows) * T + T - 1
    assert equal_share(last, rows, 3, T) and equal_share(None, rows, 3, T)
    assert not equal_share(torch.cat([last, torch.tensor([0])]).sort().values, rows, 3, T)


@pytest.mark.parametrize("kind", ["parity", "ppc"])
def test_micro_steps_of_a_stack_give_its_one_pass_step(tmp_path, kind):
    """Micro-batches of 2 rows of every run end at the one-pass stack's weights and losses, up
    to float summation order (each run's share over its whole step's label counts; PPC: token
    and position-id counts apart)."""
    def trained(where, micro):
        specs = [KINDS[kind](tmp_path / where / str(s), s) for s in SEEDS]
        for spec in specs:
            spec["config"] = {**spec["config"], kind: {"micro_batch": micro}}
        train_jobs([as_job(spec) for spec in specs])
        return [load_state(tmp_path / where / str(s) / "model.pt") for s in SEEDS]

    for one, split in zip(trained("one", 0), trained("micro", 2)):
        diff = max(float((one["model"][k] - split["model"][k]).abs().max()) for k in one["model"])
        assert 0 < diff < 5e-5, diff  # not 0: the micro-steps ran, in another summation order (measured 1.2e-5)
        assert [r["step"] for r in one["log"]] == [r["step"] for r in split["log"]]
        for a, b in zip(one["log"], split["log"]):
            parts = {"loss", "token_loss"} | ({"position_loss"} if kind == "ppc" else set())
            assert parts <= set(a) and set(a) == set(b)
            assert [b[p] for p in parts] == pytest.approx([a[p] for p in parts], rel=1e-5, abs=1e-6)


def test_a_stack_jobs_runs_are_the_jobs_their_own_rule_hands_over(tmp_path):
    """A stack rule's job (``parity_train_stack<i>``: lists of per-run files, param
    stack_seeds) splits into jobs with each run's files, identity and checkpoint as its own
    rule's job has them, and runs through ``run_stack``."""
    from sparselen.interface.job import per_run_rule
    from sparselen.jobs.dispatch import step_function
    from sparselen.jobs.stacks import run_jobs, run_stack

    seeds = (3, 4)
    alone = [as_job(parity_job(tmp_path / str(s), s)) for s in seeds]
    spec = parity_job(tmp_path, 0)
    files = {name: [getattr(job.output, name) for job in alone] for name in ("model", "log_csv", "summary")}
    params = {**spec["params"], "checkpoint": [job.params.checkpoint for job in alone], "stack_seeds": list(seeds)}
    stack = Job.of("parity_train_stack1", output=files, params=params, wildcards={"K_train": 2}, config=CONFIG)
    runs = run_jobs(stack)
    assert [job.rule for job in runs] == ["parity_train"] * 2
    for job, own in zip(runs, alone):
        assert vars(job.output) == vars(own.output) and Run.of(job).files == Run.of(own).files
        assert Run.of(job).identity == Run.of(own).identity and Run.of(job).wildcards == Run.of(own).wildcards
    assert step_function("parity_train_stack1") is run_stack and step_function("parity_train").__name__ == "train"
    assert per_run_rule("theory_run_gpt_stack12") == "theory_run_gpt"
    assert per_run_rule("language_train") == "language_train"
    with pytest.raises(ValueError, match=r"3 stack_seeds \[3, 4, 5\]"):
        run_jobs(Job.of("parity_train_stack1", output=files, params={**params, "stack_seeds": [3, 4, 5]},
                        wildcards={"K_train": 2}))


@pytest.mark.parametrize("kind", ["parity", "ppc"])
def test_batches_drawn_ahead_in_a_worker_are_the_batches_drawn_in_place(tmp_path, kind):
    """A CUDA stack draws its runs' batches in a worker process a few steps ahead and stacks
    them there (``step_batches``): for runs resumed at two steps, the group at the lower step
    first, every step's stacked batch is the one of the group's batches drawn in place, field
    for field (PoSE's ids and PPC's coupled ids included), with each run's length and tokens."""
    from sparselen.training.stacked import StackedStep, step_batches
    from sparselen.training.train import apply_position_scheme

    jobs = [as_job(KINDS[kind](tmp_path / str(s), s)) for s in SEEDS]
    model_cfgs, cfgs, batch_fns = zip(*(importlib.import_module(f"sparselen.{kind}.jobs").training(j) for j in jobs))
    drawn_ahead = list(step_batches(model_cfgs[0], list(cfgs), list(batch_fns), [3, 5, 3], 9, ahead=3))
    in_place = [(step, [0, 2]) for step in range(3, 9)] + [(step, [1]) for step in range(5, 9)]
    assert len(drawn_ahead) == len(in_place) == 10
    for got, (step, runs) in zip(drawn_ahead, in_place):
        want = StackedStep.of([apply_position_scheme(batch_fns[i](step), model_cfgs[0], cfgs[i], step) for i in runs])
        assert got.lengths == want.lengths and got.tokens == want.tokens
        for field in dataclasses.fields(want.batch):
            x, y = getattr(got.batch, field.name), getattr(want.batch, field.name)
            assert (x is None and y is None) or torch.equal(x, y), field.name


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the worker is forked on Linux only; counts /proc")
@pytest.mark.parametrize("stack", [["parity"], ["ppc"], ["theory", "local"], ["theory", "nonlocal"],
                                   ["theory", "coupled"]], ids="-".join)
def test_paper_stacks_draw_their_batches_in_a_worker_under_1024_open_files(stack):
    """configs/paper.yaml's stacks (parity's 58 runs, PPC's 35, the theory's GPT 85 on each law:
    PoSE, RoPE, coupled ids) draw their batches through the worker, ``PREFETCH_STEPS`` ahead,
    under a soft limit of 1024 open files (a common default), each step's the runs' batches
    drawn and stacked in place (tests/stack_batch_worker.py). The worker hands a step over as
    its 2-4 stacked tensors, a descriptor each, whatever the stack's size (measured: 15 to 23
    beyond the ones it inherits; each run's batch apart, 570 to 1,210, and the PoSE and coupled
    stacks of 85 failed with 'Too many open files')."""
    from sparselen.interface.config import load

    out = subprocess.run([PYTHON, str(ROOT / "tests/stack_batch_worker.py"), *stack, "--limit", "1024"],
                         capture_output=True, text=True, timeout=120, env=subprocess_env())
    assert out.returncode == 0, out.stderr[-4000:]
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["stack"] == load([ROOT / "configs/paper.yaml"])[stack[0]]["stack"]
    assert got["worker_fds"] - got["inherited"] < 64, got


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_NOFILE as Linux sets it")
def test_a_job_raises_its_open_file_limit_to_the_hard_one_and_says_so_once(caplog):
    import logging
    import resource

    from sparselen.runtime.device import raise_open_file_limit

    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    hard = before[1]
    if hard <= 64:
        pytest.skip(f"hard open-file limit {hard}")
    caplog.set_level(logging.INFO, logger="sparselen.runtime.device")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
        raise_open_file_limit()
        raise_open_file_limit()
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, before)
    assert [r.getMessage() for r in caplog.records] == [f"open-file limit raised from 64 to its hard limit {hard}"]


def drawn_parity_step(tmp_path, S: int, step: int = 0):
    """A stack of S parity runs (``parity_job``: PoSE, one length per batch) and their batches
    of ``step``, drawn and stacked as the trainer draws them."""
    from sparselen.nn.architectures import build_model
    from sparselen.parity.jobs import training
    from sparselen.training.stacked import StackedStep
    from sparselen.training.train import apply_position_scheme

    mcs, cfgs, fns = zip(*(training(as_job(parity_job(tmp_path / str(s), s))) for s in range(S)))
    singles = []
    for cfg in cfgs:
        torch.manual_seed(cfg.seed)
        singles.append(build_model(mcs[0]))
    batches = [apply_position_scheme(fns[i](step), mcs[0], cfgs[i], step) for i in range(S)]
    return stack_models(singles), singles, batches, StackedStep.of(batches), cfgs[0]


def test_runs_grouped_by_drawn_length_give_the_padded_steps_losses_and_gradients(tmp_path):
    """``length_groups``: a step's runs sorted by drawn length and cut into contiguous groups,
    each group's batch the group's own batches stacked and padded to its longest (not the
    step's), one forward and backward pass per group on the group's weights: every run's loss
    (over its own labels, as in the one padded pass) and gradients equal the padded step's up to
    float summation (measured: at most 1.2e-7 apart at this step, 2.4e-7 at others, on
    gradients up to 1.9), and each run's loss is the one it has alone on its own unpadded batch."""
    from sparselen.training.stacked import backward, group_batch, grouped_backward, length_groups, stack_batches
    from sparselen.training.train import loss_fn

    S, cpu = 7, torch.device("cpu")
    model, singles, batches, drawn, cfg = drawn_parity_step(tmp_path, S)
    lengths = drawn.lengths
    assert len(set(lengths)) >= 3  # the runs' lengths differ: the groups pad to different lengths

    groups = length_groups(lengths, 3)
    assert sorted(sum(groups, [])) == list(range(S)) and [len(g) for g in groups] == [3, 2, 2]
    by_length = [lengths[i] for g in groups for i in g]
    assert by_length == sorted(lengths)  # contiguous groups of the runs sorted by length
    for runs in groups:  # a group's batch is its runs' batches stacked alone: padded to its own longest
        piece, alone_stacked = group_batch(drawn.batch, S, runs, max(lengths[i] for i in runs)), \
            stack_batches([batches[i] for i in runs])
        for field in dataclasses.fields(piece):
            x, y = getattr(piece, field.name), getattr(alone_stacked, field.name)
            assert (x is None and y is None) or torch.equal(x, y), field.name
    assert max(lengths[i] for i in groups[0]) < max(lengths)

    padded_losses, padded_parts = backward(model, drawn.batch, S, cfg, cpu)
    padded_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    losses, parts = grouped_backward(model, model, drawn.batch, S, groups, lengths, cfg, cpu)
    assert parts.keys() == padded_parts.keys()
    torch.testing.assert_close(losses, padded_losses, rtol=0, atol=5e-7)
    torch.testing.assert_close(parts["token_loss"], padded_parts["token_loss"], rtol=0, atol=5e-7)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, padded_grads[name], rtol=0, atol=5e-7, msg=name)
    assert any(not torch.equal(p.grad, padded_grads[n]) for n, p in model.named_parameters())  # it ran apart
    for s in range(S):  # each run's loss scale is its own: the mean over its labels, as alone
        alone_loss = loss_fn(singles[s], batches[s])[0].detach()
        assert float(losses[s]) == pytest.approx(float(alone_loss), abs=5e-7)


def test_one_length_group_is_the_one_padded_pass_bit_for_bit(tmp_path):
    """``length_groups: 1`` (the default) takes a stack's step as it always was: one padded pass,
    then clipping and AdamW; weights, losses and gradients equal bit for bit after 3 steps."""
    from sparselen.training.stacked import backward, clip_grad_norm_per_run, train_step
    from sparselen.training.train import lr_lambda

    S, cpu = 5, torch.device("cpu")
    runs = []
    for _ in range(2):
        model, _, _, _, cfg = drawn_parity_step(tmp_path, S)
        opt = make_optimizer(model, cfg.optim, stack_dims=1)
        runs.append((model, opt, torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(cfg.optim, cfg.steps))))
    assert cfg.length_groups == 1
    (grouped, opt_a, sched_a), (one_pass, opt_b, sched_b) = runs
    for step in range(3):
        drawn = drawn_parity_step(tmp_path, S, step)[3]
        losses_a, _ = train_step(grouped, grouped, opt_a, sched_a, drawn.batch, S, cfg, cpu, drawn.lengths)
        opt_b.zero_grad(set_to_none=True)
        losses_b, _ = backward(one_pass, drawn.batch, S, cfg, cpu)
        clip_grad_norm_per_run(one_pass.parameters(), cfg.optim.grad_clip)
        opt_b.step()
        sched_b.step()
        assert torch.equal(losses_a, losses_b)
        for a, b in zip(grouped.parameters(), one_pass.parameters()):
            assert torch.equal(a.grad, b.grad) and torch.equal(a, b)


@pytest.mark.parametrize("micro", [0, 2])
def test_a_stack_trained_in_length_groups_ends_at_the_padded_stacks_weights(tmp_path, micro):
    """``parity.length_groups: 2`` over a stack of 3 (passes of 1 and 2 runs, alone or in
    micro-batches of 2 rows) ends within 5e-5 of the one-pass stack after 12 AdamW steps at lr
    1e-2 with a clip that bites, with the same log rows (float summation order only, measured:
    at most 1.8e-5; a run's loss scaled differently, or another run's gradient in its slice,
    moves weights by ~1e-3);
    ``length_groups: 1`` is the one-pass stack bit for bit."""
    def trained(where, knobs):
        specs = [parity_job(tmp_path / where / str(s), s) for s in SEEDS]
        for spec in specs:
            spec["config"] = {**spec["config"], "parity": {"micro_batch": micro, **knobs}}
        train_jobs([as_job(spec) for spec in specs])
        return [load_state(tmp_path / where / str(s) / "model.pt") for s in SEEDS]

    for one, one_group, grouped in zip(trained("one", {}), trained("one_group", {"length_groups": 1}),
                                       trained("grouped", {"length_groups": 2})):
        assert all(torch.equal(one["model"][k], one_group["model"][k]) for k in one["model"])
        diff = max(float((one["model"][k] - grouped["model"][k]).abs().max()) for k in one["model"])
        assert 0 < diff < 5e-5, diff
        assert [r["step"] for r in one["log"]] == [r["step"] for r in grouped["log"]]
        for a, b in zip(one["log"], grouped["log"]):
            assert [b[p] for p in ("loss", "token_loss")] == pytest.approx([a[p] for p in ("loss", "token_loss")],
                                                                           rel=1e-5, abs=1e-6)

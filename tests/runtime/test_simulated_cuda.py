"""The simulated GPU (sparselen/runtime/simulated_cuda.py): it raises where a real GPU raises (a host
tensor in a device op, numpy of a device tensor, a host generator drawing on the device, two
GPUs in one op), lets through what a GPU lets through (host scalars and indices, cross-device
copies, Module.to, a training step), and catches a tensor left on the host in each slice's
evaluation, while the correctly placed evaluation gives the CPU's numbers. The launch of a
data-parallel training under torchrun claims no GPU in its parent (it would starve a worker),
and a job that holds GPUs but finds none fails instead of training on the CPU."""

import json
import subprocess
import sys

import pytest
import torch
from conftest import PYTHON, ROOT, subprocess_env

from sparselen.interface.job import Job, runtime
from sparselen.nn.model import GPTNeoX, ModelConfig
from sparselen.runtime import simulated_cuda
from sparselen.runtime.device import NoGpu, resolve_device
from sparselen.runtime.simulated_cuda import simulate

CUDA = torch.device("cuda")
CPU = torch.device("cpu")


def tiny(scheme="rope", vocab=16, **kw):
    torch.manual_seed(0)
    return GPTNeoX(ModelConfig(vocab_size=vocab, n_layer=2, n_head=2, d_model=32, d_ff=64, scheme=scheme,
                               **kw)).eval()


def test_device_tensors_answer_as_on_a_gpu_and_mixing_raises():
    with simulate(2):
        assert torch.cuda.is_available() and torch.cuda.device_count() == 2
        x = torch.ones(3, device="cuda")
        assert x.is_cuda and x.device == torch.device("cuda", 0)
        assert (x * 2).device.type == "cuda" and x[1:].is_cuda  # ops and views stay on the device
        assert torch.arange(3, device=x.device).is_cuda
        assert not x.cpu().is_cuda and not torch.ones(3).is_cuda
        assert (x + torch.tensor(2.0)).is_cuda  # a host 0-dim scalar is allowed, as on a GPU
        assert x[torch.tensor([0, 2])].is_cuda  # host indices are allowed
        host = torch.zeros(3)
        host.copy_(x)  # cross-device copies are allowed
        assert not host.is_cuda
        with pytest.raises(RuntimeError, match="same device"):
            x + torch.ones(3)
        with pytest.raises(RuntimeError, match="same device"):
            torch.cat([x, torch.ones(3)])
        with pytest.raises(RuntimeError, match="same device"):
            x + torch.ones(3).to("cuda:1")
        with pytest.raises(TypeError, match="numpy"):
            x.numpy()
        with pytest.raises(RuntimeError, match="generator"):
            torch.randint(0, 5, (3,), generator=torch.Generator().manual_seed(0), device="cuda")
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            torch.ones(1).to("cuda:2")
    assert not torch.cuda.is_available()  # everything restored


def test_a_training_step_on_the_simulated_gpu_equals_the_cpu_step():
    from sparselen.nn.batch import Batch
    from sparselen.training.train import OptimConfig, loss_fn, make_optimizer

    ids = torch.randint(0, 16, (4, 10), generator=torch.Generator().manual_seed(1))
    out = {}
    for name in ("cpu", "cuda"):
        with simulate(1):
            model = tiny().train().to(name)
            opt = make_optimizer(model, OptimConfig(lr=1e-2, warmup_steps=0))
            loss, _ = loss_fn(model, Batch(ids, ids.clone()).to(name))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            assert all(p.is_cuda == (name == "cuda") for p in model.parameters())
            assert all(s.is_cuda == (name == "cuda") for st in opt.state.values() for s in st.values() if s.dim())
            out[name] = {k: v.cpu() for k, v in model.state_dict().items()}
    assert all(torch.equal(out["cpu"][k], out["cuda"][k]) for k in out["cpu"])


def evaluate_both_ways(evaluate):
    """``evaluate(model, device)`` with the model on the simulated GPU: placed right it gives the
    CPU's result; told the wrong device (its samples stay on the host) it raises."""
    expected = evaluate(CPU)
    with simulate(1):
        assert evaluate(CUDA) == expected
        with pytest.raises(RuntimeError, match="same device"):
            evaluate(CUDA, misplaced=True)


def test_parity_evaluation_on_the_device():
    from sparselen.parity.evaluate import cell_accuracy
    from sparselen.parity.task import VOCAB, evaluation_set

    cell = evaluation_set(0, [2], [20], 8)[(2, 20)]
    model = tiny(vocab=len(VOCAB))

    def evaluate(device, misplaced=False):
        m = model.to(device)
        return cell_accuracy(m, cell["tokens"], cell["target"], 64, CPU if misplaced else device)

    evaluate_both_ways(evaluate)


@pytest.mark.parametrize("scheme", ["rope", "coupled", "ppc"])
def test_ppc_generation_on_the_device(scheme):
    from sparselen.ppc.evaluate import cell_scores
    from sparselen.ppc.samples import Samples
    from sparselen.ppc.tasks import TASKS, sampler_params
    from sparselen.runtime.rng import generator

    task = TASKS["copy_repeat"]
    s = Samples(**vars(task.sample(torch.full((4,), 5), generator("t", 0), **sampler_params({"alphabet": 4}))))
    model = tiny(scheme, vocab=len(task.VOCAB), max_position_id=63, id_embedding=scheme != "rope")

    def evaluate(device, misplaced=False):
        return cell_scores(model.to(device), s, 4, CPU if misplaced else device)

    evaluate_both_ways(evaluate)


def test_language_losses_on_the_device():
    from sparselen.language.evaluate import last_token_loss, loss_by_position

    windows = torch.randint(0, 16, (3, 12), generator=torch.Generator().manual_seed(2))
    model = tiny()

    def evaluate(device, misplaced=False):
        m, dev = model.to(device), CPU if misplaced else device
        pos = torch.arange(11).expand(3, 11)
        return (loss_by_position(m, windows, 2, dev).tolist(),
                last_token_loss(m, windows[:, :-1], pos, windows[:, -1], 2, dev).tolist())

    evaluate_both_ways(evaluate)


def test_theory_evaluation_on_the_device():
    from sparselen.theory.evaluate import evaluate as evaluate_theory
    from sparselen.theory.evaluate import gpt_predict
    from sparselen.theory.task import planted_config

    pc = planted_config({"n_values": 2, "label": "sum_mod", "mark": "first", "offsets": "fixed", "gap": 1},
                        "local", 2)
    model = tiny(vocab=pc.vocab_size)

    def evaluate(device, misplaced=False):
        m = model.to(device)

        def host_samples(tokens, position_ids):  # what a predict that never moves its samples does
            return m(tokens, None, last_only=True)[0][:, -1, :pc.n_values].float()

        predict = host_samples if misplaced else gpt_predict(m, pc, coupled=False)
        return evaluate_theory(predict, pc, {1: 12}, 6, 0, 3).to_dict()

    evaluate_both_ways(evaluate)


def test_a_job_that_holds_gpus_and_finds_none_fails(monkeypatch):
    """gpus_per_job > 0 with no CUDA device: the job fails naming the node, CUDA_VISIBLE_DEVICES
    and the torch build; with gpus_per_job 0 it runs on the CPU."""
    if torch.cuda.is_available():
        pytest.skip("checks a machine without a GPU")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    job = Job.of("parity_evaluate", config={"device": "auto", "gpus_per_job": 1})
    with pytest.raises(NoGpu, match=r"gpus_per_job = 1.*node .*CUDA_VISIBLE_DEVICES=.*torch .*CPU-only build"):
        runtime(job).device
    assert runtime(Job.of("parity_evaluate", config={"device": "auto", "gpus_per_job": 0})).device == CPU
    with simulate(1):
        assert runtime(job).device == CUDA


def test_torchrun_workers_claim_no_gpu_slot(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARSELEN_GPU_LOCKS", str(tmp_path))
    with simulate(2):
        monkeypatch.setenv("WORLD_SIZE", "2")
        assert resolve_device("auto") == CUDA  # the worker picks LOCAL_RANK's GPU itself
        assert not list(tmp_path.iterdir())


def test_the_simulation_is_asked_for_by_the_environment(monkeypatch):
    monkeypatch.setenv(simulated_cuda.ENV, "x")
    with pytest.raises(ValueError, match="SPARSELEN_SIMULATE_CUDA='x'"):
        simulated_cuda.requested()
    monkeypatch.setenv(simulated_cuda.ENV, "2")
    with simulated_cuda.from_env():
        assert torch.cuda.device_count() == 2
    monkeypatch.delenv(simulated_cuda.ENV)
    with simulated_cuda.from_env() as mode:
        assert mode is None and not torch.cuda.is_available()


def test_a_data_parallel_launch_on_two_simulated_gpus_finishes(tmp_path):
    """language.parallel.processes = 2 on a node of 2 GPUs (the local-gpus profile's case): the
    launching job and its two torchrun workers share the GPUs without a slot claim that leaves a
    worker waiting for ever, each worker trains on its own GPU, and the weights equal one
    process's on the CPU (float summation order only)."""
    from specs import TOLERANCE, job_spec

    from sparselen.runtime import io
    from sparselen.training import modelfile

    g = torch.Generator().manual_seed(0)
    stream = torch.randint(1, 64, (20000,), generator=g)
    stream[::97] = 0
    io.torch_save({"train": stream.to(torch.int32), "eval": [], "vocab_size": 64}, tmp_path / "tokens.pt")
    runs = {}
    for name, processes, gpus in (("cpu", 1, 0), ("gpus", 2, 1)):
        out = tmp_path / name
        out.mkdir()
        spec = job_spec(out, tmp_path / "tokens.pt", processes, "ddp")
        spec["config"].update(device="auto", gpus_per_job=gpus)
        spec["params"]["train"] = {**spec["params"]["train"], "steps": 10}
        env = {**subprocess_env(), simulated_cuda.ENV: "2" if gpus else "", "SPARSELEN_GPU_LOCKS": str(tmp_path)}
        done = subprocess.run([PYTHON, str(ROOT / "tests/run_job.py"), json.dumps(spec)], env=env,
                              capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stderr[-12000:]  # a failed worker's own lines precede torchrun's summary
        runs[name] = modelfile.load_state(out / "model.pt")["model"]
        if gpus:
            assert "rank 0 of 2 on cuda:0" in done.stderr and "rank 1 of 2 on cuda:1" in done.stderr, done.stderr[-3000:]
    diff = max(float((runs["cpu"][k] - runs["gpus"][k]).abs().max()) for k in runs["cpu"])
    assert diff < TOLERANCE


def test_language_transfer_on_a_simulated_gpu_equals_the_cpu_run(smoke_run, tmp_path):
    """The smoke run's transfer of the reference model (its losses at both contexts on the
    screened tokens, the induction probe), run again on a simulated GPU from the same model and
    tokens: every device placement holds and the tables equal the CPU run's (the simulation
    keeps the CPU's numerics). The analysis itself: tests/language/test_language_analysis.py."""
    import pandas as pd
    from conftest import smoke_config

    from sparselen.jobs.dispatch import run

    lang = smoke_config()["language"]
    long, scheme = lang["contexts"]["long"], lang["schemes"]["long"][0]
    results = smoke_run / "results" / "language"
    cpu = results / f"ctx{long}/{scheme}/seed0"
    outputs = {name: tmp_path / f"{name}.csv" for name in ("losses", "screen_losses", "induction")}
    with simulate(1):
        run(Job.of("language_transfer", output=outputs, wildcards={"context": long, "run": scheme, "seed": 0},
                   input={"model": cpu / "model.pt", "tokens": results / "tokens/tokens.json",
                          "screen": results / "analysis/seed0/screen.csv"},
                   params={"contexts": lang["contexts"], "batch_size": lang["analysis"]["batch_size"],
                           "induction": lang["analysis"]["induction"]},
                   config={"device": "auto", "gpus_per_job": 1}))
    expected = {"losses": cpu / "analysed_token_losses.csv", "screen_losses": cpu / "screen_losses.csv",
                "induction": cpu / "induction.csv"}
    for name, path in outputs.items():
        pd.testing.assert_frame_equal(pd.read_csv(path), pd.read_csv(expected[name]), obj=name)


def parity_run(out, device: str, steps: int = 6):
    """A small parity training through the trainer, on ``device`` (in a simulation if cuda)."""
    from sparselen.interface.job import Runtime
    from sparselen.interface.run import Run, RunFiles
    from sparselen.parity.task import VOCAB, training_batches
    from sparselen.training.train import OptimConfig, TrainConfig, train

    mc = ModelConfig(vocab_size=len(VOCAB), n_layer=1, n_head=2, d_model=32, d_ff=64, scheme="rope")
    tc = TrainConfig(steps=steps, batch_size=8, checkpoint_every=3, log_every=3, optim=OptimConfig(lr=3e-3, warmup_steps=2))
    files = RunFiles(out / "model.pt", out / "log.csv", out / "summary.json", out / "ckpt.pt")
    return train(mc, tc, training_batches(0, 8, [6, 12], 2), Run({"run": 0}, {"seed": 0}, files,
                                                                   Runtime(device, False, 1)))


def test_the_cuda_training_path_trains_as_the_cpu_path(tmp_path):
    """On the simulated GPU the trainer takes its CUDA path: fused AdamW, batches through pinned
    memory (a no-op here) without blocking, and parity's last-token labels unembedded alone.
    The weights match the CPU path's up to float rounding (the fused kernel, the head's
    smaller product), and a checkpoint resumes on the simulated GPU with AdamW's step
    counters as float32 on the device, as the fused kernel needs them."""
    from sparselen.nn.batch import labelled_positions
    from sparselen.parity.task import training_batches
    from sparselen.training import modelfile
    from sparselen.training.train import to_device

    batch = training_batches(0, 8, [6, 12], 2)(0)
    assert len(labelled_positions(batch)) == 8  # one label per row: the loss reads 8 of 8 x T positions
    (tmp_path / "cpu").mkdir()
    parity_run(tmp_path / "cpu", "cpu")
    with simulate(1):
        on_device, positions = to_device(batch, CUDA)
        assert on_device.input_ids.is_cuda and positions.is_cuda and torch.equal(positions.cpu(), labelled_positions(batch))
        assert to_device(batch, CPU)[1] is None  # the CPU path unembeds every position, as ever
        (tmp_path / "gpu").mkdir()
        parity_run(tmp_path / "gpu", "cuda")
        state = modelfile.load_state(tmp_path / "gpu/ckpt.pt")
        assert all(g["fused"] for g in state["optimizer"]["param_groups"])
    cpu, gpu = (modelfile.load_state(tmp_path / d / "model.pt")["model"] for d in ("cpu", "gpu"))
    assert max(float((cpu[k] - gpu[k]).abs().max()) for k in cpu) < 1e-5
    assert not all(torch.equal(cpu[k], gpu[k]) for k in cpu)  # another code path, not the CPU's


def test_a_resumed_optimizer_keeps_its_step_counters_where_it_reads_them():
    """A checkpoint's optimizer state, loaded onto the GPU as the trainer loads it: resumed by a
    fused AdamW, its step counters become float32 on the device, where the fused kernel reads
    them; resumed by a foreach AdamW (no fused), they go to the host, where it reads them
    without a device synchronisation per parameter (load_state_dict leaves them on the device)."""
    from sparselen.training.train import OptimConfig, make_optimizer, place_step_counters

    def stepped(device, fused):
        model = tiny().train().to(device)
        opt = make_optimizer(model, OptimConfig(), fused=fused)
        model(torch.zeros(1, 4, dtype=torch.long, device=device))[0].sum().backward()
        opt.step()
        return opt

    with simulate(1):
        state = stepped("cpu", False).state_dict()
        loaded = {**state, "state": {i: {k: t.to("cuda") for k, t in st.items()} for i, st in state["state"].items()}}
        opt = stepped("cuda", True)
        opt.load_state_dict(loaded)
        place_step_counters(opt, fused=True)
        steps = [s["step"] for s in opt.state.values()]
        assert all(s.is_cuda and s.dtype == torch.float32 for s in steps) and all(g["fused"] for g in opt.param_groups)
        opt.step()  # the fused kernel accepts them
        opt = stepped("cuda", False)
        opt.load_state_dict(loaded)
        assert all(s["step"].is_cuda for s in opt.state.values())
        place_step_counters(opt, fused=False)
        assert not any(s["step"].is_cuda for s in opt.state.values()) and not any(g["fused"] for g in opt.param_groups)
        opt.step()

"""Steps per second per run of a stack of S runs (``sparselen.training.stacked``) against S, for the
parity model and the PPC model (scheme ppc, its first task) at a config's sizes, and of one run
trained alone by today's per-run step (``sparselen.training.train``), the ratios' base.

Each stack trains the slice's own batches (each run its seed's) with the stacked trainer's
step (``sparselen.training.stacked.train_step``): forward, backward, per-run clipping, AdamW. After
``--warmup`` steps, ``--steps`` steps are timed; per run: S x steps / seconds. On CPU the time
is the process's CPU time (torch on ``--threads`` threads of this process), which a job on
another core does not inflate; on CUDA, wall time after a synchronisation.

    .venv/bin/python benchmarks/stacked.py                                  # config.yaml, S 1 4 16 64
    .venv/bin/python benchmarks/stacked.py --config configs/paper.yaml --stacks 1 4
    .venv/bin/python benchmarks/stacked.py --device cuda --stacks 1 4 16 32 64
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from sparselen.interface.config import load
from sparselen.nn.architectures import build_model
from sparselen.nn.model import ModelConfig
from sparselen.nn.stacked_model import stack_models
from sparselen.parity import task as parity_task
from sparselen.ppc.jobs import training_batches as ppc_batches
from sparselen.ppc.runs import run_model, run_task_config
from sparselen.ppc.tasks import task_module
from sparselen.runtime.device import configure_cpu, resolve_device
from sparselen.training.stacked import stack_batches, train_step
from sparselen.training.train import TrainConfig, apply_position_scheme, backward, lr_lambda, make_optimizer

ROOT = Path(__file__).resolve().parent.parent


def parity(cfg: dict, seed: int):
    """(model config, trainer settings, batch function) of a parity run at the largest K_train."""
    p = cfg["parity"]
    mc = ModelConfig(vocab_size=len(parity_task.VOCAB), scheme=p["scheme"], **p["model"])
    tc = TrainConfig.from_section(p["train"], seed, p["pose"])
    return mc, tc, parity_task.training_batches(seed, tc.batch_size, p["train"]["lengths"], max(p["K_train"]),
                                                p["train"]["one_length_per_batch"])


def ppc(cfg: dict, seed: int):
    """(model config, trainer settings, batch function) of a PPC run (scheme ppc) on ppc.tasks[0]."""
    p = cfg["ppc"]
    task = p["tasks"][0]
    task_cfg = run_task_config(p, task)
    mc = ModelConfig(vocab_size=len(task_module(task).VOCAB), scheme="ppc", max_position_id=p["max_position_id"],
                     id_embedding="ppc" in p["id_embedding"], **run_model(p, task_cfg, "ppc"))
    tc = TrainConfig.from_section(p["train"], seed, None, position_loss_weight=p["position_loss_weight"])
    return mc, tc, ppc_batches(task, task_cfg, seed, tc.batch_size, p["max_position_id"], p["random_offset"])


MODELS = {"parity": parity, "ppc": ppc}


def steps_per_second_per_run(make, cfg: dict, stack: int, steps: int, warmup: int, device) -> float:
    """A stack of ``stack`` runs (seeds 0..stack-1); ``stack`` 0: one run by the per-run step."""
    runs = [make(cfg, seed) for seed in range(max(stack, 1))]
    mc, tc = runs[0][0], runs[0][1]
    models = []
    for _, c, _ in runs:
        torch.manual_seed(c.seed)
        models.append(build_model(mc).to(device))
    model = stack_models(models) if stack else models[0]
    del models
    opt = make_optimizer(model, tc.optim, fused=device.type == "cuda", stack_dims=1 if stack else 0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(tc.optim, tc.steps))
    model.train()

    def step(i: int) -> None:
        batches = [apply_position_scheme(fn(i), mc, c, i) for _, c, fn in runs]
        if stack:
            train_step(model, model, opt, sched, stack_batches(batches), stack, tc, device)
            return
        opt.zero_grad(set_to_none=True)
        backward(model, model, batches[0], tc, device)
        torch.nn.utils.clip_grad_norm_(model.parameters(), tc.optim.grad_clip)
        opt.step()
        sched.step()

    for i in range(warmup):
        step(i)
    clock = time.perf_counter if device.type == "cuda" else time.process_time
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = clock()
    for i in range(warmup, warmup + steps):
        step(i)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return max(stack, 1) * steps / (clock() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(ROOT / "config.yaml"))
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--stacks", nargs="+", type=int, default=[1, 4, 16, 64])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    configure_cpu(args.threads)
    device = resolve_device(args.device)
    cfg = load([args.config])
    print(f"{args.config} on {device}; steps/s per run (x: against one run alone, the per-run step)")
    for name in args.models:
        base = steps_per_second_per_run(MODELS[name], cfg, 0, args.steps, args.warmup, device)
        print(f"{name:7s} alone : {base:9.3f} steps/s", flush=True)
        for stack in args.stacks:
            rate = steps_per_second_per_run(MODELS[name], cfg, stack, args.steps, args.warmup, device)
            print(f"{name:7s} S = {stack:3d}: {rate:9.3f} steps/s per run ({rate / base:5.2f}x)", flush=True)


if __name__ == "__main__":
    main()

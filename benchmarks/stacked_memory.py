"""The memory model's prediction for a stack of S runs (``memory.train_step(..., stack=S)``)
against the peak tensor memory of ``sparselen.training.stacked.train_stack`` on the CPU.

    .venv/bin/python benchmarks/stacked_memory.py                        # config.yaml, S 1 4 16
    .venv/bin/python benchmarks/stacked_memory.py --models parity --stacks 1 4

Each stack trains the slice's own batches (each run its seed's; ``benchmarks/stacked.py``'s
parity model at the largest K_train and PPC model, scheme ppc, on its first task) through the
real stacked trainer for ``--steps`` steps (so AdamW's state exists), its files in a temporary
directory. The peak is every live storage ``PeakTensorMemory`` counts (sparselen/estimate/tracker.py)
from the first model built to the last file written, in fp32 as CPU jobs run. The prediction
takes the rows of a step and the longest padded length of the steps measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import torch
from stacked import MODELS  # benchmarks/stacked.py: each model kind's (model, trainer, batches) of a seed

from sparselen.estimate.tracker import PeakTensorMemory
from sparselen.interface.config import load
from sparselen.interface.job import Runtime
from sparselen.interface.run import Run, RunFiles
from sparselen.nn import memory
from sparselen.runtime.device import configure_cpu
from sparselen.training.stacked import train_stack

ROOT = Path(__file__).resolve().parent.parent
MiB = 2**20


def measure(make, cfg: dict, stack: int, steps: int) -> tuple[float, float, str]:
    """(measured peak bytes, predicted bytes, what was run) of a stack of seeds 0..stack-1."""
    runs = [make(cfg, seed) for seed in range(stack)]
    mc = runs[0][0]
    tcs = [dataclasses.replace(c, steps=steps, log_every=1, checkpoint_every=10**9) for _, c, _ in runs]
    fns = [fn for _, _, fn in runs]
    length = max(fn(step).input_ids.shape[1] for fn in fns for step in range(steps))
    rows = tcs[0].batch_size
    with tempfile.TemporaryDirectory() as tmp:
        runtime = Runtime("cpu", False, 1)
        files = [RunFiles(*(Path(tmp) / f"{s}.{ext}" for ext in ("model", "log.csv", "summary.json", "ckpt")))
                 for s in range(stack)]
        ids = [Run({"benchmark": s}, {"seed": s}, f, runtime) for s, f in enumerate(files)]
        with PeakTensorMemory() as tracked:
            train_stack(mc, tcs, fns, ids)
    predicted = memory.train_step(mc, rows, length, "cpu", stack=stack)
    return float(tracked.peak), predicted, f"{rows} x {length} tokens per run"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(ROOT / "config.yaml"))
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--stacks", nargs="+", type=int, default=[1, 4, 16])
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    configure_cpu(1)
    cfg = load([args.config])
    t = time.time()
    print(f"{args.config} on the CPU (fp32), torch {torch.__version__}, {args.steps} steps per stack:\n")
    print("| model | S | step | predicted MiB | measured MiB | predicted / measured |")
    print("|:--|--:|:--|--:|--:|--:|")
    ratios = []
    for name in args.models:
        for stack in args.stacks:
            measured, predicted, what = measure(MODELS[name], cfg, stack, args.steps)
            ratios.append(predicted / measured)
            print(f"| {name} | {stack} | {what} | {predicted / MiB:,.3g} | {measured / MiB:,.3g} | "
                  f"{predicted / measured:.2f} |", flush=True)
    print(f"\npredicted / measured: {min(ratios):.2f} to {max(ratios):.2f} over {len(ratios)} stacks "
          f"({time.time() - t:.0f} s)")


if __name__ == "__main__":
    main()

"""Draw a configs/paper.yaml stack's batches through a CUDA stack's batch worker
(``sparselen.training.stacked.step_batches``, ``PREFETCH_STEPS`` ahead) under a soft open-file limit,
and check each step against the runs' batches drawn and stacked in place:

    python tests/stack_batch_worker.py parity|ppc|theory [local|nonlocal|coupled] [--limit 1024] [--steps 6]

The stack: the slice's ``stack`` first seeds of one cell, each run's batch function built by
its slice's ``training(job)`` from the rule's params (parity at the largest K_train, PPC's ppc
run on its first task, the theory's GPT at the largest k). Prints one JSON line: the stack
size, and the most file descriptors seen open in this process and in the worker, and the
number open before the worker was forked (which the worker inherits)."""

import argparse
import dataclasses
import importlib
import json
import multiprocessing
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from sparselen.interface.config import load  # noqa: E402
from sparselen.interface.job import Job  # noqa: E402
from sparselen.interface.variants import run_scheme  # noqa: E402
from sparselen.ppc.runs import run_task_config  # noqa: E402
from sparselen.theory.runs import law_gpt  # noqa: E402
from sparselen.training.stacked import PREFETCH_STEPS, StackedStep, step_batches  # noqa: E402
from sparselen.training.train import apply_position_scheme  # noqa: E402


def paper_jobs(kind: str, law: str | None) -> list[Job]:
    """The training jobs of one paper.yaml stack, with the params its rule passes."""
    c = load([ROOT / "configs/paper.yaml"])
    p = c[kind]
    seeds = p["seeds"][:p["stack"]]
    if kind == "parity":
        params = {k: p[k] for k in ("model", "scheme", "pose", "train")}
        return [Job.of("parity_train", params=params, wildcards={"K_train": max(p["K_train"]), "seed": s})
                for s in seeds]
    if kind == "ppc":
        task, run = p["tasks"][0], "ppc"
        params = {"model": p["model"], "variant": p["variants"].get(run), "train": p["train"],
                  "pose": p["pose"] if run_scheme(p, run) == "pose" else None,
                  "task_config": run_task_config(p, task),
                  **{k: p[k] for k in ("max_position_id", "random_offset", "id_embedding", "position_loss_weight")}}
        return [Job.of("ppc_train", params=params, wildcards={"task": task, "run": run, "seed": s}) for s in seeds]
    params = {**{k: p[k] for k in ("task", "train", "eval")}, "gpt": law_gpt(p["gpt"], law)}
    return [Job.of("theory_run_gpt", params=params, wildcards={"distribution": law, "k": max(p["gpt"]["k"]), "seed": s})
            for s in seeds]


def open_fds(pid) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["parity", "ppc", "theory"])
    ap.add_argument("law", nargs="?")
    ap.add_argument("--limit", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=PREFETCH_STEPS + 2)
    args = ap.parse_args()
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(args.limit, hard), hard))
    jobs = paper_jobs(args.kind, args.law)
    model_cfgs, cfgs, batch_fns = zip(*(importlib.import_module(f"sparselen.{args.kind}.jobs").training(j)
                                        for j in jobs))
    S, mc = len(jobs), model_cfgs[0]
    inherited = open_fds(os.getpid())
    drawn = step_batches(mc, list(cfgs), list(batch_fns), [0] * S, args.steps, ahead=PREFETCH_STEPS)
    (worker,) = multiprocessing.active_children()
    most = {"main": inherited, "worker": 0}

    def watch(seconds=5.0):
        """Count descriptors until the worker's stop changing (its prefetch queue full), at
        most ``seconds`` (0: once)."""
        last, still, end = None, 0, time.monotonic() + seconds
        while still < 10 and worker.is_alive():
            counts = {"main": open_fds(os.getpid()), "worker": open_fds(worker.pid)}
            most.update({k: max(most[k], v) for k, v in counts.items()})
            still = still + 1 if counts == last else 0
            last = counts
            if time.monotonic() > end:
                break
            time.sleep(0.05)

    for step in range(args.steps):
        watch(5.0 if step == 0 else 0.0)
        got = next(drawn)
        want = StackedStep.of([apply_position_scheme(fn(step), mc, c, step) for fn, c in zip(batch_fns, cfgs)])
        assert got.lengths == want.lengths and got.tokens == want.tokens, step
        for field in dataclasses.fields(want.batch):
            x, y = getattr(got.batch, field.name), getattr(want.batch, field.name)
            assert (x is None and y is None) or torch.equal(x, y), (step, field.name)
    assert next(drawn, None) is None
    print(json.dumps({"stack": S, "inherited": inherited, "main_fds": most["main"], "worker_fds": most["worker"]}))


if __name__ == "__main__":
    main()

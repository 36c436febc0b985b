"""Stacks in the estimate: a stack rule's job (``<rule>_stack<i>``: a slice's ``stack: S`` in
the workflow, workflow/rules/common.smk ``stack_rules``) trains the S runs of one cell (the
seeds of one K_train, (task, run) or (law, k) of the small models) as one model
(``sparselen.training.stacked``), or evaluates them one after another, priced as one job from one
run's price (``price``): an evaluation stack pays start-up once and each run's model loading
and passes.

Such a job pays start-up, compilation and the trainer once; its training step is one step of
all S runs:

- time: the step's overheads once, the FLOPs of S runs at the profile's rate, each run's
  batch padded to the longest of the step's (the expected longest of S draws from the run's
  equally likely lengths), and the S runs' optimizer traffic (AdamW, per-run clipping, casts:
  ``profiles.OPTIMIZER_BYTES`` per parameter and run at the GPU's memory bandwidth, linear in
  S: ``profiles.optimizer_seconds``), or on a GPU, where longer, the S runs' batches drawn on the host
  (``Profile.batch_s`` each) by the worker process that draws them beside the device
  (``sparselen.training.stacked.step_batches``; on a CPU they add up); the evaluations it runs (the
  theory's GPT runs) one run after another;
- memory: S times a run's training step (``memory.stacked``); its evaluations run one run at a
  time, each as alone.

The largest S whose every pass fits a device, what the estimate offers when a config stacks
another number, is ``stack_size``'s.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from sparselen.interface.job import per_run_rule
from sparselen.nn.flops import Term, Work
from sparselen.nn.memory import DEVICES, Peak, stacked

if TYPE_CHECKING:
    from sparselen.estimate.dag import DagJob

def key(slice_: str) -> str:
    """The config key of a slice's stack size."""
    return f"{slice_}.stack"


def seeds(dag: DagJob) -> list[int] | None:
    """The seeds of the runs a stack rule's job trains (its ``stack_seeds``, in its outputs'
    order); None for any other job."""
    if per_run_rule(dag.rule) == dag.rule:
        return None
    return list(dag.params.stack_seeds)


def price(dag: DagJob, run: Work) -> Work:
    """The job's work from one of its runs' (``run``, its runs' rule's cost): a stack rule's job
    as ``stack_work`` of its runs, any other job as ``run``."""
    runs = seeds(dag)
    return run if runs is None else stack_work([run] * len(runs), dag.slice)


def padded_flops(term: Term, stack: int) -> float:
    """A training term's FLOPs for ``stack`` runs whose batches are padded to the longest of the
    step's: each length weighted by the chance that it is the longest of S draws."""
    if not term.lengths or term.shape is None:
        return stack * term.flops
    lengths, n = sorted(term.lengths), len(term.lengths)
    expected = sum((((i + 1) / n) ** stack - (i / n) ** stack) * 3 * term.shape.forward(term.rows, T)
                   for i, T in enumerate(lengths))
    return stack * term.calls * expected


def stacked_peak(work: Work, stack: int, kind: str, slice_: str) -> Peak | None:
    """The largest pass of a job of ``stack`` runs like ``work``: its training step S times."""
    best = None
    for what, key_, bytes_, training_step in work.passes:
        b = bytes_[kind]
        if training_step and stack > 1:
            b, what, key_ = stacked(b, stack, kind), f"{what} for each of {stack} runs", key(slice_)
        if best is None or b > best.bytes:
            best = Peak(b, what, key_)
    return best


def stack_work(works: list[Work], slice_: str) -> Work:
    """One job of the runs ``works`` (one cell's, same shapes): one training step for all, their
    evaluations one after another, their non-model units (and each run's trainer and files) summed."""
    first, stack = works[0], len(works)
    terms = [replace(t, flops=padded_flops(t, stack), runs=stack) for t in first.terms if t.kind == "train"]
    terms += [t for w in works for t in w.terms if t.kind != "train"]
    units: dict = {}
    for w in works:
        for name, amount in w.units.items():
            units[name] = units.get(name, 0.0) + amount
    if first.model_job:
        units["model_job"] = units.get("model_job", 0.0) + stack - 1  # seconds() adds the first
    memory = {kind: stacked_peak(first, stack, kind, slice_) for kind in DEVICES}
    return replace(first, terms=terms, units=units, runs=stack,
                   memory={k: v for k, v in memory.items() if v is not None})


def seeds_label(seeds: list[int]) -> str:
    """``0-31`` for consecutive seeds, else ``0,2,5``."""
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))) and len(seeds) > 1:
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(map(str, seeds))

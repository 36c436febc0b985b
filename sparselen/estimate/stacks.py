"""Stacks in the estimate: a stack rule's job (``<rule>_stack<i>``: a slice's ``stack: S`` in
the workflow, workflow/rules/common.smk ``stack_rules``) trains the S runs of one cell (the
seeds of one K_train, (task, run) or (law, k) of the small models) as one model
(``sparselen.training.stacked``), or evaluates them, priced as one job from one run's price
(``price``): an evaluation stack pays start-up once and each run's model loading, and either
each run's passes (PPC's generation, one run after another) or, where the run's cost marks its
passes ``stacked`` (parity's: ``sparselen.parity.jobs.evaluate_stacked``), one pass per batch for
all its runs: one run's calls with the FLOPs of all, and S times a run's pass in memory.

Such a job pays start-up, compilation and the trainer once; its training step is one step of
all S runs:

- time: the step's overheads once, the FLOPs of S runs at the profile's rate, each run's
  batch padded to the longest of the step's (the expected longest of S draws from the run's
  equally likely lengths), or with a slice's ``length_groups`` > 1 (parity's) to the longest of
  its group's (``padded_flops``), whose passes each pay the per-layer launches and whose
  weights and gradients each run's slices are gathered into and scattered from
  (``profiles.GROUP_BYTES``), and the S runs' optimizer traffic (AdamW, per-run clipping, casts:
  ``profiles.OPTIMIZER_BYTES`` per parameter and run at the GPU's memory bandwidth, linear in
  S: ``profiles.optimizer_seconds``), or on a GPU, where longer, the S runs' batches drawn on the host
  (``Profile.batch_s`` each) by the worker process that draws them beside the device
  (``sparselen.training.stacked.step_batches``; on a CPU they add up); the evaluations it runs (the
  theory's GPT runs) one run after another;
- memory: S times a run's training step (``memory.stacked``); its evaluations run one run at a
  time, each as alone (the theory's GPT runs).

A stack of runs that train, but not as one model (the theory's SFA runs, theory.sfa_stack: a
CPU's chunk of seconds-long runs), is priced ``in_turn``: its runs' work added up.

The largest S whose every pass fits a device, what the estimate offers when a config stacks
another number, is ``stack_size``'s.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from sparselen.interface.job import per_run_rule
from sparselen.jobs.slices import stacked_trainings
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
    as ``stack_work`` of its runs, or ``in_turn`` where its runs train but not as one model (the
    theory's SFA runs: theory.sfa_stack), any other job as ``run``."""
    runs = seeds(dag)
    if runs is None:
        return run
    if run.train_steps and per_run_rule(dag.rule) not in stacked_trainings():
        return in_turn([run] * len(runs))
    return stack_work([run] * len(runs), dag.slice)


def in_turn(works: list[Work]) -> Work:
    """One job of the runs ``works`` (one cell's, alike) run one after another in one process:
    their terms and units added up (start-up paid once), the memory of one run's."""
    return replace(works[0], terms=[t for w in works for t in w.terms], units=summed_units(works), runs=len(works),
                   train_steps=sum(w.train_steps for w in works))


def summed_units(works: list[Work]) -> dict:
    """The units of the runs ``works`` in one job, added up, with each run's model
    files and provenance (``model_job``) beyond the first (``profiles.seconds`` adds that one)."""
    units: dict = {}
    for w in works:
        for name, amount in w.units.items():
            units[name] = units.get(name, 0.0) + amount
    if works[0].model_job:
        units["model_job"] = units.get("model_job", 0.0) + len(works) - 1
    return units


def padded_flops(term: Term, stack: int, groups: int = 1) -> float:
    """A training term's FLOPs for ``stack`` runs whose batches are padded to the longest of the
    step's, or with ``groups`` > 1 to the longest of their length group's
    (``sparselen.training.stacked.length_groups``: the runs sorted by drawn length, cut into
    contiguous groups of near-equal size, the first ``stack % groups`` one larger): a group of
    the runs ranked a+1..b pads its b - a runs to the b-th smallest of the S draws, each length
    weighted by the chance that it is that order statistic (one group: the longest of S)."""
    if not term.lengths or term.shape is None:
        return stack * term.flops
    lengths, n = sorted(term.lengths), len(term.lengths)
    groups = min(max(groups, 1), stack)
    sizes = [stack // groups + (j < stack % groups) for j in range(groups)]
    ranks = [sum(sizes[:j + 1]) for j in range(groups)]  # each group's longest: its highest rank
    per_run = [3 * term.shape.forward(term.rows, T) for T in lengths]
    total = 0.0
    for size, rank in zip(sizes, ranks):
        below = [at_most(rank, stack, i / n) for i in range(n + 1)]  # P(rank-th smallest <= lengths[i - 1])
        total += size * term.calls * sum((below[i + 1] - below[i]) * f for i, f in enumerate(per_run))
    return total


def at_most(rank: int, draws: int, p: float) -> float:
    """The chance that the ``rank``-th smallest of ``draws`` independent draws is at most a
    value each draw is at most with chance ``p``: at least ``rank`` of them are."""
    if rank == draws:
        return p ** draws  # the longest of S, as one group has always been priced
    return sum(math.comb(draws, m) * p ** m * (1 - p) ** (draws - m) for m in range(rank, draws + 1))


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
    evaluations one after another, or one pass for all where a run's work marks its passes
    ``stacked`` (parity's evaluation stack), their non-model units (and each run's trainer and
    files, or model file) summed."""
    first, stack = works[0], len(works)
    terms = []
    for t in first.terms:
        if t.kind == "train":
            groups = min(max(t.length_groups, 1), stack)
            terms.append(replace(t, flops=padded_flops(t, stack, groups), runs=stack, passes=t.passes * groups,
                                 length_groups=groups))
    terms += [replace(t, flops=stack * t.flops, runs=stack) for t in first.terms if t.kind != "train" and t.stacked]
    terms += [t for w in works for t in w.terms if t.kind != "train" and not t.stacked]
    memory = {kind: stacked_peak(first, stack, kind, slice_) for kind in DEVICES}
    return replace(first, terms=terms, units=summed_units(works), runs=stack,
                   memory={k: v for k, v in memory.items() if v is not None})


def seeds_label(seeds: list[int]) -> str:
    """``0-31`` for consecutive seeds, else ``0,2,5``."""
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))) and len(seeds) > 1:
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(map(str, seeds))

"""Many runs of one architecture and recipe trained as one batched model, each to the weights
it would reach alone.

Small models leave a GPU idle between kernel launches; a stack of S runs
(``sparselen.stacked_model``) does one forward, backward and optimizer step for all S, so a
step costs about what one run's costs until the device is busy. Each run keeps what makes it
itself:

- its initialisation (``torch.manual_seed(seed)``, then ``build_model``, as ``train`` does);
- its batch stream (its own ``batch_fn`` and PoSE draws, ``apply_position_scheme``); batches of
  different lengths are padded at the end with IGNORE labels, which causal attention makes
  exact: no real position sees a padded one;
- its loss, a mean over its own labelled tokens (the stack minimises their sum, whose gradient
  in run s's weights is run s's loss's);
- its AdamW state and schedule: AdamW is elementwise, so one AdamW over stacked tensors is S
  AdamWs when their hyper-parameters and schedule agree (the recipe must be the same);
  biases and LayerNorm weights stay out of weight decay (``make_optimizer``'s ``stack_dims``);
- its gradient-norm clipping, ``torch.nn.utils.clip_grad_norm_``'s formula on its own gradients.

Each run reads and writes exactly the files ``train`` does (its checkpoint, model file, log CSV
and summary, in the same format), so a stack resumes a run trained alone and the other way
round, and nothing downstream sees a difference; a summary adds ``stacked_runs``. Runs whose
checkpoints stand at different steps (a kill between two runs' checkpoint writes) train as
separate stacks, one per step. A step takes micro-steps of ``micro_batch`` rows of every run
where the slice sets one; data parallelism is not used in a stack.
Log rows' throughput is each run's: its tokens (and FLOPs) over the stack's time. On CUDA a
worker process draws the runs' batches a few steps ahead of the device (``step_batches``).

An evaluation stack (parity, PPC) evaluates its runs one after another in one process, each
with its rule's per-run step, on the stack job's device: one start-up for all.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import json
import logging
import sys
import time
from types import SimpleNamespace
from typing import Callable

import torch
import torch.nn.functional as F

from sparselen import modelfile
from sparselen.architectures import build_model
from sparselen.batch import IGNORE, Batch, labelled_positions, unembedded
from sparselen.device import autocast, enable_tf32
from sparselen.device import to_device as device_copy
from sparselen.jobs import Job, Runtime, named, per_run_rule, runtime, step_function
from sparselen.model import ModelConfig
from sparselen.provenance import config_hash, provenance
from sparselen.resumable import code_fingerprint
from sparselen.run import Run
from sparselen.stacked_model import equal_share, run_state, stack_models, stack_state
from sparselen.train import (TrainConfig, apply_position_scheme, checkpoint_state, lr_lambda, make_optimizer,
                             own_checkpoint, peak_flops, place_step_counters, run_summary, throughput,
                             write_outputs)

log = logging.getLogger(__name__)


# Per-run rules whose job evaluates its model after training: the step a stack job of theirs
# runs for each of its runs once the stack is trained, with (run's job, device).
EVALUATE_AFTER_TRAINING = {"theory_run_gpt": ("sparselen.theory.jobs", "evaluate_gpt")}
# Per-run evaluation rules: a stack job of theirs evaluates its runs one after another in one
# process on one device (one start-up instead of one per run), each with its rule's step.
EVALUATIONS = ("parity_evaluate", "ppc_evaluate")


def run_stack(job) -> list[dict] | None:
    """A stack rule's job (a slice's ``stack`` knob, workflow/rules/common.smk): its runs'
    jobs (``run_jobs``) on the stack job's device and GPU share. An evaluation stack evaluates
    each run with its rule's step; a training stack trains its runs as one stack, then
    evaluates each run where its own rule does so in its training job."""
    jobs, shared = run_jobs(job), runtime(job)
    rule = jobs[0].rule
    if rule in EVALUATIONS:
        evaluate = step_function(rule)
        for run_job in jobs:
            evaluate(run_job, shared.device)
        return None
    summaries = train_jobs(jobs, shared)
    if rule in EVALUATE_AFTER_TRAINING:
        module, name = EVALUATE_AFTER_TRAINING[rule]
        evaluate = getattr(importlib.import_module(module), name)
        for run_job in jobs:
            evaluate(run_job, shared.device)
    return summaries


def run_jobs(job) -> list[Job]:
    """The jobs of a stack job's runs, as their own rule (``sparselen.jobs.per_run_rule``)
    would hand them over: run i of param ``stack_seeds`` gets the i-th file of each named
    output, of each named input that lists one file per run (the others are every run's) and
    of param ``checkpoint`` (a training stack's), the other params, and the stack's wildcards
    plus its ``seed``; the stack's log, resources, threads and config."""
    params, outputs = named(job.params), {k: list(v) for k, v in named(job.output).items()}
    inputs = named(job.input)
    seeds = list(params.pop("stack_seeds"))
    per_run = {**outputs, **{k: list(v) for k, v in inputs.items() if not isinstance(v, str)}}
    if "checkpoint" in params:
        per_run["checkpoint"] = list(params.pop("checkpoint"))
    sizes = {name: len(files) for name, files in per_run.items()}
    if any(n != len(seeds) for n in sizes.values()):
        raise ValueError(f"rule {job.rule}: {len(seeds)} stack_seeds {seeds} but files per run {sizes}")
    shared = {k: v for k, v in inputs.items() if isinstance(v, str)}
    wildcards = named(job.wildcards)

    def files(names, i):
        return {name: per_run[name][i] for name in names if name in per_run}

    return [Job(per_run_rule(job.rule), SimpleNamespace(**shared, **files(inputs, i)),
                SimpleNamespace(**files(outputs, i)), SimpleNamespace(**params, **files(["checkpoint"], i)),
                SimpleNamespace(**wildcards, seed=str(seed)), list(job.log), named(getattr(job, "resources", {})),
                job.threads, job.config)
            for i, seed in enumerate(seeds)]


def train_jobs(jobs, shared: Runtime | None = None) -> list[dict]:
    """Train the runs of ``jobs`` (``*_train`` jobs of one slice, or the theory's ``run_gpt``)
    as one stack: each job's slice builds its (model config, trainer settings, batch function)
    with its ``training(job)``, as the per-run path does. ``shared``: the runtime every run
    uses (a stack job's), else the first job's."""
    trainings = [importlib.import_module(f"sparselen.{job.rule.partition('_')[0]}.jobs").training(job) for job in jobs]
    model_cfgs, cfgs, batch_fns = zip(*trainings)
    if any(mc != model_cfgs[0] for mc in model_cfgs):
        raise ValueError("the runs of a stack must share one model config")
    runs = [Run.of(job) for job in jobs]
    shared = runs[0].runtime if shared is None else shared
    runs = [dataclasses.replace(run, runtime=shared) for run in runs]
    return train_stack(model_cfgs[0], list(cfgs), list(batch_fns), runs)


def train_stack(model_cfg: ModelConfig, cfgs: list[TrainConfig], batch_fns: list[Callable[[int], Batch]],
                runs: list[Run]) -> list[dict]:
    """Train each run (``cfgs[i]``, ``batch_fns[i]``, ``runs[i]``) to ``cfgs[i].steps`` as
    ``sparselen.train.train`` would, all in one model; returns their summaries in order."""
    check_recipe(cfgs)
    device = runs[0].runtime.device
    arch = json.loads(json.dumps(model_cfg.to_dict()))
    states = [own_checkpoint(run.files.checkpoint, config_hash(run.identity), code_fingerprint(*run.code), arch,
                             device) for run in runs]
    summaries = [None] * len(runs)
    at_step = lambda i: states[i]["step"] if states[i] is not None else 0  # noqa: E731
    for step, members in itertools.groupby(sorted(range(len(runs)), key=at_step), key=at_step):
        members = list(members)
        done = _train_group(model_cfg, [cfgs[i] for i in members], [batch_fns[i] for i in members],
                            [runs[i] for i in members], [states[i] for i in members], step, arch, device)
        for i, summary in zip(members, done):
            summaries[i] = summary
    return summaries


def check_recipe(cfgs: list[TrainConfig]) -> None:
    """Runs stack only when their trainer settings differ in the seed alone (one optimizer,
    one schedule, one step count for all)."""
    recipe = dataclasses.replace(cfgs[0], seed=0)
    for cfg in cfgs[1:]:
        if dataclasses.replace(cfg, seed=0) != recipe:
            differ = [f.name for f in dataclasses.fields(cfg) if f.name != "seed"
                      and getattr(cfg, f.name) != getattr(recipe, f.name)]
            raise ValueError(f"runs of a stack must share their trainer settings but the seed; seed {cfg.seed} "
                             f"differs from seed {cfgs[0].seed} in {differ}")


def _train_group(model_cfg, cfgs, batch_fns, runs, states, step, arch, device) -> list[dict]:
    """Runs that all stand at ``step`` (their checkpoints ``states``, None at step 0); on CUDA
    their batches drawn ``PREFETCH_STEPS`` ahead (``step_batches``)."""
    cfg, runtime, S = cfgs[0], runs[0].runtime, len(runs)
    cuda = device.type == "cuda"
    if cuda:
        enable_tf32()
    models = []
    for c in cfgs:
        torch.manual_seed(c.seed)
        models.append(build_model(model_cfg).to(device))
    single, model = models[0], stack_models(models)  # single: a run's FLOPs and parameter count
    del models
    opt = make_optimizer(model, cfg.optim, fused=cuda, stack_dims=1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(cfg.optim, cfg.schedule_steps or cfg.steps))
    rows = [[] for _ in runs]
    if step:
        model.load_state_dict(stack_state([s["model"] for s in states]))
        opt.load_state_dict(stack_optimizer_state([s["optimizer"] for s in states]))
        place_step_counters(opt, fused=cuda)
        sched.load_state_dict(states[0]["scheduler"])
        rows = [list(s["log"]) for s in states]
        for run in runs:
            log.info("resumed from %s at step %d", run.files.checkpoint, step)
    resumed_from = step
    chashes = [config_hash(run.identity) for run in runs]
    codes = [code_fingerprint(*run.code) for run in runs]
    fwd = torch.compile(model) if runtime.compile else model
    peak = peak_flops(runtime, device)

    def save_checkpoints():
        model_sd, opt_sd = model.state_dict(), opt.state_dict()
        for s, run in enumerate(runs):
            modelfile.save_state(run.files.checkpoint, checkpoint_state(
                run_state(model_sd, s), run_optimizer_state(opt_sd, s), sched.state_dict(), step, rows[s], chashes[s],
                codes[s], arch))

    model.train()
    flops_per_token = {}
    tokens_since, flops_since, tokens_run, flops_run = [0] * S, [0.0] * S, [0] * S, [0.0] * S
    t_start = t_last = t_saved = time.perf_counter()
    ahead = PREFETCH_STEPS if cuda and S > 1 else 0
    for batches in step_batches(model_cfg, cfgs, batch_fns, step, cfg.steps, ahead):
        lr = sched.get_last_lr()[0]
        losses, parts = train_step(fwd, model, opt, sched, batches, cfg, device)
        step += 1
        for s, b in enumerate(batches):
            seq_len = b.input_ids.shape[1]
            if seq_len not in flops_per_token:
                flops_per_token[seq_len] = single.flops_per_token(seq_len)
            tokens_since[s] += b.num_tokens
            flops_since[s] += b.num_tokens * flops_per_token[seq_len]
        if step % cfg.log_every == 0 or step == cfg.steps:
            now = time.perf_counter()
            seconds = max(now - t_last, 1e-9)
            totals, values = losses.float().tolist(), {k: v.float().tolist() for k, v in parts.items()}
            for s in range(S):
                row = {"step": step, "loss": totals[s], "lr": lr, "tokens_per_s": tokens_since[s] / seconds}
                if peak:
                    row["mfu"] = flops_since[s] / seconds / peak
                row.update({k: v[s] for k, v in values.items()})
                rows[s].append(row)
            tokens_run = [a + b for a, b in zip(tokens_run, tokens_since)]
            flops_run = [a + b for a, b in zip(flops_run, flops_since)]
            tokens_since, flops_since = [0] * S, [0.0] * S
            t_last = now
            log.info("step %d/%d (%d runs) loss %s lr %.3e", step, cfg.steps, S,
                     " ".join(f"{t:.5f}" for t in totals), lr)
        if step == cfg.steps or (step % cfg.checkpoint_every == 0
                                 and time.perf_counter() - t_saved >= 60 * runtime.checkpoint_minutes):
            save_checkpoints()
            t_saved = time.perf_counter()
    wall = time.perf_counter() - t_start
    model_sd = model.state_dict()
    summaries = []
    for s, (c, run) in enumerate(zip(cfgs, runs)):
        prov = provenance(run.identity, c.seed, device, steps=c.steps, run=run.identity)
        summary = run_summary(run, resumed_from, rows[s], wall, single.num_parameters(),
                              throughput(tokens_run[s], flops_run[s], wall, 1, peak), prov, stacked_runs=S)
        write_outputs(run.files, run_state(model_sd, s), model_cfg, prov, rows[s], summary)
        summaries.append(summary)
    return summaries


class StepBatches(torch.utils.data.IterableDataset):
    """Per step from ``start`` to ``stop`` - 1, the runs' batches with their position schemes
    applied: each a function of its run's seed and the step alone (``batch_fn(step)``, PoSE's
    ``generator("pose", seed, step)``), so where they are drawn changes no number."""

    def __init__(self, model_cfg: ModelConfig, cfgs: list[TrainConfig], batch_fns: list[Callable[[int], Batch]],
                 start: int, stop: int):
        super().__init__()
        self.model_cfg, self.cfgs, self.batch_fns, self.start, self.stop = model_cfg, cfgs, batch_fns, start, stop

    def __iter__(self):
        for step in range(self.start, self.stop):
            yield [apply_position_scheme(fn(step), self.model_cfg, c, step) for fn, c in zip(self.batch_fns, self.cfgs)]


# Steps a CUDA stack's batches are drawn ahead of its device: drawing S runs' batches on the
# host takes about as long as the stack's step on the GPU (docs/gpu.md, "Stacks"), so a worker
# process draws them while the GPU computes.
PREFETCH_STEPS = 4


def step_batches(model_cfg: ModelConfig, cfgs: list[TrainConfig], batch_fns: list[Callable[[int], Batch]],
                 start: int, stop: int, ahead: int = 0):
    """``StepBatches`` in this process, or with ``ahead`` > 0 in one forked worker process
    (``torch.utils.data.DataLoader``) up to ``ahead`` steps ahead (Linux; elsewhere in this
    process)."""
    data = StepBatches(model_cfg, cfgs, batch_fns, start, stop)
    if not ahead or not sys.platform.startswith("linux") or start >= stop:
        return iter(data)
    return iter(torch.utils.data.DataLoader(data, batch_size=None, num_workers=1, prefetch_factor=ahead,
                                            multiprocessing_context="fork"))


def train_step(fwd, model, opt, sched, batches: list[Batch], cfg: TrainConfig, device: torch.device):
    """One step of every run of the stack ``model`` (``fwd``: it, or its compiled form) on the
    runs' ``batches`` (position scheme applied): forward, backward, per-run clipping, AdamW
    and schedule; returns the (S,) losses and their parts, still on the device.

    One pass when ``cfg.micro_batch`` is 0 or covers a run's rows; else micro-steps of
    ``micro_batch`` rows of every run, each run's losses summed over its labels and divided by
    its whole step's label counts, so the micro-steps' gradients add up to the one-pass step's
    (as ``sparselen.train.backward`` does for one run)."""
    S = len(batches)
    opt.zero_grad(set_to_none=True)  # before the forward pass: activations never sit beside old gradients
    batch = stack_batches(batches)
    rows = batch.input_ids.shape[0] // S
    if not cfg.micro_batch or cfg.micro_batch >= rows:
        losses, parts = backward(fwd, batch, S, cfg, device)
    else:
        counts = tuple(None if c is None else device_copy(c, device) for c in label_counts_per_run(batch, S))
        losses, parts = 0.0, {}
        for piece in micro_batches(batch, S, cfg.micro_batch):
            piece_losses, piece_parts = backward(fwd, piece, S, cfg, device, counts)
            losses = losses + piece_losses
            parts = {k: parts.get(k, 0.0) + v for k, v in piece_parts.items()}
    if cfg.optim.grad_clip:
        clip_grad_norm_per_run(model.parameters(), cfg.optim.grad_clip)
    opt.step()
    sched.step()
    return losses, parts


def backward(fwd, batch: Batch, stack: int, cfg: TrainConfig, device: torch.device, counts=None):
    """Forward and backward pass of a stacked ``batch`` (a step's or a micro-step's); returns
    its (S,) losses and parts, detached. ``counts``: the whole step's (S,) label counts
    (``label_counts_per_run``) a micro-step's losses are divided by."""
    on_device, positions = to_device(batch, stack, device)
    with autocast(device):
        losses, parts = stacked_loss(fwd, on_device, stack, cfg.position_loss_weight, positions, counts)
    losses.sum().backward()
    return losses.detach(), parts


def micro_batches(batch: Batch, stack: int, rows: int) -> list[Batch]:
    """A stacked batch in micro-batches of ``rows`` rows of every run (still grouped by run):
    the i-th holds rows i*rows..(i+1)*rows-1 of each run."""
    per_run = batch.input_ids.shape[0] // stack
    if per_run % rows:
        raise ValueError(f"a run's batch of {per_run} rows does not split into micro-batches of {rows} rows; "
                         "make the micro-batch a divisor of the rows per step")
    pieces = []
    for start in range(0, per_run, rows):
        index = (torch.arange(stack)[:, None] * per_run + torch.arange(start, start + rows)).flatten()
        pieces.append(Batch(*(None if getattr(batch, f.name) is None else getattr(batch, f.name).index_select(0, index)
                              for f in dataclasses.fields(Batch))))
    return pieces


def label_counts_per_run(batch: Batch, stack: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(S,) labelled tokens and (S,) labelled position ids (None without) of each run's rows."""
    tokens = (batch.labels != IGNORE).view(stack, -1).sum(1)
    ids = None if batch.position_labels is None else (batch.position_labels != IGNORE).view(stack, -1).sum(1)
    return tokens, ids


def stack_batches(batches: list[Batch]) -> Batch:
    """The runs' batches as one of S x B rows (run s's rows s*B..(s+1)*B-1), each padded at
    the end to the longest: token 0, position id 0, IGNORE labels."""
    T = max(b.input_ids.shape[1] for b in batches)

    def joined(name: str, fill: int):
        parts = [getattr(b, name) for b in batches]
        if all(p is None for p in parts):
            return None
        if any(p is None for p in parts):
            raise ValueError(f"some runs' batches have {name} and some do not")
        return torch.cat([F.pad(p.expand(b.input_ids.shape), (0, T - p.shape[1]), value=fill)
                          for p, b in zip(parts, batches)])

    return Batch(joined("input_ids", 0), joined("labels", IGNORE), joined("position_ids", 0),
                 joined("position_labels", IGNORE))


def to_device(batch: Batch, stack: int, device: torch.device) -> tuple[Batch, torch.Tensor | None]:
    """The batch on ``device`` and, on CUDA, its labelled positions when they are few and every
    run has as many (so the unembedded rows still group by run); else every position."""
    if device.type != "cuda":
        return batch.to(device), None
    positions = labelled_positions(batch)
    if not equal_share(positions, batch.input_ids.shape[0], stack, batch.input_ids.shape[1]):
        positions = None
    return batch.to(device), None if positions is None else device_copy(positions, device)


def per_run_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, stack: int,
                          counts: torch.Tensor | None = None) -> torch.Tensor:
    """(S,) each run's mean cross-entropy over its labelled rows (``labels`` grouped by run);
    ``counts``: its summed cross-entropy over these (S,) label counts of a whole step instead
    (a micro-step's share, as ``sparselen.distributed.loss_share``)."""
    losses = F.cross_entropy(logits, labels, ignore_index=IGNORE, reduction="none").view(stack, -1)
    if counts is None:
        return losses.sum(1) / (labels != IGNORE).view(stack, -1).sum(1)
    return losses.sum(1) / counts.clamp(min=1)


def stacked_loss(model, batch: Batch, stack: int, position_loss_weight: float = 1.0, positions=None, counts=None):
    """``sparselen.train.loss_fn`` of each run: (S,) losses and their (S,) parts; ``counts``:
    (token, position-id) label counts per run of the whole step, for a micro-step's share."""
    logits, pos_logits, labels, position_labels = unembedded(model, batch, positions)
    token_counts, id_counts = counts if counts is not None else (None, None)
    loss = per_run_cross_entropy(logits, labels, stack, token_counts)
    parts = {"token_loss": loss.detach()}
    if pos_logits is not None and position_labels is not None:
        pos_loss = per_run_cross_entropy(pos_logits, position_labels, stack, id_counts)
        parts["position_loss"] = pos_loss.detach()
        loss = loss + position_loss_weight * pos_loss
    return loss, parts


def clip_grad_norm_per_run(parameters, max_norm: float) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` for each run of a stack on its own gradients (slice s
    of every stacked gradient): the 2-norm of the parameters' 2-norms, and a scale
    ``min(1, max_norm / (norm + 1e-6))``; returns the (S,) norms."""
    grads = [p.grad for p in parameters if p.grad is not None]
    norms = torch.stack([torch.linalg.vector_norm(g.flatten(1), 2, dim=1) for g in grads], dim=1)
    total = torch.linalg.vector_norm(norms, 2, dim=1)
    scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(scale.view(-1, *[1] * (g.ndim - 1)).to(g.dtype))
    return total


def stack_optimizer_state(states: list[dict]) -> dict:
    """Runs' AdamW state dicts as the stack's: moments stacked, step counters (equal in runs at
    one step) and parameter groups the first run's."""
    first = states[0]
    return {"state": {i: {k: v if k == "step" else torch.stack([s["state"][i][k] for s in states])
                          for k, v in st.items()} for i, st in first["state"].items()},
            "param_groups": first["param_groups"]}


def run_optimizer_state(stacked: dict, s: int) -> dict:
    """Run ``s``'s AdamW state dict out of the stack's (the format ``train`` writes)."""
    return {"state": {i: {k: v if k == "step" else v[s].clone() for k, v in st.items()}
                      for i, st in stacked["state"].items()},
            "param_groups": stacked["param_groups"]}

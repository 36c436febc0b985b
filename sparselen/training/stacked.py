"""Many runs of one architecture and recipe trained as one batched model, each to the weights
it would reach alone.

Small models leave a GPU idle between kernel launches; a stack of S runs
(``sparselen.nn.stacked_model``) does one forward, backward and optimizer step for all S, so a
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
where the slice sets one, and with ``length_groups`` > 1 one pass per group of runs of near
drawn lengths (``length_groups``, ``grouped_backward``), each padded to its group's longest
instead of the step's; data parallelism is not used in a stack.
Log rows' throughput is each run's: its tokens (and FLOPs) over the stack's time. On CUDA a
worker process draws the runs' batches a few steps ahead of the device and stacks them
(``step_batches``); it is forked before any tensor is on the GPU.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import sys
import time
from typing import Callable

import torch
import torch.nn.functional as F

from sparselen.interface.run import Run
from sparselen.nn.architectures import build_model
from sparselen.nn.batch import IGNORE, Batch, labelled_positions, unembedded
from sparselen.nn.model import ModelConfig
from sparselen.nn.stacked_model import equal_share, run_state, stack_models, stack_state
from sparselen.runtime.device import autocast, enable_tf32
from sparselen.runtime.device import to_device as device_copy
from sparselen.runtime.provenance import config_hash, provenance
from sparselen.training import modelfile
from sparselen.training.resumable import code_fingerprint
from sparselen.training.train import (TrainConfig, apply_position_scheme, checkpoint_state, lr_lambda, make_optimizer,
                                      own_checkpoint, own_checkpoint_step, peak_flops, place_step_counters, run_summary,
                                      throughput, without_moments, write_outputs)

log = logging.getLogger(__name__)


def train_stack(model_cfg: ModelConfig, cfgs: list[TrainConfig], batch_fns: list[Callable[[int], Batch]],
                runs: list[Run]) -> list[dict]:
    """Train each run (``cfgs[i]``, ``batch_fns[i]``, ``runs[i]``) to ``cfgs[i].steps`` as
    ``sparselen.training.train.train`` would, all in one model; returns their summaries in order.

    The runs' steps come from their checkpoints' headers, and on CUDA the one worker that draws
    every group's batches is forked then, before any checkpoint or model is on the GPU: a
    process that has initialised CUDA is not safe to fork. Resolving the device before it only
    counts the GPUs, which initialises no CUDA context (``torch.cuda.is_initialized()`` stays
    False)."""
    check_recipe(cfgs)
    device = runs[0].runtime.device
    arch = json.loads(json.dumps(model_cfg.to_dict()))
    chashes = [config_hash(run.identity) for run in runs]
    codes = [code_fingerprint(*run.code) for run in runs]
    starts = [own_checkpoint_step(run.files.checkpoint, h, c, arch) for run, h, c in zip(runs, chashes, codes)]
    stop = cfgs[0].steps
    ahead = PREFETCH_STEPS if device.type == "cuda" and len(runs) > 1 else 0
    batches = step_batches(model_cfg, cfgs, batch_fns, starts, stop, ahead=ahead)
    summaries = [None] * len(runs)
    for step, members in step_groups(starts):
        states = [own_checkpoint(runs[i].files.checkpoint, chashes[i], codes[i], arch, device) if step else None
                  for i in members]
        if step and any(state is None or state["step"] != step for state in states):
            raise RuntimeError(f"the checkpoints of runs {[runs[i].files.checkpoint for i in members]} changed "
                               f"since this stack read them at step {step}")
        done = _train_group(model_cfg, [cfgs[i] for i in members], [runs[i] for i in members], states, step, arch,
                            device, itertools.islice(batches, max(stop - step, 0)))
        for i, summary in zip(members, done):
            summaries[i] = summary
    return summaries


def step_groups(starts: list[int]) -> list[tuple[int, list[int]]]:
    """(step, runs) of the runs that stand at each step of ``starts``, the lowest step first:
    each group trains as a stack of its own (a kill between two runs' checkpoint writes leaves
    them at different steps)."""
    order = sorted(range(len(starts)), key=starts.__getitem__)
    return [(step, list(runs)) for step, runs in itertools.groupby(order, key=starts.__getitem__)]


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


def _train_group(model_cfg, cfgs, runs, states, step, arch, device, batches) -> list[dict]:
    """Runs that all stand at ``step`` (their checkpoints ``states``, None at step 0), trained
    on ``batches``: their ``StackedStep`` of each step from ``step`` on (``step_batches``)."""
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
        if step < cfg.steps:  # finished runs' checkpoints keep no moments
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
            moments = run_optimizer_state(opt_sd, s) if step < cfg.steps else without_moments(opt_sd)
            modelfile.save_state(run.files.checkpoint, checkpoint_state(
                run_state(model_sd, s), moments, sched.state_dict(), step, rows[s], chashes[s], codes[s], arch))

    model.train()
    flops_per_token = {}
    tokens_since, flops_since, tokens_run, flops_run = [0] * S, [0.0] * S, [0] * S, [0.0] * S
    t_start = t_last = t_saved = time.perf_counter()
    for drawn in batches:
        lr = sched.get_last_lr()[0]
        losses, parts = train_step(fwd, model, opt, sched, drawn.batch, S, cfg, device, drawn.lengths)
        step += 1
        for s, (seq_len, tokens) in enumerate(zip(drawn.lengths, drawn.tokens)):
            if seq_len not in flops_per_token:
                flops_per_token[seq_len] = single.flops_per_token(seq_len)
            tokens_since[s] += tokens
            flops_since[s] += tokens * flops_per_token[seq_len]
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


@dataclasses.dataclass
class StackedStep:
    """One step's batches of a stack's runs, stacked where they are drawn: the batch of S x B
    rows (``stack_batches``), and each run's own length and token count (throughput counts a
    run's tokens, not its padding). A worker hands it over as 2-4 tensors, each one
    shared-memory file descriptor, whatever S: S runs' batches apart would be 2-4 x S."""

    batch: Batch
    lengths: list[int]
    tokens: list[int]

    @classmethod
    def of(cls, batches: list[Batch]) -> "StackedStep":
        return cls(stack_batches(batches), [b.input_ids.shape[1] for b in batches], [b.num_tokens for b in batches])


class StepBatches(torch.utils.data.IterableDataset):
    """For each group of runs at one step of ``starts`` (``step_groups``), in turn, per step
    from there to ``stop`` - 1, the group's batches with their position schemes applied, as one
    ``StackedStep``: each batch a function of its run's seed and the step alone
    (``batch_fn(step)``, PoSE's ``generator("pose", seed, step)``), so where they are drawn
    changes no number."""

    def __init__(self, model_cfg: ModelConfig, cfgs: list[TrainConfig], batch_fns: list[Callable[[int], Batch]],
                 starts: list[int], stop: int):
        super().__init__()
        self.model_cfg, self.cfgs, self.batch_fns, self.starts, self.stop = model_cfg, cfgs, batch_fns, starts, stop

    def __iter__(self):
        for start, runs in step_groups(self.starts):
            for step in range(start, self.stop):
                yield StackedStep.of([apply_position_scheme(self.batch_fns[i](step), self.model_cfg, self.cfgs[i], step)
                                      for i in runs])


# Steps a CUDA stack's batches are drawn ahead of its device: drawing S runs' batches on the
# host takes about as long as the stack's step on the GPU (docs/gpu.md, "Stacks"), so a worker
# process draws them while the GPU computes.
PREFETCH_STEPS = 4


def step_batches(model_cfg: ModelConfig, cfgs: list[TrainConfig], batch_fns: list[Callable[[int], Batch]],
                 starts: list[int], stop: int, ahead: int = 0):
    """``StepBatches`` in this process, or with ``ahead`` > 0 in one worker process
    (``torch.utils.data.DataLoader``) up to ``ahead`` steps ahead (Linux; elsewhere in this
    process). The worker is forked when this is called: call it before CUDA is initialised."""
    data = StepBatches(model_cfg, cfgs, batch_fns, starts, stop)
    if not ahead or not sys.platform.startswith("linux") or all(start >= stop for start in starts):
        return iter(data)
    return iter(torch.utils.data.DataLoader(data, batch_size=None, num_workers=1, prefetch_factor=ahead,
                                            multiprocessing_context="fork"))


def train_step(fwd, model, opt, sched, batch: Batch, S: int, cfg: TrainConfig, device: torch.device,
               lengths: list[int] | None = None):
    """One step of every run of the stack ``model`` (``fwd``: it, or its compiled form) on the
    S runs' batches stacked (``stack_batches``; position scheme applied): forward, backward,
    per-run clipping, AdamW and schedule; returns the (S,) losses and their parts, still on the
    device.

    One pass when ``cfg.micro_batch`` is 0 or covers a run's rows; else micro-steps of
    ``micro_batch`` rows of every run, each run's losses summed over its labels and divided by
    its whole step's label counts, so the micro-steps' gradients add up to the one-pass step's
    (as ``sparselen.training.train.backward`` does for one run). With ``cfg.length_groups`` > 1
    and the runs' drawn ``lengths`` (``StackedStep.lengths``), one such pass per group of runs
    (``grouped_backward``)."""
    opt.zero_grad(set_to_none=True)  # before the forward pass: activations never sit beside old gradients
    groups = length_groups(lengths, cfg.length_groups) if lengths is not None else [list(range(S))]
    if len(groups) > 1:
        losses, parts = grouped_backward(fwd, model, batch, S, groups, lengths, cfg, device)
    else:
        losses, parts = passes(fwd, batch, S, cfg, device)
    if cfg.optim.grad_clip:
        clip_grad_norm_per_run(model.parameters(), cfg.optim.grad_clip)
    opt.step()
    sched.step()
    return losses, parts


def passes(fwd, batch: Batch, S: int, cfg: TrainConfig, device: torch.device):
    """Forward and backward passes of the S runs' stacked ``batch``: one, or micro-steps of
    ``cfg.micro_batch`` rows of every run; returns their (S,) losses and parts."""
    rows = batch.input_ids.shape[0] // S
    if not cfg.micro_batch or cfg.micro_batch >= rows:
        return backward(fwd, batch, S, cfg, device)
    counts = tuple(None if c is None else device_copy(c, device) for c in label_counts_per_run(batch, S))
    losses, parts = 0.0, {}
    for piece in micro_batches(batch, S, cfg.micro_batch):
        piece_losses, piece_parts = backward(fwd, piece, S, cfg, device, counts)
        losses = losses + piece_losses
        parts = {k: parts.get(k, 0.0) + v for k, v in piece_parts.items()}
    return losses, parts


def length_groups(lengths: list[int], groups: int) -> list[list[int]]:
    """The runs (indices into ``lengths``, each run's drawn length) in ``groups`` groups of
    near-equal size, the runs sorted by length (ties in run order) and cut into contiguous
    groups, the first ``len % groups`` one run larger: the step's runs of near lengths
    together, so a group pads to its own longest. Fewer groups where there are fewer runs."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    parts = torch.arange(len(order)).tensor_split(min(max(groups, 1), max(len(order), 1)))
    return [[order[i] for i in part.tolist()] for part in parts if len(part)]


def padded_lengths(lengths: list[int], groups: int) -> list[int]:
    """The length each run's batch is padded to in a step taken in ``groups`` length groups
    (``length_groups``): its group's longest (1: the step's longest)."""
    out = list(lengths)
    for runs in length_groups(lengths, groups):
        for i in runs:
            out[i] = max(lengths[j] for j in runs)
    return out


def step_passes(cfg: TrainConfig, runs: int) -> int:
    """Forward and backward passes of a stack's step of ``runs`` runs: its micro-steps in each
    of its length groups."""
    micro = -(-cfg.batch_size // cfg.micro_batch) if 0 < cfg.micro_batch < cfg.batch_size else 1
    return micro * min(max(cfg.length_groups, 1), max(runs, 1))


def group_batch(batch: Batch, S: int, runs: list[int], length: int) -> Batch:
    """The rows of ``runs`` (in that order) of a stacked batch, cut to their first ``length``
    positions: the runs' batches stacked and padded to ``length`` (``stack_batches`` pads at
    the end, so this is what stacking those runs alone gives)."""
    per_run = batch.input_ids.shape[0] // S
    index = (torch.tensor(runs)[:, None] * per_run + torch.arange(per_run)).flatten()
    return Batch(*(None if getattr(batch, f.name) is None
                   else getattr(batch, f.name).index_select(0, index)[:, :length].contiguous()
                   for f in dataclasses.fields(Batch)))


def grouped_backward(fwd, model, batch: Batch, S: int, groups: list[list[int]], lengths: list[int],
                     cfg: TrainConfig, device: torch.device):
    """The S runs' forward and backward passes one group of runs at a time (``length_groups``),
    each group's batch padded to its own longest run (``group_batch``), on the stack's model
    with only the group's runs' weights: each parameter's slices of those runs gathered into a
    leaf tensor (``torch.func.functional_call``), whose gradients are then written into the
    stack's gradients at the runs' slices. Each run is in one group, with its own loss over
    its own labels, so its loss and gradients are the one-pass step's up to float summation
    (what a run's rows compute does not depend on the padding after them: causal attention).
    Returns the (S,) losses and parts, in run order."""
    params = dict(model.named_parameters())
    prefix = "" if fwd is model else "_orig_mod."  # a torch.compile'd module holds the model under that name
    grads, losses, parts, with_grads = {}, None, {}, None
    for runs in groups:
        index = torch.tensor(runs, device=device)
        gathered = {name: p.detach().index_select(0, index).requires_grad_() for name, p in params.items()}
        named = {prefix + name: t for name, t in gathered.items()}

        def group_fwd(*args, **kwargs):
            return torch.func.functional_call(fwd, named, args, kwargs)

        piece = group_batch(batch, S, runs, max(lengths[i] for i in runs))
        group_losses, group_parts = passes(group_fwd, piece, len(runs), cfg, device)
        if losses is None:
            losses = group_losses.new_empty(S)
        losses.index_copy_(0, index, group_losses)
        for k, v in group_parts.items():
            parts.setdefault(k, v.new_empty(S)).index_copy_(0, index, v)
        with_grad = {name for name, t in gathered.items() if t.grad is not None}
        if with_grads is not None and with_grad != with_grads:  # each group must fill its runs' slices of all
            raise RuntimeError(f"the groups of a stack's step gave gradients to different parameters: "
                               f"{sorted(with_grad ^ with_grads)}")
        with_grads = with_grad
        for name in with_grad:
            grads.setdefault(name, torch.empty_like(params[name])).index_copy_(0, index, gathered[name].grad)
        del gathered, named
    for name, p in params.items():
        p.grad = grads.get(name)
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
    (a micro-step's share, as ``sparselen.training.distributed.loss_share``)."""
    losses = F.cross_entropy(logits, labels, ignore_index=IGNORE, reduction="none").view(stack, -1)
    if counts is None:
        return losses.sum(1) / (labels != IGNORE).view(stack, -1).sum(1)
    return losses.sum(1) / counts.clamp(min=1)


def stacked_loss(model, batch: Batch, stack: int, position_loss_weight: float = 1.0, positions=None, counts=None):
    """``sparselen.training.train.loss_fn`` of each run: (S,) losses and their (S,) parts; ``counts``:
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

"""One trainer for every experiment: AdamW, linear warm-up/decay, PoSE, micro-steps,
checkpoints, resume, and the fast path a GPU expects.

Tasks hand in ``batch_fn(step) -> Batch``, a pure function of the step, and the model is
initialised from the seed; with the optimizer and schedule state in the checkpoint, a run
killed at any point and started again ends with exactly the weights of an uninterrupted run
(``tests/training/test_train.py`` kills one with SIGKILL to check). Model files and checkpoints are
``sparselen.training.modelfile`` files (safetensors + JSON: nothing is unpickled on loading).

On CUDA (and only there, so CPU results stay bit for bit): fused AdamW, TF32 for what stays
fp32 (``sparselen.runtime.device.enable_tf32``), batches copied from pinned memory without blocking,
the loss's cross-entropy upcast by autocast instead of a copy of the logits, and where at most
half the positions carry a label only those are unembedded (``sparselen.nn.batch``). Every log row
and the summary carry the model FLOP utilisation (MFU) when the device's peak is known.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F
from tqdm import tqdm

from sparselen.interface.run import Run
from sparselen.nn.architectures import build_model
from sparselen.nn.batch import IGNORE, Batch, labelled_positions, summed_token_loss, unembedded
from sparselen.nn.model import GPTNeoX, ModelConfig
from sparselen.nn.positions import pose_position_ids
from sparselen.runtime import io
from sparselen.runtime.datasheets import datasheet_peak
from sparselen.runtime.device import autocast, enable_tf32
from sparselen.runtime.device import to_device as device_copy
from sparselen.runtime.provenance import config_hash, provenance
from sparselen.runtime.rng import generator
from sparselen.training import modelfile
from sparselen.training.distributed import DataParallel, label_counts, loss_share, row_slice
from sparselen.training.resumable import code_fingerprint

log = logging.getLogger(__name__)


@dataclass
class OptimConfig:
    lr: float = 5e-5
    weight_decay: float = 0.1
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
    warmup_steps: int = 300
    schedule: str = "linear"  # linear warm-up then linear decay to 0 (HF Trainer); or "constant"
    grad_clip: float = 1.0


@dataclass
class TrainConfig:
    steps: int
    batch_size: int
    seed: int = 0
    checkpoint_every: int = 500
    log_every: int = 50
    optim: OptimConfig = field(default_factory=OptimConfig)
    pose_chunks: int = 2
    pose_target_length: int = 0
    position_loss_weight: float = 1.0
    micro_batch: int = 0  # rows per forward/backward pass of one process; 0 (or >= its rows): one pass
    length_groups: int = 1  # a stack's passes per step, its runs grouped by drawn length (training.stacked); 1: one
    schedule_steps: int = 0  # length of the learning-rate schedule; 0: steps (the pilot trains a run's first steps)

    @classmethod
    def from_section(cls, train: dict, seed: int, pose: dict | None = None, **overrides) -> "TrainConfig":
        """From a slice's validated ``train`` section (steps, batch_size, checkpoint_every,
        log_every, optimizer) and its ``pose`` section; keys the trainer does not know (task
        settings such as ``lengths``) are ignored."""
        known = {k: train[k] for k in ("steps", "batch_size", "checkpoint_every", "log_every") if k in train}
        pose = {f"pose_{k}": v for k, v in (pose or {}).items() if k in ("chunks", "target_length")}
        return cls(seed=seed, optim=OptimConfig(**train["optimizer"]), **{**known, **pose, **overrides})


def lr_lambda(cfg: OptimConfig, total_steps: int) -> Callable[[int], float]:
    w = cfg.warmup_steps

    def f(step: int) -> float:
        if step < w:
            return (step + 1) / w
        if cfg.schedule == "constant":
            return 1.0
        return max(0.0, (total_steps - step) / max(1, total_steps - w))

    return f


def make_optimizer(model: torch.nn.Module, cfg: OptimConfig, fused: bool = False,
                   stack_dims: int = 0) -> torch.optim.Optimizer:
    """AdamW; no weight decay on biases and LayerNorm weights (the HF Trainer convention).
    ``fused``: one kernel for all parameters (CUDA); else torch's default (foreach).
    ``stack_dims``: leading dimensions that stack runs (``sparselen.training.stacked``), not counted
    when telling a bias from a weight."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim - stack_dims < 2 else decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, **({"fused": True} if fused else {}))


def place_step_counters(opt: torch.optim.Optimizer, fused: bool) -> None:
    """After loading a checkpoint's optimizer state: AdamW's step counters where this run's
    optimizer needs them: fused, as float32 on each parameter's device; else on the host, where
    foreach AdamW reads them without a device synchronisation per parameter. The checkpoint's
    own ``fused`` flag (the device it was written on) gives way to this run's."""
    for group in opt.param_groups:
        group["fused"] = fused or None
        for p in group["params"]:
            st = opt.state.get(p, {})
            if torch.is_tensor(st.get("step")):
                st["step"] = st["step"].to(p.device, torch.float32) if fused else st["step"].cpu()


def loss_fn(model: GPTNeoX, batch: Batch, position_loss_weight: float = 1.0, positions=None, in_forward=False):
    """Token cross-entropy on labelled positions (+ weighted PPC position-id loss); under
    autocast the cross-entropy runs in fp32 (autocast upcasts its input); ``positions``: only
    those are unembedded (``sparselen.nn.batch.unembedded``). ``in_forward`` (a model with
    ``loss_in_forward``, batches without position labels): the model's forward computes it."""
    if in_forward and batch.position_labels is None:
        loss = summed_token_loss(model, batch, positions) / (batch.labels != IGNORE).sum().clamp(min=1)
        return loss, {"token_loss": loss.detach()}
    logits, pos_logits, labels, position_labels = unembedded(model, batch, positions)
    loss = F.cross_entropy(logits, labels, ignore_index=IGNORE)
    parts = {"token_loss": loss.detach()}
    if pos_logits is not None and position_labels is not None:
        pos_loss = F.cross_entropy(pos_logits, position_labels, ignore_index=IGNORE)
        parts["position_loss"] = pos_loss.detach()
        loss = loss + position_loss_weight * pos_loss
    return loss, parts


def apply_position_scheme(batch: Batch, model_cfg: ModelConfig, cfg: TrainConfig, step: int) -> Batch:
    """PoSE-shift training ids for the ``pose`` scheme; drop ids the scheme must not see."""
    if model_cfg.scheme in ("nope", "rope"):
        batch.position_ids = None
    elif model_cfg.scheme == "pose":
        B, T = batch.input_ids.shape
        base = batch.position_ids if batch.position_ids is not None else torch.arange(T).expand(B, T)
        batch.position_ids = pose_position_ids(base, cfg.pose_chunks, cfg.pose_target_length,
                                               generator("pose", cfg.seed, step))
    return batch


def backward(fwd, wrapped, batch: Batch, cfg: TrainConfig, device: torch.device,
             parallel: DataParallel | None = None, in_forward: bool = False) -> tuple[torch.Tensor, dict]:
    """Forward and backward passes of one step's ``batch`` (this process's rows of it under
    ``parallel``), leaving the step's gradients in the parameters; returns its (loss, parts).

    One pass when ``cfg.micro_batch`` is 0 or covers the rows. Otherwise micro-steps of
    ``micro_batch`` rows, so a step of any size fits the device: each micro-step's losses are
    summed over its labelled tokens and divided by the whole step's label counts, so the
    micro-steps' gradients add up to the one-pass step's and its loss is the sum of their
    parts (up to float summation order). ``wrapped``: the DDP/FSDP module, whose gradients stay
    local until the last micro-step. ``in_forward``: the loss is computed in the model's
    forward (``loss_fn``)."""
    own = batch if parallel is None else parallel.rows(batch)
    if not cfg.micro_batch or cfg.micro_batch >= own.input_ids.shape[0]:
        on_device, positions = to_device(own, device)
        with autocast(device):
            if parallel is None:
                loss, parts = loss_fn(fwd, on_device, cfg.position_loss_weight, positions, in_forward)
            else:  # loss normalised by the global label counts
                loss, parts = parallel.loss_fn(fwd, on_device, *label_counts(batch), cfg.position_loss_weight,
                                               positions, in_forward)
        loss.backward()
        return loss.detach(), parts
    counts, share = label_counts(batch), loss_share if parallel is None else parallel.loss_fn
    pieces = micro_batches(own, cfg.micro_batch)
    total, sums = 0.0, {}
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        with contextlib.nullcontext() if parallel is None or last else parallel.no_sync(wrapped):
            on_device, positions = to_device(piece, device)
            with autocast(device):
                loss, parts = share(fwd, on_device, *counts, cfg.position_loss_weight, positions, in_forward)
            loss.backward()
        total = total + loss.detach()
        sums = {k: sums.get(k, 0.0) + v for k, v in parts.items()}
    return total, sums


def to_device(batch: Batch, device: torch.device) -> tuple[Batch, torch.Tensor | None]:
    """The batch on ``device`` and, on CUDA, its labelled positions when they are few
    (``sparselen.nn.batch.labelled_positions``: the loss then unembeds only them); on a CPU every
    position, as always."""
    if device.type != "cuda":
        return batch.to(device), None
    positions = labelled_positions(batch)
    return batch.to(device), None if positions is None else device_copy(positions, device)


def micro_batch_errors(key: str, micro: int, rows: int, rows_key: str) -> list[str]:
    """The config check of a micro-batch of ``micro`` rows (at ``key``) against the ``rows``
    per step (at ``rows_key``): 0 or at least ``rows`` is one pass, anything else must divide them."""
    if 0 < micro < rows and rows % micro:
        return [f"{key} = {micro}: must divide {rows_key} = {rows} (rows per step), or be 0 for one pass"]
    return []


def micro_batches(batch: Batch, rows: int) -> list[Batch]:
    """``batch`` in consecutive pieces of ``rows`` rows."""
    n = batch.input_ids.shape[0]
    if n % rows:
        raise ValueError(f"a batch of {n} rows does not split into micro-batches of {rows} rows; "
                         "make the micro-batch a divisor of the rows per step (and process)")
    return [row_slice(batch, slice(i, i + rows)) for i in range(0, n, rows)]


def train(model_cfg: ModelConfig, cfg: TrainConfig, batch_fn: Callable[[int], Batch], run: Run,
          parallel: DataParallel | None = None) -> dict:
    """Train to ``cfg.steps``, resuming from ``run.files.checkpoint`` if it belongs to this run.

    The hash of ``run.identity`` (everything that defines the run's numbers: ``sparselen.interface.run``),
    the model config and the code's fingerprint guard resume against a checkpoint of another
    configuration or code. Runtime knobs (``run.runtime``: device, ``compile``, threads,
    checkpoint_minutes) are not part of them: switching them keeps the checkpoint. Writes the
    model file (weights, model config, provenance, step log), the log CSV and the summary (the
    run's wildcards, the step it resumed from, throughput and MFU, the provenance) atomically
    at the end. The checkpoint is written at every ``checkpoint_every``-th step at least
    ``run.runtime.checkpoint_minutes`` after the last one (or the start), and at the last step
    without AdamW's moments (``without_moments``: a third of the size), and never removed here
    (``sparselen.training.resumable``), so a kill at any point, even after every output is
    written, resumes, with nothing left to train after the last step.

    ``parallel`` (``sparselen.training.distributed``, under torchrun): each rank takes its rows of the
    same global batch and the update is that of one process on the whole batch; only rank 0
    writes files. None: one process.
    """
    files, identity = run.files, run.identity
    device = parallel.device if parallel is not None else run.runtime.device
    chash, code = config_hash(identity), code_fingerprint(*run.code)
    arch = json.loads(json.dumps(model_cfg.to_dict()))  # as the checkpoint's JSON header holds it
    checkpoint = files.checkpoint
    cuda = device.type == "cuda"
    if cuda:
        enable_tf32()
    torch.manual_seed(cfg.seed)
    model = build_model(model_cfg).to(device)
    main = parallel is None or parallel.is_main
    wrapped = model if parallel is None else parallel.wrap(model)  # before the optimizer (FSDP2 shards in place)
    opt = make_optimizer(model, cfg.optim, fused=cuda)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(cfg.optim, cfg.schedule_steps or cfg.steps))
    step, rows = 0, []
    state = own_checkpoint(checkpoint, chash, code, arch, device)
    if state is not None:
        moments = state["optimizer"] if state["step"] < cfg.steps else None  # a finished run's has none
        if parallel is None:
            model.load_state_dict(state["model"])
            if moments is not None:
                opt.load_state_dict(moments)
        else:
            parallel.load_state_dicts(model, opt, state["model"], moments)
        place_step_counters(opt, fused=cuda)
        sched.load_state_dict(state["scheduler"])
        step, rows = state["step"], state["log"]
        log.info("resumed from %s at step %d", checkpoint, step)
    resumed_from = step
    fwd = torch.compile(wrapped) if run.runtime.compile else wrapped
    in_forward = cuda and model.loss_in_forward  # the loss inside the (compiled) forward; CPU results as ever
    peak = peak_flops(run.runtime, device)
    world = 1 if parallel is None else parallel.world_size

    def state_dicts():
        return (model.state_dict(), opt.state_dict()) if parallel is None else parallel.state_dicts(model, opt)

    def save_checkpoint():
        model_sd, opt_sd = state_dicts()
        if main:
            opt_sd = opt_sd if step < cfg.steps else without_moments(opt_sd)
            modelfile.save_state(checkpoint, checkpoint_state(model_sd, opt_sd, sched.state_dict(), step, rows, chash,
                                                              code, arch))

    model.train()
    flops_per_token = {}  # sequence length -> the model's training FLOPs per token
    t_last, tokens_since, flops_since = time.perf_counter(), 0, 0.0
    t_start = t_saved = time.perf_counter()
    tokens_run, flops_run = 0, 0.0
    # a bar on a terminal only: a job's stderr is its log file, which gets the per-step log lines instead
    bar = tqdm(total=cfg.steps, initial=step, desc=f"train {model_cfg.scheme} seed {cfg.seed}",
               file=sys.stderr, mininterval=1.0, dynamic_ncols=True, disable=not (main and sys.stderr.isatty()))
    while step < cfg.steps:
        batch = apply_position_scheme(batch_fn(step), model_cfg, cfg, step)
        opt.zero_grad(set_to_none=True)  # before the forward pass: activations never sit beside old gradients
        loss, parts = backward(fwd, wrapped, batch, cfg, device, parallel, in_forward)
        if cfg.optim.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.grad_clip)
        lr = sched.get_last_lr()[0]
        opt.step()
        sched.step()
        step += 1
        seq_len = batch.input_ids.shape[1]
        if seq_len not in flops_per_token:
            flops_per_token[seq_len] = model.flops_per_token(seq_len)
        tokens_since += batch.num_tokens
        flops_since += batch.num_tokens * flops_per_token[seq_len]
        if step % cfg.log_every == 0 or step == cfg.steps:
            now = time.perf_counter()
            parts = {k: float(v) for k, v in parts.items()} if parallel is None else parallel.global_sum(parts)
            total = loss.item() if parallel is None else (  # global means: the ranks' parts sum to them
                parts["token_loss"] + cfg.position_loss_weight * parts.get("position_loss", 0.0))
            seconds = max(now - t_last, 1e-9)
            row = {"step": step, "loss": total, "lr": lr, "tokens_per_s": tokens_since / seconds}
            if peak:
                row["mfu"] = flops_since / seconds / world / peak
            row.update(parts)
            rows.append(row)
            tokens_run, flops_run = tokens_run + tokens_since, flops_run + flops_since
            t_last, tokens_since, flops_since = now, 0, 0.0
            bar.set_postfix(loss=f"{row['loss']:.4f}", lr=f"{lr:.2e}", tok_s=f"{row['tokens_per_s']:.0f}")
            if main:
                log.info("step %d/%d loss %.5f lr %.3e tokens/s %.0f%s", step, cfg.steps, row["loss"], lr,
                         row["tokens_per_s"], f" MFU {row['mfu']:.3f}" if peak else "")
        bar.update(1)
        if checkpoint_due(step, cfg, time.perf_counter() - t_saved, run.runtime.checkpoint_minutes, parallel):
            save_checkpoint()
            t_saved = time.perf_counter()
    bar.close()
    wall = time.perf_counter() - t_start
    extra = {} if parallel is None else {"world_size": parallel.world_size, "parallel": parallel.strategy}
    prov = provenance(identity, cfg.seed, device, steps=cfg.steps, run=identity, **extra)
    model_sd, _ = state_dicts()
    summary = run_summary(run, resumed_from, rows, wall, model.num_parameters(),  # FSDP2: global numel
                          throughput(tokens_run, flops_run, wall, world, peak), prov)
    if main:
        write_outputs(files, model_sd, model_cfg, prov, rows, summary)
    if parallel is not None:
        parallel.barrier()  # no rank leaves before the outputs exist
    return summary


def checkpoint_due(step: int, cfg: TrainConfig, seconds_since_saved: float, checkpoint_minutes: float,
                   parallel: DataParallel | None = None) -> bool:
    """Whether to write the checkpoint after ``step``: at the last step, and at every
    ``checkpoint_every``-th step at least ``checkpoint_minutes`` after the last one. Under data
    parallelism the ranks' clocks differ, so they agree (one is enough): the ranks must take the
    checkpoint's collectives together."""
    if step == cfg.steps:
        return True
    if step % cfg.checkpoint_every:
        return False
    due = seconds_since_saved >= 60 * checkpoint_minutes
    return due if parallel is None or not checkpoint_minutes else parallel.any_rank(due)


def run_summary(run: Run, resumed_from: int, rows: list, wall: float, parameters: int, rates: dict, prov: dict,
                **extra) -> dict:
    """A training's summary JSON (one run's, alone or in a stack: ``extra`` says how it ran):
    its wildcards, where it resumed, its last loss, wall time, size, throughput and provenance."""
    return {**run.wildcards, "resumed_from_step": resumed_from, "final_loss": rows[-1]["loss"] if rows else None,
            "wall_seconds_this_run": wall, "parameters": parameters, **extra, **rates, "job_name": run.log_name,
            **prov}


def own_checkpoint(checkpoint, chash: str, code: str, arch: dict, device: torch.device) -> dict | None:
    """The state in ``checkpoint`` when it is this run's (same config hash, code fingerprint and
    model config); None when there is none or it is another run's (logged)."""
    if not checkpoint.exists():
        return None
    state = modelfile.load_state(checkpoint, device)
    return state if _is_own(checkpoint, state, chash, code, arch) else None


def own_checkpoint_step(checkpoint, chash: str, code: str, arch: dict) -> int:
    """The step of ``checkpoint`` when it is this run's (``own_checkpoint``'s test), else 0, read
    from the file's header alone: a stack learns where its runs stand, and starts the worker
    that draws their batches, before any tensor is on the GPU (``sparselen.training.stacked``)."""
    if not checkpoint.exists():
        return 0
    header = modelfile.read_header(checkpoint)
    return int(header["step"]) if _is_own(checkpoint, header, chash, code, arch) else 0


def _is_own(checkpoint, state: dict, chash: str, code: str, arch: dict) -> bool:
    """Whether a checkpoint's ``state`` (or its header) is this run's; logs why not."""
    theirs = {"config": state.get("config_hash"), "code": state.get("code"), "model": state.get("model_config")}
    differ = [what for what, ours in (("config", chash), ("code", code), ("model", arch)) if theirs[what] != ours]
    if differ:
        log.warning("ignoring checkpoint %s: another run's (its %s differ: config %s, code %s; this run's: %s, %s)",
                    checkpoint, " and ".join(differ), theirs["config"], theirs["code"], chash, code)
    return not differ


def checkpoint_state(model_sd: dict, opt_sd: dict, sched_sd: dict, step: int, rows: list, chash: str, code: str,
                     arch: dict) -> dict:
    """What a checkpoint holds: all a run needs to go on from ``step`` exactly, and what
    ``own_checkpoint`` checks it against."""
    return {"model": model_sd, "optimizer": opt_sd, "scheduler": sched_sd, "step": step, "log": rows,
            "config_hash": chash, "code": code, "model_config": arch}


def without_moments(opt_sd: dict) -> dict:
    """An optimizer state without its per-parameter state (AdamW's two moments, two thirds of
    a checkpoint): the last step's checkpoint needs none, since nothing trains after it and a
    rerun only writes the outputs again from its weights."""
    return {"state": {}, "param_groups": opt_sd["param_groups"]}


def write_outputs(files, model_sd: dict, model_cfg, prov: dict, rows: list, summary: dict) -> None:
    """A finished run's model file, log CSV and summary, each written atomically."""
    import pandas as pd

    modelfile.save_model(files.model, model_sd, model_cfg, prov, rows)
    io.write_csv(pd.DataFrame(rows), files.log_csv)
    io.write_json(files.summary, summary)


def peak_flops(runtime, device: torch.device) -> float:
    """The device's peak FLOP/s for MFU: the config's ``peak_tflops``, else a GPU's datasheet
    bf16 peak when its name is known (``sparselen.runtime.datasheets.datasheet_peak``); 0 (no
    MFU) otherwise."""
    if runtime.peak_flops:
        return runtime.peak_flops
    if device.type != "cuda":
        return 0.0
    return datasheet_peak(torch.cuda.get_device_name(device)) or 0.0


def throughput(tokens: int, flops: float, seconds: float, world: int, peak: float) -> dict:
    """A run's tokens/s, model FLOP/s per device and MFU over its wall time (start-up and
    checkpoints included: what the job costs); no MFU without a peak."""
    seconds = max(seconds, 1e-9)
    out = {"tokens_per_s": tokens / seconds, "model_flops_per_s": flops / seconds / world}
    if peak:
        out |= {"peak_flops": peak, "mfu": out["model_flops_per_s"] / peak}
    return out


def load_model(path, device: torch.device = torch.device("cpu")) -> tuple[GPTNeoX, dict]:
    """Load a trained model file written by ``train``; returns (model in eval mode, provenance)."""
    return modelfile.load_model(path, device)

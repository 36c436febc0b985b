"""One trainer for every experiment: AdamW, linear warm-up/decay, PoSE, micro-steps,
checkpoints, resume.

Tasks hand in ``batch_fn(step) -> Batch``, a pure function of the step, and the model is
initialised from the seed; with the optimizer and schedule state in the checkpoint, a run
killed at any point and started again ends with exactly the weights of an uninterrupted run
(``tests/test_train.py`` kills one with SIGKILL to check). Model files and checkpoints are
``sparselen.modelfile`` files (safetensors + JSON: nothing is unpickled on loading).
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

from sparselen import io, modelfile
from sparselen.architectures import build_model
from sparselen.batch import IGNORE, Batch
from sparselen.device import autocast
from sparselen.distributed import DataParallel, label_counts, loss_share, row_slice
from sparselen.model import GPTNeoX, ModelConfig
from sparselen.positions import pose_position_ids
from sparselen.provenance import config_hash, provenance
from sparselen.resumable import code_fingerprint
from sparselen.rng import generator
from sparselen.run import Run

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


def make_optimizer(model: torch.nn.Module, cfg: OptimConfig) -> torch.optim.Optimizer:
    """AdamW; no weight decay on biases and LayerNorm weights (the HF Trainer convention)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 else decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps)


def loss_fn(model: GPTNeoX, batch: Batch, position_loss_weight: float = 1.0):
    """Token cross-entropy on labelled positions (+ weighted PPC position-id loss)."""
    logits, pos_logits = model(batch.input_ids, batch.position_ids)
    loss = F.cross_entropy(logits.flatten(0, 1).float(), batch.labels.flatten(), ignore_index=IGNORE)
    parts = {"token_loss": loss.detach()}
    if pos_logits is not None and batch.position_labels is not None:
        pos_loss = F.cross_entropy(pos_logits.flatten(0, 1).float(), batch.position_labels.flatten(), ignore_index=IGNORE)
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
             parallel: DataParallel | None = None) -> tuple[torch.Tensor, dict]:
    """Forward and backward passes of one step's ``batch`` (this process's rows of it under
    ``parallel``), leaving the step's gradients in the parameters; returns its (loss, parts).

    One pass when ``cfg.micro_batch`` is 0 or covers the rows. Otherwise micro-steps of
    ``micro_batch`` rows, so a step of any size fits the device: each micro-step's losses are
    summed over its labelled tokens and divided by the whole step's label counts, so the
    micro-steps' gradients add up to the one-pass step's and its loss is the sum of their
    parts (up to float summation order). ``wrapped``: the DDP/FSDP module, whose gradients stay
    local until the last micro-step."""
    own = batch if parallel is None else parallel.rows(batch)
    if not cfg.micro_batch or cfg.micro_batch >= own.input_ids.shape[0]:
        with autocast(device):
            if parallel is None:
                loss, parts = loss_fn(fwd, own.to(device), cfg.position_loss_weight)
            else:  # loss normalised by the global label counts
                loss, parts = parallel.loss_fn(fwd, own.to(device), *label_counts(batch), cfg.position_loss_weight)
        loss.backward()
        return loss.detach(), parts
    counts, share = label_counts(batch), loss_share if parallel is None else parallel.loss_fn
    pieces = micro_batches(own, cfg.micro_batch)
    total, sums = 0.0, {}
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        with contextlib.nullcontext() if parallel is None or last else parallel.no_sync(wrapped):
            with autocast(device):
                loss, parts = share(fwd, piece.to(device), *counts, cfg.position_loss_weight)
            loss.backward()
        total = total + loss.detach()
        sums = {k: sums.get(k, 0.0) + v for k, v in parts.items()}
    return total, sums


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

    The hash of ``run.identity`` (everything that defines the run's numbers: ``sparselen.run``),
    the model config and the code's fingerprint guard resume against a checkpoint of another
    configuration or code. Runtime knobs (``run.runtime``: device, ``compile``, threads) are
    not part of them: switching them keeps the checkpoint. Writes the model file (weights,
    model config, provenance, step log), the log CSV and the summary (the run's wildcards, the
    step it resumed from and the provenance) atomically at the end. The checkpoint is written
    every ``checkpoint_every`` steps and at the last step, and never removed here (``sparselen.resumable``), so a kill at any point, even
    after every output is written, resumes, with nothing left to train after the last step.

    ``parallel`` (``sparselen.distributed``, under torchrun): each rank takes its rows of the
    same global batch and the update is that of one process on the whole batch; only rank 0
    writes files. None: one process.
    """
    files, identity = run.files, run.identity
    device = parallel.device if parallel is not None else run.runtime.device
    chash, code = config_hash(identity), code_fingerprint(*run.code)
    arch = json.loads(json.dumps(model_cfg.to_dict()))  # as the checkpoint's JSON header holds it
    checkpoint = files.checkpoint
    torch.manual_seed(cfg.seed)
    model = build_model(model_cfg).to(device)
    main = parallel is None or parallel.is_main
    wrapped = model if parallel is None else parallel.wrap(model)  # before the optimizer (FSDP2 shards in place)
    opt = make_optimizer(model, cfg.optim)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(cfg.optim, cfg.steps))
    step, rows = 0, []
    if checkpoint.exists():
        state = modelfile.load_state(checkpoint, device)
        theirs = {"config": state.get("config_hash"), "code": state.get("code"), "model": state.get("model_config")}
        differ = [what for what, ours in (("config", chash), ("code", code), ("model", arch)) if theirs[what] != ours]
        if not differ:
            if parallel is None:
                model.load_state_dict(state["model"])
                opt.load_state_dict(state["optimizer"])
            else:
                parallel.load_state_dicts(model, opt, state["model"], state["optimizer"])
            sched.load_state_dict(state["scheduler"])
            step, rows = state["step"], state["log"]
            log.info("resumed from %s at step %d", checkpoint, step)
        else:
            log.warning("ignoring checkpoint %s: another run's (its %s differ: config %s, code %s; this run's: %s, %s)",
                        checkpoint, " and ".join(differ), theirs["config"], theirs["code"], chash, code)
    resumed_from = step
    fwd = torch.compile(wrapped) if run.runtime.compile else wrapped

    def state_dicts():
        return (model.state_dict(), opt.state_dict()) if parallel is None else parallel.state_dicts(model, opt)

    def save_checkpoint():
        model_sd, opt_sd = state_dicts()
        if main:
            modelfile.save_state(checkpoint, {"model": model_sd, "optimizer": opt_sd, "scheduler": sched.state_dict(),
                                              "step": step, "log": rows, "config_hash": chash, "code": code,
                                              "model_config": arch})

    model.train()
    t_last, tokens_since = time.perf_counter(), 0
    t_start = time.perf_counter()
    # a bar on a terminal only: a job's stderr is its log file, which gets the per-step log lines instead
    bar = tqdm(total=cfg.steps, initial=step, desc=f"train {model_cfg.scheme} seed {cfg.seed}",
               file=sys.stderr, mininterval=1.0, dynamic_ncols=True, disable=not (main and sys.stderr.isatty()))
    while step < cfg.steps:
        batch = apply_position_scheme(batch_fn(step), model_cfg, cfg, step)
        opt.zero_grad(set_to_none=True)  # before the forward pass: activations never sit beside old gradients
        loss, parts = backward(fwd, wrapped, batch, cfg, device, parallel)
        if cfg.optim.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.grad_clip)
        lr = sched.get_last_lr()[0]
        opt.step()
        sched.step()
        step += 1
        tokens_since += batch.num_tokens
        if step % cfg.log_every == 0 or step == cfg.steps:
            now = time.perf_counter()
            parts = {k: float(v) for k, v in parts.items()} if parallel is None else parallel.global_sum(parts)
            total = loss.item() if parallel is None else (  # global means: the ranks' parts sum to them
                parts["token_loss"] + cfg.position_loss_weight * parts.get("position_loss", 0.0))
            row = {"step": step, "loss": total, "lr": lr, "tokens_per_s": tokens_since / max(now - t_last, 1e-9)}
            row.update(parts)
            rows.append(row)
            t_last, tokens_since = now, 0
            bar.set_postfix(loss=f"{row['loss']:.4f}", lr=f"{lr:.2e}", tok_s=f"{row['tokens_per_s']:.0f}")
            if main:
                log.info("step %d/%d loss %.5f lr %.3e tokens/s %.0f", step, cfg.steps, row["loss"], lr,
                         row["tokens_per_s"])
        bar.update(1)
        if step % cfg.checkpoint_every == 0 or step == cfg.steps:
            save_checkpoint()
    bar.close()
    wall = time.perf_counter() - t_start
    extra = {} if parallel is None else {"world_size": parallel.world_size, "parallel": parallel.strategy}
    prov = provenance(identity, cfg.seed, device, steps=cfg.steps, run=identity, **extra)
    model_sd, _ = state_dicts()
    summary = {**run.wildcards, "resumed_from_step": resumed_from, "final_loss": rows[-1]["loss"] if rows else None,
               "wall_seconds_this_run": wall, "parameters": model.num_parameters(), **prov}  # FSDP2: global numel
    if main:
        modelfile.save_model(files.model, model_sd, model_cfg, prov, rows)
        import pandas as pd

        io.write_csv(pd.DataFrame(rows), files.log_csv)
        io.write_json(files.summary, summary)
    if parallel is not None:
        parallel.barrier()  # no rank leaves before the outputs exist
    return summary


def load_model(path, device: torch.device = torch.device("cpu")) -> tuple[GPTNeoX, dict]:
    """Load a trained model file written by ``train``; returns (model in eval mode, provenance)."""
    return modelfile.load_model(path, device)

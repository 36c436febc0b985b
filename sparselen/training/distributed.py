"""Data-parallel training of one model across processes started by ``torchrun``.

A training step whose config asks for several processes calls ``launch``: it runs the same
step again in each of ``torchrun``'s workers and waits (Snakemake runs a rule's ``script:`` in
one plain process; the rule itself stays as it is, only its resources grow). On one node it
starts ``torchrun --standalone``; across nodes (a SLURM job of several nodes) it starts one
``torchrun`` per node with ``srun``, node 0's host as the rendezvous (static: node ranks from
SLURM, so no rendezvous server is needed).
``DataParallel.from_env()`` is None in a plain process (the trainer's single-process path is
untouched); under ``torchrun`` (``WORLD_SIZE`` > 1) it joins the process group (NCCL on GPUs,
gloo on CPU) and gives the trainer what it needs to keep its guarantees:

- **batches**: every rank builds the step's *global* batch (a pure function of seed and step,
  PoSE ids included) and takes its own contiguous rows, so the run's data does not depend on
  the number of processes;
- **loss**: each rank's loss is its summed token loss over the *global* label count, times the
  world size; DDP/FSDP average gradients over ranks, so the update is that of one process on
  the whole batch (up to float summation order), even when ranks hold different numbers of
  labelled tokens;
- **micro-steps** (``language.micro_batch_tokens``): each rank runs its rows in micro-steps
  (``sparselen.training.train.backward``), all but the last under ``no_sync``, so gradients are
  reduced once per step;
- **checkpoints**: full (unsharded) state dicts with the single-process names; only rank 0
  writes; every rank reads the same file on resume (a shared file system, as Snakemake
  needs anyway). DDP checkpoints have the single-process format (either resumes the
  other); FSDP2 ones key optimizer state by parameter name (``torch.distributed.checkpoint``).

Strategies: ``ddp`` (replicated model, gradients all-reduced) or ``fsdp`` (FSDP2
``fully_shard`` on each layer and the model: parameters, gradients and AdamW state sharded,
for models whose training state does not fit one GPU); ``auto`` picks ``fsdp`` when the
fp32 training state (16 bytes/parameter) would take over half of a GPU's memory.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from sparselen.interface.job import named
from sparselen.nn.batch import IGNORE, Batch, summed_token_loss, unembedded
from sparselen.runtime import gpu_slots
from sparselen.runtime.device import enable_tf32, no_gpu, under_torchrun

log = logging.getLogger(__name__)
STRATEGIES = ("auto", "ddp", "fsdp")


@dataclass
class DataParallel:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    strategy: str = "ddp"

    @classmethod
    def from_env(cls, device: str = "auto", strategy: str = "auto", gpus: int = 0) -> "DataParallel | None":
        """None unless started by torchrun with more than one process. ``device``: the config's
        (auto, cpu, cuda); on CUDA each process takes GPU ``LOCAL_RANK`` when the node shows
        exactly its processes' GPUs (SLURM), else claims a free one as one-GPU jobs do
        (``gpu_slots``, the local-gpus profile). ``gpus``: config gpus_per_job; a job that holds
        GPUs and finds none fails (``sparselen.runtime.device.no_gpu``) instead of training on the CPU, unless
        the config asks for ``device: cpu``."""
        if strategy not in STRATEGIES:
            raise ValueError(f"parallel strategy {strategy!r}; expected one of {STRATEGIES}")
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return None
        rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
        die_with_parent()
        cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
        if (device.startswith("cuda") or (device == "auto" and gpus > 0)) and not torch.cuda.is_available():
            raise no_gpu(device, gpus)  # an explicit device: cpu trains on the CPU whatever the job holds
        dev = torch.device("cpu")
        if cuda:
            enable_tf32()
            n, per_node = torch.cuda.device_count(), int(os.environ.get("LOCAL_WORLD_SIZE", world))
            dev = torch.device("cuda", local if n <= per_node else gpu_slots.claim(n))
            torch.cuda.set_device(dev)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if cuda else "gloo", **({"device_id": dev} if cuda else {}))
        log.info("data-parallel rank %d of %d on %s", rank, world, dev)
        return cls(rank, world, local, dev, strategy)

    @staticmethod
    def launched() -> bool:
        """Whether this process is one of several torchrun workers."""
        return under_torchrun()

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def resolve_strategy(self, model: nn.Module) -> str:
        if self.strategy != "auto":
            return self.strategy
        if self.device.type != "cuda":
            return "ddp"
        state = 16 * sum(p.numel() for p in model.parameters())  # fp32 weights, grads, Adam m and v
        return "fsdp" if state > 0.5 * torch.cuda.get_device_properties(self.device).total_memory else "ddp"

    def wrap(self, model: nn.Module) -> nn.Module:
        """The module to run forward/backward through; call before creating the optimizer
        (FSDP2 turns the model's own parameters into sharded DTensors, in place)."""
        self.strategy = self.resolve_strategy(model)
        if self.strategy == "fsdp":
            from torch.distributed.fsdp import fully_shard

            for layer in model.blocks():
                fully_shard(layer)
            fully_shard(model)
            return model
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[self.device.index] if self.device.type == "cuda" else None)

    def rows(self, batch: Batch) -> Batch:
        """This rank's contiguous share of the global batch's rows."""
        n = batch.input_ids.shape[0]
        if n % self.world_size:
            raise ValueError(f"a global batch of {n} rows does not split over {self.world_size} processes; "
                             "make the batch size a multiple of the number of processes")
        k = n // self.world_size
        return row_slice(batch, slice(self.rank * k, (self.rank + 1) * k))

    def loss_fn(self, model, batch: Batch, n_labels: int, n_position_labels: int, position_loss_weight: float,
                positions=None, in_forward: bool = False):
        """This rank's loss, scaled so the ranks' averaged gradient is the global batch mean's.
        Parts: this rank's share of the global mean (they sum to it over ranks)."""
        loss, parts = loss_share(model, batch, n_labels, n_position_labels, position_loss_weight, positions,
                                 in_forward)
        return loss * self.world_size, parts

    @contextlib.contextmanager
    def no_sync(self, module: nn.Module):
        """Backward passes inside keep their gradients local (a micro-step before the step's
        last): the last one's reduction then carries them all, once."""
        if self.strategy == "fsdp":
            module.set_requires_gradient_sync(False)
            try:
                yield
            finally:
                module.set_requires_gradient_sync(True)
        else:
            with module.no_sync():
                yield

    def global_sum(self, values: dict) -> dict:
        """Sum scalars over ranks (one all-reduce): the parts of ``loss_fn`` become global means."""
        keys = sorted(values)
        t = torch.stack([values[k].detach().float().reshape(()) for k in keys]).to(self.device)
        dist.all_reduce(t)
        return {k: float(v) for k, v in zip(keys, t.cpu())}

    def state_dicts(self, model: nn.Module, opt: torch.optim.Optimizer) -> tuple[dict, dict]:
        """Full model and optimizer state (rank 0 holds them; a collective under FSDP)."""
        if self.strategy == "fsdp":
            from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

            return get_state_dict(model, opt, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        return model.state_dict(), opt.state_dict()

    def load_state_dicts(self, model: nn.Module, opt: torch.optim.Optimizer, model_sd: dict,
                         opt_sd: dict | None) -> None:
        """A checkpoint's full state dicts into the wrapped model and its optimizer; ``opt_sd``
        None (a finished run's checkpoint): the weights alone."""
        if self.strategy == "fsdp":
            from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict, set_state_dict

            options = StateDictOptions(full_state_dict=True)
            if opt_sd is None:
                set_model_state_dict(model, model_sd, options=options)
            else:
                set_state_dict(model, opt, model_state_dict=model_sd, optim_state_dict=opt_sd, options=options)
        else:
            model.load_state_dict(model_sd)
            if opt_sd is not None:
                opt.load_state_dict(opt_sd)

    def any_rank(self, flag: bool) -> bool:
        """True on every rank when it is true on one (one all-reduce): a decision taken on each
        rank's own clock, such as whether a checkpoint is due, must be the same on all, since
        writing one is a collective under FSDP."""
        t = torch.tensor([float(flag)], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item())

    def barrier(self) -> None:
        dist.barrier()

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


# The process a launch starts in each worker (and, across nodes, on each node): it runs the job's
# step, which is the job layer's to find (sparselen.jobs.worker); named here, never imported.
WORKER = "sparselen.jobs.worker"


def die_with_parent() -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux): the torchrun agent
    when the job's process dies, each worker when the agent dies. torchrun starts workers in
    sessions of their own, so killing the job (a SIGKILL to its process group, an OOM kill)
    would otherwise leave them training on, finishing the run and deleting the checkpoint
    behind a retry's back. (SLURM's scancel kills the whole job step anyway.)"""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the call
        os.kill(os.getpid(), signal.SIGKILL)


def launch(job, processes: int, nodes: int = 1) -> None:
    """Run ``job``'s step in ``processes`` torchrun workers on each of ``nodes`` nodes and wait;
    their output goes to this process's stderr (the job's log). The job travels as JSON in a
    file beside its checkpoint (a shared file system across nodes); each worker gets an equal
    share of the job's threads."""
    spec = {"rule": job.rule, "input": named(job.input), "output": named(job.output),
            "params": named(job.params), "wildcards": named(job.wildcards), "config": dict(job.config),
            "resources": named(getattr(job, "resources", {})),
            "threads": max(1, job.threads // processes)}
    path = Path(spec["params"]["checkpoint"]).with_suffix(".job.json")
    gpus = int(job.config.get("gpus_per_job", 0)) * processes
    cmd = (node_launch_command(nodes, processes, path, job.threads, gpus) if nodes > 1 else
           [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
            "-m", WORKER, str(path)])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec))
    log.info("launching %d x %d data-parallel processes: %s", nodes, processes, " ".join(cmd))
    sys.stderr.flush()
    try:
        subprocess.run(cmd, check=True, stdout=sys.stderr, stderr=sys.stderr, preexec_fn=die_with_parent)
    finally:
        path.unlink(missing_ok=True)


def node_launch_command(nodes: int, processes: int, spec: Path, cpus: int, gpus: int) -> list[str]:
    """``srun``: one task per node of this SLURM job, each running ``torchrun`` for its node
    (``python -m sparselen.jobs.worker --node``), with the job's ``cpus`` and ``gpus`` per node
    (the executor hands the job no SLURM_* sizes, and srun would not inherit sbatch's anyway).
    Refuses outside a SLURM job."""
    if not os.environ.get("SLURM_JOB_ID"):
        raise RuntimeError(f"language.parallel.nodes = {nodes}: this job runs outside a SLURM job; several nodes "
                           f"per model need the SLURM profile (workflow/profiles/slurm), which asks for them")
    with socket.socket() as s:  # a free port on node 0, where this process runs (the batch script's node)
        s.bind(("", 0))
        port = s.getsockname()[1]
    cmd = ["srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1",
           f"--cpus-per-task={cpus}"] + ([f"--gpus-per-node={gpus}"] if gpus else [])
    return cmd + [sys.executable, "-m", WORKER, "--node", str(spec), socket.gethostname(), str(port), str(processes)]


def row_slice(batch: Batch, rows: slice) -> Batch:
    return Batch(**{name: None if t is None else t[rows] for name, t in vars(batch).items()})


def loss_share(model, batch: Batch, n_labels: int, n_position_labels: int, position_loss_weight: float,
               positions=None, in_forward: bool = False):
    """``batch``'s share of the mean loss of a larger batch it is part of, whose labelled tokens
    and position ids number ``n_labels`` and ``n_position_labels``: its summed losses over those
    counts, so the shares of the parts (ranks, micro-steps) add up to the mean and their
    gradients to its gradient. Parts: the shares of the token and position losses.
    ``positions``: only those are unembedded (``sparselen.nn.batch.unembedded``); ``in_forward``:
    the model's forward computes the token loss (``sparselen.training.train.loss_fn``)."""
    if in_forward and batch.position_labels is None:
        tok = summed_token_loss(model, batch, positions) / max(n_labels, 1)
        return tok, {"token_loss": tok.detach()}
    logits, pos_logits, labels, position_labels = unembedded(model, batch, positions)
    tok = F.cross_entropy(logits, labels, ignore_index=IGNORE, reduction="sum") / max(n_labels, 1)
    parts, loss = {"token_loss": tok.detach()}, tok
    if pos_logits is not None and position_labels is not None:
        pos = F.cross_entropy(pos_logits, position_labels, ignore_index=IGNORE, reduction="sum") / max(
            n_position_labels, 1)
        parts["position_loss"] = pos.detach()
        loss = loss + position_loss_weight * pos
    return loss, parts


def label_counts(batch: Batch) -> tuple[int, int]:
    """Labelled tokens and labelled position ids of a (global) batch."""
    n = int((batch.labels != IGNORE).sum())
    m = 0 if batch.position_labels is None else int((batch.position_labels != IGNORE).sum())
    return n, m

"""Device choice and the standard CUDA fast path (bf16 autocast, optional torch.compile)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket

import torch

from sparselen.runtime import gpu_slots

log = logging.getLogger(__name__)


class NoGpu(RuntimeError):
    """A job that holds GPUs (config ``gpus_per_job`` > 0) found none it can use."""


def no_gpu(requested: str, gpus: int) -> NoGpu:
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
    return NoGpu(f"device = {requested!r} with gpus_per_job = {gpus}, but this job finds no usable CUDA device: "
                 f"node {socket.gethostname()}, CUDA_VISIBLE_DEVICES="
                 f"{os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')}, torch {torch.__version__} ({build}). "
                 "Install a CUDA build of torch or run on a GPU node; to train on CPUs set gpus_per_job: 0")


COMPILE_CACHE = ".cache/torchinductor"  # under the working directory: one cache per campaign


def share_compile_cache(workdir=".") -> None:
    """Point torch.compile's cache (inductor and its Triton kernels) at COMPILE_CACHE under the
    workflow's working directory, unless ``TORCHINDUCTOR_CACHE_DIR`` is set: every job of a
    campaign, on any node of a shared file system, then reuses the kernels the first job of a
    shape compiled, where the default (a folder under /tmp) is private to a node and to a job's
    allocation."""
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.abspath(os.path.join(workdir, COMPILE_CACHE)))


ALLOC_CONF = "PYTORCH_CUDA_ALLOC_CONF"


def expandable_segments() -> None:
    """CUDA's caching allocator with expandable segments, unless ``PYTORCH_CUDA_ALLOC_CONF`` is
    set: a stack's or a language model's passes of changing shapes then grow one segment instead
    of leaving blocks of freed sizes that fit no later request (fragmentation), so a job peaks
    nearer what its tensors need (``sparselen.nn.memory``). Read when CUDA first allocates, so
    set before; torchrun workers and a stack's batch worker inherit it."""
    os.environ.setdefault(ALLOC_CONF, "expandable_segments:True")


def under_torchrun() -> bool:
    """Whether this process is one of several torchrun workers (which pick their GPU themselves:
    ``sparselen.training.distributed``)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def resolve_device(name: str = "auto", gpus: int = 0, slots: int = 1, whole: bool = True,
                   holder: str = "") -> torch.device:
    """``auto`` picks CUDA when present. Asking for CUDA without one is an error, not a
    fallback; so is ``auto`` finding none in a job that holds ``gpus`` > 0 GPUs (a CPU-only
    wheel or a node without a visible GPU would otherwise train on one CPU thread). ``auto`` or
    ``cuda`` with several visible GPUs, or GPUs of several ``slots`` (packing), claims a free
    GPU or slot (``gpu_slots``; ``whole``: every slot of a GPU), so parallel jobs on one machine
    do not all land on GPU 0; torchrun workers never claim. On CUDA, fp32 matrix products run
    in TF32 (``enable_tf32``)."""
    requested = str(name)
    if requested == "auto":
        if not torch.cuda.is_available():
            if gpus > 0:
                raise no_gpu(requested, gpus)
            return torch.device("cpu")
        requested = "cuda"
    device = torch.device(requested)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise no_gpu(str(name), gpus) if gpus > 0 else RuntimeError(
            f"device={name!r} was requested but CUDA is not available on this machine")
    if device.type == "cuda":
        enable_tf32()
        many = torch.cuda.device_count() > 1 or slots > 1
        if device.index is None and many and not under_torchrun():
            return torch.device("cuda", gpu_slots.claim(torch.cuda.device_count(), slots=slots, whole=whole,
                                                        holder=holder))
    return device


def enable_tf32() -> None:
    """CUDA matrix products of fp32 tensors on the tensor cores in TF32 (10-bit mantissa), as
    nanoGPT and OLMo-core train: what bf16 autocast leaves in fp32 and the code paths that do
    not autocast. CUDA-only flags: CPU results do not change."""
    torch.backends.cuda.matmul.allow_tf32 = True  # the flag torch.compile's inductor reads too
    torch.backends.cudnn.allow_tf32 = True


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``t`` on ``device``: to a GPU from pinned host memory without blocking the host (the copy
    overlaps the GPU's work on the step before); elsewhere a plain ``.to``."""
    if device.type == "cuda" and t.device.type == "cpu":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def autocast(device: torch.device):
    """bf16 autocast on CUDA; plain float32 on CPU (bf16 matmuls are slow on most CPUs)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def configure_cpu(threads: int | None) -> None:
    """CPU set-up of every compute command: the torch thread count, and flushing denormal
    floats to zero. Trained models push tiny values (near-one-hot attention, decayed Adam
    moments) into the denormal range, where x86 matrix kernels run several times slower:
    a parity training fell from 20k to 9k tokens/s by step 400 without the flush."""
    torch.set_flush_denormal(True)
    if threads:
        torch.set_num_threads(int(threads))


def raise_open_file_limit() -> None:
    """The soft limit on open files raised to the hard one (logged where it changes): a CUDA
    stack's batch worker hands tensors over as shared-memory file descriptors
    (``sparselen.training.stacked.step_batches``), beside every library's own, and 1024, a common soft
    default, is not far above them. Nothing where the platform has no ``resource`` module."""
    try:
        import resource
    except ImportError:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as e:
        log.warning("open-file limit stays at %d (hard limit %d): %s", soft, hard, e)
        return
    log.info("open-file limit raised from %d to its hard limit %d", soft, hard)

"""Device profiles: how fast one device turns work (FLOPs, steps, calls, fixed costs) into seconds.

    seconds = job_s (+ compile_s for a job that trains)
              + sum over terms [ FLOPs / rate(d_model) + calls * (call_s + n_layer * layer_s) ]
                (a training step also streams OPTIMIZER_BYTES per parameter and run at the
                 device's memory bandwidth, where the profile has one; a stack's training step:
                 its FLOPs and that traffic those of all its runs; on a GPU at least
                 runs * batch_s, its batches drawn beside it; on a CPU + (runs - 1) * batch_s)
              + sum over non-model units [ amount * seconds_per_unit ]
    rate(d) = peak_flops * utilization * d / (d + width_half)

``width_half`` models small matrix products running below peak (CPUs; 0 for GPUs); the per-call
terms model what FLOPs do not count (op dispatch, optimizer, Python, kernel launches). Named
GPUs use their datasheet bf16 peak times an assumed utilization; a measured profile comes from
``sparselen.estimate.calibrate`` (benchmarks/calibrate.py) or a measured throughput.

A profile also has the device's memory, of which a job's tensors may use ``USABLE``: a named
GPU's datasheet GB, read as GiB (HBM is sized in binary units: nvidia-smi shows an "80 GB"
H100 with 81,559 MiB; PyTorch a "141 GB" H200 with 139.8 GiB), a calibrated GPU's as PyTorch
reports it, the CPU's the machine's RAM (or ``--cpu-memory``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from sparselen.nn.flops import Shape, Term, Work
from sparselen.runtime.datasheets import GPU_ALIASES, GPUS

# Share of a device's memory a job's tensors may peak at: the CUDA context, library workspaces
# and the caching allocator's fragmentation take the rest (an assumption, as the utilization).
USABLE = 0.9
# Share of a named GPU's bf16 peak its large matrix products reach: the estimate's default (an
# assumption, see ``gpu_profile``; ``sparselen estimate --utilization``).
UTILIZATION = 0.4
# What each CPU thread beyond a job's first adds to its speed, as a share of one thread: the
# SFA's training step at paper.yaml's batch, 1.31x on 2 threads of the development machine
# (benchmarks/sfa_step.py; docs/gpu.md, "The SFA runs: their step and threads"), taken to hold
# for more threads (an assumption).
THREAD_EFFICIENCY = 0.3


@dataclass(frozen=True)
class Profile:
    """How fast one device turns work into seconds (see the module docstring)."""

    name: str
    device: str  # "gpu" | "cpu"
    peak_flops: float  # FLOP/s at full efficiency
    utilization: float = 1.0  # fraction of peak that large matrix products reach
    width_half: float = 0.0  # d_model at which small products reach half of that
    step_s: float = 0.0  # per training step (optimizer, sampling, Python, launches)
    step_layer_s: float = 0.0  # per training step and layer
    batch_s: float = 0.0  # per training step and run of a stack beyond its first: drawing its batch on the host
    call_s: float = 0.0  # per forward pass (no grad)
    call_layer_s: float = 0.0  # per forward pass and layer
    job_s: float = 0.0  # per job: interpreter start, imports, model and data loading
    compile_s: float = 0.0  # per job that trains: torch.compile's start-up (evaluation is not compiled)
    units: dict = field(default_factory=dict)  # seconds per unit of non-model work (UNITS)
    source: str = ""
    memory_bytes: float = 0.0  # the device's memory (0: unknown, not checked)
    # bytes/s a training step's per-parameter traffic streams at (``optimizer_seconds``); 0: not
    # priced apart, folded into the fitted overheads and rate (a CPU's, a measured GPU's)
    memory_bandwidth: float = 0.0
    thread_efficiency: float = THREAD_EFFICIENCY  # a CPU's speed-up per thread beyond the first (``speedup``)

    @property
    def usable_bytes(self) -> float:
        """What a job's tensors may peak at (``USABLE`` of the memory)."""
        return USABLE * self.memory_bytes

    def rate(self, d_model: float) -> float:
        d = max(float(d_model), 1.0)
        return self.peak_flops * self.utilization * d / (d + self.width_half)

    def speedup(self, threads: int) -> float:
        """How many times faster a job's work runs on ``threads`` CPU threads than on the
        profile's one: each thread beyond the first adds ``thread_efficiency`` of a thread (a
        GPU: 1, its host threads do not do the work)."""
        if self.device != "cpu":
            return 1.0
        return 1.0 + (max(int(threads), 1) - 1) * self.thread_efficiency

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)


# Non-model work, in units a profile prices (seconds per unit): defaults measured on the
# 2-core development machine (benchmarks/calibrate.py); a calibration replaces them.
UNITS = {
    "aggregate_job": 0.93,  # a table/figure/report job beyond job_s (pandas, matplotlib, scipy)
    "model_job": 1.6,  # a training/evaluation job beyond job_s (trainer, model files, provenance)
    "bpe_char": 1.9e-7,  # BPE training, single-threaded, per character of the training split
    # the tokens job, per character of the corpus and thread: its wall time on one thread on
    # documents of C4's size (benchmarks/tokens.py: 44 MB in 31 s, docs/gpu.md, "Data preparation
    # at corpus scale"), reading, encoding and writing ids
    "encode_char": 7.1e-7,
    "read_char": 2.0e-8,  # reading and splitting the corpus, per character
    "sample": 2.0e-6,  # drawing one evaluation/training sample with a task sampler
    "claims_replicate": 5.0e-4,  # the claims job, per bootstrap replicate (every claim, stability included)
    # the SFA's memory-bound passes over its (row x tuple x d_head) activations beyond their
    # FLOPs, per activation float of a training step and of an evaluation pass: what the wall
    # time of paper.yaml's nonlocal k = 4 step and pass on one thread implies beyond their FLOPs
    # (benchmarks/sfa_step.py; docs/gpu.md, "The SFA runs: their step and threads")
    "sfa_train_activation": 3.4e-8,
    "sfa_activation": 1.35e-8,
}


# Drawing one run's training batch on the host (its sampler, PoSE ids), which a stack does for
# each of its runs every step (on a GPU in a worker process, beside the device): 0.5 to 0.8 ms
# for paper.yaml's PPC and parity batches on one thread of the development machine (docs/gpu.md,
# "Stacks in the estimate").
BATCH_S = 8e-4

# Bytes a training step moves per parameter and run beyond its matrix products (fp32 weights,
# bf16 autocast), each memory-bound and so streamed at the device's memory bandwidth: fused AdamW
# reads the weight, its gradient and both moments and writes the weight and moments (28);
# gradient-norm clipping (a stack's per run, ``sparselen.training.stacked.clip_grad_norm_per_run``)
# reads the gradients for their norms, then scales them in place (4 + 8); autocast casts each
# weight to bf16 in the forward pass (read 4, write 2), and backward's bf16 weight gradient is
# written, read and accumulated into the fp32 one (2 + 2 + 4). A stack of S runs moves S times
# as much each step: the term grows with S where the step's overheads do not.
OPTIMIZER_BYTES = 54
# Bytes a stack's step taken in length groups (``sparselen.training.stacked.grouped_backward``)
# moves per parameter and run beyond those: each run's weights gathered into its group's copy
# (read 4, write 4) and its group's fp32 gradient written into the stack's (read 4, write 4).
GROUP_BYTES = 16


def gpu_profile(name: str, utilization: float = UTILIZATION, compile: bool = True, cpu: Profile | None = None) -> Profile:
    """A named GPU: datasheet peak x ``utilization`` (an assumption: 0.3-0.5 is typical of
    well-shaped bf16 training; small models reach less, which the per-step terms model).

    Overheads are assumptions for eager PyTorch, whose host-side dispatch of ~10 us per op bounds
    small models (launches are asynchronous, so the step costs the larger of host and device
    time; we add them, which is conservative): about 80 ops per layer and training step
    (forward, backward, fused AdamW), 25 per layer and forward pass; ``compile`` fuses a
    training step's to ~40% and costs ``compile_s`` at the start of each training job (the
    trainer compiles; evaluation runs eager). A training step also samples its batch on the CPU
    and reads the loss (~2 ms); a stack's worker process samples its runs' batches beside the
    device (``BATCH_S`` each: the step takes the longer of the two). Its optimizer, clipping and
    casts stream ``OPTIMIZER_BYTES`` per parameter and run at the datasheet's memory bandwidth
    (``optimizer_seconds``). Not
    measured here (no GPU was available): replace them with a
    measured profile (``sparselen pilot``, or benchmarks/calibrate.py --device cuda)."""
    key = GPU_ALIASES.get(name.lower(), name.lower())
    if key not in GPUS:
        raise ValueError(f"unknown GPU {name!r}; known: {', '.join(sorted(GPUS))} (or give a measured profile file)")
    g = GPUS[key]
    launch = 10e-6
    return Profile(
        name=f"{key} (bf16 {g.peak_bf16_tflops:g} TFLOP/s x {utilization:g})", device="gpu",
        peak_flops=g.peak_bf16_tflops * 1e12, utilization=utilization, width_half=0.0,
        step_s=2e-3, step_layer_s=80 * launch * (0.4 if compile else 1.0), batch_s=BATCH_S, call_s=5e-4,
        call_layer_s=25 * launch,
        job_s=20.0, compile_s=70.0 if compile else 0.0, units=dict((cpu or CPU_DEFAULT).units),
        memory_bytes=g.memory_gb * 2**30, memory_bandwidth=g.memory_tb_per_s * 1e12,
        source=g.source + f"; utilization {utilization:g} and overheads assumed (sparselen.estimate.profiles.gpu_profile)")


# The CPU of the machine this project was developed on (2 cores, one torch thread per job, no
# other load), fitted by ``calibrate`` (benchmarks/calibrate.py); ``--cpu-profile`` replaces it.
CPU_DEFAULT = Profile(name="cpu-1-thread (dev machine)", device="cpu", peak_flops=84e9, utilization=1.0,
                      width_half=96.0, step_s=3.2e-3, step_layer_s=5.3e-4, batch_s=BATCH_S, call_s=0.0,
                      call_layer_s=2.9e-4,
                      job_s=2.3, units=dict(UNITS), source="benchmarks/calibrate.py on the development machine")


def load_profile(path) -> Profile:
    """A profile JSON (``Profile`` fields, e.g. written by benchmarks/calibrate.py), or a
    measured-throughput JSON ``{"tokens_per_s": ..., "model": {...}, "batch": B, "seq_len": T}``
    (see ``profile_from_throughput``; ``memory_bytes``: the device's memory)."""
    data = json.loads(Path(path).read_text())
    if "tokens_per_s" in data or "flops_per_s" in data:
        return profile_from_throughput(**data)
    units = {**UNITS, **data.pop("units", {})}
    return Profile(**data, units=units)


def profile_from_throughput(model: dict | None = None, seq_len: int = 0, tokens_per_s: float | None = None,
                            flops_per_s: float | None = None, device: str = "gpu", name: str = "measured",
                            base: Profile | None = None, memory_bytes: float = 0.0, **_) -> Profile:
    """A profile whose FLOP rate reproduces one measured training throughput: ``flops_per_s``,
    or ``tokens_per_s`` of a ``model`` (n_layer, d_model, d_ff, vocab_size) at ``seq_len``
    (converted with the same FLOP count as the estimate). Overheads are folded into the rate,
    so it is exact for that shape and approximate for others."""
    if flops_per_s is None:
        if tokens_per_s is None or model is None:
            raise ValueError("a throughput profile needs flops_per_s, or tokens_per_s with model and seq_len")
        shape = Shape.of(model, model.get("vocab_size", 0))
        flops_per_s = tokens_per_s * 3 * shape.forward_flops_per_token(max(seq_len, 1))
    b = base or CPU_DEFAULT
    return Profile(name=name, device=device, peak_flops=flops_per_s, utilization=1.0, width_half=0.0,
                   job_s=b.job_s, units=dict(b.units), memory_bytes=memory_bytes,
                   source=f"measured throughput {flops_per_s:.3g} FLOP/s")


def machine_memory() -> float:
    """This machine's RAM in bytes (0 where the OS does not say)."""
    import os

    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0.0


def resolve(gpu: str | None, utilization: float, cpu_profile: str | None, compile: bool = True,
            cpu_memory_gb: float | None = None):
    """(GPU profile or None, CPU profile) from the command's arguments: a GPU name or profile
    file. The CPU profile's memory: ``cpu_memory_gb``, else the profile file's, else this
    machine's RAM."""
    cpu = load_profile(cpu_profile) if cpu_profile else CPU_DEFAULT
    if cpu_memory_gb is not None:
        cpu = replace(cpu, memory_bytes=cpu_memory_gb * 2**30)
    elif not cpu.memory_bytes:
        cpu = replace(cpu, memory_bytes=machine_memory())
    if gpu is None:
        return None, cpu
    if Path(gpu).exists():
        g = load_profile(gpu)
        return replace(g, units={**cpu.units, **g.units}), cpu
    return gpu_profile(gpu, utilization, compile, cpu), cpu


def optimizer_seconds(term: Term, profile: Profile) -> float:
    """What one training step of ``term`` streams beyond its FLOPs: ``OPTIMIZER_BYTES`` per
    parameter of each of its runs (a stack's S: linear in S; a stack in length groups also
    ``GROUP_BYTES``) at the profile's memory bandwidth;
    0 where the profile has none (its overheads hold it) or the term names no parameters."""
    if not profile.memory_bandwidth or not term.parameters:
        return 0.0
    grouped = GROUP_BYTES if term.runs > 1 and term.length_groups > 1 else 0
    return term.runs * term.parameters * (OPTIMIZER_BYTES + grouped) / profile.memory_bandwidth


def step_seconds(term: Term, profile: Profile, threads: int = 1) -> float:
    """One training step of ``term`` (all its runs, for a stack's): its FLOPs (on ``threads`` CPU
    threads: ``Profile.speedup``), the step's own overhead, each pass's per-layer kernel
    launches and its runs' optimizer traffic (``optimizer_seconds``); for a stack, its runs'
    batches drawn on the host. A stack on a GPU draws them in a worker process while the device
    computes (``sparselen.training.stacked.step_batches``), so its step takes the longer of the
    two; on a CPU it draws each further run's batch after the first, and the times add up."""
    device = (term.flops / term.calls / (profile.rate(term.d_model) * profile.speedup(threads)) + profile.step_s
              + term.passes * term.n_layer * profile.step_layer_s + optimizer_seconds(term, profile))
    if term.runs == 1:
        return device
    if profile.device == "gpu":
        return max(device, term.runs * profile.batch_s)
    return device + (term.runs - 1) * profile.batch_s


def seconds(work: Work, profile: Profile) -> dict:
    """Predicted seconds of one job: ``seconds`` in all; its resumable part ``train_seconds``
    (``work.resumable``: what its checkpoints keep, for the resubmission arithmetic);
    ``busy_seconds``, the part its device spends on its FLOPs and its training steps' optimizer
    traffic (what jobs sharing a GPU add up:
    ``sparselen.estimate.tables``); ``restart_seconds``, what every attempt pays before any work
    (start-up; a trained model's compilation). Its FLOPs and units run on ``work.threads``
    threads (``Profile.speedup``); the per-step and per-call overheads on one."""
    trains = any(t.kind == "train" for t in work.terms)
    restart = profile.job_s + (profile.compile_s if trains else 0.0)
    speedup = profile.speedup(work.threads)
    total, train, busy = restart, 0.0, 0.0
    for t in work.terms:
        flop_s = t.flops / (profile.rate(t.d_model) * speedup)
        busy += flop_s
        if t.kind == "train":
            busy += t.calls * optimizer_seconds(t, profile)
            s = t.calls * step_seconds(t, profile, work.threads)
        else:
            s = flop_s + t.calls * (profile.call_s + t.n_layer * profile.call_layer_s) * (2 if t.kind == "grad" else 1)
        if t.kind in work.resumable:
            train += s
        total += s
    units = {name: amount / speedup for name, amount in work.units.items()}
    if work.model_job:
        units["model_job"] = units.get("model_job", 0.0) + 1
    for name, amount in units.items():
        s = amount * profile.units.get(name, UNITS.get(name, 0.0))
        if name in work.resumable:
            train += s
        total += s
    return {"seconds": total, "train_seconds": train, "busy_seconds": busy, "restart_seconds": restart}

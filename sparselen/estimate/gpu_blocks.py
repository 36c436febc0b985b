"""What each block of the GPU check (``sparselen gpu-check``, ``sparselen.estimate.gpu_check``)
runs and measures, inside the process the check starts for it.

A training block runs the trainer's own step (``sparselen.training.train``'s loop body, or
``sparselen.training.stacked.train_step`` on the batches its worker process draws) on the
measured job's runs, as the job builds them (its slice's ``training``): a few warm-up steps,
whose time beyond the steady steps' is the start-up a job pays once (compilation), then timed
steps while the next one fits the block's deadline. The language analysis' block times its two
last-token passes, a greedy step (every far candidate at the short context plus one, in
batches of ``language.analysis_batch_size``) and a screening pass at the long context; the SFA
block times the idealized model's training step on one thread and on up to 16. Each step is
timed between two device synchronisations, so a launch-bound step counts its device time.

Every row says what the estimate predicts for the same work (``predicted_ms``: the datasheet
profile at its assumed utilization; the SFA's, the CPU profile a job prices it with) and the
memory model's peak beside the measured one.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass, field

import torch

WARMUP = 2  # steps before timing: the first compiles, the second meets the first new shape


@dataclass
class Context:
    """What a block's process knows: its device and datasheet, the check's settings, and its
    deadline (``time.monotonic``) after which it starts no step."""

    device: torch.device
    config: dict
    steps: int
    deadline: float
    send: object = print  # hands a finished row to the check
    phase: object = lambda text: None  # tells the check what the block is doing (a stopped block's row says it)
    warmup: int = WARMUP
    open_fds: int = 0  # the most open files seen, this process's and its children's
    since: tuple = (0.0, 0.0)  # (CPU seconds, wall seconds) when the row being measured began

    def mark(self) -> None:
        """A row's measurement begins: its CPU share and open files count from here."""
        self.since, self.open_fds = (cpu_seconds(), time.perf_counter()), 0

    def cpu_pct(self) -> float:
        """CPU seconds over wall seconds since ``mark``, in percent: this process's and its ended
        children's (a stack's batch worker, joined before the row is made)."""
        cpu, wall = self.since
        return 100 * (cpu_seconds() - cpu) / max(time.perf_counter() - wall, 1e-9)

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def now(self) -> float:
        """Wall seconds after the device has finished what was queued."""
        if self.cuda:
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def count_files(self) -> None:
        self.open_fds = max(self.open_fds, open_files())

    def device_name(self) -> str:
        return torch.cuda.get_device_name(self.device) if self.cuda else "cpu"

    def device_memory(self) -> float:
        return float(torch.cuda.get_device_properties(self.device).total_memory) if self.cuda else math.nan


@dataclass
class Steps:
    """Wall seconds of the warm-up and timed steps, each timed step's work (tokens, model
    FLOPs of its tokens, FLOPs as computed with padding), and why it stopped early if it did."""

    warm: list = field(default_factory=list)
    times: list = field(default_factory=list)
    work: list = field(default_factory=list)
    cut: str = ""

    @property
    def step_s(self) -> float:
        return statistics.median(self.times) if self.times else math.nan

    @property
    def compile_s(self) -> float:
        """The warm-up's time beyond as many steady steps: compilation and first-use costs."""
        steady = self.step_s if self.times else 0.0
        return max(0.0, sum(self.warm) - len(self.warm) * steady) if self.warm else math.nan

    def mean(self, i: int) -> float:
        return statistics.fmean(w[i] for w in self.work) if self.work else math.nan


def open_files() -> int:
    """Open file descriptors of this process and of its children (a stack's batch worker),
    where ``/proc`` shows them; 0 elsewhere."""
    try:
        pids = [os.getpid(), *children()]
    except OSError:
        return 0
    total = 0
    for pid in pids:
        try:
            total += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            pass
    return total


def children() -> list[int]:
    """This process's child processes (``/proc/self/task/*/children``)."""
    out = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                out += [int(p) for p in f.read().split()]
        except OSError:
            pass
    return out


def cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have ended (a joined worker)."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(step, ctx: Context) -> Steps:
    """``ctx.warmup`` steps, then up to ``ctx.steps`` timed ones, each started only when a step as
    long as the last timed one still ends before the deadline (the first, and each warm-up
    step, when the deadline has not passed: a warm-up step's compilation says nothing of the
    next step's time); ``step(i)`` returns its (tokens, FLOPs, padded FLOPs)."""
    out = Steps()
    t = ctx.now()
    for i in range(ctx.warmup + ctx.steps):
        if time.monotonic() + (out.times[-1] if out.times else 0.0) > ctx.deadline:
            done = f"{len(out.warm)} warm-up and {len(out.times)} of {ctx.steps} timed steps"
            out.cut = f"cut by the budget after {done}"
            break
        if i < ctx.warmup:
            ctx.phase(f"in warm-up step {i + 1} of {ctx.warmup} (compiling where the config compiles), "
                      f"{sum(out.warm):.0f} s into the warm-up")
        work = step(i)
        t1 = ctx.now()
        if i < ctx.warmup:
            out.warm.append(t1 - t)
        else:
            out.times.append(t1 - t)
            out.work.append(work)
        ctx.count_files()
        t = ctx.now()
    return out


def compiled(model, ctx: Context):
    """The model as the trainer runs it: ``torch.compile``d where the config says so."""
    return torch.compile(model) if ctx.config.get("compile") else model


def peak_bytes(ctx: Context, step, tensors) -> float:
    """The peak of the block's tensors: CUDA's ``max_memory_allocated`` since the block's reset;
    on a CPU one more step under ``tracker.PeakTensorMemory`` with ``tensors`` (weights,
    optimizer state) counted, if the deadline allows it."""
    if ctx.cuda:
        return float(torch.cuda.max_memory_allocated(ctx.device))
    if time.monotonic() > ctx.deadline:
        return math.nan
    from sparselen.estimate.tracker import PeakTensorMemory

    with PeakTensorMemory() as tracked:
        tracked.track(*tensors)
        step(ctx.warmup + ctx.steps)
    return float(tracked.peak)


def reset_peak(ctx: Context) -> None:
    if ctx.cuda:
        torch.cuda.reset_peak_memory_stats(ctx.device)


def optimizer_tensors(opt) -> list:
    return [t for state in opt.state.values() for t in state.values() if torch.is_tensor(t)]


def datasheet(ctx: Context):
    """(the estimate's profile of this device: its datasheet at the assumed utilization; the
    datasheet's bf16 peak FLOP/s for MFU, NaN where none is known)."""
    from sparselen.estimate.profiles import gpu_profile
    from sparselen.runtime.datasheets import datasheet_gpu, datasheet_peak

    name = ctx.device_name()
    prof = gpu_profile(datasheet_gpu(name) or "h100", compile=bool(ctx.config.get("compile")))
    peak = 1e12 * float(ctx.config.get("peak_tflops") or 0) or (datasheet_peak(name) if ctx.cuda else None)
    return prof, peak or math.nan


def row(ctx: Context, what: str, steps: Steps, **values) -> dict:
    """A block's row from its timed steps: step time, tokens/s, MFU, and ``values``."""
    _, peak = datasheet(ctx)
    step_s = steps.step_s
    return {"what": what, "device": ctx.device_name(), "device_memory": ctx.device_memory(),
            "threads": torch.get_num_threads(), "steps": len(steps.times), "compile_s": steps.compile_s,
            "step_ms": 1e3 * step_s, "tokens_per_s": steps.mean(0) / step_s, "mfu": steps.mean(1) / step_s / peak,
            "flops": steps.mean(1), "padded_flops": steps.mean(2), "open_fds": ctx.open_fds, "cpu_pct": ctx.cpu_pct(),
            "cut": steps.cut, **values}


# -- training: one run, or a stack of runs


def trainings(d, config: dict, tokens: str) -> list:
    """(model config, trainer settings, batch function) of each run ``d`` trains."""
    import importlib

    from sparselen.estimate.pilot import run_jobs

    module = importlib.import_module(f"sparselen.{d.slice}.jobs")
    return [module.training(job) for job in run_jobs(d, config, tokens)]



def training_rows(ctx: Context, job, runs: list) -> None:
    """Time the training step of ``runs`` (a job's: (model config, trainer settings, batch
    function) each), as one stack when there are several or the job is a stack job."""
    from sparselen.estimate.pilot import describe
    from sparselen.estimate.profiles import step_seconds
    from sparselen.training.stacked import step_passes

    mc, tc, _ = runs[0]
    work = job.work
    term = next(t for t in work.terms if t.kind == "train")
    if len(runs) > 1 or term.runs > 1:
        steps, peak, values = stack_steps(ctx, runs)
    else:
        steps, peak, values = single_steps(ctx, runs[0])
    prof, _ = datasheet(ctx)  # after the steps: a stack's worker is forked before CUDA is initialised
    predicted = training_peak(job.run or work, len(runs), "gpu" if ctx.cuda else "cpu")
    passes = step_passes(tc, len(runs))
    ctx.send(row(ctx, describe(mc, tc), steps, kind="train", runs=len(runs), n_layer=mc.n_layer,
                 d_model=mc.d_model, passes=passes, peak_gib=peak / 2**30, predicted_gib=predicted / 2**30,
                 predicted_ms=1e3 * step_seconds(term, prof), **values))


def training_peak(run_work, runs: int, kind: str) -> float:
    """The memory model's peak of a training step of ``runs`` runs like ``run_work`` (one run's
    work, its slice's cost function's): its training pass, stacked (``memory.stacked``)."""
    from sparselen.nn.memory import stacked

    passes = [p for p in run_work.passes if p[3]] or run_work.passes
    if not passes:
        return math.nan
    one = max(p[2][kind] for p in passes)
    return stacked(one, runs, kind) if runs > 1 else one


def single_steps(ctx: Context, training) -> tuple[Steps, float, dict]:
    """One run's training step as ``sparselen.training.train.train`` takes it: its batch with
    the position scheme, forward and backward (in micro-steps where set; the loss inside the
    forward on CUDA where the model computes it there), clipping, AdamW and the schedule."""
    from sparselen.nn.architectures import build_model
    from sparselen.nn.memory import meta_model
    from sparselen.training.train import apply_position_scheme, backward, lr_lambda, make_optimizer

    mc, tc, batch_fn = training
    reset_peak(ctx)
    torch.manual_seed(tc.seed)
    model = build_model(mc).to(ctx.device)
    opt = make_optimizer(model, tc.optim, fused=ctx.cuda)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(tc.optim, tc.steps))
    fwd, meta = compiled(model, ctx), meta_model(mc)
    in_forward = ctx.cuda and model.loss_in_forward
    model.train()

    def step(i):
        batch = apply_position_scheme(batch_fn(i), mc, tc, i)
        opt.zero_grad(set_to_none=True)
        backward(fwd, model, batch, tc, ctx.device, None, in_forward)
        if tc.optim.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), tc.optim.grad_clip)
        opt.step()
        sched.step()
        flops = batch.num_tokens * meta.flops_per_token(batch.input_ids.shape[1])
        return batch.num_tokens, flops, flops

    steps = timed(step, ctx)
    return steps, peak_bytes(ctx, step, [*model.parameters(), *optimizer_tensors(opt)]), {}


def host_batch_ms(mc, cfgs, fns, steps: int = 2) -> float:
    """Milliseconds to draw and stack one run's batch of a stack on the host (the profile's
    ``batch_s``), what the stack's worker process does for every run each step."""
    from sparselen.training.stacked import StackedStep
    from sparselen.training.train import apply_position_scheme

    t = time.perf_counter()
    for s in range(steps):
        StackedStep.of([apply_position_scheme(fn(s), mc, cfg, s) for cfg, fn in zip(cfgs, fns)])
    return 1e3 * (time.perf_counter() - t) / (steps * len(fns))


def stack_steps(ctx: Context, runs) -> tuple[Steps, float, dict]:
    """A stack's training step as ``sparselen.training.stacked.train_stack`` takes it: its runs'
    batches drawn by the worker process (forked first, on CUDA), one model of every run's
    initialisation, fused AdamW per run, ``stacked.train_step``."""
    from sparselen.nn.architectures import build_model
    from sparselen.nn.memory import meta_model
    from sparselen.nn.stacked_model import stack_models
    from sparselen.training.stacked import PREFETCH_STEPS, padded_lengths, step_batches, train_step
    from sparselen.training.train import lr_lambda, make_optimizer

    mc, S = runs[0][0], len(runs)
    cfgs, fns = [t[1] for t in runs], [t[2] for t in runs]
    host_ms = host_batch_ms(mc, cfgs, fns)
    ahead = PREFETCH_STEPS if ctx.cuda and S > 1 else 0
    batches = step_batches(mc, cfgs, fns, [0] * S, ctx.warmup + ctx.steps + 1, ahead=ahead)
    reset_peak(ctx)
    models = []
    for cfg in cfgs:
        torch.manual_seed(cfg.seed)
        models.append(build_model(mc).to(ctx.device))
    model = stack_models(models)
    del models
    opt = make_optimizer(model, cfgs[0].optim, fused=ctx.cuda, stack_dims=1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(cfgs[0].optim, cfgs[0].steps))
    fwd, meta = compiled(model, ctx), meta_model(mc)
    model.train()

    def step(i):
        drawn = next(batches)
        train_step(fwd, model, opt, sched, drawn.batch, S, cfgs[0], ctx.device, drawn.lengths)
        flops = sum(n * meta.flops_per_token(T) for T, n in zip(drawn.lengths, drawn.tokens))
        rows = drawn.batch.input_ids.shape[0] // S
        padded = sum(rows * T * meta.flops_per_token(T) for T in padded_lengths(drawn.lengths, cfgs[0].length_groups))
        return sum(drawn.tokens), flops, padded

    steps = timed(step, ctx)
    peak = peak_bytes(ctx, step, [*model.parameters(), *optimizer_tensors(opt)])
    del batches  # joins the worker, whose CPU time then counts
    return steps, peak, {"batch_ms": host_ms}


# -- the language analysis' last-token passes


def analysis_rows(ctx: Context, job, tokens: str) -> None:
    """The analysis' bulk on the reference model's architecture (its weights do not change a
    pass's time: random ones): a greedy step, every far candidate of one token at the short
    context plus one, in passes of ``language.analysis_batch_size`` rows; then a screening pass,
    that many rows at the long context (the analysis' largest last-token pass). Compiled as the
    analysis compiles them where the config says so."""
    from sparselen.interface import variants
    from sparselen.language import data
    from sparselen.language.analysis import last_token_batch
    from sparselen.language.dependency import greedy
    from sparselen.language.evaluate import compile_analysis, last_token_loss
    from sparselen.nn import memory
    from sparselen.nn.architectures import build_model, model_config
    from sparselen.nn.flops import Shape, chunks

    lang = ctx.config["language"]
    run = lang["schemes"]["long"][0]
    vocab = int(data.load_tokens(tokens)["vocab_size"])
    mc = model_config(variants.run_model(lang["model"], lang, run), vocab, scheme=variants.run_scheme(lang, run))
    shape = Shape.of(variants.run_model(lang["model"], lang, run), vocab)
    short, long = job.dag.params.contexts["short"], job.dag.params.contexts["long"]
    rows = last_token_batch(ctx.config, job.dag.params.analysis["batch_size"])
    reset_peak(ctx)
    model = build_model(mc).to(ctx.device).eval()
    if ctx.config.get("compile"):
        compile_analysis(model)
    g = torch.Generator().manual_seed(0)
    context = torch.randint(1, vocab, (long,), generator=g)
    ids, targets = torch.randint(1, vocab, (rows, long), generator=g), torch.randint(1, vocab, (rows,), generator=g)
    positions = torch.arange(long).expand(rows, long)
    greedy_sizes = chunks(long - short, rows)
    parts = [
        (f"greedy step: {long - short} candidates x {short + 1} tokens in passes of {rows}", greedy_sizes, short + 1,
         lambda i: greedy(model, context, 1, short, 1, rows, ctx.device)),
        (f"screen: {rows} x {long} tokens", [rows], long,
         lambda i: last_token_loss(model, ids, positions, targets, rows, ctx.device)),
    ]
    deadline = ctx.deadline
    for n, (what, sizes, T, fn) in enumerate(parts):
        ctx.deadline = time.monotonic() + (deadline - time.monotonic()) / (len(parts) - n)
        flops = sum(shape.forward(b, T, "last") for b in sizes)
        reset_peak(ctx)
        ctx.mark()
        ctx.phase(what)

        def step(i, fn=fn, sizes=sizes, T=T, flops=flops):
            fn(i)
            return sum(sizes) * T, flops, flops

        steps = timed(step, ctx)
        peak = peak_bytes(ctx, step, list(model.parameters()))
        predicted = memory.no_grad_pass(mc, max(sizes), T, "gpu" if ctx.cuda else "cpu", autocast=True)
        ctx.send(row(ctx, what, steps, kind="forward", runs=1, n_layer=mc.n_layer, d_model=mc.d_model,
                     passes=len(sizes), peak_gib=peak / 2**30, predicted_gib=predicted / 2**30,
                     predicted_ms=1e3 * forward_seconds(flops, len(sizes), shape, datasheet(ctx)[0])))
    ctx.deadline = deadline


def forward_seconds(flops: float, calls: int, shape, prof) -> float:
    """The estimate's seconds for ``calls`` no-grad passes of ``flops`` in all."""
    from sparselen.estimate.profiles import seconds
    from sparselen.nn.flops import Work

    return seconds(Work(model_job=False).add("forward", calls, flops, shape), prof)["seconds"] - prof.job_s


# -- the idealized model (SFA), on the CPU


def sfa_rows(ctx: Context, job) -> None:
    """The SFA's training step (``sparselen.theory.sfa.train_sfa``) of the measured run, on one
    thread, as its job runs, and on as many as the machine has up to 16: whether threads would
    shorten the longest runs. Its first step builds the tuples' index (cached for the
    process), the rest are timed together."""
    from sparselen.estimate.profiles import CPU_DEFAULT, step_seconds
    from sparselen.theory.sfa import sfa_window, train_sfa
    from sparselen.theory.task import planted_config, valid_lengths

    p, w = job.dag.params, job.dag.wildcards
    pc = planted_config(p.task, w.distribution, int(w.k))
    lo, L = p.train["lengths"]
    lengths = valid_lengths(pc, lo, L)
    window = sfa_window(pc, p.sfa["window"], lengths)
    term = next(t for t in job.work.terms if t.kind == "train")
    counts = thread_counts()
    deadline = ctx.deadline
    for n, threads in enumerate(counts):
        torch.set_num_threads(threads)
        ctx.mark()
        part_deadline = time.monotonic() + (deadline - time.monotonic()) / (len(counts) - n)
        steps = Steps()
        ctx.phase(f"SFA on {threads} thread(s): its first step")
        t = time.perf_counter()
        train_sfa(pc, {**p.sfa, "steps": 1}, lengths, int(w.seed), window)
        steps.warm.append(time.perf_counter() - t)
        timed_steps = min(ctx.steps, int((part_deadline - time.monotonic()) / max(steps.warm[0], 1e-6)))
        if timed_steps >= 1:
            ctx.phase(f"SFA on {threads} thread(s): {timed_steps} timed steps")
            t = time.perf_counter()
            train_sfa(pc, {**p.sfa, "steps": timed_steps}, lengths, int(w.seed), window)
            per = (time.perf_counter() - t) / timed_steps
            tokens, flops = p.sfa["batch_size"] * (statistics.fmean(lengths) + 1), term.flops / term.calls
            steps.times, steps.work = [per] * timed_steps, [(tokens, flops, flops)] * timed_steps
        if timed_steps < ctx.steps:
            steps.cut = f"cut by the budget after 1 warm-up and {max(timed_steps, 0)} of {ctx.steps} timed steps"
        ctx.count_files()
        ctx.send(row(ctx, f"SFA k={pc.k} {w.distribution}, batch {p.sfa['batch_size']}", steps, kind="cpu", runs=1,
                     n_layer=1, d_model=p.sfa["d_head"], passes=1,
                     predicted_ms=1e3 * step_seconds(term, CPU_DEFAULT)))
    ctx.deadline = deadline


def thread_counts() -> list[int]:
    """1 and the machine's cores up to 16 (the cores this process may run on)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return sorted({1, min(16, cores)})


# -- the block's process


def limits(block) -> dict:
    """Put this process under the block's limits (``gpu_check.Block``) where the platform lets
    it; returns them as its rows report them: the CPUs it may run on, its soft open-file limit
    (so a limit not set shows as not set)."""
    import resource

    if block.one_cpu and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        except OSError:
            pass
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if block.open_files:
        try:
            wanted = block.open_files if hard == resource.RLIM_INFINITY else min(block.open_files, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpus": cpus, "fd_limit": soft}


def run(block, job, config: dict, tokens: str, steps: int, deadline: float, conn, here: dict) -> None:
    """A block's process (``gpu_check.run_block``): in a process group of its own (stopping it
    stops its batch worker), with the check's environment and working directory (``here``: its
    parent server's may be older), ended by an alarm soon after the check would stop it (should
    the check itself have gone), under the block's limits and threads, on the simulated GPU
    where ``SPARSELEN_SIMULATE_CUDA`` asks for one, measure ``block`` on ``job``. Sends ("ready",
    None) once set up, ("phase", text) as it goes, ("row", row) for each row, ("error", text) if
    it fails."""
    import signal

    os.setpgid(0, 0)
    signal.alarm(max(1, math.ceil(here["kill_at"] - time.monotonic()) + 10))
    os.environ.clear()
    os.environ.update(here["environ"])
    os.chdir(here["cwd"])
    try:
        from sparselen.estimate.pilot import quiet
        from sparselen.runtime import simulated_cuda
        from sparselen.runtime.device import configure_cpu, resolve_device, share_compile_cache

        shown = limits(block)
        configure_cpu(1 if block.one_cpu else config["threads"])
        if config.get("compile"):
            share_compile_cache()  # as a job does: a rerun's compilation reads the kernels of the first
        with simulated_cuda.from_env(), quiet():
            device = resolve_device(config["device"], config["gpus_per_job"]) if block.gpu else torch.device("cpu")
            ctx = Context(device, config, steps, deadline, send=lambda r: conn.send(("row", {**r, **shown})),
                          phase=lambda text: conn.send(("phase", text)))
            ctx.mark()
            conn.send(("ready", None))
            measure(block.name, ctx, job, config, tokens)
    except Exception as e:  # the check goes on to the next block; the row says why this one failed
        conn.send(("error", f"{type(e).__name__}: {e}"[:300]))
    finally:
        conn.close()


def measure(name: str, ctx: Context, job, config: dict, tokens: str) -> None:
    """The block's measurement: the analysis' passes, the SFA's step, or a training step."""
    if name == "language_analysis":
        analysis_rows(ctx, job, tokens)
    elif name == "sfa":
        sfa_rows(ctx, job)
    else:
        ctx.phase("building its runs")
        runs = trainings(job.dag, config, tokens)
        ctx.phase(f"setting up {len(runs)} run(s)")
        training_rows(ctx, job, runs)

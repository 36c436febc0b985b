"""The pilot (``sparselen pilot``): before paying for a campaign, a few hundred steps of each
distinct model shape of a config, on the device its jobs will use (docs/gpu.md, "Before a
campaign: the pilot").

Per shape it prints step time, tokens/s, MFU (``Decoder.flops_per_token`` over the device's
datasheet peak, or ``--peak-tflops``), peak memory beside the memory model's prediction, and
whether the loss fell: a recipe check, flagging a shape whose loss does not fall in the run's
first steps at its learning rate. Where a slice stacks its runs (``stack``), it also trains a
stack of that many runs of each of its shapes (``sparselen.training.stacked``) and measures its step and
peak memory (a shape of a stack job is its first run's). Every row shows the step the estimate
predicts with the fitted profile. It writes a device profile fitted to the measured steps,
single runs' and stacks' (``sparselen.estimate.calibrate.fit``), which ``sparselen estimate --gpu FILE`` reads (a CPU's:
``--cpu-profile FILE``), so the campaign's estimate comes from the user's own hardware.

Each shape trains through the real trainer on its slice's own batch function (``training`` in
``sparselen/<slice>/jobs.py``): the first steps of its first run, its learning-rate schedule
that of the whole run. The language slice trains on the tokenized corpus when it is there
(``results/language/tokens/tokens.json``, or ``results/language/tokens.json`` of a config's
own token files), else on random tokens of its vocabulary,
whose loss says nothing about the recipe (not checked).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io as io_
import logging
import math
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

log = logging.getLogger(__name__)

TRAINING_RULES = ("parity_train", "ppc_train", "language_train", "theory_run_gpt")
MIN_DROP = 0.01  # the loss must fall by this fraction of its first value over the pilot
LANGUAGE_TOKENS = ("results/language/tokens/tokens.json", "results/language/tokens.json")


def shape_key(slice_: str, model_cfg, train_cfg, seq_len: int | None) -> tuple:
    """What sets a training step's cost and memory: the slice, the model's sizes and heads, the
    rows per step and pass, and (language) the context."""
    cfg = model_cfg.to_dict()
    sizes = {k: cfg[k] for k in ("architecture", "n_layer", "n_head", "d_model", "d_ff", "vocab_size") if k in cfg}
    head = cfg.get("max_position_id") if cfg.get("scheme") == "ppc" else 0
    return (slice_, tuple(sorted(sizes.items())), head, bool(cfg.get("id_embedding")), train_cfg.batch_size,
            train_cfg.micro_batch, seq_len)


def loss_fell(losses: list[float]) -> tuple[float, float, bool]:
    """(mean of the first tenth of the logged losses, of the last tenth, whether it fell by at
    least ``MIN_DROP`` of the first)."""
    n = max(1, len(losses) // 10)
    first, last = statistics.fmean(losses[:n]), statistics.fmean(losses[-n:])
    return first, last, last < first - MIN_DROP * abs(first)


def language_tokens(config: dict, directory: Path) -> tuple[str, bool]:
    """(the tokens file the language shapes train on, whether it is the real corpus): the
    workflow's, else a file of random tokens of the config's vocabulary written to ``directory``."""
    for path in LANGUAGE_TOKENS:
        if Path(path).exists():
            return path, True
    import torch

    from sparselen.language.cost import _vocab
    from sparselen.runtime import io

    vocab = _vocab(config["language"])
    stream = torch.randint(1, vocab, (2_000_000,), generator=torch.Generator().manual_seed(0), dtype=torch.int32)
    path = directory / "random_tokens.pt"
    io.torch_save({"train": stream, "eval": [], "vocab_size": vocab}, path)
    return str(path), False


def run_jobs(d, config: dict, tokens: str, size: int | None = None) -> list:
    """The jobs of the runs ``d`` trains (a stack job's first ``size`` seeds, else its one run),
    as their own rule would hand them over: what the slices' ``training`` builds runs from."""
    from sparselen.interface.job import Job, per_run_rule

    params = {k: v for k, v in vars(d.params).items() if k not in ("stack_seeds", "checkpoint")}
    wildcards = {k: v for k, v in vars(d.wildcards).items() if k not in ("seed", "seeds")}
    seeds = list(d.params.stack_seeds)[:size] if hasattr(d.params, "stack_seeds") else [d.wildcards.seed]
    return [Job.of(per_run_rule(d.rule), params=params, wildcards={**wildcards, "seed": s}, config=config,
                   input={"tokens": tokens} if d.slice == "language" else None) for s in seeds]


def shapes(config: dict, dag_jobs, tokens: str) -> list[tuple[tuple, object, tuple]]:
    """One (key, DAG job, (model config, trainer settings, batch function)) per distinct shape
    of the DAG's trainings (a stack job's by its first run), in workflow order."""
    from unittest import mock

    from sparselen.interface.job import per_run_rule
    from sparselen.language import data

    seen, out = set(), []
    with mock.patch.object(data, "load_tokens", functools.lru_cache(maxsize=1)(data.load_tokens)):  # read once
        for d in dag_jobs:
            if per_run_rule(d.rule) not in TRAINING_RULES:
                continue
            job = run_jobs(d, config, tokens, size=1)[0]
            mc, tc, batches = importlib.import_module(f"sparselen.{d.slice}.jobs").training(job)
            key = shape_key(d.slice, mc, tc, getattr(d.wildcards, "context", None))
            if key not in seen:
                seen.add(key)
                out.append((key, d, (mc, tc, batches)))
    return out


def measure(d, training, config: dict, steps: int, device, peak: float, directory: Path) -> dict:
    """Train one shape for ``steps`` steps (the run's schedule) and measure it."""
    import pandas as pd
    import torch

    from sparselen.estimate.plan import cost_function
    from sparselen.interface.job import Runtime
    from sparselen.interface.run import Run, RunFiles
    from sparselen.nn import memory
    from sparselen.training.train import train

    mc, tc, batches = training
    steps = min(steps, tc.steps)  # a run shorter than the pilot is trained whole
    tc = replace(tc, steps=steps, schedule_steps=tc.steps, checkpoint_every=steps, log_every=max(1, steps // 50))
    meta = memory.meta_model(mc)
    per_step = {}  # step -> (tokens, model FLOPs)

    def counted(step):
        b = batches(step)
        per_step[step] = (b.num_tokens, b.num_tokens * meta.flops_per_token(b.input_ids.shape[1]))
        return b

    runtime = Runtime(str(device), bool(config["compile"]), int(config["threads"]), peak_flops=peak)
    name = d.bench.replace("/", "_")
    files = RunFiles(*(directory / f"{name}.{ext}" for ext in ("model", "log.csv", "summary.json", "ckpt")))
    run = Run({"pilot": d.bench}, vars(d.wildcards), files, runtime)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    with quiet():
        train(mc, tc, counted, run)
        measured = torch.cuda.max_memory_allocated(device) if cuda else cpu_peak(mc, tc, batches, run, directory)
    rows = pd.read_csv(files.log_csv)
    step_s, flops = step_time(rows, per_step)
    first, last, fell = loss_fell(list(rows["loss"]))
    passes = math.ceil(tc.batch_size / tc.micro_batch) if 0 < tc.micro_batch < tc.batch_size else 1
    work = cost_function(d.rule)(d, config)
    predicted = work.memory.get("gpu" if cuda else "cpu")
    return {"slice": d.slice, "shape": describe(mc, tc), "job": d.name, "stack": 1, "lr": tc.optim.lr,
            "step_ms": 1e3 * step_s, "tokens_per_s": statistics.fmean(per_step[s][0] for s in per_step) / step_s,
            "mfu": flops / step_s / peak if peak else math.nan,
            "peak_mem_gib": measured / memory.GiB, "predicted_gib": predicted.bytes / memory.GiB if predicted else math.nan,
            "loss_first": first, "loss_last": last, "loss_fell": fell,
            "_fit": (mc.n_layer * passes, mc.d_model, flops, step_s), "_work": work}


def step_time(rows, per_step: dict) -> tuple[float, float]:
    """(median seconds, mean model FLOPs) of a step over a run's logged intervals after the
    first (start-up, compilation): ``rows`` its log (``tokens_per_s``: its tokens over the
    interval's time), ``per_step`` its (tokens, FLOPs) at each step."""
    bounds = [0, *rows["step"]]
    intervals = []  # (steps, seconds, model FLOPs) of each logged interval
    for (lo, hi), tokens_per_s in zip(zip(bounds, bounds[1:]), rows["tokens_per_s"]):
        tokens = sum(per_step[s][0] for s in range(lo, hi))
        intervals.append((hi - lo, tokens / tokens_per_s, sum(per_step[s][1] for s in range(lo, hi))))
    steady = intervals[1:] or intervals
    return statistics.median(s / n for n, s, _ in steady), statistics.fmean(f / n for n, _, f in steady)


def cell_trainings(config: dict, dag_jobs, d, tokens: str, size: int) -> list[tuple]:
    """(model config, trainer settings, batch function) of the first ``size`` runs of ``d``'s
    cell (its rule and wildcards but the seed), in seed order: the runs a stack trains together
    (a stack job's: its own first ``size``)."""
    if hasattr(d.params, "stack_seeds"):
        jobs = run_jobs(d, config, tokens, size)
    else:
        cell = {k: v for k, v in vars(d.wildcards).items() if k != "seed"}
        members = sorted((j for j in dag_jobs if j.rule == d.rule
                          and {k: v for k, v in vars(j.wildcards).items() if k != "seed"} == cell),
                         key=lambda j: j.wildcards.seed)[:size]
        jobs = [run_jobs(j, config, tokens)[0] for j in members]
    module = importlib.import_module(f"sparselen.{d.slice}.jobs")
    return [module.training(job) for job in jobs]


def measure_stack(d, trainings: list[tuple], config: dict, steps: int, device, peak: float, directory: Path) -> dict:
    """Train a stack of the runs ``trainings`` (``sparselen.training.stacked.train_stack``) for ``steps``
    steps (their schedule) and measure its step: what the estimate's stack model predicts."""
    import pandas as pd
    import torch

    from sparselen.estimate import stacks
    from sparselen.estimate.plan import cost_function
    from sparselen.estimate.tracker import PeakTensorMemory
    from sparselen.interface.job import Runtime
    from sparselen.interface.run import Run, RunFiles
    from sparselen.nn import memory
    from sparselen.training.stacked import padded_lengths, step_passes, train_stack

    mc, S = trainings[0][0], len(trainings)
    steps = min(steps, trainings[0][1].steps)
    meta = memory.meta_model(mc)

    def counts(step: int) -> tuple:
        """(the first run's tokens, all runs' tokens, their model FLOPs, the FLOPs of their rows
        padded to the step's longest, or to their length group's: ``stacked.padded_lengths``)
        of a step, its batches drawn again here: on CUDA the stack draws them in its worker
        process, and each is a function of its run and the step."""
        drawn = [fn(step) for _, _, fn in trainings]
        pads = padded_lengths([b.input_ids.shape[1] for b in drawn], trainings[0][1].length_groups)
        return (drawn[0].num_tokens, sum(b.num_tokens for b in drawn),
                sum(b.num_tokens * meta.flops_per_token(b.input_ids.shape[1]) for b in drawn),
                sum(b.input_ids.shape[0] * T * meta.flops_per_token(T) for b, T in zip(drawn, pads)))

    runtime = Runtime(str(device), bool(config["compile"]), int(config["threads"]), peak_flops=peak)

    def runs(tag: str, n_steps: int):
        cfgs = [replace(tc, steps=n_steps, schedule_steps=tc.steps, checkpoint_every=n_steps,
                        log_every=max(1, n_steps // 50)) for _, tc, _ in trainings]
        files = [RunFiles(*(directory / f"{tag}{s}.{ext}" for ext in ("model", "log.csv", "summary.json", "ckpt")))
                 for s in range(S)]
        return cfgs, [Run({"pilot": d.bench, "stack": s}, vars(d.wildcards), f, runtime) for s, f in enumerate(files)]

    cfgs, stack_runs = runs("stack", steps)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    with quiet():
        train_stack(mc, cfgs, [fn for _, _, fn in trainings], stack_runs)
        if cuda:
            measured = torch.cuda.max_memory_allocated(device)
        else:
            cfgs2, runs2 = runs("memory", 2)
            with PeakTensorMemory() as tracked:
                train_stack(mc, cfgs2, [fn for _, _, fn in trainings], runs2)
            measured = tracked.peak
    # a run's log has its own tokens over the stack's time
    per_step, log_rows = {s: counts(s) for s in range(steps)}, pd.read_csv(stack_runs[0].files.log_csv)
    step_s, flops = step_time(log_rows, {k: (v[0], v[2]) for k, v in per_step.items()})
    padded = step_time(log_rows, {k: (v[0], v[3]) for k, v in per_step.items()})[1]
    work = stacks.stack_work([cost_function(d.rule)(d, config)] * S, d.slice)
    predicted = work.memory.get("gpu" if cuda else "cpu")
    tc = trainings[0][1]
    passes = step_passes(tc, S)
    return {"slice": d.slice, "shape": describe(mc, tc), "job": d.name, "stack": S,
            "step_ms": 1e3 * step_s, "tokens_per_s": statistics.fmean(v[1] for v in per_step.values()) / step_s,
            "mfu": flops / step_s / peak if peak else math.nan, "peak_mem_gib": measured / memory.GiB,
            "predicted_gib": predicted.bytes / memory.GiB if predicted else math.nan,
            "_fit": (mc.n_layer * passes, mc.d_model, padded, step_s), "_work": work}


@contextlib.contextmanager
def quiet():
    """The trainer's progress bar and step log (for a job's log file) kept off the pilot's output."""
    logger = logging.getLogger("sparselen.training.train")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        with contextlib.redirect_stderr(io_.StringIO()):
            yield
    finally:
        logger.setLevel(level)


def describe(mc, tc) -> str:
    cfg = mc.to_dict()
    head = " +position head" if cfg.get("scheme") == "ppc" else ""
    return (f"{cfg.get('architecture', 'gpt_neox')} {mc.n_layer}x{mc.d_model} ff {mc.d_ff} vocab {mc.vocab_size}"
            f"{head}, {tc.batch_size} rows" + (f" in passes of {tc.micro_batch}" if tc.micro_batch else ""))


def cpu_peak(mc, tc, batches, run, directory: Path) -> float:
    """Peak tensor bytes of two training steps on the CPU (``tracker.PeakTensorMemory``: the
    CPU has no ``max_memory_allocated``), in files of their own."""
    from sparselen.estimate.tracker import PeakTensorMemory
    from sparselen.interface.run import RunFiles
    from sparselen.training.train import train

    files = RunFiles(*(directory / f"memory.{ext}" for ext in ("model", "log.csv", "summary.json", "ckpt")))
    with PeakTensorMemory() as tracked:
        train(mc, replace(tc, steps=2, log_every=1, checkpoint_every=10**9), batches, replace(run, files=files))
    files.checkpoint.unlink(missing_ok=True)
    return float(tracked.peak)


def profile(results: list[dict], device, compile: bool, threads: int = 1):
    """A device profile fitted to the measured steps, single runs' and stacks' (a stack's step
    its runs' FLOPs padded to the step's longest batch, as the estimate counts them): FLOP rate
    and per-step overheads (``calibrate.fit``; a GPU's width fall-off 0); forward-pass and per-job terms from the
    datasheet profile of the same GPU (or the built-in CPU profile): the pilot times training only.
    Shapes too small to show the FLOP rate (a fitted rate above the device's peak) keep the
    base profile's rate, and the fit sets only the overheads."""
    import torch

    from sparselen.estimate import profiles
    from sparselen.estimate.calibrate import fit
    from sparselen.runtime.datasheets import datasheet_gpu

    cuda = device.type == "cuda"
    name = torch.cuda.get_device_name(device) if cuda else profiles.CPU_DEFAULT.name
    base = profiles.gpu_profile(datasheet_gpu(name) or "h100", compile=compile) if cuda else profiles.CPU_DEFAULT
    rows = [r["_fit"] for r in results]
    peak, d0, step_s, step_layer_s = fit(rows, d0=0.0 if cuda else None)
    ceiling = base.peak_flops * (1 if cuda else threads)
    if peak > ceiling:
        peak, d0 = base.peak_flops * base.utilization * (1 if cuda else threads), base.width_half
        _, _, step_s, step_layer_s = fit(rows, peak=peak, d0=d0)
    memory = torch.cuda.get_device_properties(device).total_memory if cuda else profiles.machine_memory()
    measured = ", ".join(f"{r['shape']}{stack_label(r)}: {r['step_ms']:.3g} ms" for r in results)
    # memory_bandwidth 0: the measured steps hold their optimizer traffic, which the fit folds
    # into its rate and overheads
    return replace(base, name=f"{name} (pilot)", peak_flops=peak, utilization=1.0, width_half=d0, step_s=step_s,
                   step_layer_s=step_layer_s, memory_bandwidth=0.0, memory_bytes=float(memory),
                   source=f"sparselen pilot: training steps per shape ({measured}); forward passes and start-up "
                          f"from {base.name}")


def stack_label(row: dict) -> str:
    """How a profile's source names a stack's row."""
    return f", a stack of {row['stack']}" if row.get("stack", 1) > 1 else ""


def pilot(configfiles, steps: int = 300, out: str = "pilot_profile.json", peak_tflops: float | None = None,
          print_=print) -> dict:
    """Run the pilot of ``configfiles`` (``sparselen pilot``); returns its table, its profile and
    the shapes whose loss did not fall."""
    import pandas as pd

    from sparselen.estimate.dag import workflow_jobs
    from sparselen.estimate.profiles import step_seconds
    from sparselen.estimate.stack_size import configured
    from sparselen.interface.config import load
    from sparselen.interface.job import Runtime
    from sparselen.runtime import io
    from sparselen.runtime.device import configure_cpu, resolve_device
    from sparselen.training.train import peak_flops

    config = load(configfiles)
    configured_stacks = configured(config)
    configure_cpu(config["threads"])
    device = resolve_device(config["device"], config["gpus_per_job"])
    tflops = peak_tflops if peak_tflops is not None else config["peak_tflops"]
    peak = peak_flops(Runtime(str(device), False, 1, peak_flops=1e12 * tflops), device)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        tokens, real = language_tokens(config, directory) if "language" in config else ("", True)
        dag_jobs = workflow_jobs(configfiles)
        found = shapes(config, dag_jobs, tokens)
        print_(f"pilot: {len(found)} distinct model shapes, {steps} steps each, on {device}"
               + ("" if real else "; language shapes on random tokens (their loss is not checked)"))
        results = []
        for key, d, training in found:
            log.info("pilot: %s (%s)", d.rule, d.name)
            r = measure(d, training, config, steps, device, peak, directory)
            if d.slice == "language" and not real:
                r["loss_fell"] = None
            results.append(r)
        stacked = []  # each shape of a slice that stacks: a stack of its config's size
        for key, d, training in found:
            size = configured_stacks.get(d.slice, 1)
            if size > 1:
                log.info("pilot: %s (%s), a stack of %d", d.rule, d.name, size)
                trainings = cell_trainings(config, dag_jobs, d, tokens, size)
                stacked.append(measure_stack(d, trainings, config, steps, device, peak, directory))
    prof = profile(results + stacked, device, bool(config["compile"]), int(config["threads"]))
    for r in results + stacked:  # the estimate's step with the fitted profile, beside the measured
        term = next(t for t in r.pop("_work").terms if t.kind == "train")
        r["predicted_ms"] = 1e3 * step_seconds(term, prof)
    table = pd.DataFrame([{k: v for k, v in r.items() if k != "_fit"} for r in results + stacked])
    io.write_text(out, prof.to_json() + "\n")
    print_(table.to_markdown(index=False, floatfmt=".4g"))
    flat = table[table["loss_fell"] == False]  # noqa: E712 (None: not checked)
    for r in flat.itertuples():
        print_(f"FLAGGED: {r.slice} {r.shape} ({r.job}): the loss did not fall over {steps} steps at lr {r.lr:g} "
               f"({r.loss_first:.4g} -> {r.loss_last:.4g}); check the recipe before the campaign")
    print_(f"wrote {out}: {prof.name}, {prof.peak_flops / 1e12:.3g} TFLOP/s fitted, {prof.step_s * 1e3:.3g} ms + "
           f"{prof.step_layer_s * 1e6:.3g} us per layer and training step; use it with "
           f"`sparselen estimate --configfile ... {'--gpu' if device.type == 'cuda' else '--cpu-profile'} {out}`")
    return {"table": table, "profile": prof, "flagged": list(flat["job"])}

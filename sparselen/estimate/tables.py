"""The estimate's tables: seconds and peak memory per job on its device, per slice and per job
type; GPU-hours and submissions with and without packing (small models' groups sharing a GPU:
``sparselen.estimate.packing``); SLURM submissions whose predicted time exceeds their limit, with the
attempts resuming from checkpoints would take; the errors that make ``sparselen estimate``
exit non-zero (a job over its device's memory, a job no attempt finishes); predicted against a
finished run's measured benchmark files. The assumptions behind the numbers are printed with
them (``assumptions``).
"""

from __future__ import annotations

import math
import os
import sys

from sparselen.estimate import limits, stack_size, stacks
from sparselen.estimate.disk import FINISHED, TRAINING, disk_table
from sparselen.estimate.display import hm
from sparselen.estimate.plan import Job
from sparselen.estimate.profiles import GROUP_BYTES, OPTIMIZER_BYTES, USABLE, Profile, seconds
from sparselen.estimate.timeline import PACKED_GROUP, SLURM_GROUP_AT_ONCE, campaign_clock, submission_seconds
from sparselen.interface.job import per_run_rule
from sparselen.jobs.slices import runtime_keys, stacked_evaluation_rules
from sparselen.nn.memory import GiB

DP_EFFICIENCY = 0.9  # assumed: n devices training one model together run n x this as fast as one


def keeps_checkpoints(steps: int, checkpoint_every: int) -> bool:
    """Whether a killed attempt of a job keeps training progress: it trains and saves a
    checkpoint before its last step."""
    return 0 < checkpoint_every < steps


def attempts_needed(need_s: float, train_s: float, steps: int, checkpoint_every: int, limit_s: float,
                    restart_s: float, retries: int = 2, checkpoint_minutes: float = 0.0, cap_s: float = math.inf) -> int:
    """Attempts a job needs when attempt a of one ``snakemake`` command runs for ``a * limit_s``,
    at most ``cap_s`` (a = 1 .. 1 + ``retries``; rerunning the command starts again at attempt 1), and a killed
    attempt keeps its training progress up to the last checkpoint (at multiples of
    ``checkpoint_every`` steps at least ``checkpoint_minutes`` apart); each attempt pays
    ``restart_s`` again. ``math.inf`` if no number of attempts finishes: a whole command's
    attempts save no progress (no checkpoint reached, or none kept)."""
    done = 0.0  # seconds of training work saved in checkpoints
    ckpt_s = math.inf
    if keeps_checkpoints(steps, checkpoint_every):
        block = train_s / steps * checkpoint_every
        ckpt_s = block * max(1, math.ceil(60 * checkpoint_minutes / block)) if block > 0 else 0.0
    for command in range(100):
        done_before = done
        for a in range(1, 2 + retries):
            limit = min(a * limit_s, cap_s)
            if restart_s + (need_s - done) <= limit:
                return command * (1 + retries) + a
            if ckpt_s < math.inf:  # training progress kept up to the last checkpoint before the kill
                progressed = max(0.0, limit - restart_s)
                done = min(train_s, done + math.floor(progressed / ckpt_s) * ckpt_s)
        if done == done_before:
            return math.inf
    return math.inf


def estimate(config: dict, jobs: list[Job], gpu: Profile | None, cpu: Profile, retries: int = 2,
             dp_efficiency: float = DP_EFFICIENCY) -> "pd.DataFrame":
    """One row per job of ``jobs`` (``plan``): predicted seconds on its device; with ``gpu`` (and
    config gpus_per_job > 0) model jobs run on the GPU profile, the rest (and theory SFA runs,
    which always use the CPU) on ``cpu``. Each row carries its SLURM submission, its level in it
    and the submission's limit, as Snakemake forms them (``dag``); a stack job's rule is its
    runs' (``parity_train``).

    A model trained on n devices together (language.parallel) takes its one-device time over
    n x ``dp_efficiency`` (an assumption: gradient all-reduce and stragglers), plus its start-up;
    ``device_seconds`` = seconds x devices is what it costs."""
    import pandas as pd

    on_gpu = gpu is not None and config.get("gpus_per_job", 0) > 0
    rows = []
    for j in jobs:
        d, w = j.dag, j.work
        device = gpu if on_gpu and w.model_job and not w.cpu_only else cpu
        s = seconds(w, device)
        if w.devices > 1:
            speedup = w.devices * dp_efficiency
            s = {**s, "seconds": s["restart_seconds"] + (s["seconds"] - s["restart_seconds"]) / speedup,
                 "train_seconds": s["train_seconds"] / speedup}
        peak = w.memory.get(device.device)
        rows.append({"slice": d.slice, "rule": per_run_rule(d.rule), "job": d.name, "runs": w.runs, "bench": d.bench,
                     "group": d.group,
                     "device": device.device, "peak_flops": device.peak_flops,
                     "flops": w.flops, "seconds": s["seconds"], "train_seconds": s["train_seconds"],
                     "busy_seconds": s["busy_seconds"] / (w.devices * dp_efficiency if w.devices > 1 else 1),
                     "devices": w.devices, "device_seconds": s["seconds"] * w.devices,
                     "memory_gib": peak.bytes / GiB if peak else math.nan,
                     "usable_gib": device.usable_bytes / GiB if device.memory_bytes else math.nan,
                     "memory_pass": peak.what if peak else "", "memory_key": peak.key if peak else "",
                     "steps": w.train_steps, "checkpoint_every": w.checkpoint_every, "parameters": w.parameters,
                     "runtime_min": d.runtime_min, "runtime_key": runtime_key(config, d.runtime_min, d.rule),
                     "restart_s": s["restart_seconds"], "submission": d.submission,
                     "level": d.level, "limit_min": d.limit_min, "jobid": d.jobid, "deps": d.deps,
                     "threads": d.threads, "priority": d.priority})
    return pd.DataFrame(rows)


def runtime_key(config: dict, runtime_min: float, rule: str = "") -> str:
    """The config key that sets a job's time limit: a stack job's resources.runtime_margin
    (``limits``), its rule's own key (its slice's ``RUNTIME_KEYS``) or resources.runtime where
    its runtime is that key's value, else "" (its rule's own minutes, or the SLURM profile's
    default-resources)."""
    resources = config.get("resources", {})
    if rule and per_run_rule(rule) != rule:
        return "resources.runtime_margin"
    for key in (runtime_keys().get(rule), "runtime"):
        if key and runtime_min == resources.get(key):
            return f"resources.{key}"
    return ""


def submissions(df, retries: int = 2, jobs_per_gpu: int = 1, checkpoint_minutes: float = 0.0,
                cap_min: float = math.inf) -> "pd.DataFrame":
    """Per SLURM submission (a model's group, a group of packed model groups sharing one GPU,
    the SFA runs' group, the data jobs' group, an ungrouped job): predicted wall time
    (``submission_seconds``: its jobs one at a time, as the executor plugin runs them), its
    limit (Snakemake's, which sums a group's levels but takes a level's longest job, as if its
    jobs ran side by side; a later attempt's at most ``cap_min``), attempts needed and whether
    they resume from checkpoints; ``gpu_hours``: its wall time times the GPUs it holds (one for
    packed model groups); ``runs``: the model groups in it."""
    import pandas as pd

    rows = []
    for sub, g in df.groupby("submission", sort=False):
        packed = bool((g["group"] == PACKED_GROUP).any())
        need, train = submission_seconds(g, shared_gpu=packed)
        limit = 60 * g["limit_min"].iloc[0]
        steps, every = int(g["steps"].max()), int(g["checkpoint_every"].max() or 0)
        a = attempts_needed(need, train, steps, every, limit, float(g["restart_s"].max()), retries,
                            checkpoint_minutes, 60 * cap_min)
        rules = "+".join(f"{r} x{n}" if n > 1 else r for r, n in g["rule"].value_counts(sort=False).items())
        keys = [k for k in g["runtime_key"] if k]
        on_gpu = g["device"] == "gpu"
        gpus = 1 if packed else int(g.loc[on_gpu, "devices"].max()) if on_gpu.any() else 0
        rows.append({"slice": g["slice"].iloc[0], "submission": sub, "rules": rules,
                     "predicted_h": need / 3600, "limit_h": limit / 3600,
                     "last_limit_h": min((1 + retries) * limit, 60 * cap_min) / 3600, "attempts": a,
                     "checkpoints": keeps_checkpoints(steps, every), "runtime_key": keys[0] if keys else "",
                     "packed": packed, "runs": g["job"].nunique() if packed else 1,
                     "gpu_hours": gpus * need / 3600})
    return pd.DataFrame(rows)


def packing_table(df, subs) -> "pd.DataFrame":
    """Submissions (all, and those holding GPUs) and GPU-hours without packing (each model group
    its own submission and GPU: its jobs' device-hours) and with it (what the workflow submits:
    a group of packed model groups holds one GPU for its wall time)."""
    import pandas as pd

    other = df["submission"].nunique() - len(subs)  # data, table, figure submissions
    gpu_h = df.loc[df["device"] == "gpu", "device_seconds"].sum() / 3600
    gpu_subs = subs[subs["gpu_hours"] > 0]
    packed = subs[subs["packed"]]
    unpacked_gpu_subs = len(gpu_subs) - len(packed) + int(packed["runs"].sum())
    unpacked_gpu_h = gpu_h - df.loc[(df["device"] == "gpu") & (df["group"] == PACKED_GROUP), "device_seconds"].sum() / 3600
    return pd.DataFrame([
        {"": "without packing", "submissions": other + len(subs) - len(packed) + int(packed["runs"].sum()),
         "gpu_submissions": unpacked_gpu_subs, "gpu_hours": gpu_h},
        {"": "with packing (what the workflow submits)", "submissions": other + len(subs),
         "gpu_submissions": len(gpu_subs), "gpu_hours": unpacked_gpu_h + packed["gpu_hours"].sum()}])


def assumptions(config: dict, gpu: Profile | None, cpu: Profile, jobs_per_gpu: int, retries: int,
                dp_efficiency: float, local: bool = False) -> list[str]:
    """What the numbers assume, one line each: printed with the tables (for a ``local`` run,
    only the CPU profile's: packing, SLURM limits and data-parallel training do not apply)."""
    out = []
    for p in [gpu, cpu] if gpu is not None else [cpu]:
        rate = f"{p.peak_flops * p.utilization / 1e12:.3g} TFLOP/s for matrix products" + (
            f" (peak {p.peak_flops / 1e12:g} x utilization {p.utilization:g})" if p.utilization != 1 else "")
        out.append(f"{p.device.upper()} {p.name}: {rate}; per training step {p.step_s * 1e3:.3g} ms + "
                   f"{p.step_layer_s * 1e6:.3g} us per layer and pass"
                   + (f" + {OPTIMIZER_BYTES} bytes per parameter and run (AdamW, clipping, casts; {GROUP_BYTES} "
                      f"more in a stack's length groups) at {p.memory_bandwidth / 1e12:.3g} TB/s"
                      if p.memory_bandwidth else "")
                   + f", per forward pass {p.call_s * 1e3:.3g} ms + "
                   f"{p.call_layer_s * 1e6:.3g} us per layer; per job {p.job_s:.3g} s start-up + "
                   f"{p.units.get('model_job', 0):.3g} s for a model"
                   + (f", + {p.compile_s:.3g} s where torch.compile applies (training; evaluation runs eager)"
                      if p.compile_s else "")
                   + (f"; each thread of a job beyond its first adds {p.thread_efficiency:g} of a thread's speed (an "
                      f"assumption beyond 2 threads; theory.sfa_threads)" if p.device == "cpu" else "")
                   + f" ({p.source})")
    if local:
        return out
    pk = config.get("packing", {})
    if jobs_per_gpu > 1:
        how = ("packing.jobs_per_gpu" if pk.get("jobs_per_gpu") else
               f"as many as fit {pk.get('gpu_memory_gib')} GiB by the memory model, at most packing.max_jobs_per_gpu")
        out.append(f"Packing: {jobs_per_gpu} model groups of the small models (sparselen.estimate.packing.PACKED) share a GPU "
                   f"({how}); side by side they share its arithmetic: a layer takes the longer of its longest job "
                   f"and the sum of its jobs' GPU-busy (FLOP and optimizer-traffic) time")
    else:
        out.append("Packing: none (each model group holds its GPU; packing needs gpus_per_job 1)")
    res = config.get("resources", {})
    out.append(f"Time limits: attempt a of a SLURM submission gets a x its limit, at most resources.max_runtime = "
               f"{res.get('max_runtime', 'unset')} min, {1 + retries} attempts (retries: {retries}); a stack job's "
               f"limit is resources.runtime_margin = {res.get('runtime_margin')} x its prediction on "
               f"resources.runtime_gpu = {res.get('runtime_gpu')} (at least {limits.MIN_MINUTES} min; "
               f"sparselen.estimate.limits); a killed training resumes from its last checkpoint (at multiples of "
               f"train.checkpoint_every at least checkpoint_minutes = {config.get('checkpoint_minutes', 0)} apart)")
    out.append(f"Data-parallel training (language.parallel): n devices run n x {dp_efficiency:g} as fast as one")
    return out


def time_errors(subs, config: dict, retries: int) -> list[str]:
    """Submissions that lose work at their first time limit: no number of attempts finishes
    them (none of one command's attempts covers the whole job, and none keeps a checkpoint, or
    reaches one, so rerunning starts over), or attempt 1 is killed and, keeping no checkpoint,
    a later attempt starts over (the first attempt's hours lost, on every launch)."""
    out = []
    for r in subs[(subs["attempts"] == math.inf) | ((subs["attempts"] > 1) & ~subs["checkpoints"])].itertuples():
        missing = math.ceil((r.predicted_h - r.limit_h) * 60 / 10) * 10  # minutes attempt 1 lacks
        now = config["resources"].get(r.runtime_key.partition(".")[2])
        if r.limit_h * 60 >= config["resources"].get("max_runtime", math.inf):
            fix = "it is at resources.max_runtime, the partition's longest limit: make its job shorter"
        elif r.runtime_key == "resources.runtime_margin":
            fix = f"raise {r.runtime_key} from {now} to at least {math.ceil(10 * now * r.predicted_h / r.limit_h) / 10}"
        elif r.runtime_key:
            fix = f"raise {r.runtime_key} from {now} to at least {now + missing} min"
        else:
            fix = f"raise its rule's runtime (workflow/rules/{r.slice}.smk) by at least {missing} min"
        if r.attempts < math.inf:
            out.append(f"{r.submission} ({r.rules}): predicted {hm(r.predicted_h)} > limit {hm(r.limit_h)}, and it "
                       f"keeps no checkpoint: attempt 1 is killed and attempt {int(r.attempts)} starts over; {fix}")
            continue
        if r.checkpoints:
            why, fix = "none reaches a checkpoint", f"checkpoint more often (checkpoint_minutes, train.checkpoint_every) or {fix}"
        else:
            why = "it keeps no checkpoint"
        out.append(f"{r.submission} ({r.rules}): predicted {hm(r.predicted_h)} > limit {hm(r.limit_h)}, and "
                   f"{1 + retries} attempts (up to {hm(r.last_limit_h)}) each start over ({why}): "
                   f"it never finishes; {fix}")
    return out


def memory_errors(df, config: dict) -> list[str]:
    """Jobs whose predicted peak memory exceeds what their device may use, one line per
    rule and pass (its jobs share the shape)."""
    over = df[df["memory_gib"] > df["usable_gib"]]
    out = []
    for (rule, what, key), g in over.groupby(["rule", "memory_pass", "memory_key"], sort=False):
        j = g.iloc[g["memory_gib"].argmax()]
        more = f" and {len(g) - 1} more" if len(g) > 1 else ""
        out.append(f"{rule} {j['job']}{more}: predicted peak {j['memory_gib']:.1f} GiB ({what}) > "
                   f"{j['usable_gib']:.1f} GiB usable on the {j['device'].upper()}: lower {key} "
                   f"(now {config_value(config, key)}; docs/gpu.md)")
    return out


def config_value(config: dict, key: str):
    value = config
    for part in key.split("."):
        value = value[part]
    return value


def report(config: dict, jobs: list[Job], gpu: Profile | None, cpu: Profile, retries: int = 2, out=print,
           dp_efficiency: float = DP_EFFICIENCY, err=None, gpus_available: tuple = (8, 64),
           cores: int | None = None) -> dict:
    """Print the estimate of ``jobs`` (``plan``) and its assumptions; return its tables and
    ``errors``: the jobs that cannot succeed as configured (``memory_errors``, ``time_errors``),
    each also printed through ``err`` (stderr). Hours are device-hours (what a cluster bills); a
    job's longest wall time (``max_job_h``) is what its SLURM limit must cover; ``mfu`` and
    ``gpu_busy`` are a GPU job's predicted model FLOP utilisation and the share of its time its
    GPU computes for it, alone on the GPU (what packing fills). The wall clock follows the DAG
    (``timeline.campaign_clock``): on a cluster, on each of ``gpus_available`` GPUs; for a local
    run (no GPU), on this machine's ``cores`` (default: all), without the SLURM tables. A stack
    job (a small slice's ``stack``) is one row of its runs (``stacks``); ``best_stacks``: the
    largest stacks that fit the GPU, where the config's differ (``stack_choice``)."""
    from sparselen.estimate.display import markdown
    from sparselen.estimate.packing import jobs_per_gpu

    err = err or (lambda line: print(line, file=sys.stderr))
    local = gpu is None or not config.get("gpus_per_job", 0) > 0
    df = estimate(config, jobs, gpu, cpu, retries, dp_efficiency)
    n = jobs_per_gpu(config)
    subs = submissions(df, retries, n, float(config.get("checkpoint_minutes", 0)),
                       config.get("resources", {}).get("max_runtime", math.inf))
    stacked = bool((df["runs"] > 1).any())
    by_slice = df.groupby(["slice", "device"], sort=False).agg(
        jobs=("seconds", "size"), runs=("runs", "sum"), hours=("device_seconds", "sum"),
        pflop=("flops", "sum")).reset_index()
    by_slice["hours"] /= 3600
    by_slice["pflop"] /= 1e15
    by_rule = df.assign(peak_seconds=df["seconds"] * df["peak_flops"]).groupby(["slice", "rule", "device"], sort=False).agg(
        jobs=("seconds", "size"), runs=("runs", "sum"), stack=("runs", "max"), devices=("devices", "max"),
        hours=("device_seconds", "sum"),
        max_job_h=("seconds", "max"), pflop=("flops", "sum"), max_mem_gib=("memory_gib", "max"),
        mfu=("flops", "sum"), peak_seconds=("peak_seconds", "sum"), gpu_busy=("busy_seconds", "sum"),
        seconds=("seconds", "sum")).reset_index()
    gpu_rows = by_rule["device"] == "gpu"
    by_rule["mfu"] = (by_rule["mfu"] / by_rule["peak_seconds"]).where(gpu_rows)
    by_rule["gpu_busy"] = (by_rule["gpu_busy"] / by_rule["seconds"]).where(gpu_rows)
    by_rule = by_rule.drop(columns=["peak_seconds", "seconds"] + ([] if stacked else ["runs", "stack"]))
    if not stacked:
        by_slice = by_slice.drop(columns="runs")
    by_rule[["hours", "max_job_h"]] /= 3600
    by_rule["pflop"] /= 1e15
    packing = packing_table(df, subs)
    out(f"Device profile: {cpu.name} (every job)" if local else
        f"Device profiles: {gpu.name} (model jobs); {cpu.name} (other jobs)")
    for p in [cpu] if local else [gpu, cpu]:
        size = f"{p.usable_bytes / GiB:.1f} GiB usable ({USABLE:.0%} of {p.memory_bytes / GiB:.1f} GiB)"
        out(f"Memory on {p.name}: {size if p.memory_bytes else 'unknown, not checked'}")
    out("\nAssumptions:")
    for line in assumptions(config, None if local else gpu, cpu, n, retries, dp_efficiency, local):
        out(f"- {line}")
    if stacked:
        for line in stacks_assumption(config, gpu if not local else cpu):
            out(f"- {line}")
    out(f"\nPer slice (device-hours as h:mm, one job at a time):\n")
    out(markdown(by_slice))
    out(f"\nPer job type (h:mm: device-hours; max_job: the longest job; "
        + ("runs: the runs its jobs train or evaluate, stack: the most in one job; " if stacked else "")
        + f"max_mem_gib: the largest predicted peak memory of a job, sparselen.nn.memory" + (
            "; mfu, gpu_busy: a GPU job alone on its GPU" if not local else "") + "):\n")
    out(markdown(by_rule))
    if not local:
        out(f"\nSubmissions and GPU-hours, without and with packing ({n} model group(s) per GPU; a SLURM submission "
            f"runs its {n} one after another, {SLURM_GROUP_AT_ONCE} at a time (the executor plugin's group jobs): packing "
            f"saves submissions and queue waits there, GPU-hours only where they run side by side, as locally):\n")
        out(markdown(packing))
    total = {d: g["device_seconds"].sum() / 3600 for d, g in df.groupby("device")}
    if "gpu" in total:
        total["gpu"] = packing["gpu_hours"].iloc[1]
    out("\nTotal: " + ", ".join(f"{hm(h)} {d.upper()}-hours" for d, h in total.items())
        + (f" (with packing; {hm(packing['gpu_hours'].iloc[0])} without)" if "gpu" in total and n > 1 else ""))
    clock = campaign_clock(df, local, gpus_available, cores)
    for line in clock["lines"]:
        out(line)
    disk = disk_table(df, (cores or os.cpu_count() or 1) if local else gpus_available[0])
    if len(disk) > 1:
        out(f"\nDisk of the trained models (GiB; sparselen.estimate.disk): model files; finished runs' model files and "
            f"checkpoints ({FINISHED} bytes per parameter, until the workflow's onsuccess removes the checkpoints); "
            f"peak: with the largest training jobs of {'this machine' if local else f'{gpus_available[0]} GPUs'} in "
            f"flight ({TRAINING} bytes per parameter of a training run's checkpoint):\n")
        out(markdown(disk))
    best = {} if local else stack_choice(config, jobs, gpu, out)
    over = subs[(subs["predicted_h"] > subs["limit_h"]) & (subs["attempts"] < math.inf) & subs["checkpoints"]]
    if len(over):
        out(f"\nWARNING: {len(over)} submission(s) exceed their SLURM time limit (resources.runtime; a group's jobs "
            f"that run in turn add up; attempt a gets a x the limit, at most resources.max_runtime, {1 + retries} "
            f"attempts with retries: {retries}):")
        for r in over.itertuples():
            if r.attempts <= 1 + retries:
                fix = f"finishes in attempt {r.attempts} ({r.attempts - 1} resubmission(s), resuming from checkpoints)"
            else:
                reruns = math.ceil(r.attempts / (1 + retries)) - 1
                fix = (f"needs {r.attempts} attempts: {reruns} rerun(s) of the snakemake command after the retries "
                       f"are used up (each starts again at attempt 1; finished jobs and checkpoints are kept), "
                       f"or raise its limit to "
                       f"{math.ceil(r.predicted_h * 60 / 10) * 10} min")
            out(f"  {r.submission} ({r.rules}): {hm(r.predicted_h)} > {hm(r.limit_h)}: {fix}")
    errors = memory_errors(df, config) + time_errors(subs, config, retries)
    for e in errors:
        err(f"ERROR: {e}")
    return {"jobs": df, "slices": by_slice, "rules": by_rule, "submissions": subs, "packing": packing,
            "jobs_per_gpu": n, "errors": errors, "clock": clock, "local": local, "best_stacks": best, "disk": disk}


def stacks_assumption(config: dict, p: Profile) -> list[str]:
    """The assumption lines of the config's stacks: the slices' batched ones (``stack``), and the
    theory's SFA runs one after another (``theory.sfa_stack``)."""
    lines = []
    in_turn = int(config.get("theory", {}).get("sfa_stack", 1))
    if in_turn > 1:
        lines.append(f"theory.sfa_stack {in_turn}: a job runs that many SFA runs one after another in one process, "
                     f"priced as their work added up after one start-up (sparselen.estimate.stacks.in_turn)")
    sizes = ", ".join(f"{stacks.key(s)} {n}" for s, n in stack_size.configured(config).items() if n > 1)
    if not sizes:
        return lines
    grouped = "; ".join(f"{name}'s in {section['length_groups']} passes, {name}.length_groups"
                        for name, section in config.items()
                        if isinstance(section, dict) and int(section.get("length_groups", 1)) > 1)
    grouped = f" ({grouped}: the runs grouped by drawn length, each padded to its group's longest)" if grouped else ""
    together = ", ".join(stacked_evaluation_rules())
    return [f"Stacks ({sizes}; sparselen.training.stacked): a stack's job starts, compiles and runs the trainer once; its "
            f"training step pays its overheads once and the FLOPs and optimizer traffic of all its runs, each batch "
            f"padded to the step's longest{grouped}, or, where longer, {p.batch_s * 1e3:.3g} ms a run to draw their "
            f"batches in a worker process; its peak memory is S x a run's training step; an evaluation stack of "
            f"{together or 'no rule'} evaluates its runs as one stacked model, one pass per batch for all, any other its "
            f"runs one after another after one start-up, as a training stack of the theory's GPT runs does; one SLURM "
            f"submission on one GPU, not packed", *lines]


def stack_choice(config: dict, jobs: list[Job], gpu: Profile, out=print) -> dict:
    """Where the fewest stacks of even size within ``stack_size.SHARE`` of the GPU's usable
    memory (``stack_size.even_fit``) differ from a slice's configured ``stack``: print them, with the
    stack jobs' GPU-hours with it and as configured; warn of a configured stack over that share."""
    if not gpu.memory_bytes:
        return {}
    now, room = stack_size.configured(config), stack_size.SHARE * gpu.usable_bytes
    for s, peak in stack_size.stack_peaks(jobs).items():
        if peak.bytes > room:
            size = now[s]
            out(f"\nWARNING: {stacks.key(s)} {size}: predicted peak {peak.bytes / GiB:.1f} GiB, over "
                f"{stack_size.SHARE:.0%} of the GPU's usable {gpu.usable_bytes / GiB:.1f} GiB (docs/gpu.md, \"Stacks\")")
    fit = stack_size.even_fit(jobs, room)
    best = {s: size for s, (size, _) in fit.items() if size != now.get(s, 1)}
    if not best:
        return {}
    sizes = {s: now.get(s, 1) for s in best}
    out(f"\nStacks: the fewest per cell, of even size, within {stack_size.SHARE:.0%} of the GPU's usable "
        f"{gpu.usable_bytes / GiB:.1f} GiB (up to a cell's seeds; sparselen.training.stacked, docs/gpu.md):")
    for s, size in best.items():
        peak = fit[s][1]
        out(f"  {stacks.key(s)}: {size} (now {sizes[s]}): predicted peak {peak.bytes / GiB:.2f} GiB ({peak.what})")
    with_them = stack_size.training_hours(jobs, best, gpu)
    out(f"  With them: {hm(with_them)} GPU-hours of these slices' training jobs instead of "
        f"{hm(stack_size.training_hours(jobs, sizes, gpu))}")
    return best


def compare(df, benchmarks) -> "pd.DataFrame":
    """Predicted vs measured seconds per job, from a run's benchmark files (``results/benchmarks``,
    as the ledger reads them); jobs missing on either side are left out. Measured = each job's
    wall time: what a scheduler's time limit counts, and the job's own compute time on a machine
    running one single-threaded job per core (Snakemake's sampled ``cpu_time`` misses part of a
    ``script:`` job's CPU time, so it is not used)."""

    from sparselen.report.ledger import read_benchmarks

    bench = read_benchmarks(benchmarks)
    bench["bench"] = [f"{s}/{p}" + (f"/{j}" if j else "") for s, p, j in zip(bench["slice"], bench["step"], bench["job"])]
    measured = bench.groupby("bench")["wall_s"].mean()
    out = df[["slice", "rule", "job", "bench", "seconds"]].rename(columns={"seconds": "predicted_s"})
    out = out.merge(measured.rename("measured_s"), left_on="bench", right_index=True, how="inner")
    out["ratio"] = out["predicted_s"] / out["measured_s"]
    return out


def comparison_words(by_slice, profile: str) -> str:
    """The comparison in a sentence: how far the predictions were off in all, and what to do
    where they were off by more than 30%."""
    total = by_slice[by_slice["slice"] == "all"].iloc[0]
    ratio = total["predicted_s"] / total["measured_s"]
    line = (f"In all, the prediction was {ratio:.2f} of the measured wall time ({total['predicted_s'] / 60:.0f} "
            f"against {total['measured_s'] / 60:.0f} job-minutes) on the profile {profile}.")
    if 1 / 1.3 <= ratio <= 1.3:
        return line + " That is within 30%: the estimate can be trusted on this machine."
    side = "too low: this machine is slower" if ratio < 1 else "too high: this machine is faster"
    return (line + f" That is {side} than the profile says; price on a profile measured here "
            "(`--cpu-profile auto`, the default, or `--calibrate FILE`), or compare with a run under "
            "less load (jobs side by side share the cores).")


def comparison_tables(cmp) -> tuple:
    by_slice = cmp.groupby("slice", sort=False)[["predicted_s", "measured_s"]].sum()
    by_slice.loc["all"] = by_slice.sum()
    by_slice["ratio"] = by_slice["predicted_s"] / by_slice["measured_s"]
    by_rule = cmp.groupby(["slice", "rule"], sort=False).agg(jobs=("bench", "size"), predicted_s=("predicted_s", "sum"),
                                                             measured_s=("measured_s", "sum")).reset_index()
    by_rule["ratio"] = by_rule["predicted_s"] / by_rule["measured_s"]
    return by_slice.reset_index(), by_rule

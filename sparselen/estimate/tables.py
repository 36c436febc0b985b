"""The estimate's tables: seconds and peak memory per job on its device, per slice and per job
type; SLURM submissions whose predicted time exceeds their limit, with the attempts resuming
from checkpoints would take; the errors that make ``sparselen estimate`` exit non-zero (a job
over its device's memory, a job no attempt finishes); predicted against a finished run's
measured benchmark files.
"""

from __future__ import annotations

import math
import sys

from sparselen.estimate.flops import seconds
from sparselen.estimate.memory import GiB
from sparselen.estimate.plan import Job
from sparselen.estimate.profiles import USABLE, Profile

DP_EFFICIENCY = 0.9  # assumed: n devices training one model together run n x this as fast as one


def keeps_checkpoints(steps: int, checkpoint_every: int) -> bool:
    """Whether a killed attempt of a job keeps training progress: it trains and saves a
    checkpoint before its last step."""
    return 0 < checkpoint_every < steps


def attempts_needed(need_s: float, train_s: float, steps: int, checkpoint_every: int, limit_s: float,
                    restart_s: float, retries: int = 2) -> int:
    """Attempts a job needs when attempt a of one ``snakemake`` command runs for ``a * limit_s``
    (a = 1 .. 1 + ``retries``; rerunning the command starts again at attempt 1), and a killed
    attempt keeps its training progress up to the last checkpoint (every ``checkpoint_every``
    steps); each attempt pays ``restart_s`` again. ``math.inf`` if no number of attempts
    finishes: a whole command's attempts save no progress (no checkpoint reached, or none kept)."""
    done = 0.0  # seconds of training work saved in checkpoints
    ckpt_s = train_s / steps * checkpoint_every if keeps_checkpoints(steps, checkpoint_every) else math.inf
    for command in range(100):
        done_before = done
        for a in range(1, 2 + retries):
            limit = a * limit_s
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
    and the submission's limit, as Snakemake forms them (``dag``).

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
            s = {"seconds": device.job_s + (s["seconds"] - device.job_s) / speedup,
                 "train_seconds": s["train_seconds"] / speedup}
        peak = w.memory.get(device.device)
        rows.append({"slice": d.slice, "rule": d.rule, "job": d.name, "bench": d.bench, "group": d.group,
                     "device": device.device,
                     "flops": w.flops, "seconds": s["seconds"], "train_seconds": s["train_seconds"],
                     "devices": w.devices, "device_seconds": s["seconds"] * w.devices,
                     "memory_gib": peak.bytes / GiB if peak else math.nan,
                     "usable_gib": device.usable_bytes / GiB if device.memory_bytes else math.nan,
                     "memory_pass": peak.what if peak else "", "memory_key": peak.key if peak else "",
                     "steps": w.train_steps, "checkpoint_every": w.checkpoint_every,
                     "runtime_min": d.runtime_min, "runtime_key": runtime_key(config, d.runtime_min),
                     "restart_s": device.job_s, "submission": d.submission,
                     "level": d.level, "limit_min": d.limit_min})
    return pd.DataFrame(rows)


def runtime_key(config: dict, runtime_min: float) -> str:
    """The config key that sets a job's time limit: resources.runtime or resources.sfa_runtime
    where its runtime is theirs, else its rule's own (``job_resources(runtime=...)``)."""
    for key in ("runtime", "sfa_runtime"):
        if runtime_min == config.get("resources", {}).get(key):
            return f"resources.{key}"
    return ""


def submissions(df, retries: int = 2) -> "pd.DataFrame":
    """Per SLURM submission that runs a model (a model's group, the SFA runs' group, an
    ungrouped job): predicted wall time (its levels in turn, the jobs of a level side by side),
    its limit, attempts needed and whether they resume from checkpoints. Data, table and figure
    jobs take seconds to minutes and are not checked."""
    import pandas as pd

    rows = []
    for sub, g in df.groupby("submission", sort=False):
        if not (g["flops"] > 0).any():
            continue
        by_level = g.groupby("level")
        need, train = by_level["seconds"].max().sum(), by_level["train_seconds"].max().sum()
        limit = 60 * g["limit_min"].iloc[0]
        steps, every = int(g["steps"].max()), int(g["checkpoint_every"].max() or 0)
        a = attempts_needed(need, train, steps, every, limit, float(g["restart_s"].max()), retries)
        rules = "+".join(f"{r} x{n}" if n > 1 else r for r, n in g["rule"].value_counts(sort=False).items())
        keys = [k for k in g["runtime_key"] if k]
        rows.append({"slice": g["slice"].iloc[0], "submission": sub, "rules": rules,
                     "predicted_h": need / 3600, "limit_h": limit / 3600, "attempts": a,
                     "checkpoints": keeps_checkpoints(steps, every), "runtime_key": keys[0] if keys else ""})
    return pd.DataFrame(rows)


def time_errors(subs, config: dict, retries: int) -> list[str]:
    """Submissions that no number of attempts finishes: none of one command's attempts covers
    the whole job, and none keeps a checkpoint (or reaches one), so rerunning starts over."""
    out = []
    for r in subs[subs["attempts"] == math.inf].itertuples():
        missing = math.ceil((r.predicted_h - r.limit_h) * 60 / 10) * 10  # minutes attempt 1 lacks
        if r.runtime_key:
            now = config["resources"][r.runtime_key.split(".")[1]]
            fix = f"raise {r.runtime_key} from {now} to at least {now + missing} min"
        else:
            fix = f"raise its rule's runtime (workflow/rules/{r.slice}.smk) by at least {missing} min"
        if r.checkpoints:
            why, fix = "none reaches a checkpoint", f"checkpoint more often (its train.checkpoint_every) or {fix}"
        else:
            why = "it keeps no checkpoint"
        out.append(f"{r.submission} ({r.rules}): predicted {r.predicted_h:.2f} h > limit {r.limit_h:.2f} h, and "
                   f"{1 + retries} attempts (up to {(1 + retries) * r.limit_h:.2f} h) each start over ({why}): "
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
           dp_efficiency: float = DP_EFFICIENCY, err=None) -> dict:
    """Print the estimate of ``jobs`` (``plan``); return its tables and ``errors``: the jobs
    that cannot succeed as configured (``memory_errors``, ``time_errors``), each also printed
    through ``err`` (stderr). Hours are device-hours (what a cluster bills); a job's longest
    wall time (``max_job_h``) is what its SLURM limit must cover."""
    err = err or (lambda line: print(line, file=sys.stderr))
    df = estimate(config, jobs, gpu, cpu, retries, dp_efficiency)
    unit = "GPU-h" if gpu is not None and config.get("gpus_per_job", 0) > 0 else "CPU-h"
    by_slice = df.groupby(["slice", "device"], sort=False).agg(
        jobs=("seconds", "size"), hours=("device_seconds", "sum"), pflop=("flops", "sum")).reset_index()
    by_slice["hours"] /= 3600
    by_slice["pflop"] /= 1e15
    by_rule = df.groupby(["slice", "rule", "device"], sort=False).agg(
        jobs=("seconds", "size"), devices=("devices", "max"), hours=("device_seconds", "sum"),
        max_job_h=("seconds", "max"), pflop=("flops", "sum"), max_mem_gib=("memory_gib", "max")).reset_index()
    by_rule[["hours", "max_job_h"]] /= 3600
    by_rule["pflop"] /= 1e15
    subs = submissions(df, retries)
    out(f"Device profiles: {gpu.name if gpu else '-'} (model jobs); {cpu.name} (other jobs)")
    for p in [gpu, cpu] if gpu is not None else [cpu]:
        size = f"{p.usable_bytes / GiB:.1f} GiB usable ({USABLE:.0%} of {p.memory_bytes / GiB:.1f} GiB)"
        out(f"Memory on {p.name}: {size if p.memory_bytes else 'unknown, not checked'}")
    if (df["devices"] > 1).any():
        out(f"Models trained on several devices (language.parallel): wall time = one device's / (devices x "
            f"{dp_efficiency:g}, the assumed data-parallel efficiency); hours below are device-hours")
    out(f"\nPer slice (device-hours, one job at a time):\n")
    out(by_slice.to_markdown(index=False, floatfmt=".3g"))
    out(f"\nPer job type (max_mem_gib: the largest predicted peak memory of a job, sparselen.estimate.memory):\n")
    out(by_rule.to_markdown(index=False, floatfmt=".3g"))
    total = {d: g["device_seconds"].sum() / 3600 for d, g in df.groupby("device")}
    out("\nTotal: " + ", ".join(f"{h:,.1f} {d.upper()}-h" for d, h in total.items()))
    over = subs[(subs["predicted_h"] > subs["limit_h"]) & (subs["attempts"] < math.inf)]
    if len(over):
        out(f"\nWARNING: {len(over)} submission(s) exceed their SLURM time limit (resources.runtime; a group's jobs "
            f"that run in turn add up; attempt a gets a x the limit, {1 + retries} attempts with retries: {retries}):")
        for r in over.itertuples():
            if r.attempts <= 1 + retries:
                how = "resuming from checkpoints" if r.checkpoints else "each from the start: no checkpoints"
                fix = f"finishes in attempt {r.attempts} ({r.attempts - 1} resubmission(s), {how})"
            else:
                reruns = math.ceil(r.attempts / (1 + retries)) - 1
                fix = (f"needs {r.attempts} attempts: {reruns} rerun(s) of the snakemake command after the retries "
                       f"are used up (each starts again at attempt 1; finished jobs and checkpoints are kept), "
                       f"or raise its limit to "
                       f"{math.ceil(r.predicted_h * 60 / 10) * 10} min")
            out(f"  {r.submission} ({r.rules}): {r.predicted_h:.2f} h > {r.limit_h:.2f} h: {fix}")
    errors = memory_errors(df, config) + time_errors(subs, config, retries)
    for e in errors:
        err(f"ERROR: {e}")
    return {"jobs": df, "slices": by_slice, "rules": by_rule, "submissions": subs, "errors": errors}


def compare(df, benchmarks) -> "pd.DataFrame":
    """Predicted vs measured seconds per job, from a run's benchmark files (``results/benchmarks``,
    as the ledger reads them); jobs missing on either side are left out. Measured = each job's
    wall time: what a scheduler's time limit counts, and the job's own compute time on a machine
    running one single-threaded job per core (Snakemake's sampled ``cpu_time`` misses part of a
    ``script:`` job's CPU time, so it is not used)."""
    import pandas as pd

    from sparselen.report.ledger import read_benchmarks

    bench = read_benchmarks(benchmarks)
    bench["bench"] = [f"{s}/{p}" + (f"/{j}" if j else "") for s, p, j in zip(bench["slice"], bench["step"], bench["job"])]
    measured = bench.groupby("bench")["wall_s"].mean()
    out = df[["slice", "rule", "job", "bench", "seconds"]].rename(columns={"seconds": "predicted_s"})
    out = out.merge(measured.rename("measured_s"), left_on="bench", right_index=True, how="inner")
    out["ratio"] = out["predicted_s"] / out["measured_s"]
    return out


def comparison_tables(cmp) -> tuple:
    by_slice = cmp.groupby("slice", sort=False)[["predicted_s", "measured_s"]].sum()
    by_slice.loc["all"] = by_slice.sum()
    by_slice["ratio"] = by_slice["predicted_s"] / by_slice["measured_s"]
    by_rule = cmp.groupby(["slice", "rule"], sort=False).agg(jobs=("bench", "size"), predicted_s=("predicted_s", "sum"),
                                                             measured_s=("measured_s", "sum")).reset_index()
    by_rule["ratio"] = by_rule["predicted_s"] / by_rule["measured_s"]
    return by_slice.reset_index(), by_rule

"""The GPU check (``sparselen gpu-check``): the few measurements a campaign's estimate rests on,
taken on one GPU within a fixed budget of seconds (docs/gpu.md, "The GPU check").

Where the pilot (``sparselen.estimate.pilot``) trains every shape of a config for hundreds of
steps, the check times one job of each block of work the campaign's GPU-hours go to, largest
first, so that a run stopped early has measured what matters most: the job priced highest of
each block's rules at the config (``Block``). Which jobs those are, and their hours, is the
check's plan (``make_plan``: Snakemake's DAG priced by the estimate), which can be made
beforehand where the workflow's packages are, and run on a GPU machine that has only torch.

Every block runs in a fresh process of its own, as a job does (``processes``), so a stack's
batch worker is forked before any tensor is on the GPU, as in its job; a block gets its job's
limits (one CPU, a soft open-file limit) without changing the others'; its peak memory is its
own; and a block that overruns its share of the budget is stopped without stopping the check.
Each row is appended to ``gpu_check.csv`` as it comes (``gpu_blocks`` says what a row holds),
and the device profile fitted to the rows so far is written beside it after each block
(``profile.json``), which ``sparselen estimate --gpu FILE`` reads.
"""

from __future__ import annotations

import csv
import logging
import math
import os
import signal
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Block:
    """One measurement of the check: ``rules``, the per-run rules whose jobs' hours it stands
    for (the first is the rule of the job it runs); ``weight``, its share of the budget against
    the others'; ``gpu``, whether its jobs' hours are GPU-hours; ``one_cpu``, run on one CPU
    (its batch worker shares it, as in a job given one core); ``open_files``, a soft limit on
    open files its process runs under (0: the check's own)."""

    name: str
    rules: tuple[str, ...]
    weight: float
    gpu: bool = True
    one_cpu: bool = False
    open_files: int = 0


# A block's weight: its share of the budget. The compiled training blocks pay compilation out of
# theirs, the OLMo step is the longest step, the SFA measures two thread counts.
BLOCKS = (
    Block("ppc_stack", ("ppc_train",), 1.0),
    Block("language_train", ("language_train",), 1.0),
    Block("parity_stack", ("parity_train",), 0.8, one_cpu=True),
    Block("language_analysis", ("language_analyze", "language_transfer"), 0.8),
    # the theory's GPT stacks (85 runs at paper.yaml) held more descriptors than a common soft limit
    Block("theory_stack", ("theory_run_gpt",), 0.6, open_files=1024),
    Block("sfa", ("theory_run_sfa",), 0.6, gpu=False),
)
NAMES = tuple(b.name for b in BLOCKS)

COLUMNS = ("block", "what", "hours", "device", "runs", "threads", "cpus", "fd_limit", "start_s", "block_s", "steps",
           "compile_s", "step_ms", "predicted_ms", "tokens_per_s", "mfu", "peak_gib", "predicted_gib", "open_fds",
           "cpu_pct", "batch_ms", "kind", "n_layer", "d_model", "passes", "flops", "padded_flops", "device_memory",
           "cut")
CSV_NAME, PROFILE_NAME, PLAN_NAME = "gpu_check.csv", "profile.json", "plan.pkl"
RESERVE_S = 3.0  # kept from the budget for the profile and the table at the end
MIN_BLOCK_S = 5.0  # a block left less than this is not started


def planned(config: dict, dag_jobs, names=NAMES) -> list[tuple[Block, object, float]]:
    """(block, the job it measures, its jobs' hours) of each block of ``names`` with jobs in
    the DAG, the GPU blocks by their GPU-hours, most first, then the CPU's. Hours are the
    estimate's (``plan``) on the H100's datasheet profile at the assumed utilization (this
    process does not open the GPU, so it prices with the datasheet the estimate quotes; the
    order hardly depends on which), the CPU blocks' on the CPU profile. A block measures its
    rule's job priced highest: the stack of the most runs, the longest sequences."""
    from sparselen.estimate.plan import plan
    from sparselen.estimate.profiles import CPU_DEFAULT, gpu_profile, seconds
    from sparselen.interface.job import per_run_rule

    gpu = gpu_profile("h100", compile=bool(config.get("compile")))
    out = []
    for block in (b for b in BLOCKS if b.name in names):
        jobs = plan(config, [d for d in dag_jobs if per_run_rule(d.rule) in block.rules])
        if not jobs:
            log.info("gpu-check: no %s jobs in this config; block %s left out", block.rules[0], block.name)
            continue
        prof = gpu if block.gpu else CPU_DEFAULT
        cost = {id(j): seconds(j.work, prof)["seconds"] for j in jobs}
        own = [j for j in jobs if per_run_rule(j.dag.rule) == block.rules[0]]
        out.append((block, max(own, key=lambda j: cost[id(j)]), sum(cost.values()) / 3600))
    return sorted(out, key=lambda p: (not p[0].gpu, -p[2]))


# -- a block's process


def run_block(block: Block, job, config: dict, tokens: str, steps: int, deadline: float, kill_at: float,
              add) -> None:
    """Run a block in its process (``gpu_blocks.run``) until it ends, or until ``kill_at``, when
    it is stopped with its batch worker; ``add`` each of its rows as it comes, and a row saying
    why if it stopped short. A row's ``start_s``: the process's start-up before its
    measurement; ``block_s``: the block's seconds until the row came."""
    from sparselen.estimate import gpu_blocks

    ctx = processes()
    receive, send = ctx.Pipe(duplex=False)
    here = {"environ": dict(os.environ), "cwd": os.getcwd(), "kill_at": kill_at}
    process = ctx.Process(target=gpu_blocks.run, args=(block, job, config, tokens, steps, deadline, send, here))
    started = time.monotonic()
    process.start()
    send.close()
    phase, problem, start_s = "starting its process", "", math.nan
    while True:
        left = kill_at - time.monotonic()
        if left <= 0:
            problem = f"stopped at its budget of {deadline - started:.0f} s"
            stop(process)
            break
        if receive.poll(min(left, 1.0)):
            try:
                kind, value = receive.recv()
            except EOFError:
                break
            if kind == "row":
                add({"start_s": start_s, "block_s": time.monotonic() - started, **value})
            elif kind == "ready":
                start_s = time.monotonic() - started
            elif kind == "phase":
                phase = value
            else:
                problem = f"failed: {value}"
        elif not process.is_alive():
            break
    receive.close()
    process.join(10)
    if process.exitcode and not problem:
        problem = f"its process ended with exit code {process.exitcode}"
    if problem:
        add({"what": phase, "cut": problem})


# What the block processes' parent imports once: each block's process is forked from it, with
# torch and the slices imported and no thread yet run.
PRELOAD = ["torch._dynamo", "sparselen.estimate.gpu_blocks", "sparselen.estimate.plan", "sparselen.training.stacked",
           "sparselen.parity.jobs", "sparselen.ppc.jobs", "sparselen.language.jobs", "sparselen.theory.jobs",
           "sparselen.language.dependency", "sparselen.theory.sfa"]


def processes():
    """Block processes are forked from a fresh server process (multiprocessing's forkserver):
    as cheap as a fork, as clean as a new process. Forked from this one, a block that runs
    several threads deadlocks in OpenMP once this process's own threads have run; a fresh
    interpreter per block pays torch's import each time. A stack's batch worker is then forked
    before any tensor is on the GPU, as in its job. (As with any multiprocessing start method
    but fork, a script that runs the check guards its entry with ``if __name__ == "__main__"``.)"""
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def stop(process) -> None:
    """End a block's process and its batch worker (its process group)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


# -- the rows, and the profile fitted to them


class Rows:
    """``gpu_check.csv`` under ``directory``: written anew, each row flushed to disk as it
    comes, so that a check stopped at any point keeps what it measured."""

    def __init__(self, directory: Path):
        directory.mkdir(parents=True, exist_ok=True)
        self.path, self.rows = directory / CSV_NAME, []
        with open(self.path, "w", newline="") as f:
            csv.DictWriter(f, COLUMNS).writeheader()

    def add(self, row: dict) -> None:
        self.rows.append(row)
        with open(self.path, "a", newline="") as f:
            csv.DictWriter(f, COLUMNS, extrasaction="ignore", restval="").writerow(row)
            f.flush()
            os.fsync(f.fileno())


def fitted_profile(rows: list[dict], compile: bool):
    """A device profile fitted to the check's rows (``calibrate.fit``), or None before any
    training row: the FLOP rate and per-step overheads from every training step measured, a
    stack's included (its FLOPs all its runs' with their padding), leaving out a stack whose
    step its host's batches bound (``runs x batch_ms`` at least its step, which ``batch_s``
    models); per-pass overheads from the analysis' passes at that rate; ``batch_s`` from the
    stacks' batches drawn on the host; ``compile_s`` from the compiled blocks' warm-up. What it
    does not measure (job start-up, non-model work) stays the datasheet profile's."""
    from sparselen.estimate.calibrate import fit
    from sparselen.estimate.profiles import CPU_DEFAULT, gpu_profile
    from sparselen.runtime.datasheets import datasheet_gpu

    done = [r for r in rows if finite(r.get("step_ms"))]
    train = [r for r in done if r.get("kind") == "train"
             and not (finite(r.get("batch_ms")) and r["runs"] * r["batch_ms"] >= r["step_ms"])]
    if not train:
        return None
    name = train[0]["device"]
    cuda = name != "cpu"
    base = gpu_profile(datasheet_gpu(name) or "h100", compile=compile) if cuda else CPU_DEFAULT
    peak, d0, step_s, step_layer_s = fit(fit_rows(train), d0=0.0 if cuda else None)
    if peak > base.peak_flops:  # steps too small to show the FLOP rate: the datasheet's, overheads fitted
        peak, d0 = base.peak_flops * base.utilization, base.width_half
        _, _, step_s, step_layer_s = fit(fit_rows(train), peak=peak, d0=d0)
    forward = [r for r in done if r.get("kind") == "forward"]
    call_s, call_layer_s = fit(fit_rows(forward), peak=peak, d0=d0)[2:] if forward else (base.call_s, base.call_layer_s)
    batch = [r["batch_ms"] / 1e3 for r in done if finite(r.get("batch_ms"))]
    compiled = [r["compile_s"] for r in train if finite(r.get("compile_s"))]
    measured = ", ".join(f"{r['block']}: {r['step_ms']:.3g} ms" for r in done if r.get("kind") != "cpu")
    # memory_bandwidth 0: the measured steps hold their optimizer traffic, which the fit folds
    # into its rate and overheads
    return replace(base, name=f"{name} (gpu-check)", peak_flops=peak, utilization=1.0, width_half=d0, step_s=step_s,
                   step_layer_s=step_layer_s, memory_bandwidth=0.0, call_s=call_s, call_layer_s=call_layer_s,
                   batch_s=statistics.median(batch) if batch else base.batch_s,
                   compile_s=statistics.fmean(compiled) if compile and compiled else base.compile_s,
                   memory_bytes=float(train[0].get("device_memory") or 0) if cuda else base.memory_bytes,
                   source=f"sparselen gpu-check: {measured}; job start-up and non-model work from {base.name}")


def fit_rows(rows: list[dict]) -> list[tuple]:
    """``calibrate.fit``'s rows: (layers x passes, d_model, FLOPs, seconds) of one pass or step."""
    return [(r["n_layer"] * (r["passes"] if r["kind"] == "train" else 1), r["d_model"],
             r["padded_flops"] / (1 if r["kind"] == "train" else r["passes"]),
             r["step_ms"] / 1e3 / (1 if r["kind"] == "train" else r["passes"])) for r in rows]


def finite(x) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def shown(row: dict) -> str:
    """One line of a row for the terminal."""
    def num(key, fmt=".3g"):
        return format(row[key], fmt) if finite(row.get(key)) else "-"

    text = (f"{row['block']:<18} {num('step_ms')} ms a step (estimate {num('predicted_ms')}), "
            f"{num('peak_gib')} GiB (model {num('predicted_gib')}), compile {num('compile_s')} s, "
            f"{num('open_fds', '.0f')} files, CPU {num('cpu_pct', '.0f')}%: {row.get('what', '')}")
    return text + (f" [{row['cut']}]" if row.get("cut") else "")


# -- the command


def gpu_check(configfiles, out: str = "results/gpu_check", budget: float = 480.0, steps: int = 20,
              names=NAMES, plan_file: str | None = None, plan_only: bool = False, print_=print) -> dict:
    """Run the check of ``configfiles`` within ``budget`` seconds (its planning included), each
    block up to ``steps`` timed steps; write ``out``/gpu_check.csv and ``out``/profile.json.
    Its plan (``planned``: Snakemake's DAG and the estimate) is written to ``out``/plan.pkl
    first (alone with ``plan_only``); ``plan_file``: run that plan instead of making one, on a
    machine without the workflow's packages (Snakemake, jsonschema). Returns the rows and the
    profile."""
    start = time.monotonic()
    directory = Path(out)
    plan = load_plan(plan_file) if plan_file else make_plan(configfiles, directory / PLAN_NAME)
    order = [p for p in plan["order"] if p[0].name in names]
    print_(f"gpu-check: {len(order)} blocks, planned in {plan['seconds']:.0f} s: "
           + ", ".join(f"{b.name} ({h:.3g} {'GPU' if b.gpu else 'CPU'}-h)" for b, _, h in order))
    if plan_only:
        print_(f"wrote {directory / PLAN_NAME}; run it with `sparselen gpu-check --plan {directory / PLAN_NAME}`")
        return {"rows": [], "profile": None, "plan": plan}
    rows, prof = run_blocks(plan["config"], order, directory, start + budget, steps, print_)
    summary(rows, prof, directory, plan["configfiles"], time.monotonic() - start, print_)
    return {"rows": rows.rows, "profile": prof, "plan": plan}


def make_plan(configfiles, path: Path) -> dict:
    """The check's plan of ``configfiles``: the validated config, the configs' names, the blocks
    in order with their jobs and hours (``planned``), written to ``path`` (a pickle: its jobs
    are the estimate's objects)."""
    import pickle

    from sparselen.estimate.dag import workflow_jobs
    from sparselen.interface.config import load
    from sparselen.runtime import io

    start = time.monotonic()
    config = load(configfiles)
    plan = {"configfiles": [str(f) for f in configfiles], "config": config,
            "order": planned(config, workflow_jobs(configfiles))}
    plan["seconds"] = time.monotonic() - start
    with io.atomic_path(path) as tmp:
        tmp.write_bytes(pickle.dumps(plan))
    return plan


def load_plan(path) -> dict:
    """A plan ``make_plan`` wrote (a pickle: read only a file of your own)."""
    import pickle

    return pickle.loads(Path(path).read_bytes())


def run_blocks(config: dict, order, directory: Path, deadline: float, steps: int, print_):
    """Run the blocks of ``order`` in turn before ``deadline``, each given its weight's share of
    what is left (a block done early leaves its time to the next), its rows to ``directory``'s
    CSV as they come and the profile refitted after each; returns the rows and the profile."""
    table, prof = Rows(directory), None
    with tempfile.TemporaryDirectory() as tmp:
        from sparselen.estimate.pilot import language_tokens
        from sparselen.runtime import io

        tokens = language_tokens(config, Path(tmp))[0] if "language" in config else ""
        for i, (block, job, hours) in enumerate(order):

            def add(row, block=block, hours=hours):
                row = {"block": block.name, "hours": hours, **row}
                table.add(row)
                print_(shown(row))

            left = deadline - RESERVE_S - time.monotonic()
            share = left * block.weight / sum(b.weight for b, _, _ in order[i:])
            if share < MIN_BLOCK_S:
                add({"cut": f"not run: {max(left, 0):.0f} s of the budget left"})
            else:
                ends = time.monotonic() + share
                run_block(block, job, config, tokens, steps, ends, min(ends + grace(share), deadline - RESERVE_S / 2),
                          add)
            prof = fitted_profile(table.rows, bool(config.get("compile"))) or prof
            if prof is not None:
                io.write_text(directory / PROFILE_NAME, prof.to_json() + "\n")
    return table, prof


def grace(share: float) -> float:
    """How long past its deadline a block may take to finish the step it is in and report."""
    return 3.0 + 0.1 * share


def summary(table: Rows, prof, directory: Path, configfiles, seconds: float, print_) -> None:
    """The rows as a table, and where the profile is and how the estimate reads it."""
    import pandas as pd

    frame = pd.DataFrame(table.rows, columns=list(COLUMNS))
    keep = ["block", "what", "runs", "compile_s", "step_ms", "predicted_ms", "mfu", "peak_gib", "predicted_gib",
            "open_fds", "cpu_pct", "cut"]
    print_(frame[keep].to_markdown(index=False, floatfmt=".3g"))
    print_(f"gpu-check took {seconds:.0f} s; rows in {table.path}")
    if prof is None:
        print_("no training step was measured: no profile written")
        return
    files = " ".join(map(str, configfiles)) or "config.yaml"
    print_(f"wrote {directory / PROFILE_NAME}: {prof.name}, {prof.peak_flops / 1e12:.3g} TFLOP/s fitted, "
           f"{prof.step_s * 1e3:.3g} ms + {prof.step_layer_s * 1e6:.3g} us per layer and step; use it with "
           f"`sparselen estimate --configfile {files} --gpu {directory / PROFILE_NAME}`")

"""The campaign's wall clock as the DAG orders it: the estimate's jobs as ``schedule`` tasks
(one per SLURM submission on a cluster, one per job for a local run, where Snakemake ignores
groups), their critical chain and their wall clock on a number of GPUs or cores.
"""

from __future__ import annotations

from sparselen.estimate.schedule import Task, critical_chain, wall_clock

PACKED_GROUP = "packed_model"  # the group of model jobs that share GPUs (workflow/rules/common.smk)
# How many jobs of a level of one SLURM submission run at once. The SLURM executor plugin starts
# a group job's members one after another (its jobstep runs the group with `--jobs 1`;
# tests/workflow/test_slurm.py shows it for packed model groups and fails when they run side by
# side), so every submission takes the sum of its jobs' times: a packed one its model groups',
# the SFA runs' group its runs', the data group its jobs'. Locally (the local-gpus profile)
# packed groups run side by side, JOBS_PER_GPU at a time.
SLURM_GROUP_AT_ONCE = 1


def submission_seconds(g, at_once: int | None = SLURM_GROUP_AT_ONCE, shared_gpu: bool = False) -> tuple[float, float]:
    """(wall seconds, training seconds) of one submission's jobs ``g``: its levels in turn, each
    level's jobs, longest first, in layers of ``at_once`` (None: all of them) one layer after
    another; a layer takes its longest job. On a ``shared_gpu`` (a packed submission) its jobs
    share the GPU's arithmetic (each has its own CPU thread for the rest): a layer takes the
    longer of its longest job and the sum of their GPU-busy time, and their training stretches
    by the same factor."""
    need = train = 0.0
    for _, level in g.groupby("level"):
        level = level.sort_values("seconds", ascending=False)
        step = at_once or len(level)
        for i in range(0, len(level), step):
            layer = level.iloc[i:i + step]
            longest = layer["seconds"].max()
            wall = max(longest, layer["busy_seconds"].sum()) if shared_gpu else longest
            need, train = need + wall, train + layer["train_seconds"].max() * wall / max(longest, 1e-9)
    return need, train


def job_tasks(df) -> list[Task]:
    """One task per job, holding its threads (a local run: every job on this machine's cores)."""
    names = {r.jobid: f"{r.rule}:{r.job}" if r.job else r.rule for r in df.itertuples()}
    return [Task(names[r.jobid], r.seconds / 3600, tuple(names[d] for d in r.deps if d in names),
                 cpus=int(r.threads)) for r in df.itertuples()]


def submission_tasks(df) -> list[Task]:
    """One task per SLURM submission: its jobs' wall time as ``submission_seconds`` has
    it (as the executor plugin runs them, one at a time), the GPUs it holds (one for packed
    model groups), waiting on the submissions whose jobs its jobs read; a CPU submission holds
    no GPU and runs on the cluster's CPU nodes."""
    owner = dict(zip(df["jobid"], df["submission"]))
    tasks = []
    for sub, g in df.groupby("submission", sort=False):
        packed = bool((g["group"] == PACKED_GROUP).any())
        need, _ = submission_seconds(g, shared_gpu=packed)
        on_gpu = g["device"] == "gpu"
        gpus = 1 if packed and on_gpu.any() else int(g.loc[on_gpu, "devices"].max()) if on_gpu.any() else 0
        deps = sorted({owner[d] for ds in g["deps"] for d in ds if d in owner} - {sub})
        tasks.append(Task(sub, need / 3600, tuple(deps), gpus=gpus, cpus=0))
    return tasks


def rules_of(df, task: Task, local: bool) -> str:
    """The rules a task runs (a submission's, with their counts)."""
    if local:
        return task.name.partition(":")[0]
    g = df[df["submission"] == task.name]
    return "+".join(f"{r} x{n}" if n > 1 else r for r, n in g["rule"].value_counts(sort=False).items())


def campaign_clock(df, local: bool, gpus_available=(8,), cores: int | None = None) -> dict:
    """The critical chain and the wall clock of the estimate's jobs ``df`` (``tables.estimate``),
    with the lines that print them: a local run's jobs on ``cores`` (default: this machine's),
    a cluster's submissions on each of ``gpus_available`` GPUs, its CPU submissions on CPU nodes
    as soon as they are ready. Returns ``chain_h``, ``chain`` (tasks), ``wall_h`` ({GPUs or
    cores: hours}), ``lines``."""
    import os

    from sparselen.estimate.display import hm

    tasks = job_tasks(df) if local else submission_tasks(df)
    chain_h, chain = critical_chain(tasks)
    lines = [f"\nCritical chain, {hm(chain_h)} (each waits on the one before; no number of "
             f"{'cores' if local else 'GPUs'} finishes sooner):"]
    lines += [f"  {hm(t.hours):>7}  {t.name}" + ("" if local else f" ({rules_of(df, t, local)})") for t in chain]
    if local:
        n = cores or os.cpu_count() or 1
        wall = {n: wall_clock(tasks, gpus=None, cpus=n)}
        busy = sum(t.hours * t.cpus for t in tasks) / n
        lines.append(f"Wall clock on this machine's {n} core{'s' * (n != 1)} (make run: each job on its threads' "
                     f"cores once its inputs exist, the longest remaining chain first): {hm(wall[n])} (at least "
                     f"{hm(chain_h)}, the critical chain, and {hm(busy)}, the core-hours over {n})")
    else:
        wall = {n: wall_clock(tasks, gpus=n, cpus=None) for n in gpus_available}
        gpu_h = sum(t.hours * t.gpus for t in tasks)
        lines.append("Wall clock (each submission once its inputs exist, the longest remaining chain first; CPU "
                     "submissions on CPU nodes as they become ready): " + "; ".join(
                         f"{n} GPU{'s' * (n != 1)}: {hm(h)} (at least {hm(max(chain_h, gpu_h / n))})"
                         for n, h in wall.items()))
    return {"chain_h": chain_h, "chain": chain, "wall_h": wall, "lines": lines}

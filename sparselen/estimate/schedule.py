"""How long a campaign takes when its jobs wait for their inputs: a list scheduler over the
DAG's jobs (or SLURM submissions) with their predicted hours, and the DAG's critical chain.

A sum of hours over the devices is a lower bound that dependencies can only lengthen: a
language model's analysis cannot start before its training, nor that before the corpus is
tokenized. The scheduler starts, whenever a device frees up, the ready task with the longest
chain still behind it (what the workflow's priorities ask Snakemake to do), so its wall clock
is what a well-ordered run achieves, and never shorter than the critical chain.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    """One unit the scheduler places: a job, or a SLURM submission of several."""

    name: str
    hours: float
    deps: tuple[str, ...] = ()
    gpus: int = 0  # GPUs it holds (0: none)
    cpus: int = 1  # cores it holds


def chain_hours(tasks: list[Task]) -> dict[str, float]:
    """Each task's hours plus the longest chain of tasks that wait on it (its "bottom level")."""
    by_name, after = {t.name: t for t in tasks}, _after(tasks)
    tail: dict[str, float] = {}
    for name in reversed(_topological(tasks)):
        tail[name] = by_name[name].hours + max((tail[n] for n in after[name]), default=0.0)
    return tail


def critical_chain(tasks: list[Task]) -> tuple[float, list[Task]]:
    """The longest chain of dependent tasks (hours, its tasks first to last): no number of
    devices finishes the campaign sooner."""
    if not tasks:
        return 0.0, []
    by_name = {t.name: t for t in tasks}
    tail = chain_hours(tasks)
    waiting = {t.name for t in tasks for d in t.deps if d in by_name}
    after = _after(tasks)
    start = max((n for n in tail if n not in waiting) or tail, key=lambda n: tail[n])
    chain = [by_name[start]]
    while after[chain[-1].name]:
        chain.append(by_name[max(after[chain[-1].name], key=lambda n: tail[n])])
    return tail[start], chain


def wall_clock(tasks: list[Task], gpus: int | None = None, cpus: int | None = None,
               rank: dict[str, float] | None = None) -> float:
    """Hours until the last task ends on ``gpus`` GPUs and ``cpus`` cores (None: as many as the
    ready tasks ask for), each task starting once its dependencies have ended and its devices
    are free, the ready task with the longest chain behind it first (a task that fits the free
    devices goes ahead of a longer one that does not). A task wanting more devices than there
    are runs on all of them, proportionally longer. ``rank`` (higher first; ties in the order
    tasks became ready) replaces the chains: e.g. Snakemake's priorities, to see what they
    achieve."""
    by_name = {t.name: t for t in tasks}
    tail = rank if rank is not None else chain_hours(tasks)
    waits = {t.name: {d for d in t.deps if d in by_name} for t in tasks}
    after = _after(tasks)
    free = {"gpus": gpus, "cpus": cpus}
    ready = [n for n, w in waits.items() if not w]
    running: list[tuple[float, str]] = []
    now, end = 0.0, 0.0
    while ready or running:
        ready.sort(key=lambda n: -tail[n])
        for name in list(ready):
            take = _take(by_name[name], gpus, cpus)
            if all(free[k] is None or free[k] >= v for k, v in take.items()):
                for k, v in take.items():
                    if free[k] is not None:
                        free[k] -= v
                ready.remove(name)
                hours = by_name[name].hours * _stretch(by_name[name], gpus, cpus)
                heapq.heappush(running, (now + hours, name))
        if not running:
            raise ValueError(f"tasks that can never start: {sorted(ready)}")
        now, name = heapq.heappop(running)
        end = max(end, now)
        for k, v in _take(by_name[name], gpus, cpus).items():
            if free[k] is not None:
                free[k] += v
        for n in after[name]:
            waits[n].discard(name)
            if not waits[n]:
                ready.append(n)
    return end


def _take(task: Task, gpus: int | None, cpus: int | None) -> dict[str, int]:
    return {"gpus": min(task.gpus, gpus) if gpus is not None else task.gpus,
            "cpus": min(task.cpus, cpus) if cpus is not None else task.cpus}


def _stretch(task: Task, gpus: int | None, cpus: int | None) -> float:
    """How much longer a task runs on fewer devices than it asks for."""
    factor = 1.0
    for want, have in ((task.gpus, gpus), (task.cpus, cpus)):
        if have is not None and want > have > 0:
            factor = max(factor, want / have)
    return factor


def _topological(tasks: list[Task]) -> list[str]:
    names = {t.name for t in tasks}
    waits = {t.name: {d for d in t.deps if d in names} for t in tasks}
    order, ready = [], [n for n, w in waits.items() if not w]
    after = _after(tasks)
    while ready:
        name = ready.pop()
        order.append(name)
        for n in after[name]:
            waits[n].discard(name)
            if not waits[n]:
                ready.append(n)
    if len(order) != len(tasks):
        raise ValueError("the tasks' dependencies form a cycle")
    return order


def _after(tasks: list[Task]) -> dict[str, list[str]]:
    """The tasks that wait on each task."""
    after = {t.name: [] for t in tasks}
    for t in tasks:
        for d in set(t.deps):
            if d in after:
                after[d].append(t.name)
    return after

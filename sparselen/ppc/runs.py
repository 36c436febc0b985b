"""What one run of a PPC task is made of: its model (the section's, the task's overrides, the
variant's), its seeds and the task settings it depends on."""

from __future__ import annotations

from sparselen.interface import variants


def task_model(model: dict, task_cfg: dict) -> dict:
    """``ppc.model`` with the task's own ``model`` overrides (e.g. fewer rotary dims) on top."""
    return {**model, **task_cfg.get("model", {})}


def task_seeds(p: dict, task: str) -> list[int]:
    """A task's training seeds: its own ``seeds``, else ``ppc.seeds`` (before seed_offset)."""
    return p[task].get("seeds", p["seeds"])


def task_schemes(p: dict, task: str) -> list[str]:
    """A task's runs: its own ``schemes``, else ``ppc.schemes``."""
    return p[task].get("schemes", p.get("schemes", []))


def all_schemes(p: dict) -> list[str]:
    """Every run name some task of the section runs, in order of first appearance."""
    return list(dict.fromkeys(name for task in p["tasks"] for name in task_schemes(p, task)))


def run_task_config(p: dict, task: str) -> dict:
    """A task's section as one run sees it: without its seed and run lists, which say which
    runs exist, not what one is (so adding a seed or a run retrains no other), and with the
    task's token format where it is not the first (``sparselen.ppc.tasks``)."""
    from sparselen.ppc.tasks import task_module

    fmt = getattr(task_module(task), "FORMAT", 1)
    return {k: v for k, v in p[task].items() if k not in ("seeds", "schemes")} | ({"format": fmt} if fmt > 1 else {})


def run_model(p: dict, task_cfg: dict, name: str) -> dict:
    """The model of run ``name`` on a task: ``ppc.model``, the task's overrides, then the
    variant's (e.g. RoPE at another base)."""
    return variants.run_model(task_model(p["model"], task_cfg), p, name)

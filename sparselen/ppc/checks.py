"""Cross-key checks of the ``ppc`` section (the schema has checked each key alone)."""

from __future__ import annotations

from sparselen.config import model_errors
from sparselen.ppc.tasks import TASKS, sampler_params


def task_model(model: dict, task_cfg: dict) -> dict:
    """``ppc.model`` with the task's own ``model`` overrides (e.g. fewer rotary dims) on top."""
    return {**model, **task_cfg.get("model", {})}


def config_errors(p: dict) -> list[str]:
    out = []
    for task in p["tasks"]:
        t = p.get(task)
        if t is None:
            out.append(f"ppc.tasks lists {task!r} but the section ppc.{task} is missing")
            continue
        where = f"ppc.{task}.model" if "model" in t else "ppc.model"
        for msg in model_errors(where, task_model(p["model"], t)):
            out += [] if msg in out else [msg]  # a bad ppc.model is named once, not per task
        lo, hi = t["train_sizes"]
        if lo > hi:
            out.append(f"ppc.{task}.train_sizes = {[lo, hi]}: the first (smallest) size exceeds the second")
        largest = max(hi, max(t["eval_sizes"]))
        if task == "variable_assignment":
            if largest > t["num_variables"]:
                out.append(f"ppc.variable_assignment.num_variables = {t['num_variables']}: programs of "
                           f"{largest} lines need at least {largest} distinct variables")
            if t["value_digits"][0] > t["value_digits"][1]:
                out.append(f"ppc.variable_assignment.value_digits = {t['value_digits']}: the first (fewest digits) "
                           f"exceeds the second")
                continue
        top = TASKS[task].max_coupled_id(largest, **sampler_params(t))
        if top > p["max_position_id"]:
            out.append(f"ppc.max_position_id = {p['max_position_id']}: ppc.{task} reaches coupled id {top} "
                       f"(size {largest}); raise it to at least {top}")
    return out

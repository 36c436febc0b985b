"""Cross-key checks of the ``ppc`` section (the schema has checked each key alone)."""

from __future__ import annotations

from sparselen.interface import variants
from sparselen.interface.config import model_errors
from sparselen.nn.model import POSITION_SCHEMES
from sparselen.ppc.runs import all_schemes, task_model
from sparselen.ppc.tasks import sampler_params, task_kind, task_module
from sparselen.training.train import micro_batch_errors

# Per task: the key that must cover the largest size (and why), and a [fewest, most] range key.
SIZED_KEYS = {
    "variable_assignment": ("num_variables", "programs of {n} lines need at least {n} distinct variables",
                            "value_digits", "fewest digits"),
    "pointer_copy": ("num_keys", "prompts of {n} lines need at least {n} distinct keys", "line_length",
                     "fewest symbols"),
}


def config_errors(p: dict) -> list[str]:
    names = all_schemes({**p, "tasks": [t for t in p["tasks"] if t in p]})
    out = variants.variant_errors("ppc", p, names, POSITION_SCHEMES, p["model"])
    out += micro_batch_errors("ppc.micro_batch", p["micro_batch"], p["train"]["batch_size"], "ppc.train.batch_size")
    for name, v in p.get("variants", {}).items():
        target = v.get("model", {}).get("position_target", "absolute")
        if target != "absolute" and v["scheme"] != "ppc":
            out.append(f"ppc.variants.{name}.model.position_target = {target!r}: only a ppc run has a position "
                       f"head (its scheme is {v['scheme']!r})")
    if any(variants.run_scheme(p, n) == "pose" for n in names) and "pose" not in p:
        out.append("ppc.schemes runs the pose scheme but the section ppc.pose is missing")
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
        smallest, largest = min(lo, min(t["eval_sizes"])), max(hi, max(t["eval_sizes"]))
        kind = task_kind(task)
        if kind in SIZED_KEYS:
            count, need, span, fewest = SIZED_KEYS[kind]
            if largest > t[count]:
                out.append(f"ppc.{task}.{count} = {t[count]}: {need.format(n=largest)}")
            if t[span][0] > t[span][1]:
                out.append(f"ppc.{task}.{span} = {t[span]}: the first ({fewest}) exceeds the second")
                continue
        if kind == "parity_scratchpad" and not t["dense"]:
            if t["k"][0] > t["k"][1]:
                out.append(f"ppc.{task}.k = {t['k']}: the first (fewest marked bits) exceeds the second")
                continue
            if t["k"][1] > smallest:
                out.append(f"ppc.{task}.k = {t['k']}: samples of {smallest} pairs (the smallest size) cannot hold "
                           f"{t['k'][1]} marked bits")
        top = task_module(task).max_coupled_id(largest, **sampler_params(t))
        if top > p["max_position_id"]:
            out.append(f"ppc.max_position_id = {p['max_position_id']}: ppc.{task} reaches coupled id {top} "
                       f"(size {largest}); raise it to at least {top}")
    return out

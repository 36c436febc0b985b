"""The PPC tasks. Each module defines VOCAB, SIZE (what a size counts, for figure labels),
IDS_DEPEND_ON_INPUT (whether plain coupling needs an oracle for the response's ids),
``sample(sizes, g, **params) -> Samples``, ``max_coupled_id(size, **params)`` and
``control(**params) -> str`` (why the task, with these settings, needs no coupling and is a
control of the claims; "" when it needs coupling); a new task is one module, its schema block
and a line here."""

from sparselen.ppc.tasks import addition, copy_repeat, pointer_copy, variable_assignment

TASKS = {"copy_repeat": copy_repeat, "variable_assignment": variable_assignment, "addition": addition,
         "pointer_copy": pointer_copy}
# Keys of a task's config section that configure the run, not the sampler.
RUN_KEYS = ("train_sizes", "eval_sizes", "steps", "seeds", "model")


def sampler_params(task_cfg: dict) -> dict:
    """The sampler's keyword arguments from a task's config section (e.g. alphabet, max_depth)."""
    return {k: v for k, v in task_cfg.items() if k not in RUN_KEYS}

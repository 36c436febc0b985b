"""The PPC tasks. Each module defines VOCAB, EOS (the token that ends every response, and
nowhere else in it: where a generated response ends), SIZE (what a size counts, for figure labels),
ORIGIN ("paper": a task the paper tests PPC on; "ours": our own), ``sample(sizes, g, **params)
-> Samples``, and, of its sampler's parameters: ``ids_depend_on_input`` (whether plain coupling
needs an oracle for the response's ids), ``control`` (why the task, so configured, needs no
coupling and is a control of the claims; "" when it needs coupling), ``max_coupled_id(size)``
``max_first_lookup(size)`` (the longest id distance from the last prompt token to the
first response id) and ``chance_exact_match(size)`` (the exact match of a model that keeps the
format and ids and guesses every token it must look up: the level a run that did not
generalize sits at). A task the paper tests PPC on (ORIGIN "paper") also defines ``form(**params)``,
the form run in words. A task whose coupled lookups stay within units of the prompt (lines, pairs)
also defines ``unit_starts(samples)``, where its ids may be skipped (``ppc.<task>.id_skips``).
A new task is one module, its schema block and a line here.

A config section ``ppc.<name>`` runs the task ``name``, or the task whose name ``name`` starts
with before a ``_``: a second form of one task (``variable_assignment_digits``,
``parity_scratchpad_dense``) is its own section, with its own settings, runs and table rows.

A task whose token format is not its first also defines FORMAT (an integer above 1): it is part
of its runs' identity (``sparselen.ppc.runs.run_task_config``), so a run trained on another
format is trained again, while the runs of the other tasks keep theirs."""

from sparselen.ppc.tasks import addition, copy_repeat, parity_scratchpad, pointer_copy, variable_assignment

TASKS = {"copy_repeat": copy_repeat, "variable_assignment": variable_assignment, "addition": addition,
         "pointer_copy": pointer_copy, "parity_scratchpad": parity_scratchpad}
# Keys of a task's config section that configure the run, not the sampler.
RUN_KEYS = ("train_sizes", "eval_sizes", "steps", "seeds", "schemes", "model", "id_skips", "format")


def task_kind(name: str) -> str:
    """The task of the config section ``name``: ``name`` itself when it is one, else the task
    ``name`` starts with before a ``_`` (the longest such)."""
    if name in TASKS:
        return name
    forms = [task for task in TASKS if name.startswith(task + "_")]
    if not forms:
        raise ValueError(f"ppc task {name!r} is neither a task {sorted(TASKS)} nor <task>_<form>")
    return max(forms, key=len)


def task_module(name: str):
    """The module of the task section ``name`` (``task_kind``)."""
    return TASKS[task_kind(name)]


def sampler_params(task_cfg: dict) -> dict:
    """The sampler's keyword arguments from a task's config section (e.g. alphabet, max_depth)."""
    return {k: v for k, v in task_cfg.items() if k not in RUN_KEYS}

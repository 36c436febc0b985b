"""The paper's theory as code (docs/theory.md): ``task`` samples k-sparse planted correlation
distributions, ``sfa`` is the sparse functional attention class, ``evaluate`` measures a
model's error at Lbar, ``report`` tables and draws it, and ``jobs`` are the steps the
workflow's ``theory_*`` rules run.

A slice, one of four independent ones. May import: ``training``, ``presentation``,
``interface``, ``nn``, ``statistics``, ``runtime``; never another slice, nor ``jobs``,
``report``, ``estimate``, ``calibration`` or ``cli``."""

# What builds this slice's trainings (their batches and models), besides the trainer: an edit
# here discards in-flight checkpoints, an edit elsewhere keeps them (sparselen/training/resumable.py).
TRAINING_CODE = ('theory/task.py', 'theory/runs.py', 'theory/jobs.py', 'theory/sfa.py')
# What the workflow's machinery knows of this slice's rules beyond their step and cost functions
# (sparselen.jobs.slices): the steps whose runs a stack job trains as one model (config
# ``theory.stack``), each with the step its runs' jobs then run alone (None: none); the steps
# whose time limit a config key of their own (under ``resources``) sets; the steps whose stack
# job evaluates its runs as one stacked model (none: an evaluation stack runs its runs' steps in turn).
STACKED = {"run_gpt": "evaluate_gpt"}
RUNTIME_KEYS = {"run_sfa": "sfa_runtime"}
STACKED_EVALUATIONS = {}


def sfa_seeds(section: dict) -> list[int]:
    """The idealized model's training seeds: ``theory.sfa_seeds`` (a count N: seeds 0 to N - 1),
    else ``theory.seeds``. The GPT runs' seeds are sized for T1, which only they decide; the
    SFA runs (T1's implementation check, T2's groups) need fewer."""
    seeds = section.get("sfa_seeds", section["seeds"])
    return list(range(seeds)) if isinstance(seeds, int) else list(seeds)

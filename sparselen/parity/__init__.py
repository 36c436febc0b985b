"""Sparse parity (docs/reconstruction.md, "Sparse parity"): task, evaluation, tables and
figure, and the steps the workflow's ``parity_*`` rules run.

A slice, one of four independent ones. May import: ``training``, ``presentation``,
``interface``, ``nn``, ``statistics``, ``runtime``; never another slice, nor ``jobs``,
``report``, ``estimate``, ``calibration`` or ``cli``."""

# What builds this slice's trainings (their batches and models), besides the trainer: an edit
# here discards in-flight checkpoints, an edit elsewhere keeps them (sparselen/training/resumable.py).
TRAINING_CODE = ('parity/task.py', 'parity/jobs.py')
# What the workflow's machinery knows of this slice's rules beyond their step and cost functions
# (sparselen.jobs.slices): the steps whose runs a stack job trains as one model (config
# ``parity.stack``), each with the step its runs' jobs then run alone (None: none); the steps
# whose time limit a config key of their own (under ``resources``) sets; the steps whose stack
# job evaluates its runs as one stacked model, each with the function of ``jobs`` that does it
# (their runs' jobs and the device; any other evaluation stack runs its runs' steps in turn).
STACKED = {"train": None}
RUNTIME_KEYS = {}
STACKED_EVALUATIONS = {"evaluate": "evaluate_stacked"}

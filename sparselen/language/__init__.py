"""Natural language (docs/reconstruction.md, "Natural language"): corpus, tokenizer, packed
token streams, losses by position, the sparse-dependency analysis (how few distant tokens
carry the benefit of a long context), tables and figures, and the steps the workflow's
``language_*`` rules run.

A slice, one of four independent ones. May import: ``training``, ``presentation``,
``interface``, ``nn``, ``statistics``, ``runtime``; never another slice, nor ``jobs``,
``report``, ``estimate``, ``calibration`` or ``cli``."""

# What builds this slice's trainings (their batches and models), besides the trainer: an edit
# here discards in-flight checkpoints, an edit elsewhere keeps them (sparselen/training/resumable.py).
TRAINING_CODE = ('language/data.py', 'language/token_files.py', 'language/jobs.py', 'interface/variants.py')
# What the workflow's machinery knows of this slice's rules beyond their step and cost functions
# (sparselen.jobs.slices): the steps whose runs a stack job trains as one model (config
# ``language.stack``), each with the step its runs' jobs then run alone (None: none); the steps
# whose time limit a config key of their own (under ``resources``) sets; the steps whose stack
# job evaluates its runs as one stacked model (none: an evaluation stack runs its runs' steps in turn).
STACKED = {}
RUNTIME_KEYS = {"tokens": "tokens_runtime", "train": "language_runtime", "analyze": "language_runtime"}
STACKED_EVALUATIONS = {}

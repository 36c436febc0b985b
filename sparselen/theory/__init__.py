"""The paper's theory as code (docs/theory.md): ``task`` samples k-sparse planted correlation
distributions, ``sfa`` is the sparse functional attention class, ``evaluate`` measures a
model's error at Lbar, ``report`` tables and draws it, and ``jobs`` are the steps the
workflow's ``theory_*`` rules run."""

# What builds this slice's trainings (their batches and models), besides the trainer: an edit
# here discards in-flight checkpoints, an edit elsewhere keeps them (sparselen/resumable.py).
TRAINING_CODE = ('theory/task.py', 'theory/runs.py', 'theory/jobs.py', 'theory/sfa.py')

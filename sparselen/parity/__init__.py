"""Sparse parity (docs/reconstruction.md, "Sparse parity"): task, evaluation, tables and
figure, and the steps the workflow's ``parity_*`` rules run."""

# What builds this slice's trainings (their batches and models), besides the trainer: an edit
# here discards in-flight checkpoints, an edit elsewhere keeps them (sparselen/resumable.py).
TRAINING_CODE = ('parity/task.py', 'parity/jobs.py')

"""Position coupling and Predictive Position Coupling (docs/reconstruction.md, "Position
coupling and PPC"): tasks, generation-based evaluation, tables and figure, and the steps the
workflow's ``ppc_*`` rules run."""

# What builds this slice's trainings (their batches and models), besides the trainer: an edit
# here discards in-flight checkpoints, an edit elsewhere keeps them (sparselen/resumable.py).
TRAINING_CODE = ('ppc/tasks', 'ppc/samples.py', 'ppc/runs.py', 'ppc/jobs.py', 'variants.py')

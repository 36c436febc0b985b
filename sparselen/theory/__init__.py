"""The paper's theory as code (docs/theory.md): ``task`` samples k-sparse planted correlation
distributions, ``sfa`` is the sparse functional attention class, ``evaluate`` measures a
model's error at Lbar, ``report`` tables and draws it, and ``jobs`` are the steps the
workflow's ``theory_*`` rules run."""

# What builds this slice's trainings (their batches and models), besides the trainer: an edit
# here discards in-flight checkpoints, an edit elsewhere keeps them (sparselen/resumable.py).
TRAINING_CODE = ('theory/task.py', 'theory/runs.py', 'theory/jobs.py', 'theory/sfa.py')


def sfa_seeds(section: dict) -> list[int]:
    """The idealized model's training seeds: ``theory.sfa_seeds`` (a count N: seeds 0 to N - 1),
    else ``theory.seeds``. The GPT runs' seeds are sized for T1, which only they decide; the
    SFA runs (T1's implementation check, T2's groups) need fewer."""
    seeds = section.get("sfa_seeds", section["seeds"])
    return list(range(seeds)) if isinstance(seeds, int) else list(seeds)

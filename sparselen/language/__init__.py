"""Natural language (docs/reconstruction.md, "Natural language"): corpus, tokenizer, packed
token streams, losses by position, the sparse-dependency analysis (how few distant tokens
carry the benefit of a long context), tables and figures, and the steps the workflow's
``language_*`` rules run."""

# What builds this slice's trainings (their batches and models), besides the trainer: an edit
# here discards in-flight checkpoints, an edit elsewhere keeps them (sparselen/resumable.py).
TRAINING_CODE = ('language/data.py', 'language/token_files.py', 'language/jobs.py', 'variants.py')

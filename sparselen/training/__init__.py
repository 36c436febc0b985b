"""The training layer: the one trainer (``train``), stacks of runs trained as one model
(``stacked``), data parallelism under torchrun (``distributed``), checkpoints that outlive their
job and the code fingerprints that guard them (``resumable``), model files (``modelfile``) and
their Hugging Face export (``hf_export``).

May import: ``interface``, ``nn``, ``statistics``, ``runtime``; never ``presentation``.
"""

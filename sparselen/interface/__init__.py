"""The interface layer: what a step receives. The job object and its runtime knobs
(``job``), a training run's identity and files derived from its job (``run``), the validated
configuration (``config``) and a slice's named runs (``variants``).

May import: ``nn``, ``statistics``, ``runtime``.
"""

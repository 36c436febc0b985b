"""The jobs layer: a rule's step found by its name and run (``dispatch``; ``run`` below is
what every rule's ``workflow/scripts/job.py`` calls), stack jobs of many runs (``stacks``), the
processes of a data-parallel launch (``worker``), a config's cross-key checks (``checks``), and
what each slice declares of its rules (``slices``).

May import: the four slices (``parity``, ``ppc``, ``theory``, ``language``) and every layer below
them; never ``report``, ``estimate``, ``calibration`` or ``cli``.
"""

from sparselen.jobs.dispatch import run

__all__ = ["run"]

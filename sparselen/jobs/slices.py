"""The slices as the workflow's machinery sees them: a rule's step found by its name, and what
each slice declares of its rules beyond their code (``TRAINING_CODE``, ``STACKED``,
``RUNTIME_KEYS`` and ``STACKED_EVALUATIONS`` in ``sparselen/<slice>/__init__.py``), read here
and nowhere else.

Rule ``<slice>_<step>`` runs ``sparselen.<slice>.jobs.<step>(job)`` and is priced by
``sparselen.<slice>.cost.<step>``: the rule's name is the registry, so a new rule needs no
entry anywhere but its slice.
"""

from __future__ import annotations

import importlib

from sparselen import language, parity, ppc, theory

PACKAGES = {package.__name__.rpartition(".")[2]: package for package in (parity, ppc, language, theory)}


def slice_of(rule: str):
    """The package of the slice whose rule ``rule`` is (``parity_train`` -> ``sparselen.parity``)."""
    name = rule.partition("_")[0]
    if name not in PACKAGES:
        raise ValueError(f"rule {rule!r} belongs to no slice {sorted(PACKAGES)}")
    return PACKAGES[name]


def slice_step(rule: str):
    """The step function of a per-run rule: ``sparselen.<slice>.jobs.<step>``."""
    slice_, _, step = rule.partition("_")
    module = importlib.import_module(f"sparselen.{slice_}.jobs")
    try:
        return getattr(module, step)
    except AttributeError:
        raise AttributeError(f"rule {rule!r} has no step function sparselen.{slice_}.jobs.{step}") from None


def stacked_trainings() -> dict[str, tuple[str, str | None]]:
    """Per rule whose runs a stack job trains as one model: (its slice, the step each run's job
    then runs alone, or None)."""
    return {f"{name}_{step}": (name, after) for name, package in PACKAGES.items()
            for step, after in package.STACKED.items()}


def stacked_evaluation_rules() -> list[str]:
    """The rules whose stack job evaluates its runs as one stacked model (``STACKED_EVALUATIONS``)."""
    return [f"{name}_{step}" for name, package in PACKAGES.items() for step in package.STACKED_EVALUATIONS]


def stacked_evaluations() -> dict[str, object]:
    """Per rule whose stack job evaluates its runs as one stacked model: the function that does
    it (``sparselen.<slice>.jobs.<name>(jobs, device)``, on its runs' jobs)."""
    return {f"{name}_{step}": getattr(importlib.import_module(f"sparselen.{name}.jobs"), function)
            for name, package in PACKAGES.items() for step, function in package.STACKED_EVALUATIONS.items()}


def runtime_keys() -> dict[str, str]:
    """Per rule whose time limit a config key of its own sets: that key (under ``resources``)."""
    return {f"{name}_{step}": key for name, package in PACKAGES.items() for step, key in package.RUNTIME_KEYS.items()}

"""Every job of the workflow for a config with the work it will do: the jobs are Snakemake's
(``dag``), each priced by its slice's cost function, named like the step it runs
(rule ``<slice>_<step>`` -> ``sparselen.<slice>.cost.<step>(job, config) -> Work``), as
``sparselen.interface.job`` runs ``sparselen.<slice>.jobs.<step>``. A stack rule's job
(``<rule>_stack<i>``) is priced from its runs' rule's cost as one job of its runs
(``stacks.price``). A new rule is priced by a function in its slice's ``cost.py``; one without
is an error.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from types import SimpleNamespace

from sparselen.estimate import stacks
from sparselen.estimate.dag import DagJob
from sparselen.interface.job import per_run_rule
from sparselen.nn.flops import Work

TARGETS = ("all", "report")  # rules that only gather other jobs' outputs (and fig_<slice>)


@dataclass
class Job:
    dag: DagJob
    work: Work
    run: Work | None = None  # one of its runs' work (a stack job's: one run alone)


class MissingCost(LookupError):
    pass


def cost_function(rule: str):
    """``parity_train`` -> ``sparselen.parity.cost.train``; None for a target rule."""
    if rule in TARGETS or rule.startswith("fig_"):
        return None
    slice_, _, step = per_run_rule(rule).partition("_")  # a stack rule: its runs' rule's cost
    module_name = f"sparselen.{slice_}.cost"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name not in (module_name, f"sparselen.{slice_}"):
            raise
        module = None
    fn = getattr(module, step, None)
    if fn is None:
        raise MissingCost(f"rule {rule} has no cost: define {module_name}.{step}")
    return fn


def plan(config: dict, jobs: list[DagJob]) -> list[Job]:
    """``jobs`` (``dag.workflow_jobs``) priced for ``config`` (merged and schema-filled); every
    rule's cost function is looked up before any job is priced."""
    costs = {rule: cost_function(rule) for rule in {j.rule for j in jobs}}
    return [priced(j, costs[j.rule](j, config)) for j in jobs if costs[j.rule] is not None]


def priced(dag: DagJob, run: Work) -> Job:
    """The job of ``dag`` whose runs' rule prices one run at ``run``; a stack job's name carries
    its runs' seeds (``seeds=0-31``)."""
    seeds = stacks.seeds(dag)
    if seeds is not None:
        dag = replace(dag, wildcards=SimpleNamespace(**vars(dag.wildcards), seeds=stacks.seeds_label(seeds)))
    return Job(dag, stacks.price(dag, run), run)

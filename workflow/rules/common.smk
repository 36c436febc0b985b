# Configuration checks (before any job starts) and helpers shared by every slice.
import json
import os
import shlex
import sys

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

import sparselen.config

# Every job imports sparselen from this checkout and runs the interpreter that runs Snakemake,
# whatever environment the job starts in (plain shell, SLURM job step, conda env).
shell.prefix(
    f"export PYTHONPATH={shlex.quote(workflow.basedir)}${{{{PYTHONPATH:+:$PYTHONPATH}}}}; "
    f"export PATH={shlex.quote(os.path.dirname(sys.executable))}:$PATH; "
)
SCHEMA = "../schemas/config.schema.yaml"
CONFIG_SOURCE = ", ".join(map(str, workflow.configfiles)) or "config.yaml"

try:
    validate(config, SCHEMA)
except WorkflowError:
    problems = sparselen.config.schema_errors(config, workflow.source_path(SCHEMA))
    raise WorkflowError(
        f"invalid configuration (from {CONFIG_SOURCE}):\n  " + "\n  ".join(problems)
    ) from None
try:
    sparselen.config.check(config, CONFIG_SOURCE)
except ValueError as e:
    raise WorkflowError(str(e)) from None


def as_arg(obj):
    """A config subtree as one shell-quoted JSON argument (also the params rerun key)."""
    return shlex.quote(json.dumps(obj, sort_keys=True))


RUNTIME = {"device": config["device"], "threads": config["threads"]}

# Scheduler resources and groups (SLURM profile, local-gpus profile; README "Running on a
# SLURM cluster"). A rule that trains or evaluates a model declares
#     group: GROUP_MODEL
#     resources: **job_resources(runtime=MINUTES)
# so one submission trains a model and runs its evaluations on the same GPU. A GROUP_MODEL rule
# must read one model only (plus data/aggregate outputs): one that reads two models' outputs
# joins both chains into one submission that asks for all their GPUs at once. Seconds-long
# CPU rules declare `group: GROUP_DATA` (evaluation sets and other inputs that need no model)
# or `group: GROUP_AGGREGATE` (tables, figures). Groups only matter on a cluster.
GROUP_MODEL = "model"
GROUP_DATA = "data"
GROUP_AGGREGATE = "aggregate"


def job_resources(runtime=None, mem_mb=None):
    """Resources of a training/evaluation job: wall time in minutes (config resources.runtime
    unless given) times the attempt, so a retry after a time-out asks for more; memory; one CPU
    per torch thread; and `gpu` only when config gpus_per_job > 0, so the same rules run on
    CPU-only partitions."""
    minutes = runtime or config["resources"]["runtime"]
    res = {
        "runtime": lambda wildcards, attempt: minutes * attempt,
        "mem_mb": mem_mb or config["resources"]["mem_mb"],
        "cpus_per_task": RUNTIME["threads"],
    }
    if config["gpus_per_job"]:
        res["gpu"] = config["gpus_per_job"]
    return res

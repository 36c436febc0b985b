# Configuration checks (before any job starts) and helpers shared by every slice.
import json
import os
import shlex
import sys

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

import sparselen.config

# Jobs import sparselen from this checkout, whatever environment runs them (venv, conda, SLURM),
# and `python` is the interpreter running Snakemake unless a conda env is activated on top.
os.environ["PYTHONPATH"] = os.pathsep.join(
    filter(None, [workflow.basedir, os.environ.get("PYTHONPATH")])
)
os.environ["PATH"] = os.pathsep.join(
    [os.path.dirname(sys.executable), os.environ.get("PATH", "")]
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

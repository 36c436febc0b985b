"""Train the runs of several training jobs as one stack in a process of its own (tests kill
it): ``python tests/run_stack.py '<json: a list of Job.of keyword arguments, with "rule">'``."""

import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sparselen.interface.job import Job  # noqa: E402
from sparselen.jobs.stacks import train_jobs  # noqa: E402

logging.basicConfig(level=logging.INFO, stream=sys.stderr)
train_jobs([Job.of(spec.pop("rule"), **spec) for spec in json.loads(sys.argv[1])])

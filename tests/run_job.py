"""Run one workflow step in a process of its own, as Snakemake's `script:` would (tests kill
it): ``python tests/run_job.py '<json: Job.of keyword arguments, with "rule" and optionally
"threads", the job's CPUs>'``."""

import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sparselen.interface.job import Job  # noqa: E402
from sparselen.jobs.dispatch import run  # noqa: E402

logging.basicConfig(level=logging.INFO, stream=sys.stderr)
spec = json.loads(sys.argv[1])
threads = spec.pop("threads", None)
job = Job.of(spec.pop("rule"), **spec)
if threads is not None:
    job.threads = threads
run(job)

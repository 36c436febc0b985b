"""The processes a data-parallel launch starts (``sparselen.jobs.worker``); the launches
themselves: tests/training/test_distributed.py."""

import json
import subprocess

from conftest import PYTHON, subprocess_env


def test_a_worker_ends_with_its_steps_status_and_its_traceback(tmp_path):
    """A torchrun worker ends with ``os._exit`` (``sparselen.jobs.worker.worker_main``: the
    interpreter's teardown would race gloo's threads): a step that fails still exits 1 and leaves
    its traceback in the log. (A step that succeeds exits 0: the launch tests.)"""
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({"rule": "parity_no_such_step", "threads": 1}))
    done = subprocess.run([PYTHON, "-m", "sparselen.jobs.worker", str(spec)], env=subprocess_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" in done.stderr and "parity_no_such_step" in done.stderr, done.stderr[-3000:]

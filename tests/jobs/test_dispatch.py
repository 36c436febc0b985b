"""Where a job starts (``sparselen.jobs.dispatch.run``): what it sets up before its step."""

import os

from sparselen.interface.job import Job
from sparselen.jobs import dispatch
from sparselen.runtime.device import ALLOC_CONF


def test_a_job_that_may_use_a_gpu_gets_expandable_segments_unless_the_user_set_the_allocator(monkeypatch):
    """``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` in a job whose device may be CUDA
    (``auto``, ``cuda``), set before its step runs, never over a value of the user's; a CPU job
    is left as it was."""
    seen = []
    monkeypatch.setattr(dispatch, "step_function", lambda rule: lambda job: seen.append(os.environ.get(ALLOC_CONF)))
    monkeypatch.setenv(ALLOC_CONF, "restored after the test")
    monkeypatch.delenv(ALLOC_CONF)
    for device in ("cpu", "auto"):
        dispatch.run(Job.of("parity_table", config={"device": device}))
    monkeypatch.setenv(ALLOC_CONF, "max_split_size_mb:128")
    dispatch.run(Job.of("parity_table", config={"device": "cuda"}))
    assert seen == [None, "expandable_segments:True", "max_split_size_mb:128"]

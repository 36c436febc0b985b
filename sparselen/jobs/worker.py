"""The processes a data-parallel launch starts (``sparselen.training.distributed.launch``):
one ``torchrun`` worker running the job's step, or, across nodes, one node's ``torchrun``.
Started as ``python -m sparselen.jobs.worker SPEC`` (``--node SPEC MASTER PORT PROCESSES`` for
a node)."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path


def node_main(spec: str, master: str, port: str, processes: str) -> None:
    """One node's share of a multi-node job (an ``srun`` task): become its ``torchrun``, with
    the node rank and node count SLURM gives the task."""
    argv = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={os.environ['SLURM_NNODES']}",
            f"--node-rank={os.environ['SLURM_NODEID']}", f"--nproc-per-node={processes}",
            f"--master-addr={master}", f"--master-port={port}", "-m", "sparselen.jobs.worker", spec]
    os.execv(sys.executable, argv)


def worker_main(spec_file: str) -> None:
    """One torchrun worker: run the job's step, then end the process with ``os._exit`` (0 when
    the step succeeded, 1 with its traceback when it failed), its output flushed.

    The interpreter's own teardown is skipped on purpose: it races gloo's threads. A collective's
    work keeps a snapshot of the caller's thread-local state, Python modes included (the
    simulated GPU's ``TorchFunctionMode``), and the gloo thread that ran it frees it after the
    caller has gone on: that takes the GIL. After the last collective (the closing barrier) the
    worker's main thread needs only milliseconds to reach finalization; a gloo thread that asks
    for the GIL then is ended with ``pthread_exit``, whose unwinding through the work's destructor
    aborts: ``terminate called without an active exception``, SIGABRT. ``destroy_process_group``
    does not stop those threads under DDP, which keeps the process group alive. With
    ``os._exit`` nothing outlives the interpreter it needs."""
    import faulthandler
    import traceback

    from sparselen.interface.job import Job
    from sparselen.jobs.dispatch import run

    faulthandler.enable()  # a worker killed by a fatal signal (an abort in C++) leaves every thread's stack in the log
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    code = 0
    try:
        spec = json.loads(Path(spec_file).read_text())
        threads = spec.pop("threads")
        job = Job.of(spec.pop("rule"), **spec)
        job.threads = threads
        run(job)
    except BaseException:  # noqa: BLE001 - reported here, since the process ends without the interpreter's report
        traceback.print_exc()
        code = 1
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # a node of a multi-node ``launch`` (--node), or one torchrun worker
    if sys.argv[1] == "--node":
        node_main(*sys.argv[2:6])
    worker_main(sys.argv[1])

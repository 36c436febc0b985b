"""What a step receives: the job object, by name, and its runtime knobs.

A rule names its inputs, outputs, params and config subtree once, and its step function
(``sparselen.jobs``) receives them by name from ``job``: Snakemake's own object
(``job.input.model``, ``job.output.table``, ``job.params.train``, ``job.wildcards.seed``,
``job.threads``, ``job.log``, ``job.config``). ``Job`` below builds the same thing by hand, for
tests and for calling a step from Python without Snakemake.

Runtime knobs (``device``, ``compile``, ``threads``, ``checkpoint_minutes``, ``peak_tflops``)
do not change the numbers a job computes, so no rule passes them as params (a change would
rerun jobs) and no config hash contains them: a job reads them from ``job.config`` through
``runtime``, and its share of a GPU (``packing``) from its resources.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
from dataclasses import dataclass, field
from types import SimpleNamespace

import torch

from sparselen.runtime.device import resolve_device


@dataclass(frozen=True)
class Runtime:
    device_name: str  # config ``device``: auto, cpu, cuda, cuda:N
    compile: bool
    threads: int
    gpus: int = 0  # GPUs the job holds (config ``gpus_per_job``)
    checkpoint_minutes: float = 0.0  # config ``checkpoint_minutes``: the least time between checkpoints
    peak_flops: float = 0.0  # config ``peak_tflops`` x 1e12: the device's peak for MFU; 0: its datasheet's
    slots_per_gpu: int = 1  # resources ``jobs_per_gpu``: jobs that share one GPU (sparselen/estimate/packing.py)
    packed: bool = False  # resources ``gpu_slots``: the job holds one slot of a GPU, not all of them
    name: str = ""  # the job (rule and wildcards), written into the GPU slot it holds

    @functools.cached_property
    def device(self) -> torch.device:
        """Resolved on first use, so a job that only launches workers (``language.parallel``)
        never claims a GPU the workers need."""
        return resolve_device(self.device_name, self.gpus, self.slots_per_gpu, whole=not self.packed,
                              holder=self.name)


def named(ns) -> dict:
    """Snakemake's named lists (``job.input``, ``job.params``...) or ``Job.of``'s namespaces as a dict."""
    return dict(ns.items()) if hasattr(ns, "items") else dict(vars(ns))


def runtime(job) -> Runtime:
    """The job's runtime knobs from the top of the validated config, its GPU share from its
    resources (workflow/rules/common.smk ``job_resources``)."""
    c, res = job.config, named(getattr(job, "resources", {}))
    wildcards = " ".join(f"{k}={v}" for k, v in named(job.wildcards).items())
    return Runtime(str(c["device"]), bool(c["compile"]), int(c["threads"]), int(c.get("gpus_per_job", 0)),
                   float(c.get("checkpoint_minutes", 0)), 1e12 * float(c.get("peak_tflops", 0)),
                   int(res.get("jobs_per_gpu", 1)), int(res.get("gpu_slots", 0)) > 0, f"{job.rule} {wildcards}".strip())


@dataclass
class Job:
    """A job built by hand, shaped like the object Snakemake hands a ``script:``."""

    rule: str
    input: SimpleNamespace = field(default_factory=SimpleNamespace)
    output: SimpleNamespace = field(default_factory=SimpleNamespace)
    params: SimpleNamespace = field(default_factory=SimpleNamespace)
    wildcards: SimpleNamespace = field(default_factory=SimpleNamespace)
    log: list = field(default_factory=list)
    resources: dict = field(default_factory=dict)
    threads: int = 1
    config: dict = field(default_factory=lambda: {"device": "cpu", "compile": False, "threads": 1})

    @classmethod
    def of(cls, rule: str, *, input=None, output=None, params=None, wildcards=None, config=None,
           resources=None) -> "Job":
        """``Job.of("parity_table", input={"evals": [...]}, output={"csv": ..., "md": ...})``."""
        ns = lambda d: SimpleNamespace(**(d or {}))  # noqa: E731
        job = cls(rule, ns(input), ns(output), ns(params), ns({k: str(v) for k, v in (wildcards or {}).items()}),
                  resources=dict(resources or {}))
        if config is not None:
            job.config = {**job.config, **config}
        return job


STACK_RULE = re.compile(r"(?P<runs>\w+)_stack\d+")


def per_run_rule(rule: str) -> str:
    """The rule of a stack rule's runs (``parity_train_stack2`` -> ``parity_train``: a slice's
    runtime knob ``stack``, workflow/rules/common.smk); any other rule itself."""
    m = STACK_RULE.fullmatch(rule)
    return m["runs"] if m else rule


@contextlib.contextmanager
def log_to(paths):
    """Send the job's stderr (logging, progress bars, tracebacks) to its log file."""
    if not paths:
        yield
        return
    with open(paths[0], "w") as f, contextlib.redirect_stderr(f):
        handler = logging.StreamHandler(f)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        try:
            yield
        except BaseException:
            logging.getLogger(__name__).exception("job failed")
            raise
        finally:
            root.removeHandler(handler)

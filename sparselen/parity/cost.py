"""What each ``parity_*`` job computes, for ``sparselen estimate``: one function per step, named
like it (rule ``parity_train`` -> ``train``), taking the DAG's job (rule, typed wildcards,
params) and the validated config."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from sparselen.nn import memory
from sparselen.nn.flops import Shape, Work, aggregate, chunks, micro_steps, train_work
from sparselen.nn.model import ModelConfig
from sparselen.parity.task import VOCAB


def eval_data(job, config) -> Work:
    """Sampling the evaluation set: a sample of 40 tokens is one unit."""
    ev = job.params.eval
    n = sum(ev["n"] * (L + 1) / 40 for L in ev["lengths"] for k in ev["k_test"] if k <= L // 2)
    return Work(model_job=False).unit("sample", n)


def train(job, config) -> Work:
    """One length l per batch, uniform over the training range: sequences of 2 l + 1 tokens;
    memory at the longest, in micro-batches of ``parity.micro_batch`` rows; a stack's step in
    ``parity.length_groups`` passes (``sparselen.estimate.stacks``)."""
    p, micro = job.params, config["parity"]["micro_batch"]
    lo, hi = p.train["lengths"]
    seq = [2 * l + 1 for l in range((lo + 1) // 2, hi // 2 + 1)]
    rows, passes = micro_steps(p.train["batch_size"], micro)
    cfg = _model(p.model, p.scheme)
    w = train_work(Shape.of(p.model, len(VOCAB)), p.train, p.train["batch_size"], seq, passes,
                   memory.parameters(cfg))
    w.terms[-1] = replace(w.terms[-1], length_groups=int(config["parity"].get("length_groups", 1)))
    return w.need(f"training step of {rows} x {max(seq)} tokens", "parity.micro_batch",
                  lambda kind: memory.train_step(cfg, rows, max(seq), kind), training_step=True)


def evaluate(job, config) -> Work:
    """The evaluation grid, every cell's sequences in passes of ``batch_tokens``, read at the
    last position (bf16 autocast on a GPU): one run's, as a run of its evaluation stack where
    the job is one (its ``stack_seeds``: S runs share a pass's tokens, one pass per batch for
    all, ``sparselen.parity.jobs.evaluate_stacked``; ``sparselen.estimate.stacks`` prices the S)."""
    from sparselen.parity.evaluate import rows_per_pass

    p = config["parity"]
    shape, ev, cfg = Shape.of(p["model"], len(VOCAB)), p["eval"], _model(p["model"], p["scheme"])
    runs = len(getattr(job.params, "stack_seeds", None) or [None])
    w = Work()
    for L in ev["lengths"]:
        rows = rows_per_pass(job.params.batch_tokens, L + 1, runs)
        for k in ev["k_test"]:
            if k <= L // 2:
                for b in chunks(ev["n"], rows):
                    w.add("forward", 1, shape.forward(b, L + 1, "last"), shape, stacked=True)
        w.need(f"evaluation pass of {min(rows, ev['n'])} x {L + 1} tokens", "parity.eval.batch_tokens",
               lambda kind: memory.no_grad_pass(cfg, min(rows, ev["n"]), L + 1, kind, autocast=True), stacked=True)
    return w


def gpu_peak(config) -> float:
    """The largest predicted GPU peak of a parity model job (every run has the same shapes):
    how many share a GPU (``sparselen.estimate.packing``)."""
    p = config["parity"]
    job = SimpleNamespace(params=SimpleNamespace(model=p["model"], scheme=p["scheme"], pose=p["pose"],
                                                 train=p["train"], batch_tokens=p["eval"]["batch_tokens"]))
    return max(step(job, config).memory["gpu"].bytes for step in (train, evaluate))


def _model(model: dict, scheme: str) -> ModelConfig:
    return ModelConfig(vocab_size=len(VOCAB), scheme=scheme, **model)


table = figure = aggregate

"""What each ``parity_*`` job computes, for ``sparselen estimate``: one function per step, named
like it (rule ``parity_train`` -> ``train``), taking the DAG's job (rule, typed wildcards,
params) and the validated config."""

from __future__ import annotations

from sparselen.estimate.flops import Shape, Work, aggregate, chunks, train_work
from sparselen.parity.task import VOCAB


def eval_data(job, config) -> Work:
    """Sampling the evaluation set: a sample of 40 tokens is one unit."""
    ev = job.params.eval
    n = sum(ev["n"] * (L + 1) / 40 for L in ev["lengths"] for k in ev["k_test"] if k <= L // 2)
    return Work(model_job=False).unit("sample", n)


def train(job, config) -> Work:
    """One length l per batch, uniform over the training range: sequences of 2 l + 1 tokens."""
    p = job.params
    lo, hi = p.train["lengths"]
    seq = [2 * l + 1 for l in range((lo + 1) // 2, hi // 2 + 1)]
    return train_work(Shape.of(p.model, len(VOCAB)), p.train, p.train["batch_size"], seq)


def evaluate(job, config) -> Work:
    """The evaluation grid, every cell's sequences in passes of ``batch_tokens``, read at the
    last position."""
    from sparselen.parity.evaluate import rows_per_pass

    p = config["parity"]
    shape, ev = Shape.of(p["model"], len(VOCAB)), p["eval"]
    w = Work()
    for L in ev["lengths"]:
        for k in ev["k_test"]:
            if k <= L // 2:
                for b in chunks(ev["n"], rows_per_pass(job.params.batch_tokens, L + 1)):
                    w.add("forward", 1, shape.forward(b, L + 1, "last"), shape)
    return w


table = figure = aggregate

"""What each ``theory_*`` job computes, for ``sparselen estimate``: one function per step, named
like it (rule ``theory_run_sfa`` -> ``run_sfa``), taking the DAG's job (rule, typed wildcards,
params) and the validated config. A run trains and then evaluates at every ratio's length."""

from __future__ import annotations

import math
from functools import lru_cache
from types import SimpleNamespace

from sparselen.nn import memory
from sparselen.nn.flops import Shape, Work, aggregate, chunks, mean, micro_steps, train_work
from sparselen.nn.model import ModelConfig
from sparselen.theory.runs import law_gpt
from sparselen.theory.task import eval_lengths, planted_config, valid_lengths


def run_sfa(job, config) -> Work:
    """On the job's threads (theory.sfa_threads: the rule's)."""
    p = job.params
    pc, lengths, targets = _setting(job)
    return sfa_work(pc, p.sfa, lengths, targets, p.eval, job.threads)


def run_gpt(job, config) -> Work:
    """Training in micro-batches of ``theory.micro_batch`` rows, then the evaluation (last
    position, bf16 autocast on a GPU, as training)."""
    p, micro = job.params, config["theory"]["micro_batch"]
    pc, lengths, targets = _setting(job)
    shape = Shape.of(p.gpt["model"], pc.vocab_size)
    train, B = p.gpt["train"], p.gpt["train"]["batch_size"]
    rows, passes = micro_steps(B, micro)
    cfg = ModelConfig(vocab_size=pc.vocab_size, scheme=p.gpt["schemes"][job.wildcards.distribution],
                      **p.gpt["model"])
    w = train_work(shape, train, B, [n + 1 for n in lengths], passes, memory.parameters(cfg))
    for n in targets:
        for b in chunks(p.eval["n"], p.eval["batch_size"]):
            w.add("forward", 1, shape.forward(b, n + 1, "last"), shape)
    T, n = max(lengths) + 1, min(p.eval["n"], p.eval["batch_size"])
    w.need(f"training step of {rows} x {T} tokens", "theory.micro_batch",
           lambda kind: memory.train_step(cfg, rows, T, kind), training_step=True)
    return w.need(f"evaluation pass of {n} x {max(targets) + 1} tokens", "theory.eval.batch_size",
                  lambda kind: memory.no_grad_pass(cfg, n, max(targets) + 1, kind, autocast=True))


def gpu_peak(config) -> float:
    """The largest predicted GPU peak of a GPT run of the theory slice (every law and k):
    how many share a GPU (``sparselen.estimate.packing``); 0 without GPT runs (the SFA runs
    stay on the CPU)."""
    t = config["theory"]
    peaks = []
    for dist in t["distributions"]:
        params = SimpleNamespace(task=t["task"], train=t["train"], eval=t["eval"], gpt=law_gpt(t["gpt"], dist))
        for k in t["gpt"]["k"]:
            job = SimpleNamespace(params=params, wildcards=SimpleNamespace(distribution=dist, k=k))
            peaks.append(run_gpt(job, config).memory["gpu"].bytes)
    return max(peaks, default=0.0)


table = figure = aggregate


def _setting(job):
    """(planted config, training lengths, evaluated lengths) of a run."""
    p = job.params
    pc = planted_config(p.task, job.wildcards.distribution, job.wildcards.k)
    lo, L = p.train["lengths"]
    return pc, valid_lengths(pc, lo, L), list(eval_lengths(L, p.eval["ratios"]).values())


@lru_cache(maxsize=None)
def sfa_tuples(pc, length: int, window: int) -> int:
    """Number of k-tuples the SFA attends over at ``length`` (sparselen.theory.sfa._tuples,
    counted without building them); the same for every seed, so counted once."""
    import torch

    from sparselen.theory.task import position_ids

    ids = position_ids(pc, length)
    sp = ids.sort().values
    reach = torch.searchsorted(sp, sp + window, right=True) - 1 - torch.arange(len(sp))
    return int(sum(math.comb(int(r), pc.k - 1) for r in reach.tolist()))


def sfa_work(pc, s: dict, lengths: list[int], eval_lengths: list[int], ev: dict, threads: int = 1) -> Work:
    """The idealized model's training and evaluation (sparselen.theory.sfa) on ``threads``
    threads: per sequence of T tokens with N tuples, FLOPs for projecting each token once per
    member slot 4 T k d_embed d_head, summing the members' projections 2 k N d_head, the key and
    value MLPs 2 N d_head (d_head + q), the query's scores 2 N d_head; and the passes over the
    N x d_head activations (bias and offsets, GELU, sums, copies: memory-bound, few FLOPs),
    priced per activation float as units (``sfa_train_activation`` per training step,
    ``sfa_activation`` per evaluation pass)."""
    from sparselen.theory.sfa import sfa_window

    window = sfa_window(pc, s["window"], lengths)
    d, h, k = s["d_embed"], s["d_head"], pc.k

    def per_row(n):
        T, N = n + 1, sfa_tuples(pc, n, window)
        return 4 * T * k * d * h + 2 * k * N * h + 2 * N * h * (h + pc.n_values) + 2 * N * h

    def activations(n):
        return sfa_tuples(pc, n, window) * h

    shape, B = Shape(1, h, h, pc.n_values), s["batch_size"]
    w = Work(cpu_only=True, train_steps=s["steps"], checkpoint_every=1,  # checkpoint_minutes apart
             resumable=("train", "sfa_train_activation"), threads=threads)
    w.add("train", s["steps"], s["steps"] * 3 * mean(B * per_row(n) for n in lengths), shape)
    w.unit("sfa_train_activation", s["steps"] * mean(B * activations(n) for n in lengths))
    for n in eval_lengths:
        for b in chunks(ev["n"], ev["batch_size"]):
            w.add("forward", 1, b * per_row(n), shape)
            w.unit("sfa_activation", b * activations(n))
    return w

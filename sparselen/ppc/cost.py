"""What each ``ppc_*`` job computes, for ``sparselen estimate``: one function per step, named like
it (rule ``ppc_train`` -> ``train``), taking the DAG's job (rule, typed wildcards, params) and
the validated config. Shapes are those the jobs see: a few real training batches, the
evaluation set drawn as the pipeline draws it."""

from __future__ import annotations

import json
from functools import lru_cache
from types import SimpleNamespace

from sparselen.interface import variants
from sparselen.nn import memory
from sparselen.nn.flops import Shape, Work, aggregate, chunks, micro_steps, train_work
from sparselen.nn.model import ModelConfig
from sparselen.ppc.runs import run_model, task_schemes
from sparselen.ppc.tasks import sampler_params, task_module

TRAIN_BATCHES = 16  # real training batches whose padded lengths stand for every step's


def eval_data(job, config) -> Work:
    """Sampling the evaluation set: a sample of 40 tokens is one unit."""
    p = job.params
    samples, _ = _eval_set(job.wildcards.task, p.sampler, p.sizes, p.eval)
    return Work(model_job=False).unit("sample", samples / 40)


def train(job, config) -> Work:
    """Memory at the longest padded batch, in micro-batches of ``ppc.micro_batch`` rows."""
    p, task, name = job.params, job.wildcards.task, job.wildcards.run
    section = {"model": p.model, "variants": {name: p.variant} if p.variant else {}}
    train_cfg = {**p.train, "steps": int(p.task_config.get("steps", p.train["steps"]))}
    seq = _train_lengths(task, p.task_config, p.train["batch_size"], p.max_position_id)
    model, scheme = run_model(section, p.task_config, name), variants.run_scheme(section, name)
    rows, passes = micro_steps(p.train["batch_size"], config["ppc"]["micro_batch"])
    cfg = _model(model, scheme, task, p.max_position_id, p.id_embedding)
    w = train_work(_shape(model, scheme, task, p.max_position_id), train_cfg, p.train["batch_size"], seq, passes,
                   memory.parameters(cfg))
    return w.need(f"training step of {rows} x {max(seq)} tokens", "ppc.micro_batch",
                  lambda kind: memory.train_step(cfg, rows, max(seq), kind), training_step=True)


def evaluate(job, config) -> Work:
    """Greedy generation as ``cell_scores`` runs it: per prompt length, the prompt into the KV
    cache, then one cached step per token of the longest target response (bf16 autocast on a
    GPU); a batch whose samples all end sooner stops sooner, so this bounds it."""
    p, task, name = config["ppc"], job.wildcards.task, job.wildcards.run
    t = p[task]
    model, scheme = run_model(p, t, name), variants.run_scheme(p, name)
    shape = _shape(model, scheme, task, p["max_position_id"])
    cfg = _model(model, scheme, task, p["max_position_id"], p["id_embedding"])
    _, calls = _eval_set(task, sampler_params(t), t["eval_sizes"], {**p["eval"], "batch_size": job.params.batch_size})
    w = Work()
    for rows, P, R in calls:
        w.add("forward", 1, shape.forward(rows, P, "last"), shape)
        w.add("forward", R - 1, sum(shape.cached_step(rows, P + j) for j in range(R - 1)), shape)
    rows, P, R = max(calls, key=lambda c: c[0] * (c[1] + c[2]))
    return w.need(f"generation of {rows} rows, {P} + {R} tokens", "ppc.eval.batch_size",
                  lambda kind: memory.generation(cfg, rows, P, R, kind, autocast=True))


def gpu_peak(config) -> float:
    """The largest predicted GPU peak of a PPC model job, over tasks and runs: the training
    step (``train``) and generation of a batch of the longest evaluated prompts and responses
    (a bound of ``evaluate``'s, from 16 samples of the largest size: cheap enough to compute
    whenever the workflow is read): how many share a GPU (``sparselen.estimate.packing``)."""
    import torch

    from sparselen.ppc.runs import run_task_config
    from sparselen.runtime.rng import generator

    p, peaks = config["ppc"], []
    for task in p["tasks"]:
        t = p[task]
        s = task_module(task).sample(torch.full((16,), max(t["eval_sizes"])), generator("ppc-packing", task),
                               **sampler_params(t))
        P, R = int(s.prompt_len.max()), int((s.length - s.prompt_len).max())
        rows = min(p["eval"]["batch_size"], p["eval"]["n"])
        for name in task_schemes(p, task):
            params = SimpleNamespace(model=p["model"], variant=p["variants"].get(name), train=p["train"],
                                     task_config=run_task_config(p, task), max_position_id=p["max_position_id"],
                                     id_embedding=p["id_embedding"])
            job = SimpleNamespace(params=params, wildcards=SimpleNamespace(task=task, run=name))
            model, scheme = run_model(p, t, name), variants.run_scheme(p, name)
            cfg = _model(model, scheme, task, p["max_position_id"], p["id_embedding"])
            peaks += [train(job, config).memory["gpu"].bytes, memory.generation(cfg, rows, P, R, "gpu", autocast=True)]
    return max(peaks)


table = figure = aggregate


def _shape(model: dict, scheme: str, task: str, max_position_id: int) -> Shape:
    """A run's model; a ``ppc`` run also predicts position ids (its position head)."""
    head = _model(model, scheme, task, max_position_id, []).position_classes if scheme == "ppc" else 0
    return Shape.of(model, len(task_module(task).VOCAB), head)


def _model(model: dict, scheme: str, task: str, max_position_id: int, id_embedding: list) -> ModelConfig:
    """A run's model config, as ``ppc.jobs.train`` builds it."""
    return ModelConfig(vocab_size=len(task_module(task).VOCAB), scheme=scheme, max_position_id=max_position_id,
                       id_embedding=scheme in id_embedding, **model)


def _train_lengths(task: str, task_cfg: dict, batch_size: int, max_position_id: int) -> list[int]:
    """The padded lengths of the first training batches (seed 0)."""
    return _cached_train_lengths(task, json.dumps(task_cfg, sort_keys=True), batch_size, max_position_id)


@lru_cache(maxsize=None)
def _cached_train_lengths(task: str, task_cfg: str, batch_size: int, max_position_id: int) -> list[int]:
    from sparselen.ppc.jobs import training_batches

    fn = training_batches(task, json.loads(task_cfg), 0, batch_size, max_position_id, False)
    return [fn(s).input_ids.shape[1] for s in range(TRAIN_BATCHES)]


def _eval_set(task: str, sampler: dict, sizes: list, ev: dict) -> tuple[int, list]:
    """(tokens sampled, generation calls (rows, prompt length, response length)) of a task's
    evaluation set, its validation cell at the largest size included: shared by every run of
    the task, so drawn once."""
    return _cached_eval_set(task, json.dumps([sampler, sizes, ev], sort_keys=True))


@lru_cache(maxsize=None)
def _cached_eval_set(task: str, settings: str) -> tuple[int, list]:
    import torch

    from sparselen.runtime.rng import generator

    sampler, sizes, ev = json.loads(settings)
    calls, n_samples = [], 0
    for stream, size in [*(("ppc-eval", size) for size in sizes), ("ppc-validation", max(sizes))]:
        s = task_module(task).sample(torch.full((ev["n"],), size), generator(stream, ev["seed"], task, size), **sampler)
        n_samples += len(s) * s.tokens.shape[1]
        for P in s.prompt_len.unique().tolist():
            group = s.length[s.prompt_len == P]
            R = int((group - P).max())
            calls += [(b, P, R) for b in chunks(len(group), ev["batch_size"])]
    return n_samples, calls

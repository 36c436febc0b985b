"""The steps of the ``parity_*`` rules (workflow/rules/parity.smk), one function each; every
function receives the rule's named inputs, outputs, params and wildcards (sparselen/interface/job.py)."""

from __future__ import annotations

import logging

import torch

from sparselen.interface.job import runtime
from sparselen.interface.run import Run, typed_wildcards
from sparselen.nn.model import ModelConfig
from sparselen.nn.stacked_model import stack_models
from sparselen.parity import TRAINING_CODE, report, task
from sparselen.parity.evaluate import evaluate_grid, evaluate_stack
from sparselen.runtime import io
from sparselen.runtime.provenance import provenance
from sparselen.training.train import TrainConfig, load_model
from sparselen.training.train import train as train_model

log = logging.getLogger(__name__)


def eval_data(job) -> None:
    """The shared samples every model is evaluated on (params.eval = parity.eval)."""
    cfg = job.params.eval
    cells = task.evaluation_set(cfg["seed"], cfg["k_test"], cfg["lengths"], cfg["n"])
    io.torch_save({"cells": cells, "provenance": provenance(cfg, cfg["seed"])}, job.output.eval_set)
    log.info("wrote %d cells (%d impossible cells left out) to %s", len(cells),
             len(cfg["k_test"]) * len(cfg["lengths"]) - len(cells), job.output.eval_set)


def training(job):
    """(model config, trainer settings, batch function) of one run (wildcards K_train, seed) on
    k ~ Unif{1..K_train}: params model, scheme, pose, train; what ``train`` and the pilot train."""
    p, w = job.params, typed_wildcards(job)
    mc = ModelConfig(vocab_size=len(task.VOCAB), scheme=p.scheme, **p.model)
    knobs = job.config.get("parity", {})
    tc = TrainConfig.from_section(p.train, w["seed"], p.pose, micro_batch=knobs.get("micro_batch", 0),
                                  length_groups=knobs.get("length_groups", 1))
    batches = task.training_batches(w["seed"], tc.batch_size, p.train["lengths"], w["K_train"],
                                    p.train["one_length_per_batch"])
    return mc, tc, batches


def train(job) -> dict:
    """One model (``training``)."""
    return train_model(*training(job), Run.of(job, TRAINING_CODE))


def evaluate(job, device: torch.device | None = None) -> None:
    """One model on the shared evaluation set (params.batch_tokens), on ``device`` (an
    evaluation stack's, ``sparselen.jobs.stacks.run_stack``) or the job's own."""
    dev = device or runtime(job).device
    model, prov = load_model(job.input.model, dev)
    cells = torch.load(job.input.eval_set, weights_only=True)["cells"]
    df = evaluate_grid(model, cells, job.params.batch_tokens, dev, K_train=prov["run"]["K_train"], seed=prov["seed"],
                       scheme=model.cfg.scheme)
    df["config_hash"] = prov["config_hash"]
    io.write_csv(df, job.output.eval)


def evaluate_stacked(jobs, device: torch.device) -> None:
    """An evaluation stack's runs (``jobs``: each run's ``evaluate`` job) as one stacked model
    (``sparselen.nn.stacked_model``), each batch of the evaluation set in one pass for all of
    them; each run's ``eval.csv`` as ``evaluate`` writes it for its model alone."""
    models, provs = zip(*(load_model(job.input.model, device) for job in jobs))
    model = stack_models(list(models)).eval()
    del models
    cells = torch.load(jobs[0].input.eval_set, weights_only=True)["cells"]
    labels = [{"K_train": prov["run"]["K_train"], "seed": prov["seed"], "scheme": model.cfg.scheme} for prov in provs]
    for job, prov, df in zip(jobs, provs, evaluate_stack(model, labels, cells, jobs[0].params.batch_tokens, device)):
        df["config_hash"] = prov["config_hash"]
        io.write_csv(df, job.output.eval)


def table(job) -> None:
    report.table(job.input.evals, job.output.csv, job.output.md, job.params.facts)


def figure(job) -> None:
    report.figure(job.input.table, job.input.evals, job.params.facts, job.output)

"""The steps of the ``parity_*`` rules (workflow/rules/parity.smk), one function each; every
function receives the rule's named inputs, outputs, params and wildcards (sparselen/jobs.py)."""

from __future__ import annotations

import logging

import torch

from sparselen import io
from sparselen.jobs import runtime
from sparselen.model import ModelConfig
from sparselen.parity import report, task
from sparselen.parity.evaluate import evaluate_grid
from sparselen.provenance import provenance
from sparselen.train import RunFiles, TrainConfig, load_model
from sparselen.train import train as train_model

log = logging.getLogger(__name__)


def eval_data(job) -> None:
    """The shared samples every model is evaluated on (params.eval = parity.eval)."""
    cfg = job.params.eval
    cells = task.evaluation_set(cfg["seed"], cfg["k_test"], cfg["lengths"], cfg["n"])
    io.torch_save({"cells": cells, "provenance": provenance(cfg, cfg["seed"])}, job.output.eval_set)
    log.info("wrote %d cells (%d impossible cells left out) to %s", len(cells),
             len(cfg["k_test"]) * len(cfg["lengths"]) - len(cells), job.output.eval_set)


def train(job) -> dict:
    """One model (wildcards K, seed) on k ~ Unif{1..K}: params model, scheme, pose, train."""
    p, K, seed = job.params, int(job.wildcards.K), int(job.wildcards.seed)
    rt = runtime(job)
    mc = ModelConfig(vocab_size=len(task.VOCAB), scheme=p.scheme, **p.model)
    tc = TrainConfig.from_section(p.train, seed, p.pose)
    batches = task.training_batches(seed, tc.batch_size, p.train["lengths"], K, p.train["one_length_per_batch"])
    identity = {"model": p.model, "scheme": p.scheme, "pose": p.pose, "train": p.train, "K_train": K, "seed": seed}
    return train_model(mc, tc, batches, RunFiles.of(job), identity, rt.device, {"K_train": K, "scheme": p.scheme},
                       rt.compile)


def evaluate(job) -> None:
    """One model on the shared evaluation set (params.batch_tokens)."""
    dev = runtime(job).device
    model, prov = load_model(job.input.model, dev)
    cells = torch.load(job.input.eval_set, weights_only=True)["cells"]
    df = evaluate_grid(model, cells, job.params.batch_tokens, dev, K_train=prov["run"]["K_train"], seed=prov["seed"],
                       scheme=model.cfg.scheme)
    df["config_hash"] = prov["config_hash"]
    io.write_csv(df, job.output.eval)


def table(job) -> None:
    report.table(job.input.evals, job.output.csv, job.output.md)


def figure(job) -> None:
    report.figure(job.input.table, job.params.train_max_length, job.output.png, job.output.pdf)

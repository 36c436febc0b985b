"""The steps of the ``ppc_*`` rules (workflow/rules/ppc.smk), one function each; every
function receives the rule's named inputs, outputs, params and wildcards (sparselen/interface/job.py).

Every task is trained on short inputs with each scheme and evaluated by greedy generation on
inputs up to several times longer."""

from __future__ import annotations

import logging

import pandas as pd
import torch

from sparselen.interface import variants
from sparselen.interface.job import runtime
from sparselen.interface.run import Run, typed_wildcards
from sparselen.nn.model import ModelConfig
from sparselen.ppc import TRAINING_CODE, report
from sparselen.ppc.evaluate import evaluate_cells
from sparselen.ppc.generate import COUPLED
from sparselen.ppc.runs import run_model
from sparselen.ppc.samples import random_offsets, skip_ids, to_batch
from sparselen.ppc.tasks import sampler_params, task_module
from sparselen.runtime import io
from sparselen.runtime.provenance import provenance
from sparselen.runtime.rng import generator
from sparselen.training.train import TrainConfig, load_model
from sparselen.training.train import train as train_model

log = logging.getLogger(__name__)


def eval_data(job) -> None:
    """``n`` samples per evaluated size (params sampler, sizes, eval), from a generator seeded
    by (eval seed, task, size), shared by every model; a validation cell of as many samples at
    the largest size, seeded apart, on which the claims choose the best baseline (never on the
    samples they compare); and the longest first-lookup distance of the training sizes (params
    train_sizes), where the diagnostics split (``sparselen.ppc.evaluate``)."""
    task, e, sampler = job.wildcards.task, job.params.eval, job.params.sampler
    module = task_module(task)

    def draw(stream: str, size: int) -> dict:
        return vars(module.sample(torch.full((e["n"],), size), generator(stream, e["seed"], task, size), **sampler))

    cells = {size: draw("ppc-eval", size) for size in job.params.sizes}
    largest = max(job.params.sizes)
    limit = module.max_first_lookup(job.params.train_sizes[1], **sampler)
    prov = provenance({"sampler": sampler, "sizes": job.params.sizes, "eval": e,
                       "train_sizes": job.params.train_sizes}, e["seed"])
    io.torch_save({"task": task, "cells": cells, "validation": {largest: draw("ppc-validation", largest)},
                   "first_lookup_limit": limit, "provenance": prov}, job.output.eval_set)
    log.info("wrote %s evaluation cells %s and a validation cell to %s", task, list(cells), job.output.eval_set)


def training_batches(task: str, task_cfg: dict, seed: int, batch_size: int, max_position_id: int, offset: bool,
                     coupled: bool = True, target: str = "absolute"):
    """``step -> Batch``, a pure function of (task, seed, step): sizes uniform in the training
    range, coupled ids skipped between the task's units (``id_skips`` of them, coupled runs
    only), else shifted by a random start offset when ``offset``; without ``coupled`` the batch
    has plain positions (what rope and pose shift), on the same samples. ``target``: what a ppc
    run's position head predicts of the next id (``ModelConfig.position_target``).

    A row gets one shift, never both: evaluation lays every size out unshifted (ids from 0, no
    skip), which one uniform shift draws as often as any other (1 / (room + 1)), while a skip
    and then an offset in the room it leaves draw it about as rarely as its square (the
    shortest size's unshifted layout then in about 1 of 24,000 rows, absent from whole training
    runs). The skips already train the large ids the offset is for."""
    module, (lo, hi), params = task_module(task), task_cfg["train_sizes"], sampler_params(task_cfg)
    skips = task_cfg.get("id_skips", 0) if coupled else 0

    def batch_fn(step: int):
        g = generator("ppc-train", task, seed, step)
        s = module.sample(torch.randint(lo, hi + 1, (batch_size,), generator=g), g, **params)
        if skips:
            s = skip_ids(s, module.unit_starts(s), skips, max_position_id, g)
        batch = to_batch(s, random_offsets(s, max_position_id, g) if offset and not skips else None, target,
                         max_position_id)
        if not coupled:
            batch.position_ids = None
        return batch

    return batch_fn


def training(job):
    """(model config, trainer settings, batch function) of one run (wildcards task, run = a run
    name of ppc.schemes, seed): params model, variant (the run's ppc.variants entry, or None),
    pose (for a pose run, else None), train, task_config, max_position_id, random_offset,
    id_embedding, position_loss_weight; what ``train`` and the pilot train."""
    p, w = job.params, typed_wildcards(job)
    task, name, seed = w["task"], w["run"], w["seed"]
    section = {"model": p.model, "variants": {name: p.variant} if p.variant else {}}
    scheme = variants.run_scheme(section, name)
    mc = ModelConfig(vocab_size=len(task_module(task).VOCAB), scheme=scheme, max_position_id=p.max_position_id,
                     id_embedding=scheme in p.id_embedding, **run_model(section, p.task_config, name))
    train_cfg = {**p.train, **({"steps": p.task_config["steps"]} if "steps" in p.task_config else {})}
    tc = TrainConfig.from_section(train_cfg, seed, p.pose, position_loss_weight=p.position_loss_weight,
                                  micro_batch=job.config.get("ppc", {}).get("micro_batch", 0))
    batches = training_batches(task, p.task_config, seed, tc.batch_size, p.max_position_id, p.random_offset,
                               coupled=scheme in COUPLED, target=mc.position_target)
    return mc, tc, batches


def train(job) -> dict:
    """One model (``training``)."""
    return train_model(*training(job), Run.of(job, TRAINING_CODE))


def evaluate(job, device: torch.device | None = None) -> None:
    """One model by generation on its task's evaluation set (params.batch_size), to its task's
    end-of-response token: the test cells (``split`` test) and the validation cell (``split``
    validation). ``device``: an evaluation stack's (``sparselen.jobs.stacks.run_stack``), else the
    job's own."""
    dev = device or runtime(job).device
    model, prov = load_model(job.input.model, dev)
    data = torch.load(job.input.eval_set, weights_only=True)
    labels = {"task": data["task"], "scheme": job.wildcards.run, "seed": prov["seed"]}
    eos = task_module(data["task"]).EOS
    rows = [row for split in ("test", "validation")
            for row in evaluate_cells(model, data["cells" if split == "test" else split], job.params.batch_size, dev,
                                      data["first_lookup_limit"], eos, split=split, **labels)]
    df = pd.DataFrame(rows)
    df["config_hash"] = prov["config_hash"]
    io.write_csv(df, job.output.eval)


def table(job) -> None:
    report.table(job.input.evals, job.output.csv, job.output.md, getattr(job.params, "train_sizes", None),
                 getattr(job.output, "seeds", None))


def figure(job) -> None:
    report.figure(job.input.table, job.params.train_max_sizes, job.output.png, job.output.pdf)
    if hasattr(job.output, "seeds_png"):
        from sparselen.ppc import seeds_figure  # its claims' statistics (scipy): not for every PPC job

        seeds_figure.figure(job.input.seeds, job.params.roles, job.output.seeds_png, job.output.seeds_pdf)

"""The steps of the ``theory_*`` rules (workflow/rules/theory.smk), one function each; every
function receives the rule's named inputs, outputs, params and wildcards (sparselen/interface/job.py).

A run trains and evaluates in one job: the evaluation takes seconds, while a separate job
would pay another interpreter start for every run of the grid."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import torch

from sparselen.interface.run import Run
from sparselen.interface.run import identity as run_identity
from sparselen.interface.run import typed_wildcards
from sparselen.nn.model import ModelConfig
from sparselen.runtime import io
from sparselen.runtime.provenance import config_hash, provenance
from sparselen.theory import TRAINING_CODE, report
from sparselen.theory.evaluate import evaluate, gpt_predict, sfa_predict
from sparselen.theory.sfa import sfa_window, train_sfa
from sparselen.theory.task import eval_lengths, gpt_batches, planted_config, valid_lengths
from sparselen.training.modelfile import save_state
from sparselen.training.resumable import CHECKPOINT
from sparselen.training.train import TrainConfig, load_model
from sparselen.training.train import train as train_model

log = logging.getLogger(__name__)


def _setting(job):
    """(planted config, training lengths, {ratio: Lbar}) of a theory run (wildcards
    distribution, k, seed)."""
    p, w = job.params, job.wildcards
    pc = planted_config(p.task, w.distribution, int(w.k))
    lo, L = p.train["lengths"]
    return pc, valid_lengths(pc, lo, L), eval_lengths(L, p.eval["ratios"])


def _write_eval(job, predict, pc, targets, labels: dict) -> None:
    p = job.params
    df = evaluate(predict, pc, targets, p.eval["n"], p.eval["seed"], p.eval["batch_size"])
    for key, value in {**labels, "n_values": pc.n_values}.items():
        df[key] = value
    io.write_csv(df, job.output.eval)
    log.info("%s", df[["ratio", "length", "log_loss", "error"]].to_string(index=False))


def run_sfa(job, device: torch.device | None = None) -> None:
    """The idealized sparse-functional-attention model (params task, train, eval, sfa) on one
    (distribution, k, seed); always on CPU (tuples are gathered, not a GPU-shaped workload;
    ``device``, a stack job's, is not used), on the job's threads (theory.sfa_threads, set by
    ``sparselen.jobs.dispatch``). A stack job of theory.sfa_stack seeds runs this for each in turn
    (``sparselen.jobs.stacks.run_stack``)."""
    p, identity, run = job.params, run_identity(job), typed_wildcards(job)
    pc, lengths, targets = _setting(job)
    window = sfa_window(pc, p.sfa["window"], lengths)
    checkpoint = Path(job.output.model).parent / CHECKPOINT
    net, rows = train_sfa(pc, p.sfa, lengths, run["seed"], window, checkpoint,
                          float(job.config.get("checkpoint_minutes", 0)), config_hash(identity))
    prov = provenance(identity, run["seed"], torch.device("cpu"), run={"model": "sfa", **identity})
    save_state(job.output.model, {"model": net.state_dict(), "planted": pc.to_dict(), "window": window, "sfa": p.sfa,
                                  "provenance": prov})
    io.write_csv(pd.DataFrame(rows), job.output.log_csv)
    io.write_json(job.output.summary, {"model": "sfa", **run, "final_loss": rows[-1]["loss"] if rows else None,
                                       "parameters": sum(x.numel() for x in net.parameters()), **prov})
    _write_eval(job, sfa_predict(net), pc, targets, {"model": "sfa", **run, "window": window, "scheme": "relative",
                                                     "config_hash": config_hash(identity)})


def training(job):
    """(model config, trainer settings, batch function) of a GPT-NeoX (params task, train, eval,
    gpt) on one (distribution, k, seed), with the scheme ``gpt.schemes[distribution]``; what
    ``run_gpt`` and the pilot train."""
    p, seed = job.params, typed_wildcards(job)["seed"]
    pc, lengths, targets = _setting(job)
    g = p.gpt
    scheme = g["schemes"][job.wildcards.distribution]
    mc = ModelConfig(vocab_size=pc.vocab_size, scheme=scheme, **g["model"])
    longest = max(targets.values()) + 1
    tc = TrainConfig.from_section(g["train"], seed, {"chunks": g["pose"]["chunks"], "target_length": longest},
                                  micro_batch=job.config.get("theory", {}).get("micro_batch", 0))
    return mc, tc, gpt_batches(pc, lengths, tc.batch_size, seed, scheme == "coupled", longest)


def run_gpt(job) -> None:
    """A GPT-NeoX (``training``), then its evaluation (``evaluate_gpt``)."""
    run = Run.of(job, TRAINING_CODE)
    train_model(*training(job), run)
    evaluate_gpt(job, run.runtime.device)


def evaluate_gpt(job, device: torch.device) -> None:
    """A trained GPT run's evaluation at every ratio's length (also each run of a stack job:
    ``sparselen.jobs.stacks.run_stack``)."""
    pc, _, targets = _setting(job)
    wildcards = typed_wildcards(job)
    scheme = job.params.gpt["schemes"][wildcards["distribution"]]
    net, prov = load_model(job.output.model, device)
    _write_eval(job, gpt_predict(net, pc, scheme == "coupled"), pc, targets,
                {"model": "gpt", **wildcards, "window": None, "scheme": scheme, "config_hash": prov["config_hash"]})


def table(job) -> None:
    report.table(job.input.evals, job.output, job.params.floor)


def figure(job) -> None:
    report.figure(job.input.evals, job.params.train_max_length, job.params.floor, job.output.png, job.output.pdf)

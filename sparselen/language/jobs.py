"""The steps of the ``language_*`` rules (workflow/rules/language.smk), one function each;
every function receives the rule's named inputs, outputs, params and wildcards
(sparselen/interface/job.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from sparselen.interface.job import named, runtime
from sparselen.interface.run import Run, identity, typed_wildcards
from sparselen.language import TRAINING_CODE, analysis, controls
from sparselen.language import corpus as corpora
from sparselen.language import data, encoding
from sparselen.language import token_files as token_file_format
from sparselen.language import tokenizer as tokenizers
from sparselen.language.evaluate import compile_analysis
from sparselen.language.evaluate import loss_by_position as losses_by_position
from sparselen.language.evaluate import position_bins
from sparselen.language.figures import figures as draw_figures
from sparselen.language.progress import Progress, fingerprint
from sparselen.language.tables import TABLES
from sparselen.nn.architectures import model_config
from sparselen.presentation.tables import runs_provenance, write_table
from sparselen.runtime import io
from sparselen.runtime.provenance import provenance
from sparselen.runtime.rng import generator
from sparselen.statistics.stats import NONNEGATIVE, t_interval
from sparselen.statistics.verdicts import Settings
from sparselen.training import distributed
from sparselen.training.distributed import DataParallel
from sparselen.training.resumable import ANALYSIS_PROGRESS
from sparselen.training.train import TrainConfig, load_model
from sparselen.training.train import train as train_model

log = logging.getLogger(__name__)


def corpus(job) -> None:
    """Stream the documents into one JSONL file per split (params.corpus = language.corpus)."""
    cfg = job.params.corpus
    summary = corpora.write_split(cfg, {"train": job.output.train, "eval": job.output.eval})
    io.write_json(job.output.summary, {**summary, "provenance": provenance(cfg, cfg["seed"])})
    log.info("corpus: %s", summary)


def tokenizer(job) -> None:
    """BPE trained on the training split, or OLMo's file (params.tokenizer = language.tokenizer)."""
    cfg = job.params.tokenizer
    if cfg["kind"] == "olmo":
        tokenizers.fetch_olmo_tokenizer(job.output.tokenizer)
        return
    tok = tokenizers.train_bpe(corpora.texts(job.input.train), cfg["vocab_size"], cfg["min_frequency"])
    with io.atomic_path(job.output.tokenizer) as tmp:
        tok.save(str(tmp))


def tokens(job) -> None:
    """Held-out documents, then the training stream, as OLMo-format token files named by
    ``tokens.json``: documents stream from the corpus' files through the tokenizer in chunks
    encoded over the job's threads, so memory does not grow with the corpus and a killed job
    resumes at its last chunk (``sparselen.language.encoding``); every model step reads the
    files in place."""
    tokenizers.use_threads(job.threads)
    tok = tokenizers.load(job.input.tokenizer)
    eos, vocab = tokenizers.eos_id(tok), tokenizers.vocab_size(tok)
    dtype = token_file_format.dtype_for_vocab(vocab)

    def write(split: str) -> dict:
        return encoding.write_split(getattr(job.output, split), getattr(job.input, split), tok, job.input.tokenizer,
                                    eos, vocab, dtype, job.threads)

    files = {"eval": write("eval")}  # first: held-out documents too short fail before the long encoding
    lengths = [len(d) for d in token_file_format.TokenStream(job.output.eval, dtype, vocab, eos).documents()]
    data.check_held_out_lengths(lengths, job.config["language"])  # read, not params: a change reruns nothing
    files["train"] = write("train")
    counts = {"train_tokens": files["train"]["tokens"], "eval_tokens": sum(lengths),
              "eval_median_document_tokens": int(np.median(lengths))}
    token_file_format.write_index(job.output.tokens, files, eos, vocab, dtype, **counts,
                                  provenance=provenance(None, None, **counts))
    log.info("tokens: %s", counts)


def token_files(job) -> None:
    """The config's OLMo token files (params.token_files), checked (dtype, ids below the
    vocabulary, EOS present) and named in ``tokens.json``, which every model step reads."""
    spec = dict(job.params.token_files)
    toks = token_file_format.load_tokens(spec)
    data.check_held_out_lengths([len(d) for d in toks["eval"]], job.config["language"])
    counts = {"train_tokens": len(toks["train"]), "eval_documents": len(toks["eval"]),
              "eval_tokens": sum(map(len, toks["eval"]))}
    io.write_json(job.output.tokens, {"format": "olmo-memmap", **spec, **counts,
                                      "provenance": provenance(spec, None, **counts)})
    log.info("token files: %s", counts)


def train(job) -> dict:
    """One LM (wildcards context, run = a scheme or a language.variants entry, seed): params
    model and scheme (the run's, a variant's resolved), pose, train. With more than one
    process (``language.parallel``: processes per node x nodes) the step starts torchrun and
    runs again in each worker; the workers train the model data-parallel
    (``sparselen.training.distributed``)."""
    run = Run.of(job, TRAINING_CODE)
    settings = parallel_settings(job)
    if settings["processes"] * settings["nodes"] > 1 and not DataParallel.launched():
        distributed.launch(job, settings["processes"], settings["nodes"])  # this step again, in each worker
        return io.read_json(job.output.summary)
    parallel = DataParallel.from_env(job.config["device"], settings["strategy"], run.runtime.gpus)
    try:
        return train_model(*training(job), run, parallel)
    finally:
        if parallel is not None:
            parallel.close()


def training(job):
    """(model config, trainer settings, batch function) of one LM (wildcards context, seed;
    params model, scheme, pose, train; input tokens); what ``train`` and the pilot train."""
    p, w = job.params, typed_wildcards(job)
    toks = data.load_tokens(job.input.tokens)
    mc = model_config(p.model, toks["vocab_size"], scheme=p.scheme)
    context = w["context"]
    batch_size = max(1, p.train["batch_tokens"] // context)
    micro_tokens = job.config.get("language", {}).get("micro_batch_tokens", 0)  # a runtime knob, not a param
    tc = TrainConfig.from_section(p.train, w["seed"], p.pose, batch_size=batch_size,
                                  micro_batch=micro_tokens and max(1, micro_tokens // context))
    return mc, tc, data.training_batches(toks["train"], context, batch_size, w["seed"])


def parallel_settings(job) -> dict:
    """``language.parallel`` (runtime knobs, read from the config, never params)."""
    return {"processes": 1, "nodes": 1, "strategy": "auto", **job.config.get("language", {}).get("parallel", {})}


def loss_by_position(job) -> None:
    """Mean loss vs context size on held-out windows, binned (params.eval = language.eval)."""
    cfg, dev = job.params.eval, runtime(job).device
    model, prov = load_model(job.input.model, dev)
    docs = data.load_tokens(job.input.tokens)["eval"]
    length = cfg["length"]
    positions = data.sample_positions(docs, length, cfg["windows"], generator("language-eval", cfg["seed"]))
    windows = torch.stack([docs[d][t - length:t + 1] for d, t in positions])
    losses = losses_by_position(model, windows, cfg["batch_size"], dev)  # column j: j + 1 tokens of context
    rows = []
    for lo, hi in position_bins(length):
        per_window = losses[:, lo - 1:hi - 1].mean(1).numpy()
        mean, low, high = t_interval(per_window, bounds=NONNEGATIVE)
        rows.append({"context": int(job.wildcards.context), "scheme": job.wildcards.run, "seed": prov["seed"],
                     "position": float(np.sqrt(lo * (hi - 1))), "bin_low": lo, "bin_high": hi - 1,
                     "mean": mean, "ci_low": low, "ci_high": high, "n": len(per_window),
                     "config_hash": prov["config_hash"]})
    io.write_csv(pd.DataFrame(rows), job.output.losses)


def analyze(job) -> None:
    """Screen tokens, then greedy and cheap-selector L_k (params analysis, contexts) on part
    ``wildcards.part`` of ``params.parts`` of the analysed tokens (all by default); every part
    screens the same tokens (a few minutes of the hours), ``analysis_merge`` joins the parts.
    Resumable: its stages and per-token searches are kept beside the outputs
    (``sparselen.language.progress``)."""
    ctx, dev = job.params.contexts, runtime(job).device
    part = (int(named(job.wildcards).get("part", 0)), int(getattr(job.params, "parts", 1)))
    a = dict(job.params.analysis)  # the selectors (saliency: forward and backward) keep its batch_size
    a |= {"batch_size": analysis.last_token_batch(job.config, a["batch_size"]), "selector_batch_size": a["batch_size"]}
    model, prov = analysis_model(job)
    docs = data.load_tokens(job.input.tokens)["eval"]
    short, long = ctx["short"], ctx["long"]
    progress = Progress(Path(job.output.deps).parent / ANALYSIS_PROGRESS,
                        fingerprint(identity(job), job.input.model, docs))
    screened = progress.stage("screen", lambda: analysis.screen(model, docs, a, short, long, dev))
    io.write_csv(screened.assign(seed=prov["seed"], config_hash=prov["config_hash"]), job.output.screen)
    n = int(screened["analysed"].sum())
    log.info("%d of %d tokens have benefit >= %s; analysing %d (part %d of %d)",
             int((screened["benefit"] >= a["min_benefit"]).sum()), len(screened), a["min_benefit"], n, part[0] + 1,
             part[1])
    if n < 2:
        raise ValueError(f"only {n} of {len(screened)} screened tokens have L_short - L_long >= "
                         f"language.analysis.min_benefit = {a['min_benefit']}; lower it or raise candidates")
    deps = analysis.sparse_dependency(model, docs, screened, a, short, long, dev, progress, part)
    planted, planted_deps = analysis.planted_control(model, docs, a, short, long, dev, progress, part)
    log.info("planted control: %d of %d repeats beyond the short window have benefit >= %s",
             int(planted["analysed"].sum()), int(planted["beyond"].sum()), a["min_benefit"])
    frames = [d for d in (deps, planted_deps) if len(d)]  # a part can have no tokens of either
    deps = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    planted["seed"] = deps["seed"] = prov["seed"]
    planted["config_hash"] = deps["config_hash"] = prov["config_hash"]
    io.write_csv(planted, job.output.planted)
    io.write_csv(deps, job.output.deps)


def analysis_merge(job) -> None:
    """One seed's analysis from its parts (``input.screen``, ``deps``, ``planted``: a list each,
    in part order): the screens, equal in every part, once; the dependency rows in the order
    of an analysis in one part (``analysis.merge_parts``)."""
    for name in ("screen", "planted"):
        paths = list(getattr(job.input, name))
        first = pd.read_csv(paths[0])
        for path in paths[1:]:
            if not first[["doc", "t", "analysed"]].equals(pd.read_csv(path)[["doc", "t", "analysed"]]):
                raise ValueError(f"analysis parts analysed different tokens: {paths[0]} and {path} (the parts "
                                 "must run on one kind of device: rerun them, or set language.analysis_parts: 1)")
        io.write_csv(first, getattr(job.output, name))
    deps = analysis.merge_parts([_read_rows(f) for f in job.input.deps], list(job.params.analysis["selectors"]),
                                last=("seed", "config_hash"))
    io.write_csv(deps, job.output.deps)


def _read_rows(path) -> pd.DataFrame:
    """A part's dependency rows (an empty part's file has none)."""
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def analysis_model(job):
    """(model, provenance) of ``job.input.model`` on the job's device; with the runtime knob
    ``compile``, its analysis forward passes compiled (``evaluate.compile_analysis``)."""
    rt = runtime(job)
    model, prov = load_model(job.input.model, rt.device)
    if rt.compile:
        compile_analysis(model)
    return model, prov


def transfer(job) -> None:
    """A model's losses at both contexts (params contexts, batch_size) on the analysed tokens,
    for a long-context model also on every screened (random) token (the model-scale table's
    gain; a short model's file has the columns only), and its induction probe."""
    dev = runtime(job).device
    model, prov = analysis_model(job)
    docs = data.load_tokens(job.input.tokens)["eval"]
    screened = pd.read_csv(job.input.screen)
    short, long = job.params.contexts["short"], job.params.contexts["long"]
    context = int(job.wildcards.context)
    every = context == long
    toks = screened if every else screened[screened["analysed"]]
    batch_size = analysis.last_token_batch(job.config, job.params.batch_size)
    losses = analysis.context_losses(model, docs, list(zip(toks["doc"], toks["t"])), [short, long], batch_size, dev)
    df = pd.DataFrame({"doc": toks["doc"].values, "t": toks["t"].values, "context": context,
                       "scheme": job.wildcards.run, "seed": prov["seed"],
                       "parameters": sum(p.numel() for p in model.parameters()),
                       "loss_short": losses[short].numpy(), "loss_long": losses[long].numpy(),
                       "config_hash": prov["config_hash"]})
    df["gain"] = df["loss_short"] - df["loss_long"]
    analysed = toks["analysed"].to_numpy(bool)
    io.write_csv(df[analysed], job.output.losses)
    io.write_csv(df if every else df.iloc[:0], job.output.screen_losses)
    labels = {"context": context, "scheme": job.wildcards.run, "seed": prov["seed"], "config_hash": prov["config_hash"]}
    io.write_csv(induction(model, docs, job.params.induction, short, long, job.params.batch_size, dev, labels),
                 job.output.induction)


def induction(model, docs, cfg: dict, short: int, long: int, batch_size: int, device, labels: dict) -> pd.DataFrame:
    """The induction probe (``cfg`` = language.analysis.induction), one row per sequence: a
    span repeated with the second copy beyond the short window, filling the long context;
    ``labels`` (context, scheme, seed, config hash) on every row."""
    filler = long - cfg["prefix"] - 2 * cfg["span"]
    if cfg["span"] + filler <= short:
        raise ValueError(f"language.analysis.induction: span {cfg['span']} + filler {filler} must exceed the "
                         f"short context {short}, so that the second copy cannot see the first in it")
    seqs = controls.induction_sequences(docs, cfg["sequences"], cfg["prefix"], cfg["span"], filler, cfg["seed"])
    probe = controls.induction_probe(model, seqs, cfg["prefix"], cfg["span"], short, batch_size, device)
    df = pd.DataFrame({k: v.numpy() for k, v in probe.items()})
    df["sequence"] = np.arange(len(df))
    for key, value in labels.items():
        df[key] = value
    return df


def table(job) -> None:
    """The table ``wildcards.table`` of the registry (sparselen/language/tables.py): its
    inputs read by name, built with params.analysis (the settings it reads), written as CSV
    and Markdown with the provenance of the runs it reads."""
    entry, settings = TABLES[job.wildcards.table], dict(job.params.analysis)
    inputs = entry.read(named(job.input))
    write_table(entry.build(**inputs, analysis=settings), job.output.csv, job.output.md,
                entry.title.format(**settings), runs_provenance(*inputs.values()))


def figures(job) -> None:
    """Both figures; params report (the bootstrap) and facts (the language claims' facts) let
    them mark what the claims do not read."""
    i, p = job.input, job.params
    settings = Settings(p.report["bootstrap"], p.report["seed"], p.report["level"], p.facts)
    draw_figures(p.contexts["short"], p.contexts["long"], p.min_benefit, i.table, i.generalization,
                 i.loss_by_position, i.screen, i.deps, settings, job.output)

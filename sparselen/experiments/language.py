"""Natural language (SPEC.md section 5): corpus, tokenizer, token data, training, loss by
position, the sparse-dependency analysis, tables and figures, each a
``sparselen language <step>`` command called by one Snakemake rule."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from sparselen import io
from sparselen.aggregate import read_tables, write_table
from sparselen.cliargs import add_runtime_args
from sparselen.device import configure_cpu, resolve_device
from sparselen.language import analysis, corpus, data, tokenizer
from sparselen.language.bootstrap import bootstrap_ci
from sparselen.language.evaluate import loss_by_position
from sparselen.provenance import provenance
from sparselen.rng import generator
from sparselen.settings import model_config, parse_json_arg, train_config
from sparselen.stats import t_interval
from sparselen.train import load_model, train

log = logging.getLogger(__name__)


def make_corpus(cfg: dict, out, out_summary) -> None:
    """``cfg`` = language.corpus: read the documents and split them by document."""
    split = corpus.split_documents(corpus.read_documents(cfg), cfg["eval_fraction"], cfg["seed"])
    io.write_json(out, split)
    summary = {name: {"documents": len(d), "characters": sum(len(x["text"]) for x in d)} for name, d in split.items()}
    io.write_json(out_summary, {**summary, "provenance": provenance(cfg, cfg["seed"])})
    log.info("corpus: %s", summary)


def make_tokenizer(cfg: dict, corpus_path, out) -> None:
    """``cfg`` = language.tokenizer: BPE trained on the training split, or OLMo's file."""
    if cfg["kind"] == "olmo":
        tokenizer.fetch_olmo_tokenizer(out)
        return
    texts = [d["text"] for d in io.read_json(corpus_path)["train"]]
    tok = tokenizer.train_bpe(texts, cfg["vocab_size"], cfg["min_frequency"])
    with io.atomic_path(out) as tmp:
        tok.save(str(tmp))


def make_tokens(corpus_path, tokenizer_path, out) -> None:
    """Training stream (packed, EOS-separated) and held-out documents as token ids."""
    split, tok = io.read_json(corpus_path), tokenizer.load(tokenizer_path)
    ids = {name: tokenizer.encode(tok, [d["text"] for d in docs]) for name, docs in split.items()}
    stream = data.pack(ids["train"], tokenizer.eos_id(tok)).to(torch.int32)
    eval_docs = [torch.tensor(d, dtype=torch.int32) for d in ids["eval"]]
    counts = {"train_tokens": len(stream), "eval_tokens": sum(map(len, eval_docs)),
              "eval_median_document_tokens": int(np.median([len(d) for d in eval_docs]))}
    io.torch_save({"train": stream, "eval": eval_docs, "vocab_size": tokenizer.vocab_size(tok),
                   "provenance": provenance(None, None, **counts)}, out)
    log.info("tokens: %s", counts)


def load_tokens(path) -> dict:
    t = torch.load(path, weights_only=False)
    t["train"] = t["train"].long()
    t["eval"] = [d.long() for d in t["eval"]]
    return t


def run_training(cfg: dict, tokens_path, context: int, scheme: str, seed: int, out_model, out_log, out_summary,
                 checkpoint, device: str = "auto") -> dict:
    """``cfg`` = {model, pose, train, compile}: one LM at ``context`` with position ``scheme``."""
    dev = resolve_device(device)
    tokens = load_tokens(tokens_path)
    cfg = {**cfg, "model": {**cfg["model"], "position": scheme}}  # the run's scheme, not the schema default
    mc = model_config(cfg["model"], tokens["vocab_size"])
    batch_size = max(1, cfg["train"]["batch_tokens"] // context)
    tc = train_config(cfg["train"], seed, cfg["pose"], compile=cfg.get("compile", False), batch_size=batch_size)
    run = {**cfg, "context": context, "scheme": scheme, "seed": seed, "vocab_size": tokens["vocab_size"]}
    batches = data.training_batches(tokens["train"], context, batch_size, seed)
    return train(mc, tc, batches, out_model, checkpoint, dev, run, out_log, out_summary,
                 {"context": context, "scheme": scheme})


def position_bins(length: int) -> list[tuple[int, int]]:
    """Log-spaced [lo, hi) bins of context sizes 1..length (a quarter octave each)."""
    edges = sorted({int(round(2 ** (i / 4))) for i in range(int(4 * np.log2(length)) + 1)} | {length + 1})
    return [(lo, hi) for lo, hi in zip(edges[:-1], edges[1:])]


def run_loss_by_position(cfg: dict, model_path, tokens_path, out_csv, device: str = "auto") -> pd.DataFrame:
    """``cfg`` = language.eval: mean loss vs context size on held-out windows, binned."""
    dev = resolve_device(device)
    model, prov = load_model(model_path, dev)
    docs = load_tokens(tokens_path)["eval"]
    length = cfg["length"]
    positions = data.sample_positions(docs, length, cfg["windows"], generator("language-eval", cfg["seed"]))
    windows = torch.stack([docs[d][t - length:t + 1] for d, t in positions])
    losses = loss_by_position(model, windows, cfg["batch_size"], dev)  # column j: j + 1 tokens of context
    rows = []
    for lo, hi in position_bins(length):
        per_window = losses[:, lo - 1:hi - 1].mean(1).numpy()
        mean, low, high = t_interval(per_window)
        rows.append({"context": prov["run"]["context"], "scheme": prov["run"]["scheme"], "seed": prov["seed"],
                     "position": float(np.sqrt(lo * (hi - 1))), "bin_low": lo, "bin_high": hi - 1,
                     "mean": mean, "ci_low": low, "ci_high": high, "n": len(per_window)})
    df = pd.DataFrame(rows)
    io.write_csv(df, out_csv)
    return df


def run_analysis(cfg: dict, model_path, tokens_path, out_screen, out_deps, device: str = "auto") -> None:
    """``cfg`` = {analysis, contexts}: screen tokens, then greedy and cheap-selector L_k."""
    dev = resolve_device(device)
    model, prov = load_model(model_path, dev)
    docs = load_tokens(tokens_path)["eval"]
    a, short, long = cfg["analysis"], cfg["contexts"]["short"], cfg["contexts"]["long"]
    screened = analysis.screen(model, docs, a, short, long, dev)
    screened["seed"] = prov["seed"]
    io.write_csv(screened, out_screen)
    n = int(screened["analysed"].sum())
    log.info("%d of %d tokens have benefit >= %s; analysing %d", int((screened["benefit"] >= a["min_benefit"]).sum()),
             len(screened), a["min_benefit"], n)
    if n < 2:
        raise ValueError(f"only {n} of {len(screened)} screened tokens have L_short - L_long >= "
                         f"language.analysis.min_benefit = {a['min_benefit']}; lower it or raise candidates")
    deps = analysis.sparse_dependency(model, docs, screened, a, short, long, dev)
    deps["seed"] = prov["seed"]
    deps["config_hash"] = prov["config_hash"]
    io.write_csv(deps, out_deps)


def run_transfer(cfg: dict, model_path, tokens_path, screen_csv, out_csv, device: str = "auto") -> None:
    """``cfg`` = {contexts, batch_size}: a model's losses on the analysed tokens at both contexts."""
    dev = resolve_device(device)
    model, prov = load_model(model_path, dev)
    docs = load_tokens(tokens_path)["eval"]
    screened = pd.read_csv(screen_csv)
    tokens = screened[screened["analysed"]]
    positions = list(zip(tokens["doc"], tokens["t"]))
    short, long = cfg["contexts"]["short"], cfg["contexts"]["long"]
    losses = analysis.context_losses(model, docs, positions, [short, long], cfg["batch_size"], dev)
    df = pd.DataFrame({"doc": tokens["doc"].values, "t": tokens["t"].values, "context": prov["run"]["context"],
                       "scheme": prov["run"]["scheme"], "seed": prov["seed"],
                       "loss_short": losses[short].numpy(), "loss_long": losses[long].numpy()})
    df["gain"] = df["loss_short"] - df["loss_long"]
    io.write_csv(df, out_csv)


def make_tables(cfg: dict, deps_csvs, transfer_csvs, position_csvs, out) -> None:
    """``cfg`` = language.analysis. ``out``: dict of output paths (table, generalization, position)."""
    deps, transfer = read_tables(deps_csvs), read_tables(transfer_csvs)
    boot = {"n_boot": cfg["bootstrap"], "seed": cfg["seed"]}
    rows = []
    for (method, k), g in deps.groupby(["method", "k"], sort=False):
        med, lo, hi = bootstrap_ci(g["recovered"], np.median, **boot)
        rows.append({"method": method, "k": k, "n_tokens": len(g), "median": med, "ci_low": lo, "ci_high": hi,
                     "mean": float(g["recovered"].mean()),
                     f"share_ge_{cfg['sparse_fraction']}": float((g["recovered"] >= cfg["sparse_fraction"]).mean()),
                     "overlap_with_greedy": float(g["overlap"].mean())})
    table = pd.DataFrame(rows)
    prov = provenance(None, sorted(deps["seed"].unique().tolist()),
                      config_hashes=sorted(deps["config_hash"].unique().tolist()))
    write_table(table, out["table_csv"], out["table_md"],
                "Natural language: fraction of the long-context benefit recovered by k distant tokens "
                "(median over analysed tokens, 95% bootstrap interval)", prov)

    levels = []
    for seed, g in deps.groupby("seed"):
        lv = analysis.sparsity_level(g, cfg["sparse_fraction"])
        lv["seed"] = seed
        levels.append(lv)
    joined = transfer.merge(pd.concat(levels), on=["doc", "t", "seed"])
    order = {str(k): i for i, k in enumerate(sorted(deps["k"].unique()))}
    rows = []
    for (ctx, scheme), run in joined.groupby(["context", "scheme"], sort=True):
        for level, g in [*run.groupby("sparsity"), ("all", run)]:
            mean, lo, hi = bootstrap_ci(g["gain"], np.mean, **boot)
            rank = len(order) + 1 if level == "all" else order.get(level, len(order))  # ">kmax" after the ks
            rows.append({"context": ctx, "scheme": scheme, "sparsity": level, "order": rank,
                         "n_tokens": len(g), "mean": mean, "ci_low": lo, "ci_high": hi})
    gen = pd.DataFrame(rows).sort_values(["context", "scheme", "order"])
    write_table(gen, out["generalization_csv"], out["generalization_md"],
                "Natural language: each model's gain from the long over the short context on the analysed "
                f"tokens, by token sparsity (smallest greedy k recovering {cfg['sparse_fraction']} of the "
                "benefit; mean, 95% bootstrap interval)", prov)

    pos = read_tables(position_csvs)
    rows = []
    for (ctx, scheme, lo, hi), g in pos.groupby(["context", "scheme", "bin_low", "bin_high"], sort=True):
        if len(g) > 1:  # several seeds: interval over seeds
            mean, low, high = t_interval(g["mean"])
        else:
            mean, low, high = float(g["mean"].iloc[0]), float(g["ci_low"].iloc[0]), float(g["ci_high"].iloc[0])
        rows.append({"context": ctx, "scheme": scheme, "position": float(g["position"].iloc[0]), "bin_low": lo,
                     "bin_high": hi, "mean": mean, "ci_low": low, "ci_high": high, "n_seeds": len(g)})
    io.write_csv(pd.DataFrame(rows), out["position_csv"])


def make_figures(cfg: dict, table_csv, generalization_csv, position_csv, screen_csvs, out) -> None:
    """``cfg`` = {contexts, min_benefit}."""
    from sparselen.language.figures import length_figure, sparsity_figure  # matplotlib only here
    from sparselen.plotting import save_figure

    short, long = cfg["contexts"]["short"], cfg["contexts"]["long"]
    prov = provenance(None, None, tables=[str(table_csv), str(generalization_csv), str(position_csv)])
    fig = sparsity_figure(pd.read_csv(table_csv), read_tables(screen_csvs), cfg["min_benefit"], short, long)
    save_figure(fig, out["sparsity_png"], out["sparsity_pdf"], prov)
    gen = pd.read_csv(generalization_csv)
    fig = length_figure(pd.read_csv(position_csv), gen[gen["sparsity"] != "all"], short, long)
    save_figure(fig, out["length_png"], out["length_pdf"], prov)


def config_errors(config: dict) -> list[str]:
    """Cross-key checks of the ``language`` section (the schema has checked each key alone)."""
    out = []
    p = config.get("language")
    if not p:
        return out
    short, long = p["contexts"]["short"], p["contexts"]["long"]
    if short >= long:
        out.append(f"language.contexts = {p['contexts']}: short must be below long")
    a = p["analysis"]
    if max(a["k"]) > long - short:
        out.append(f"language.analysis.k = {a['k']}: k cannot exceed the far context long - short = {long - short}")
    if p["eval"]["length"] < long:
        out.append(f"language.eval.length = {p['eval']['length']}: must reach the long context ({long})")
    schemes = set(p["schemes"]["short"]) | set(p["schemes"]["long"])
    target = p["pose"].get("target_length")
    if "pose" in schemes and (target is None or target < p["eval"]["length"]):
        out.append(f"language.pose.target_length = {target}: must be at least language.eval.length "
                   f"({p['eval']['length']}) when a pose model is trained")
    if p["train"]["batch_tokens"] < long:
        out.append(f"language.train.batch_tokens = {p['train']['batch_tokens']}: below one long-context row ({long})")
    m = p["model"]
    if m.get("d_model", 128) % m.get("n_head", 4):
        out.append(f"language.model.d_model = {m.get('d_model')}: not divisible by n_head = {m.get('n_head')}")
    # Whether the paths exist is checked by the corpus job, the first of the slice (the
    # paper-scale config names C4 shards that only exist where it runs).
    c = p["corpus"]
    if c["source"] == "files" and not c.get("paths"):
        out.append("language.corpus.paths = []: source 'files' needs .txt, .jsonl or .json.gz files or directories")
    elif c["source"] != "files" and c.get("paths"):
        out.append(f"language.corpus.paths = {c['paths']}: only read with language.corpus.source = files")
    return out


def _outputs(a, names) -> dict:
    return {n: getattr(a, n) for n in names}


def add_commands(sub) -> None:
    p = sub.add_parser("language", help="natural-language sparse dependency (SPEC.md section 5)")
    steps = p.add_subparsers(dest="step", required=True)

    def cmd(name, help, func, *args, threads=False):
        s = steps.add_parser(name, help=help)
        for a in args:
            s.add_argument(f"--{a}", required=True, **({"type": parse_json_arg} if a == "config" else {}))
        if threads:
            add_runtime_args(s)
        s.set_defaults(func=lambda ns: (configure_cpu(getattr(ns, "threads", None)), func(ns)))
        return s

    cmd("corpus", "read and split the corpus", lambda a: make_corpus(a.config, a.out, a.summary),
        "config", "out", "summary")
    cmd("tokenizer", "train (or fetch) the tokenizer", lambda a: make_tokenizer(a.config, a.corpus, a.out),
        "config", "corpus", "out")
    cmd("tokens", "tokenize both splits", lambda a: make_tokens(a.corpus, a.tokenizer, a.out),
        "corpus", "tokenizer", "out")
    s = cmd("train", "train one LM (one context, scheme, seed)", lambda a: run_training(
        a.config, a.tokens, a.context, a.scheme, a.seed, a.model, a.log_csv, a.summary, a.checkpoint, a.device),
        "config", "tokens", "scheme", "model", "log-csv", "summary", "checkpoint", threads=True)
    s.add_argument("--context", type=int, required=True)
    s.add_argument("--seed", type=int, required=True)
    cmd("loss-by-position", "validation loss vs position", lambda a: run_loss_by_position(
        a.config, a.model, a.tokens, a.out, a.device), "config", "model", "tokens", "out", threads=True)
    cmd("analyze", "sparse dependency analysis of the reference model", lambda a: run_analysis(
        a.config, a.model, a.tokens, a.screen, a.deps, a.device), "config", "model", "tokens", "screen", "deps",
        threads=True)
    cmd("transfer", "a model's losses on the analysed tokens", lambda a: run_transfer(
        a.config, a.model, a.tokens, a.screen, a.out, a.device), "config", "model", "tokens", "screen", "out",
        threads=True)
    s = cmd("tables", "recovered fractions, generalization by sparsity, loss by position", lambda a: make_tables(
        a.config, a.deps, a.transfer, a.position, _outputs(a, [
            "table_csv", "table_md", "generalization_csv", "generalization_md", "position_csv"])),
        "config", "table-csv", "table-md", "generalization-csv", "generalization-md", "position-csv")
    for name in ("deps", "transfer", "position"):
        s.add_argument(f"--{name}", nargs="+", required=True)
    s = cmd("figures", "draw both figures", lambda a: make_figures(
        a.config, a.table, a.generalization, a.position, a.screen, _outputs(a, [
            "sparsity_png", "sparsity_pdf", "length_png", "length_pdf"])),
        "config", "table", "generalization", "position", "sparsity-png", "sparsity-pdf", "length-png", "length-pdf")
    s.add_argument("--screen", nargs="+", required=True)

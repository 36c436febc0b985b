"""The sparse-dependency analysis outlives its job's time limit: what it has computed is kept in
one file beside its outputs, and the next attempt goes on from there.

At paper scale the analysis (screen, greedy per token x k steps, the selectors, the null and the
planted controls) runs for hours in one job. Its stages are kept whole, and its greedy searches
token by token: the file is rewritten atomically after each stage and each analysed token, so
a killed attempt loses at most one token's search, and a resumed analysis gives exactly the
rows of an uninterrupted one (it reuses what was computed, never recomputes it).

Like a training checkpoint (``sparselen.training.resumable``) the file is not a Snakemake output, which
Snakemake would delete with a failed job's outputs; the workflow's ``onsuccess`` removes it
once the job's outputs are recorded. It records a fingerprint of what computes the analysis:
the rule's params and wildcards, the model file, the held-out tokens and the code of the
analysis (``CODE``). A file of another fingerprint is ignored: the analysis starts over.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from sparselen.runtime import io
from sparselen.training.resumable import TRAINER, source_fingerprint

log = logging.getLogger(__name__)
# the package modules that compute the analysis' numbers: its own, and the models it runs
CODE = ("language/analysis.py", "language/controls.py", "language/data.py", "language/dependency.py",
        "language/evaluate.py", "language/progress.py", "training/modelfile.py", *TRAINER)


def file_digest(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


def fingerprint(identity: dict, model_path, docs) -> str:
    """Hash of what the analysis' numbers depend on: ``identity`` (the rule's params and
    wildcards), the model file, the held-out documents ``docs`` (id tensors) and ``CODE``."""
    h = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode())
    h.update(file_digest(model_path).encode())
    for d in docs:
        h.update(len(d).to_bytes(8, "little") + d.numpy().tobytes())
    h.update(source_fingerprint(*CODE).encode())
    return h.hexdigest()[:16]


class Progress:
    """Results of the analysis' stages and per-token searches so far; with ``path`` None, kept
    in memory only (an analysis run outside a job)."""

    def __init__(self, path=None, fingerprint: str = ""):
        self.path, self.fingerprint, self.state = path and Path(path), fingerprint, {}
        if self.path is None or not self.path.exists():
            return
        try:
            saved = json.loads(self.path.read_text(), object_hook=decode)
        except ValueError as e:
            log.warning("ignoring analysis progress %s: unreadable (%s)", self.path, e)
            return
        if saved.get("fingerprint") != fingerprint:
            log.info("ignoring analysis progress %s: another analysis (fingerprint %s, not %s)", self.path,
                     saved.get("fingerprint"), fingerprint)
            return
        self.state = saved["state"]
        log.info("resuming analysis from %s: %s", self.path, self.summary())

    def summary(self) -> str:
        return ", ".join(f"{name} ({len(v)} tokens)" if isinstance(v, list) else name for name, v in self.state.items())

    def stage(self, name: str, compute):
        """``compute()``, or its result kept from an earlier attempt."""
        if name not in self.state:
            self.state[name] = compute()
            self.save()
        return self.state[name]

    def tokens(self, name: str) -> list:
        """The per-token results of search ``name`` so far, in token order."""
        return list(self.state.get(name, []))

    def add_token(self, name: str, result) -> None:
        """Keep the next token's result of search ``name``."""
        self.state.setdefault(name, []).append(result)
        self.save()

    def save(self) -> None:
        if self.path is not None:
            io.write_text(self.path, json.dumps({"fingerprint": self.fingerprint, "state": self.state}, default=encode))


def encode(obj):
    """JSON of the analysis' results: tables and tensors with their dtypes, so that what is
    read back equals what was computed (floats are written exactly)."""
    if isinstance(obj, pd.DataFrame):
        return {"__frame__": {c: {"dtype": str(obj[c].dtype), "values": obj[c].tolist()} for c in obj.columns}}
    if isinstance(obj, torch.Tensor):
        return {"__tensor__": {"dtype": str(obj.dtype).removeprefix("torch."), "values": obj.tolist()}}
    raise TypeError(f"analysis progress cannot keep a {type(obj).__name__}")


def decode(obj: dict):
    if "__frame__" in obj:
        return pd.DataFrame({c: np.array(v["values"], dtype=v["dtype"]) for c, v in obj["__frame__"].items()})
    if "__tensor__" in obj:
        return torch.tensor(obj["__tensor__"]["values"], dtype=getattr(torch, obj["__tensor__"]["dtype"]))
    return obj

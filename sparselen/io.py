"""Atomic writes: a killed job never leaves a file that looks finished.

Every final output is written to a temporary file in the same directory and renamed into
place (``os.replace`` is atomic on POSIX), so Snakemake sees either no file or a whole one.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

import torch


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path next to ``path``; move it over ``path`` only on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def json_dumps(obj) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, default=str)


def write_json(path, obj) -> None:
    write_text(path, json_dumps(obj) + "\n")


def read_json(path):
    return json.loads(Path(path).read_text())


def torch_save(obj, path) -> None:
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def write_csv(df, path) -> None:
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False)

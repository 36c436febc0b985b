"""Atomic writes: a killed job never leaves a file that looks finished.

Every final output is written to a temporary file in the same directory and renamed into
place (``os.replace`` is atomic on POSIX), so Snakemake sees either no file or a whole one.
The temporary file is created private (mode 0600); before the rename it gets the mode any new
file gets under the process's umask, so results on a shared file system stay readable by
whoever the umask lets read them.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

import torch


def proc_status(field: str) -> str | None:
    """The value of one field of this process's ``/proc/self/status`` (Linux); None elsewhere."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return line.split()[1]
    except OSError:
        pass
    return None


def umask() -> int:
    """The process's umask, read without changing it where Linux says it (``/proc``); elsewhere
    set and restored at once."""
    mask = proc_status("Umask")
    if mask is not None:
        return int(mask, 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def peak_rss_mb() -> float:
    """This process's own peak resident memory in MB (``VmHWM``, Linux). Not ``getrusage``'s
    ``ru_maxrss``: a child started by ``subprocess`` keeps its parent's high-water mark there."""
    return int(proc_status("VmHWM")) / 1024  # kB


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path next to ``path``; move it over ``path`` only on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~umask())
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

"""Run Snakemake so that a killed run can simply be started again.

``python -m sparselen.runtime.runlock [snakemake arguments]`` (what ``make run`` calls):

1. takes an exclusive ``flock`` on ``<workdir>/.snakemake/sparselen-run.lock`` without waiting.
   If another run holds it, it stops at once with exit code 75 and says so: a second run in the
   same directory while the first is alive is refused (as Snakemake itself would refuse it);
2. holding it, no other run started this way is alive, so any Snakemake lock left in the
   directory is stale (its run was killed, e.g. SIGKILL of the whole process group, a lost
   login node, an OOM kill): it runs ``snakemake --unlock`` with the same arguments;
3. replaces itself with ``snakemake <arguments> --rerun-incomplete`` (jobs a kill left half
   done are redone; training jobs resume from their checkpoints). The lock's file descriptor
   is inherited across the exec, so the lock lives exactly as long as the Snakemake process;
   the kernel releases it however that process ends, so no stale lock of ours can exist.

A run started with plain ``snakemake`` takes no flock; as a second guard on Linux, step 2 is
skipped (and the run refused) while any live process runs snakemake in the same directory.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

LOCK_NAME = "sparselen-run.lock"
EX_TEMPFAIL = 75


def workdir(args: list[str]) -> Path:
    """The directory Snakemake will run in (``--directory``/``-d``, else the current one)."""
    for i, a in enumerate(args):
        if a in ("--directory", "-d") and i + 1 < len(args):
            return Path(args[i + 1]).resolve()
        if a.startswith("--directory="):
            return Path(a.split("=", 1)[1]).resolve()
    return Path.cwd()


def other_snakemake_in(directory: Path) -> list[int]:
    """Pids of live processes (not us) running snakemake with this working directory (Linux)."""
    out = []
    for proc in Path("/proc").glob("[0-9]*"):
        pid = int(proc.name)
        if pid == os.getpid():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
            cwd = Path(os.readlink(proc / "cwd"))
        except OSError:
            continue
        words = [c.decode(errors="replace") for c in cmd if c]
        if not any(Path(w).name == "snakemake" or w == "snakemake" for w in words[:3]):
            continue
        if any(w.startswith("--unlock") for w in words):
            continue
        if workdir_of(words, cwd) == directory:
            out.append(pid)
    return out


def workdir_of(words: list[str], cwd: Path) -> Path:
    for i, a in enumerate(words):
        if a in ("--directory", "-d") and i + 1 < len(words):
            return (cwd / words[i + 1]).resolve()
        if a.startswith("--directory="):
            return (cwd / a.split("=", 1)[1]).resolve()
    return cwd.resolve()


def acquire(directory: Path) -> int | None:
    """An fd holding the run lock, or None if another run holds it."""
    lock_dir = directory / ".snakemake"
    lock_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
        os.close(fd)
        print(f"sparselen: another run is active in {directory} (pid {holder or '?'}); not starting a second "
              "one. Wait for it to finish, or stop it first.", file=sys.stderr)
        return None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)  # the pid survives the exec below
    return fd


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    directory = workdir(args)
    fd = acquire(directory)
    if fd is None:
        return EX_TEMPFAIL
    snakemake = [sys.executable, "-m", "snakemake"]
    others = other_snakemake_in(directory) if sys.platform.startswith("linux") else []
    if others:
        print(f"sparselen: snakemake is already running in {directory} (pid {', '.join(map(str, others))}, "
              "started without this wrapper); not starting a second run.", file=sys.stderr)
        return EX_TEMPFAIL
    locks = directory / ".snakemake" / "locks"
    if locks.is_dir() and any(locks.iterdir()):
        print(f"sparselen: removing the stale Snakemake lock of a run that was killed ({locks})", file=sys.stderr)
        subprocess.run([*snakemake, *args, "--unlock"], check=True, stdout=subprocess.DEVNULL)
    if "--rerun-incomplete" not in args and "--ri" not in args:
        args.append("--rerun-incomplete")
    os.set_inheritable(fd, True)  # the flock stays held by the snakemake process below
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [*snakemake, *args])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())

"""A killed run continues with the same command; a second run while the first is alive is refused.

Real processes: the smoke config's parity slice started through ``sparselen.runtime.runlock`` in its own
process group, SIGKILLed as a whole mid-run (what a closed terminal or an OOM kill of `make run`
does), then started again."""

import os
import signal
import subprocess
import time

import pytest
from conftest import PYTHON, ROOT, SMOKE, subprocess_env


def args(workdir, *extra):
    return ["-s", str(ROOT / "Snakefile"), "--directory", str(workdir), "--cores", "1", *extra, "fig_parity",
            "--configfile", *map(str, SMOKE)]


def wrapper(workdir, *extra):
    return [PYTHON, "-m", "sparselen.runtime.runlock", *args(workdir, *extra)]


@pytest.mark.slow
def test_kill_then_continue_and_refuse_a_second_run(tmp_path):
    w = tmp_path / "w"
    t0 = time.monotonic()
    first = subprocess.Popen(wrapper(w), env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)  # its own process group, as `make run` in a terminal
    # wait until it is mid-run: the evaluation set is done and a training has started
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and first.poll() is None:
        if (w / "results/parity/eval_set.pt").exists() and list(w.glob("logs/parity/train/*.log")):
            break
        time.sleep(0.2)
    assert first.poll() is None, first.stdout.read().decode()[-3000:]

    # a second run while the first is alive is refused, at once, with a reason
    second = subprocess.run(wrapper(w), env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert second.returncode == 75 and "another run is active" in second.stderr, second.stderr

    os.killpg(first.pid, signal.SIGKILL)  # the whole process group: snakemake and its jobs
    first.wait()
    assert list((w / ".snakemake/locks").iterdir()), "expected Snakemake's lock to be left behind"
    # the problem being solved: plain snakemake refuses (after a kill it also needs --rerun-incomplete)
    plain = subprocess.run([PYTHON, "-m", "snakemake", *args(w, "--rerun-incomplete")], env=subprocess_env(),
                           capture_output=True, text=True, timeout=300)
    assert plain.returncode != 0 and "LockException" in plain.stdout + plain.stderr, plain.stderr[-2000:]

    again = subprocess.run(wrapper(w), env=subprocess_env(), capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "removing the stale Snakemake lock" in again.stderr
    assert (w / "results/figures/parity.png").stat().st_size > 0
    locks = w / ".snakemake/locks"
    assert not (locks.exists() and any(locks.iterdir()))
    print(f"\nkill-and-continue test: {time.monotonic() - t0:.0f} s wall")


def test_plain_snakemake_run_is_not_unlocked(tmp_path, monkeypatch):
    """A run started without the wrapper holds no flock; the /proc guard still refuses."""
    from sparselen.runtime import runlock

    w = tmp_path / "w"
    (w / ".snakemake/locks").mkdir(parents=True)
    (w / ".snakemake/locks/0.input.lock").write_text("")
    monkeypatch.setattr(runlock, "other_snakemake_in", lambda d: [12345])
    monkeypatch.setattr(runlock.os, "execv", lambda *a: (_ for _ in ()).throw(AssertionError("must not run")))
    assert runlock.main(args(w)) == 75
    assert (w / ".snakemake/locks/0.input.lock").exists()


def test_workdir_parsing(tmp_path):
    from sparselen.runtime import runlock

    assert runlock.workdir(["--directory", str(tmp_path), "all"]) == tmp_path.resolve()
    assert runlock.workdir([f"--directory={tmp_path}"]) == tmp_path.resolve()
    assert runlock.workdir_of(["python", "-m", "snakemake", "-d", "sub"], tmp_path) == (tmp_path / "sub").resolve()

"""This machine's CPU profile: measured once, cached by the machine it describes, quiet, and
stopped by SIGTERM as by Ctrl-C without leaving a file."""

import logging
import os
import signal

import pytest

from sparselen.estimate import calibrate, machine
from sparselen.estimate.profiles import CPU_DEFAULT


def test_a_profile_is_measured_once_and_read_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(machine, "CACHE", tmp_path)
    calls = []

    def measured():
        calls.append(logging.getLogger().level)
        logging.getLogger("sparselen.training.train").info("step 10/20 loss 1.0")
        return CPU_DEFAULT

    monkeypatch.setattr(calibrate, "calibrate", measured)
    said = []
    first = machine.measure_cpu_profile(said.append)
    assert first == CPU_DEFAULT and machine.cached_path().parent == tmp_path and machine.cached_path().exists()
    assert calls == [logging.WARNING] and len(said) == 2  # quiet while measuring; one line before, one after
    assert machine.measure_cpu_profile(said.append) == CPU_DEFAULT and len(calls) == 1 and len(said) == 2
    assert machine.cached_cpu_profile() == CPU_DEFAULT


def test_sigterm_stops_the_measurement_and_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setattr(machine, "CACHE", tmp_path)

    def killed():
        os.kill(os.getpid(), signal.SIGTERM)
        return CPU_DEFAULT

    monkeypatch.setattr(calibrate, "calibrate", killed)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        machine.measure_cpu_profile(lambda line: None)
    assert not machine.cached_path().exists() and machine.cached_cpu_profile() is None
    assert signal.getsignal(signal.SIGTERM) == before  # the caller's handler back

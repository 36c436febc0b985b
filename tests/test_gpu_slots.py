"""GPU slots: parallel jobs on one machine each lock a different GPU (sparselen/gpu_slots.py)."""

import subprocess
import sys

import pytest
import torch

from sparselen import gpu_slots
from sparselen.device import resolve_device


def test_each_claim_gets_a_free_gpu_until_none_is_left(tmp_path):
    names = ["0", "1"]
    first = gpu_slots.try_acquire(names, tmp_path)
    second = gpu_slots.try_acquire(names, tmp_path)
    assert (first[0], second[0]) == (0, 1)
    assert gpu_slots.try_acquire(names, tmp_path) is None
    first[1].close()  # the job holding GPU 0 exits
    assert gpu_slots.try_acquire(names, tmp_path)[0] == 0


def test_a_lock_held_by_another_process_is_respected(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from sparselen import gpu_slots; "
         f"gpu_slots.claim(2, {str(tmp_path)!r}); print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert gpu_slots.claim(2, tmp_path) == 1
        assert gpu_slots.claim(2, tmp_path) == 1  # the same GPU for the rest of this process
    finally:
        holder.communicate("")


def test_lock_names_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert gpu_slots.physical_ids(2) == ["3", "5"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpu_slots.physical_ids(2) == ["0", "1"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only path")
def test_resolve_device_without_gpus_is_unchanged():
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")

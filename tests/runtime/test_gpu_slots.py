"""GPU slots: parallel jobs on one machine each lock a different GPU, or a slot of a shared one
(sparselen/runtime/gpu_slots.py)."""

import subprocess
import sys
import time

import pytest
import torch

from sparselen.runtime import gpu_slots
from sparselen.runtime.device import resolve_device


def test_each_claim_gets_a_free_gpu_until_none_is_left(tmp_path):
    names = ["0", "1"]
    first = gpu_slots.try_acquire(names, tmp_path)
    second = gpu_slots.try_acquire(names, tmp_path)
    assert (first[0], second[0]) == (0, 1)
    assert gpu_slots.try_acquire(names, tmp_path) is None
    first[1][0].close()  # the job holding GPU 0 exits
    assert gpu_slots.try_acquire(names, tmp_path)[0] == 0


def test_packed_jobs_spread_over_the_gpus_then_fill_their_slots(tmp_path):
    """Two GPUs of 2 slots: slot 0 of each GPU first, then slot 1; a fifth job finds none; a
    whole-GPU job finds no GPU with every slot free until one GPU's two holders exit."""
    names = ["0", "1"]
    held = [gpu_slots.try_acquire(names, tmp_path, slots=2, holder=f"job{i}") for i in range(4)]
    assert [h[0] for h in held] == [0, 1, 0, 1]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"gpu-{g}-slot{s}.lock" for g in "01" for s in "01"]
    assert (tmp_path / "gpu-1-slot1.lock").read_text().split()[1] == "job3"  # the holder is named
    assert gpu_slots.try_acquire(names, tmp_path, slots=2) is None
    assert gpu_slots.try_acquire(names, tmp_path, slots=2, take=2) is None
    assert gpu_slots.held_slots(names, tmp_path, 2) == [2, 2]
    for i in (1, 3):  # GPU 1's jobs exit
        held[i][1][0].close()
    whole = gpu_slots.try_acquire(names, tmp_path, slots=2, take=2)
    assert whole[0] == 1 and len(whole[1]) == 2


def test_a_lock_held_by_another_process_is_respected(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from sparselen.runtime import gpu_slots; "
         f"gpu_slots.claim(2, {str(tmp_path)!r}); print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert gpu_slots.claim(2, tmp_path) == 1
        assert gpu_slots.claim(2, tmp_path) == 1  # the same GPU for the rest of this process
    finally:
        holder.communicate("")


def test_a_whole_gpu_job_waits_for_the_slots_of_one_gpu(tmp_path):
    """A packed job holds slot 1 of the only GPU; a whole-GPU job takes slot 0 and waits for
    slot 1, which it gets as soon as the packed job exits."""
    packed = subprocess.Popen(
        [sys.executable, "-c", "import sys; from sparselen.runtime import gpu_slots; "
         f"f = gpu_slots._lock(gpu_slots.slot_path({str(tmp_path)!r}, '0', 1), 'packed'); print('held', flush=True); "
         "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    whole = None
    try:
        assert packed.stdout.readline().strip() == "held"
        whole = subprocess.Popen(
            [sys.executable, "-c", "from sparselen.runtime import gpu_slots; "
             f"print(gpu_slots.claim(1, {str(tmp_path)!r}, slots=2, whole=True), flush=True)"],
            stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60  # however slowly it starts (a loaded machine): until it holds slot 0
        while gpu_slots.held_slots(["0"], tmp_path, 2) != [2] and whole.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gpu_slots.held_slots(["0"], tmp_path, 2) == [2]  # slot 0 taken by the waiting job
        with pytest.raises(subprocess.TimeoutExpired):  # which keeps waiting for slot 1
            whole.wait(timeout=1)
    finally:
        packed.communicate("")
    assert whole.communicate(timeout=60)[0].strip() == "0"


def test_slots_live_in_the_allocation_under_slurm(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "4711")
    assert gpu_slots.lock_dir(tmp_path) == tmp_path / "slurm-4711"
    monkeypatch.delenv("SLURM_JOB_ID")
    assert gpu_slots.lock_dir(tmp_path) == tmp_path


def test_lock_names_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert gpu_slots.physical_ids(2) == ["3", "5"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpu_slots.physical_ids(2) == ["0", "1"]


def test_one_visible_gpu_claims_a_slot_only_when_it_is_shared(tmp_path, monkeypatch):
    """Without packing a job alone on its GPU claims nothing (SLURM's case); with slots it takes
    one (a packed job) or all (a whole-GPU job)."""
    from sparselen.runtime.simulated_cuda import simulate

    monkeypatch.setattr(gpu_slots, "LOCK_DIR", tmp_path)
    monkeypatch.setattr(gpu_slots, "_held", {})
    with simulate(1):
        assert resolve_device("auto") == torch.device("cuda") and not list(tmp_path.iterdir())
        assert resolve_device("auto", 1, slots=4, whole=False, holder="parity_train K_train=1 seed=0") == \
            torch.device("cuda", 0)
    assert [p.name for p in tmp_path.iterdir()] == ["gpu-0-slot0.lock"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only path")
def test_resolve_device_without_gpus_is_unchanged():
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")

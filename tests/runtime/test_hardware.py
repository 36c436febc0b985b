"""Provenance names the hardware: CPU model and instruction sets, GPU and driver, torch build."""

import subprocess
from types import SimpleNamespace

import torch

from sparselen.runtime import hardware as hw
from sparselen.runtime.provenance import provenance

X86 = """processor	: 0
vendor_id	: GenuineIntel
model name	: Intel(R) Xeon(R) Platinum 8480+
flags		: fpu sse4_2 avx avx2 fma f16c avx512f avx512bw avx512_bf16 amx_tile amx_bf16 hypervisor

processor	: 1
model name	: something else
"""
ARM = """processor	: 0
BogoMIPS	: 50.00
Features	: fp asimd evtstrm aes sve sve2 bf16 i8mm
CPU implementer	: 0x41
"""


def test_cpuinfo_parsing():
    x = hw._cpuinfo(X86)
    assert x["model"] == "Intel(R) Xeon(R) Platinum 8480+" and x["vendor"] == "GenuineIntel"
    assert x["isa"] == ["sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_bf16",
                        "amx_tile", "amx_bf16"]
    a = hw._cpuinfo(ARM)
    assert a["isa"] == ["asimd", "sve", "sve2", "bf16", "i8mm"] and a["vendor"] == "0x41"


def test_this_machine():
    h = hw.hardware("cpu")
    cpu, build = h["cpu"], h["torch"]
    assert cpu["model"] and cpu["logical_cpus"] >= 1 and 1 <= cpu["usable_cpus"] <= cpu["logical_cpus"]
    assert cpu["torch_capability"] == torch.backends.cpu.get_cpu_capability()
    assert build["version"] == torch.__version__ and build["git"] == torch.version.git_version
    assert h["threads"]["intra_op"] == torch.get_num_threads()
    assert "gpu" not in h


def test_provenance_carries_it():
    p = provenance({"a": 1}, 0, torch.device("cpu"))
    assert p["hardware"]["cpu"]["torch_capability"] and p["hardware"]["torch"]["version"]
    assert p["device_name"] == p["hardware"]["cpu"]["model"]


def test_gpu_fields(monkeypatch):
    """The CUDA path, with torch's device query and nvidia-smi stubbed (no GPU here)."""
    props = SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0, total_memory=85_520_809_984,
                            multi_processor_count=132)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    real_run = subprocess.run

    def fake_run(cmd, *a, **k):
        if cmd[0] == "nvidia-smi":
            assert "--id=0" in cmd
            return SimpleNamespace(returncode=0, stdout="570.124.06, NVIDIA H100 80GB HBM3, 81559 MiB\n")
        return real_run(cmd, *a, **k)

    monkeypatch.setattr(hw.subprocess, "run", fake_run)
    hw._hardware.cache_clear()
    try:
        g = hw.hardware(torch.device("cuda", 0))["gpu"]
    finally:
        hw._hardware.cache_clear()
    assert g == {"name": "NVIDIA H100 80GB HBM3", "index": 0, "capability": "9.0", "memory_gib": 79.6,
                 "multiprocessors": 132, "cuda_runtime": "12.8", "driver": "570.124.06"}


def test_report_names_the_hardware():
    from sparselen.report.render import _hardware_line

    summary = provenance({"a": 1}, 0, torch.device("cpu"))
    line = _hardware_line(summary, "hardware")
    assert summary["hardware"]["cpu"]["model"] in line and torch.backends.cpu.get_cpu_capability() in line
    gpu = {"hardware": {"cpu": {"model": "x", "torch_capability": "AVX2"}, "gpu": {"name": "H100", "driver": "570"}}}
    assert _hardware_line(gpu, "hardware") == "x (AVX2); H100, driver 570"
    assert _hardware_line({}, "hardware") == "not recorded"

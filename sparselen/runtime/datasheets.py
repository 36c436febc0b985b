"""GPU datasheets: each named GPU's dense bf16 peak, memory and memory bandwidth, and which entry
a CUDA device name is. The estimate's device profiles (``sparselen.estimate.profiles``) price
work with them; the trainer reports MFU against them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPU:
    peak_bf16_tflops: float  # dense (no structured sparsity), tensor cores
    memory_gb: float  # the datasheet's memory
    source: str
    memory_tb_per_s: float = 0.0  # the datasheet's memory bandwidth (TB/s, 1e12 bytes a second)


# Dense bf16 tensor-core peaks, memory and memory bandwidth from the vendors' datasheets (the
# "with sparsity" figures are 2x).
GPUS = {
    "h100-sxm": GPU(989.4, 80, "NVIDIA H100 Tensor Core GPU datasheet: BF16 Tensor Core 1,979 TFLOPS with sparsity, "
                               "80 GB, 3.35 TB/s (SXM5)", 3.35),
    "h100-pcie": GPU(756.0, 80, "NVIDIA H100 datasheet: BF16 Tensor Core 1,513 TFLOPS with sparsity, 80 GB, 2 TB/s "
                                "(PCIe)", 2.0),
    "h200": GPU(989.4, 141, "NVIDIA H200 datasheet: BF16 Tensor Core 1,979 TFLOPS with sparsity (same compute as "
                            "H100 SXM), 141 GB, 4.8 TB/s", 4.8),
    "a100": GPU(312.0, 80, "NVIDIA A100 datasheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity), A100 80GB "
                           "(SXM and PCIe), 1,935 GB/s (PCIe; SXM 2,039)", 1.935),
    "a100-40gb": GPU(312.0, 40, "NVIDIA A100 datasheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity), A100 40GB, "
                                "1,555 GB/s", 1.555),
    "l40s": GPU(362.05, 48, "NVIDIA L40S datasheet: BF16 Tensor Core 362.05 TFLOPS (733 with sparsity), 48 GB, "
                            "864 GB/s", 0.864),
    "a10": GPU(125.0, 24, "NVIDIA A10 datasheet: BF16 Tensor Core 125 TFLOPS (250 with sparsity), 24 GB, 600 GB/s",
               0.6),
    "l4": GPU(121.0, 24, "NVIDIA L4 datasheet: BF16 Tensor Core 121 TFLOPS (242 with sparsity), 24 GB, 300 GB/s",
              0.3),
}
GPU_ALIASES = {"h100": "h100-sxm", "a100-sxm": "a100", "a100-pcie": "a100", "a100-80gb": "a100", "a10g": "a10"}


def datasheet_gpu(device_name: str) -> str | None:
    """The ``GPUS`` entry of a CUDA device name as torch reports it ("NVIDIA H100 80GB HBM3",
    "NVIDIA A100-SXM4-40GB", "NVIDIA L40S"), or None when none matches."""
    name = device_name.lower().replace("-", " ")
    words = name.split()
    if "nvl" in words:  # H100 NVL: not in GPUS
        return None
    for key, test in (("h100-pcie", lambda: "h100" in words and "pcie" in words),
                      ("h100-sxm", lambda: "h100" in words), ("h200", lambda: "h200" in words),
                      ("a100-40gb", lambda: "a100" in name and "40gb" in name), ("a100", lambda: "a100" in name),
                      ("l40s", lambda: "l40s" in words), ("a10", lambda: "a10" in words or "a10g" in words),
                      ("l4", lambda: "l4" in words)):
        if test():
            return key
    return None


def datasheet_peak(device_name: str) -> float | None:
    """A CUDA device's dense bf16 datasheet peak in FLOP/s (``datasheet_gpu``), or None."""
    key = datasheet_gpu(device_name)
    return None if key is None else GPUS[key].peak_bf16_tflops * 1e12

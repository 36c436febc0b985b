"""Measure this machine's device profile for ``sparselen estimate`` and write it as JSON.

    .venv/bin/python benchmarks/calibrate.py --out cpu.json              # one torch thread, CPU
    .venv/bin/python benchmarks/calibrate.py --device cuda --out gpu.json
    .venv/bin/sparselen estimate --cpu-profile cpu.json [--gpu gpu.json] [--compare results/benchmarks]

Fits (sparselen.estimate.calibrate) the FLOP rate of GPT-NeoX matrix products and its fall-off
at small widths, the per-step and per-forward-pass overheads (the real trainer on random tokens),
the fixed costs of real jobs and the tokenizer's rates. CPU timings are process
CPU time, so another job on another core does not inflate them (a loaded machine still does:
shared caches and memory bandwidth); CUDA timings are wall time after a synchronize.
"""

from __future__ import annotations

import argparse

from sparselen.estimate.calibrate import calibrate
from sparselen.runtime import io

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="seconds, fewer shapes (tests)")
    a = ap.parse_args()
    p = calibrate(quick=a.quick, threads=a.threads, device=a.device)
    io.write_text(a.out, p.to_json() + "\n")
    print(f"{a.out}: {p.name}: {p.peak_flops / 1e9:.1f} GFLOP/s (half at d_model {p.width_half:g}), "
          f"step {p.step_s * 1e3:.2f} + {p.step_layer_s * 1e3:.2f}/layer ms, forward {p.call_s * 1e3:.2f} + "
          f"{p.call_layer_s * 1e3:.2f}/layer ms, job start-up {p.job_s:.1f} s")

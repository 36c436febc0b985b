"""Peak memory of one idealized-model (SFA) evaluation pass: measured against the prediction the
SFA runs' SLURM requests come from (``sparselen.theory.memory``).

Runs the SFA's forward pass (no gradients, as the evaluation does) over ``rows`` random
sequences at the longest evaluated length of a config's law and k, each in a process of its own,
and reads that process' own peak resident memory (``sparselen.runtime.io.peak_rss_mb``). Prints rows, tuples,
measured MB, predicted MB (``BASE_MB`` + the pass' tensors, before the request's margin) and
the measured increase per row against the predicted one.

    .venv/bin/python benchmarks/sfa_memory.py                  # configs/paper.yaml, nonlocal, k = 4
    .venv/bin/python benchmarks/sfa_memory.py --distribution coupled --k 3 --rows 10 50
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setting(config: str, distribution: str, k: int):
    """(planted config, SFA section, window, longest evaluated length) of the config's runs."""
    from sparselen.interface.config import load
    from sparselen.theory.sfa import sfa_window
    from sparselen.theory.task import eval_lengths, planted_config, valid_lengths

    t = load([config])["theory"]
    pc, (lo, L) = planted_config(t["task"], distribution, k), t["train"]["lengths"]
    return pc, t["sfa"], sfa_window(pc, t["sfa"]["window"], valid_lengths(pc, lo, L)), max(
        eval_lengths(L, t["eval"]["ratios"]).values())


def child(config: str, distribution: str, k: int, rows: int) -> None:
    """The measured pass (in a process of its own)."""
    import torch

    from sparselen.runtime.io import peak_rss_mb
    from sparselen.theory.sfa import SFAModel
    from sparselen.theory.task import position_ids

    pc, s, window, n = setting(config, distribution, k)
    model = SFAModel(pc.vocab_size, pc.n_values, pc.k, window, s["d_embed"], s["d_head"]).eval()
    ids = position_ids(pc, n)
    with torch.no_grad():
        model(torch.randint(0, pc.vocab_size, (rows, len(ids))), ids)
    print(peak_rss_mb())


def measure(config: str, distribution: str, k: int, rows: int) -> float:
    """Peak RSS (MB) of ``child`` with ``rows`` sequences."""
    args = json.dumps([config, distribution, k, rows])
    out = subprocess.run([sys.executable, __file__, "--child", args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return float(out.stdout.split()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(ROOT / "configs/paper.yaml"))
    p.add_argument("--distribution", default="nonlocal")
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--rows", type=int, nargs=2, default=[12, 20], help="two batch sizes (rows)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(*json.loads(args.child))
        return
    from sparselen.theory.cost import sfa_tuples
    from sparselen.theory.memory import BASE_MB, pass_bytes

    pc, s, window, n = setting(args.config, args.distribution, args.k)
    N = sfa_tuples(pc, n, window)
    print("| rows | tuples | tokens | measured MB | predicted MB |\n|---|---|---|---|---|")
    measured, predicted = [], []
    for rows in args.rows:
        measured.append(measure(args.config, args.distribution, args.k, rows))
        predicted.append(BASE_MB + pass_bytes(args.k, s["d_head"], N, rows, False) / 1e6)
        print(f"| {rows} | {N} | {n + 1} | {measured[-1]:.0f} | {predicted[-1]:.0f} |", flush=True)
    (a, b), (pa, pb) = args.rows, predicted
    print(f"\nper row: measured {(measured[1] - measured[0]) / (b - a):.0f} MB, predicted {(pb - pa) / (b - a):.0f} MB")


if __name__ == "__main__":
    main()

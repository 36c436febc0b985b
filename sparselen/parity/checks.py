"""Cross-key checks of the ``parity`` section (the schema has checked each key alone)."""

from __future__ import annotations

from sparselen.interface.config import model_errors
from sparselen.training.train import micro_batch_errors


def config_errors(p: dict) -> list[str]:
    out = []
    lo, hi = p["train"]["lengths"]
    if lo > hi:
        out.append(f"parity.train.lengths = {[lo, hi]}: the first (shortest) length exceeds the second")
    if hi // 2 < 1 or (hi // 2) < (lo + 1) // 2:
        out.append(f"parity.train.lengths = {[lo, hi]}: contains no even length")
    if min(p["K_train"]) > hi // 2:
        out.append(f"parity.K_train = {p['K_train']}: K_train cannot exceed the longest training l = {hi // 2}")
    out += model_errors("parity.model", p["model"])
    out += micro_batch_errors("parity.micro_batch", p["micro_batch"], p["train"]["batch_size"],
                              "parity.train.batch_size")
    longest = max(p["eval"]["lengths"]) + 1
    target = p["pose"].get("target_length")
    if p["scheme"] == "pose" and (target is None or target < longest):
        out.append(f"parity.pose.target_length = {target}: must be at least the longest evaluated sequence "
                   f"({longest} tokens = max(parity.eval.lengths) + 1) for the pose scheme")
    if all(k > length // 2 for k in p["eval"]["k_test"] for length in p["eval"]["lengths"]):
        out.append("parity.eval: every (k_test, length) cell is impossible (k_test > length / 2)")
    return out

"""Cross-key checks of the ``theory`` section (the schema has checked each key alone)."""

from __future__ import annotations

from sparselen.interface.config import model_errors
from sparselen.theory.task import eval_lengths, planted_config, valid_lengths
from sparselen.training.train import micro_batch_errors


def config_errors(t: dict) -> list[str]:
    out = []
    lo, L = t["train"]["lengths"]
    if lo > L:
        return [f"theory.train.lengths = {[lo, L]}: the first (shortest) length exceeds the second"]
    if 1 not in t["eval"]["ratios"]:
        out.append(f"theory.eval.ratios = {t['eval']['ratios']}: must contain 1 (the error at Lbar = L anchors "
                   "the error ratios and the bound's shape)")
    gpt = t["gpt"]
    runs = {(d, k) for d in t["distributions"] for k in t["k"] + gpt["k"]}
    for dist, k in sorted(runs):
        try:
            pc = planted_config(t["task"], dist, k)
        except ValueError as e:
            out.append(f"theory.task (k={k}, {dist}): {e}")
            continue
        if not valid_lengths(pc, lo, L):
            out.append(f"theory.train.lengths = {[lo, L]}: no valid training length for the {dist} law with k={k} "
                       f"(need a multiple of {pc.blocks()}, at least {pc.min_length()})")
        for r, n in eval_lengths(L, t["eval"]["ratios"]).items():
            try:
                pc.check_length(n)
            except ValueError as e:
                out.append(f"theory.eval.ratios: Lbar = {r:g} * L = {n}: {e}")
    if gpt["k"]:
        out += model_errors("theory.gpt.model", gpt["model"])
        out += micro_batch_errors("theory.micro_batch", t["micro_batch"], gpt["train"]["batch_size"],
                                  "theory.gpt.train.batch_size")
        for dist in t["distributions"]:
            if dist not in gpt["schemes"]:
                out.append(f"theory.gpt.schemes: no scheme for the {dist!r} distribution")
    return out

"""Host memory of one idealized-model (SFA) run, which its job asks SLURM for
(workflow/rules/theory.smk): it spans two orders of magnitude across laws and k.

The SFA (``sparselen.theory.sfa``) works on the N k-tuples of a sequence of T tokens: each row
of a batch carries, per tuple, its key and value before and after their GELU MLPs (float32,
d_head wide). Measured (``benchmarks/sfa_memory.py`` and a training step of 64 and 128 rows at
configs/paper.yaml's nonlocal k = 4): 3.8 d_head floats per tuple and row in an evaluation pass,
5.9 in a training step (activations kept for the backward pass, and their gradients); per
tuple, its int64 member indices. N grows as T C(R, k-1) (R: tokens within the window), so the
peak is the evaluation at the longest length or the training batch. docs/gpu.md sets this
against measured peaks.
"""

from __future__ import annotations

BASE_MB = 400  # the interpreter, torch and the package, before any tensor
MARGIN = 1.25  # on the predicted tensors
# float32 d_head-wide activations per tuple and row (module docstring)
PASS_WIDTHS = {False: 4, True: 6}  # train: False (an evaluation pass), True (a training step)


def pass_bytes(k: int, d_head: int, tuples: int, rows: int, train: bool) -> float:
    """Peak tensor bytes of one SFA pass over ``rows`` sequences of ``tuples`` k-tuples each:
    their index tensors (tuples, offsets, member rows: int64) and each row's activations."""
    return 3 * 8 * k * tuples + rows * tuples * 4 * PASS_WIDTHS[train] * d_head


def sfa_mem_mb(params: dict, distribution: str, k: int) -> int:
    """Memory (MB, rounded up to 1000) one ``theory_run_sfa`` job asks for: ``params`` =
    its rule's params (task, train, eval, sfa)."""
    from sparselen.theory.cost import sfa_tuples
    from sparselen.theory.sfa import sfa_window
    from sparselen.theory.task import eval_lengths, planted_config, valid_lengths

    pc, (lo, L), s = planted_config(params["task"], distribution, k), params["train"]["lengths"], params["sfa"]
    lengths, window = valid_lengths(pc, lo, L), sfa_window(pc, s["window"], valid_lengths(pc, lo, L))
    passes = [(n + 1, s["batch_size"], True) for n in lengths]  # a sequence of n + 1 tokens: n and the query
    passes += [(n + 1, params["eval"]["batch_size"], False) for n in eval_lengths(L, params["eval"]["ratios"]).values()]
    peak = max(pass_bytes(k, s["d_head"], sfa_tuples(pc, T - 1, window), b, train)
               for T, b, train in passes)
    return int(-(-(BASE_MB + MARGIN * peak / 1e6) // 1000) * 1000)

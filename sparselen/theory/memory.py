"""Host memory of one idealized-model (SFA) run, which its job asks SLURM for
(workflow/rules/theory.smk): it spans two orders of magnitude across laws and k.

The SFA (``sparselen.theory.sfa``) works on the N k-tuples of a sequence of T tokens. Gathering
them builds a one-hot (k, N, T) selection, int64 and then a float32 copy kept for the pass; each
row of a batch then carries, per tuple, its k token vectors and its key and value (float32,
about ``k d_embed + 4 d_head`` numbers live at once; training keeps them for the backward pass,
counted twice). N grows as T C(R, k-1) (R: tokens within the window), so the peak is the
evaluation at the longest length or the training batch. ``benchmarks/data_memory.py --sfa``
sets this against a measured peak (docs/gpu.md).
"""

from __future__ import annotations

BASE_MB = 400  # the interpreter, torch and the package, before any tensor
MARGIN = 1.25  # on the predicted tensors
TRAIN_FACTOR = 2  # activations kept for the backward pass, and their gradients


def pass_bytes(k: int, d_embed: int, d_head: int, tuples: int, tokens: int, rows: int, train: bool) -> float:
    """Peak tensor bytes of one SFA pass over ``rows`` sequences of ``tokens`` tokens and
    ``tuples`` k-tuples."""
    select = 4 * k * tuples * tokens
    per_row = 4 * (k * d_embed + 4 * d_head) * (TRAIN_FACTOR if train else 1)
    return max(3 * select, select + rows * tuples * per_row)  # one-hot: int64 + float32


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
    peak = max(pass_bytes(k, s["d_embed"], s["d_head"], sfa_tuples(pc, T - 1, window), T, b, train)
               for T, b, train in passes)
    return int(-(-(BASE_MB + MARGIN * peak / 1e6) // 1000) * 1000)

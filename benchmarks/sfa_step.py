"""Time of the idealized model's (SFA) training step and evaluation pass by form and torch
threads, against the estimate.

Builds the SFA run of a config's law and k (``sparselen.theory.sfa``: its window and sizes)
and a batch of ``--rows`` sequences (default ``theory.sfa.batch_size``) at the longest training
length, then times a training step as ``train_sfa`` takes it (forward, log loss, backward,
AdamW) and an evaluation pass (a forward without gradients, as ``evaluate``), for each form of
the head (``summed``: the model's, each token projected once per member slot and the tuples'
members summed; ``gathered``: the tuples' token vectors gathered by a one-hot selection, then
projected, the reference of tests/theory/test_theory_sfa.py) and thread count, in alternating
rounds so that other load on the machine hits each alike. Prints per form, pass and thread
count the median wall ms, its range, the median process CPU ms (all threads; on one thread,
what the pass computes even where other load shares the cores), the speed-up over the first
thread count and, for the model's form, the ms the estimate predicts (``sparselen.theory.cost``
on the default CPU profile) and, on one thread, the seconds per activation float that the
measured wall time implies beyond the FLOPs (the CPU profile's units ``sfa_train_activation``
and ``sfa_activation``).

    .venv/bin/python benchmarks/sfa_step.py                  # configs/paper.yaml, nonlocal, k = 4, 1 and 2 threads
    .venv/bin/python benchmarks/sfa_step.py --forms summed gathered --threads 1
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

UNIT = {"train": "sfa_train_activation", "eval": "sfa_activation"}


def setting(config: str, distribution: str, k: int, rows: int | None):
    """(planted config, SFA section with ``batch_size`` = rows, window, training length)."""
    from sparselen.interface.config import load
    from sparselen.theory.sfa import sfa_window
    from sparselen.theory.task import planted_config, valid_lengths

    t = load([config])["theory"]
    pc, (lo, L) = planted_config(t["task"], distribution, k), t["train"]["lengths"]
    lengths = valid_lengths(pc, lo, L)
    s = {**t["sfa"], "batch_size": rows or t["sfa"]["batch_size"]}
    return pc, s, sfa_window(pc, s["window"], lengths), max(lengths)


def gathered(head, x, position_ids, queries=None):
    """The head in its defining form (tests/theory/test_theory_sfa.py's reference): each tuple's
    token vectors gathered by a one-hot selection and concatenated, then projected."""
    import torch
    import torch.nn.functional as F

    from sparselen.theory.sfa import tuples

    B, T, _ = x.shape
    index, off = tuples(position_ids, head.k, head.window)
    queries = torch.arange(T) if queries is None else queries
    u = torch.einsum("jnt,btd->bnjd", F.one_hot(index.T, T).to(x.dtype), x).flatten(2)
    key = head.key(u) + head._embed_offsets(head.key_offsets, off)
    value = head.value(u) + head._embed_offsets(head.value_offsets, off)
    key, value = head.key_mlp(F.gelu(key)), head.value_mlp(F.gelu(value))
    scores = head.query(x[:, queries]) @ key.transpose(1, 2) / math.sqrt(head.d_head)
    visible = index.max(dim=1).values[None, :] <= queries[:, None]
    has = visible.any(dim=1, keepdim=True)
    scores = scores.masked_fill(~visible, float("-inf")).masked_fill(~has, 0.0)
    return (torch.softmax(scores, dim=-1) * has) @ value


def passes(pc, s: dict, window: int, n: int, form: str) -> dict:
    """{pass: function} of a fresh model of ``form``: its training step and evaluation pass."""
    import torch
    import torch.nn.functional as F

    from sparselen.runtime.rng import generator
    from sparselen.theory.sfa import SFAModel
    from sparselen.theory.task import sample

    torch.manual_seed(0)
    model = SFAModel(pc.vocab_size, pc.n_values, pc.k, window, s["d_embed"], s["d_head"])
    if form == "gathered":
        model.attention.forward = functools.partial(gathered, model.attention)
    opt = torch.optim.AdamW(model.parameters(), lr=s["lr"], weight_decay=s["weight_decay"])
    batch = sample(pc, n, s["batch_size"], generator("sfa-step", 0))

    def train() -> None:
        loss = F.cross_entropy(model(batch.tokens, batch.position_ids), batch.label)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    @torch.no_grad()
    def evaluate() -> None:
        model(batch.tokens, batch.position_ids)

    return {"train": train, "eval": evaluate}


def timed(runs: dict, threads: list[int], rounds: int) -> dict:
    """{(form, pass, threads): [(wall s, process CPU s)]}, forms and thread counts alternating
    in each round; the first round warms up (allocations, cached tuples) and is dropped."""
    from sparselen.runtime.device import configure_cpu

    out = {(form, kind, t): [] for form in runs for kind in UNIT for t in threads}
    for r in range(rounds + 1):
        for t in threads:
            configure_cpu(t)
            for (form, kind, _), run in ((key, runs[key[0]][key[1]]) for key in out if key[2] == t):
                t0, c0 = time.perf_counter(), time.process_time()
                run()
                if r:
                    out[form, kind, t].append((time.perf_counter() - t0, time.process_time() - c0))
    return out


def predicted(pc, s: dict, n: int, threads: int) -> dict:
    """The estimate's seconds of one training step and one evaluation pass of ``s["batch_size"]``
    rows at length ``n`` on ``threads`` threads: {pass: (seconds, of which FLOPs and overheads,
    activation floats)}."""
    from sparselen.estimate.profiles import CPU_DEFAULT, step_seconds
    from sparselen.theory.cost import sfa_work

    rows = s["batch_size"]
    w = sfa_work(pc, {**s, "steps": 1}, [n], [n], {"n": rows, "batch_size": rows}, threads)
    speedup = CPU_DEFAULT.speedup(threads)
    out = {}
    for kind, term in (("train", w.terms[0]), ("eval", w.terms[1])):
        flop_s = step_seconds(term, CPU_DEFAULT, threads) if kind == "train" else (
            term.flops / (CPU_DEFAULT.rate(term.d_model) * speedup) + CPU_DEFAULT.call_layer_s)
        floats = w.units[UNIT[kind]]
        out[kind] = (flop_s + floats * CPU_DEFAULT.units[UNIT[kind]] / speedup, flop_s, floats)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(ROOT / "configs" / "paper.yaml"))
    p.add_argument("--distribution", default="nonlocal")
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--rows", type=int, help="sequences per pass (default: the config's theory.sfa.batch_size)")
    p.add_argument("--forms", nargs="+", default=["summed"], choices=["summed", "gathered"])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch threads, timed in turn")
    p.add_argument("--rounds", type=int, default=3, help="timed passes per form and thread count (after a warm-up)")
    a = p.parse_args()

    from sparselen.theory.cost import sfa_tuples

    pc, s, window, n = setting(a.config, a.distribution, a.k, a.rows)
    times = timed({form: passes(pc, s, window, n, form) for form in a.forms}, a.threads, a.rounds)
    print(f"{a.distribution} k={pc.k} window={window}: {s['batch_size']} rows x {n + 1} tokens, "
          f"{sfa_tuples(pc, n, window)} tuples per row; {a.rounds} passes each")
    print("form      pass   threads  median_ms  range_ms       cpu_ms  speedup  predicted_ms  s_per_activation")
    for (form, kind, t), ts in times.items():
        wall, cpu = [w for w, _ in ts], [c for _, c in ts]
        med = statistics.median(wall)
        base = statistics.median(w for w, _ in times[form, kind, a.threads[0]])
        total, flop_s, floats = predicted(pc, s, n, t)[kind] if form == "summed" else (math.nan, math.nan, 1.0)
        implied = f"{(med - flop_s) / floats:.3g}" if t == 1 and form == "summed" else "-"
        print(f"{form:8}  {kind:5}  {t:7d}  {1e3 * med:9.0f}  {1e3 * min(wall):5.0f}-{1e3 * max(wall):<5.0f}  "
              f"{1e3 * statistics.median(cpu):6.0f}  {base / med:7.2f}  {1e3 * total:12.0f}  {implied:>16}")


if __name__ == "__main__":
    main()

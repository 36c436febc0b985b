"""Training throughput: sparselen's GPT-NeoX vs transformers.GPTNeoXForCausalLM, same run.

Both models get the same architecture, the same weights, the same batches and the same AdamW
step; rounds alternate between the two (and which goes first) so that machine load and order
effects hit both alike. Prints each model's median tokens/s and the median of the per-round
ratios (ours / transformers, each round's pair measured back to back) with their range. On
CPU a round is timed in process CPU time, which another job on the other core does not
inflate (torch runs on ``--threads`` threads of this process).

    .venv/bin/python benchmarks/throughput.py            # the CPU default configs
    .venv/bin/python benchmarks/throughput.py --device cuda --threads 0
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import yaml

from sparselen.nn.model import GPTNeoX, ModelConfig, hf_config
from sparselen.runtime.device import autocast, configure_cpu, resolve_device

ROOT = Path(__file__).resolve().parent.parent


def parity_default_shape() -> tuple[dict, int, int]:
    """The parity model and batch of the embedded default config (so the two cannot drift);
    sequence length = the longest training sample (2l = max length, plus the query)."""
    p = yaml.safe_load((ROOT / "config.yaml").read_text())["parity"]
    model = {k: p["model"][k] for k in ("n_layer", "n_head", "d_model", "d_ff")}
    return model, p["train"]["batch_size"], p["train"]["lengths"][1] + 1


SHAPES = {  # name: (model kwargs, batch, sequence length)
    "parity-default": parity_default_shape(),
    "lm-small": (dict(n_layer=4, n_head=4, d_model=256, d_ff=1024, vocab_size=16384), 16, 256),
}


def step_fn(model, hf: bool, device):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(x, y):
        with autocast(device):
            logits = model(x).logits if hf else model(x)[0]
        loss = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step


def measure(step, x, y, steps: int, device) -> float:
    clock = time.perf_counter if device.type == "cuda" else time.process_time
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = clock()
    for _ in range(steps):
        step(x, y)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return steps * x.numel() / (clock() - t0)


def run(name: str, device, rounds: int, steps: int) -> tuple[list[float], list[float]]:
    from transformers import GPTNeoXForCausalLM

    kwargs, batch, seq = SHAPES[name]
    kwargs = {"vocab_size": 8, **kwargs}
    cfg = ModelConfig(**kwargs, scheme="rope")
    torch.manual_seed(0)
    ours = GPTNeoX(cfg).to(device).train()
    theirs = GPTNeoXForCausalLM(hf_config(cfg)).to(device).train()  # its default (SDPA) attention
    theirs.load_state_dict(ours.state_dict(), strict=False)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, cfg.vocab_size, (batch, seq), generator=g).to(device)
    y = torch.randint(0, cfg.vocab_size, (batch, seq), generator=g).to(device)
    steps_ours, steps_theirs = step_fn(ours, False, device), step_fn(theirs, True, device)
    for s in (steps_ours, steps_theirs):  # warm-up
        measure(s, x, y, 3, device)
    a, b = [], []
    for r in range(rounds):  # alternate which model goes first, so order effects cancel
        if r % 2:
            b.append(measure(steps_theirs, x, y, steps, device))
            a.append(measure(steps_ours, x, y, steps, device))
        else:
            a.append(measure(steps_ours, x, y, steps, device))
            b.append(measure(steps_theirs, x, y, steps, device))
    return a, b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch default)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10, help="training steps per round")
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    args = ap.parse_args()
    configure_cpu(args.threads)
    device = resolve_device(args.device)
    print(f"device={device} threads={torch.get_num_threads()} torch={torch.__version__} "
          f"rounds={args.rounds} steps/round={args.steps} (medians over rounds)")
    print(f"{'shape':<16}{'sparselen tok/s':>18}{'transformers tok/s':>20}{'ratio':>8}  ratio range")
    for name in args.shapes:
        ours, theirs = run(name, device, args.rounds, args.steps)
        ratios = [a / b for a, b in zip(ours, theirs)]
        print(f"{name:<16}{statistics.median(ours):>18,.0f}{statistics.median(theirs):>20,.0f}"
              f"{statistics.median(ratios):>8.3f}  {min(ratios):.3f}-{max(ratios):.3f}")


if __name__ == "__main__":
    main()

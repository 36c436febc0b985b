"""Training throughput: sparselen's OLMo variants vs its GPT-NeoX, at the language slice's shape.

Same batches, same AdamW step, the language model shape of config.yaml (``language.model``,
vocabulary ``language.tokenizer.vocab_size``, context ``language.contexts.long``, rows
``language.train.batch_tokens // context``). Rounds rotate the order of the models so machine
load and order effects hit all alike; on CPU each measurement is process CPU time. Prints each
model's median tokens/s and the median (range) over rounds of its ratio to GPT-NeoX measured in
the same round.

    .venv/bin/python benchmarks/olmo_throughput.py            # 1 thread, 7 rounds
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from throughput import measure, step_fn  # noqa: E402

from sparselen.nn.architectures import build_model, model_config  # noqa: E402
from sparselen.runtime.device import configure_cpu, resolve_device  # noqa: E402


def language_shape() -> tuple[dict, int, int, int]:
    lang = yaml.safe_load((ROOT / "config.yaml").read_text())["language"]
    ctx = lang["contexts"]["long"]
    return dict(lang["model"]), lang["tokenizer"]["vocab_size"], ctx, lang["train"]["batch_tokens"] // ctx


def models(base: dict) -> dict[str, dict]:
    """name: model dict. ``d_ff`` as configured; ``olmo1-matched``: SwiGLU width 2/3 d_ff, the
    GPT-NeoX MLP's parameter count (OLMo's own rule, ~8/3 d_model)."""
    olmo = {k: v for k, v in base.items() if k != "rotary_pct"} | {"architecture": "olmo"}
    return {"gpt_neox": base,
            "olmo1": olmo | {"variant": "olmo1"},
            "olmo1-matched": olmo | {"variant": "olmo1", "d_ff": 2 * base["d_ff"] // 3},
            "olmo2": olmo | {"variant": "olmo2"},
            "kempner_c4": olmo | {"variant": "kempner_c4"}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=10, help="training steps per round")
    args = ap.parse_args()
    configure_cpu(args.threads)
    device = resolve_device(args.device)
    base, vocab, ctx, rows = language_shape()
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, vocab, (rows, ctx), generator=g).to(device)
    y = torch.randint(0, vocab, (rows, ctx), generator=g).to(device)
    steps, params = {}, {}
    for name, m in models(base).items():
        torch.manual_seed(0)
        model = build_model(model_config(m, vocab)).to(device).train()
        params[name] = model.num_parameters()
        steps[name] = step_fn(model, False, device)
        measure(steps[name], x, y, 3, device)  # warm-up
    names = list(steps)
    tok = {n: [] for n in names}
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            tok[n].append(measure(steps[n], x, y, args.steps, device))
    print(f"device={device} threads={torch.get_num_threads()} torch={torch.__version__} shape: {base} "
          f"vocab={vocab} context={ctx} batch={rows}; rounds={args.rounds} steps/round={args.steps}")
    print(f"{'model':<16}{'params':>10}{'tok/s':>10}{'vs gpt_neox':>13}  ratio range")
    for n in names:
        ratios = [a / b for a, b in zip(tok[n], tok["gpt_neox"])]
        print(f"{n:<16}{params[n]:>10,}{statistics.median(tok[n]):>10,.0f}{statistics.median(ratios):>13.3f}"
              f"  {min(ratios):.3f}-{max(ratios):.3f}")


if __name__ == "__main__":
    main()

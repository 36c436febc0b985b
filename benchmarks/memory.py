"""The memory model (``sparselen.nn.memory``) against measured peak tensor memory.

    .venv/bin/python benchmarks/memory.py                 # CPU: measured here, about a minute
    .venv/bin/python benchmarks/memory.py --device cuda   # the same passes on a GPU
    .venv/bin/python benchmarks/memory.py --reference     # predictions for docs/gpu.md's H200 runs

Passes, each on GPT-NeoX and OLMo (``sparselen.nn.architectures.build_model``) at several shapes:
training steps through the trainer's own ``backward`` (``loss_fn``, or its micro-steps) and
``make_optimizer`` (AdamW), measured over three steps so AdamW's state exists; a no-grad
evaluation pass (per-position losses, as ``language.evaluate.loss_by_position``); the saliency
selector's input-gradient pass; PPC generation with its KV cache. CPU peaks are measured with ``PeakTensorMemory``
(sparselen/estimate/tracker.py: a TorchDispatchMode counting live storage bytes, freed by weakref
finalizers), in fp32 as CPU jobs run; CUDA peaks with ``torch.cuda.max_memory_allocated`` under
the bf16 autocast training uses. ``--reference`` prints the model's predictions beside the
peaks measured on an NVIDIA H200 that docs/gpu.md reports.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from sparselen.estimate.tracker import PeakTensorMemory
from sparselen.nn import memory
from sparselen.nn.architectures import build_model, model_config
from sparselen.nn.batch import IGNORE, Batch
from sparselen.runtime.device import autocast
from sparselen.training.train import OptimConfig, TrainConfig, backward, make_optimizer

MiB = 2**20
NEOX = {"n_layer": 2, "n_head": 4, "d_model": 128, "d_ff": 512}
OLMO = {"architecture": "olmo", "variant": "kempner_c4", "n_layer": 2, "n_head": 4, "d_model": 128, "d_ff": 512}
# (name, model section, vocabulary, scheme, extra ModelConfig keys, rows, sequence length, labels, micro-batch)
TRAIN = [
    ("GPT-NeoX parity-like", {**NEOX, "rotary_pct": 0.25}, 6, "pose", {}, 32, 51, "last", 0),
    ("GPT-NeoX PPC head", NEOX, 160, "ppc", {"max_position_id": 255, "id_embedding": True}, 16, 100, "all", 0),
    ("GPT-NeoX vocab 4096", NEOX, 4096, "rope", {}, 8, 256, "all", 0),
    ("OLMo kempner_c4", OLMO, 2048, "rope", {}, 8, 256, "all", 0),
    ("OLMo kempner_c4, micro-batch 2", OLMO, 2048, "rope", {}, 8, 256, "all", 2),
    ("OLMo olmo1 (SwiGLU) 4x64", {**OLMO, "variant": "olmo1", "n_layer": 4, "d_model": 64, "d_ff": 256}, 16384,
     "rope", {}, 4, 128, "all", 0),
]
# (name, model section, vocabulary, rows, sequence length)
PASSES = [("GPT-NeoX vocab 4096", NEOX, 4096, 8, 256), ("OLMo kempner_c4", OLMO, 2048, 8, 256)]
# PPC generation with a KV cache: (name, model section, vocabulary, max_position_id, rows, prompt, new tokens)
GENERATION = [("GPT-NeoX PPC head", NEOX, 160, 511, 64, 200, 100)]

# Measured on an NVIDIA H200 (torch 2.11+cu130, bf16 autocast, this package's models and loss_fn,
# torch.optim.AdamW; peak = torch.cuda.max_memory_allocated after 3 or 4 steps), as docs/gpu.md reports.
KEMPNER = {"architecture": "olmo", "variant": "kempner_c4", "n_layer": 12, "n_head": 12, "d_model": 768,
           "d_ff": 3072}
PPC_MODEL = {"n_layer": 6, "n_head": 8, "d_model": 512, "d_ff": 2048, "rotary_pct": 1.0}
REFERENCE = [  # (name, model section, vocabulary, scheme, extra keys, pass, rows, length, measured GiB)
    ("OLMo 12x768, T 2048, rows 1", KEMPNER, 16384, "rope", {}, "train", 1, 2048, 3.125),
    ("OLMo 12x768, T 2048, rows 4", KEMPNER, 16384, "rope", {}, "train", 4, 2048, 6.604),
    ("OLMo 12x768, T 2048, rows 16", KEMPNER, 16384, "rope", {}, "train", 16, 2048, 21.17),
    ("OLMo 12x768, T 512, rows 16", KEMPNER, 16384, "rope", {}, "train", 16, 512, 6.604),
    ("OLMo 12x768, T 2048, rows 128: out of memory on the H200", KEMPNER, 16384, "rope", {}, "train", 128, 2048,
     None),
    ("GPT-NeoX parity 6x512, T 51, rows 64", {**PPC_MODEL, "rotary_pct": 0.25}, 6, "pose", {}, "train", 64, 51,
     0.769),
    ("GPT-NeoX PPC 6x512, T 200, rows 64", PPC_MODEL, 160, "ppc", {"max_position_id": 1024, "id_embedding": True},
     "train", 64, 200, 1.931),
    ("GPT-NeoX theory 4x256, T 25, rows 128", {"n_layer": 4, "n_head": 4, "d_model": 256, "d_ff": 1024}, 5,
     "rope", {}, "train", 128, 25, 0.24),
    ("saliency, fp32, parameter grads, rows 8", KEMPNER, 16384, "rope", {}, "saliency fp32 params", 8, 2048, 10.34),
    ("saliency, fp32, no parameter grads, rows 8", KEMPNER, 16384, "rope", {}, "saliency fp32", 8, 2048, 7.25),
    ("saliency, bf16, no parameter grads, rows 8", KEMPNER, 16384, "rope", {}, "saliency bf16", 8, 2048, 5.33),
    ("saliency, fp32, parameter grads, rows 64", KEMPNER, 16384, "rope", {}, "saliency fp32 params", 64, 2048,
     79.4),
    ("loss by position, bf16, rows 8 x T 8192", KEMPNER, 16384, "rope", {}, "eval", 8, 8192, 14.47),
    # micro-steps (each pass's loss summed over the step's label count, as sparselen.training.train.backward),
    # and PPC generation (sparselen.ppc.generate, fp32): rows are those of one pass
    ("OLMo 12x768, T 2048, 128 rows in micro-steps of 16", KEMPNER, 16384, "rope", {}, "train", 16, 2048, 21.582),
    ("OLMo 12x768, T 2048, 64 rows in micro-steps of 32", KEMPNER, 16384, "rope", {}, "train", 32, 2048, 41.258),
    ("OLMo 12x768, T 512, 512 rows in micro-steps of 64", KEMPNER, 16384, "rope", {}, "train", 64, 512, 21.583),
    ("PPC generation, 250 rows, 300 + 150 tokens", PPC_MODEL, 160, "ppc", {"max_position_id": 1023,
                                                                            "id_embedding": True},
     "generation 150", 250, 300, 4.754),
]


def config(model: dict, vocab: int, scheme: str, extra: dict | None = None):
    return model_config(model, vocab, scheme=scheme, **(extra or {}))


def random_batch(cfg, rows: int, length: int, labels: str) -> Batch:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (rows, length), generator=g)
    targets = torch.randint(0, cfg.vocab_size, (rows, length), generator=g)
    if labels == "last":
        targets[:, :-1] = IGNORE
    if memory.extra_head(cfg):
        pos = torch.arange(length) + torch.randint(0, cfg.max_position_id - length, (rows, 1), generator=g)
        return Batch(ids, targets, pos, pos + 1)
    return Batch(ids, targets)


class Meter:
    """Peak bytes of the passes run inside: live storages on the CPU, the allocator's peak on CUDA."""

    def __init__(self, device: torch.device, *existing):
        self.device, self.existing = device, existing

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            self.tracker = PeakTensorMemory().__enter__()
            self.tracker.track(*self.existing)
        return self

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak = torch.cuda.max_memory_allocated(self.device)
        else:
            self.tracker.__exit__(*exc)
            self.peak = self.tracker.peak


def measure_training(cfg, rows, length, labels, micro, device) -> float:
    torch.manual_seed(0)
    model = build_model(cfg).to(device).train()
    opt = make_optimizer(model, OptimConfig())
    tc = TrainConfig(steps=3, batch_size=rows, micro_batch=micro)
    batch = random_batch(cfg, rows, length, labels)
    with Meter(device, *model.parameters(), *model.buffers()) as m:
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            backward(model, model, batch, tc, device)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
    return m.peak


def measure_evaluation(cfg, rows, length, device) -> float:
    model = build_model(cfg).to(device).eval()
    windows = torch.randint(0, cfg.vocab_size, (rows, length + 1), generator=torch.Generator().manual_seed(0))
    with Meter(device, *model.parameters(), *model.buffers()) as m, torch.no_grad():
        w = windows.to(device)
        with autocast(device):
            logits, _ = model(w[:, :-1])
        F.cross_entropy(logits.float().transpose(1, 2), w[:, 1:], reduction="none")
    return m.peak


def measure_saliency(cfg, rows, length, device, param_grads: bool) -> float:
    """dependency.saliency_scores' pass: last_only forward, the gradient of the last position's
    loss with respect to the input embeddings (no autocast)."""
    model = build_model(cfg).to(device).eval().requires_grad_(param_grads)
    store = {}
    model.input_embeddings().register_forward_hook(lambda mod, inp, out: store.update(e=out.requires_grad_()))
    ids = torch.randint(0, cfg.vocab_size, (rows, length), generator=torch.Generator().manual_seed(0))
    with Meter(device, *model.parameters(), *model.buffers()) as m:
        ids, tgt = ids.to(device), ids[:, 0].to(device)
        h = model.hidden_states(ids, torch.arange(length, device=device).expand_as(ids), last_only=True)[:, -1]
        loss = F.cross_entropy(model.lm_head(h).float(), tgt, reduction="sum")
        (grad,) = torch.autograd.grad(loss, store["e"])
        (grad * store["e"]).sum(-1).abs()
    return m.peak


def measure_generation(cfg, rows, prompt, new, device) -> float:
    """``ppc.generate.generate`` (as ``ppc.evaluate`` runs it: KV cache, no autocast)."""
    from sparselen.ppc.generate import generate

    model = build_model(cfg).to(device).eval()
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, cfg.vocab_size, (rows, prompt), generator=g)
    ids = torch.arange(prompt).expand(rows, prompt)
    with Meter(device, *model.parameters(), *model.buffers()) as m:
        generate(model, tokens.to(device), ids.to(device), new)
    return m.peak


def predict(cfg, what: str, rows: int, length: int, device: str) -> float:
    if what == "train":
        return memory.train_step(cfg, rows, length, device)
    if what.startswith("generation"):
        return memory.generation(cfg, rows, length, int(what.split()[1]), device, autocast=False)
    if what == "eval":
        return memory.no_grad_pass(cfg, rows, length, device, autocast=True, unembed="all", per_position_loss=True)
    bf16, params = "bf16" in what, "params" in what
    return memory.input_gradient_pass(cfg, rows, length, device, autocast=bf16, param_grads=params)


def row(name, what, predicted, measured, unit=MiB, label="MiB") -> str:
    ratio = f"{predicted / measured:.2f}" if measured else "-"
    shown = f"{measured / unit:,.3g}" if measured else "-"
    return f"| {name} | {what} | {predicted / unit:,.3g} | {shown} | {ratio} |"


def header(label: str, measured: str) -> list[str]:
    return [f"| shape | pass | predicted {label} | {measured} {label} | predicted / measured |",
            "|:--|:--|--:|--:|--:|"]


def run(device: torch.device) -> list[float]:
    kind = "gpu" if device.type == "cuda" else "cpu"
    print(f"Measured on {torch.cuda.get_device_name(device) if kind == 'gpu' else 'the CPU (fp32)'}, "
          f"torch {torch.__version__}:\n")
    lines, ratios = header("MiB", "measured"), []
    for name, model, vocab, scheme, extra, rows, length, labels, micro in TRAIN:
        cfg = config(model, vocab, scheme, extra)
        measured = measure_training(cfg, rows, length, labels, micro, device)
        pred = memory.train_step(cfg, micro or rows, length, kind)
        what = f"training step, {rows} x {length}" + (f" in micro-steps of {micro} rows" if micro else "")
        lines.append(row(name, what, pred, measured))
        ratios.append(pred / measured)
    for name, model, vocab, rows, length in PASSES:
        cfg = config(model, vocab, "rope")
        for what, measured in (("eval", measure_evaluation(cfg, rows, length, device)),
                               ("saliency fp32 params", measure_saliency(cfg, rows, length, device, True)),
                               ("saliency fp32", measure_saliency(cfg, rows, length, device, False))):
            pred = predict(cfg, what, rows, length, kind)
            label = {"eval": "loss by position (no grad)", "saliency fp32 params": "saliency, parameter grads",
                     "saliency fp32": "saliency, no parameter grads"}[what]
            lines.append(row(name, f"{label}, {rows} x {length}", pred, measured))
            ratios.append(pred / measured)
    for name, model, vocab, max_id, rows, prompt, new in GENERATION:
        cfg = config(model, vocab, "ppc", {"max_position_id": max_id, "id_embedding": True})
        measured = measure_generation(cfg, rows, prompt, new, device)
        pred = memory.generation(cfg, rows, prompt, new, kind, autocast=False)
        lines.append(row(name, f"generation (KV cache), {rows} rows, {prompt} + {new} tokens", pred, measured))
        ratios.append(pred / measured)
    print("\n".join(lines))
    return ratios


def reference() -> list[float]:
    print("NVIDIA H200 (measured peaks as docs/gpu.md reports them; predictions for device 'gpu'):\n")
    lines, ratios = header("GiB", "H200"), []
    for name, model, vocab, scheme, extra, what, rows, length, measured in REFERENCE:
        cfg = config(model, vocab, scheme, extra)
        pred = predict(cfg, what, rows, length, "gpu")
        label = {"train": "training step", "eval": "loss by position (no grad)"}.get(what, what.split()[0])
        lines.append(row(name, label, pred, measured and measured * memory.GiB, memory.GiB, "GiB"))
        if measured:
            ratios.append(pred / (measured * memory.GiB))
    print("\n".join(lines))
    return ratios


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--reference", action="store_true", help="predict docs/gpu.md's H200 measurements")
    a = ap.parse_args()
    t = time.time()
    ratios = reference() if a.reference else run(torch.device(a.device))
    print(f"\npredicted / measured: {min(ratios):.2f} to {max(ratios):.2f} over {len(ratios)} passes "
          f"({time.time() - t:.0f} s)")

"""Sparse dependency (docs/reconstruction.md, "Natural language"): how few distant tokens recover the long-context benefit.

For a target token with long context C (L_long tokens) the last L_short tokens are the short
window and the rest the far context. L_k is the loss given the window plus k far tokens kept
at their original position ids. ``greedy`` adds, k times, the far token that lowers the loss
most; all candidates of one step are one batched forward pass (chunked by ``batch_size``).
Cheap selectors rank the far tokens from one pass over the full long context instead:
- ``attention``: attention weight of the target's query on each token, averaged over heads
  and layers;
- ``saliency``: |gradient x input| of the target's loss with respect to the token embedding;
- ``random``: a uniformly random ranking (the floor any selector must beat).

Every pass runs under the training's autocast (bf16 on CUDA, none on CPU). Saliency takes the
gradient with respect to the embedding output alone: the parameters stop requiring gradients
for its duration, so no weight gradient is computed or stored.
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F

from sparselen.language.evaluate import subset_loss
from sparselen.nn.model import GPTNeoX
from sparselen.runtime.device import autocast
from sparselen.runtime.rng import generator

SELECTORS = ("attention", "saliency", "random")


def greedy(model: GPTNeoX, context: torch.Tensor, target: int, short: int, kmax: int, batch_size: int,
           device) -> tuple[list[int], list[float]]:
    """Greedy far-token selection for one target: (chosen indices in order, L_1..L_kmax)."""
    n_far = len(context) - short
    chosen, losses = [], []
    for _ in range(kmax):
        free = torch.ones(n_far, dtype=torch.bool)
        free[chosen] = False
        cand = free.nonzero()[:, 0]
        far = torch.cat((torch.tensor(chosen, dtype=torch.long).expand(len(cand), len(chosen)), cand[:, None]), 1)
        loss = subset_loss(model, context.expand(len(cand), -1), torch.full((len(cand),), int(target)), far, short,
                           batch_size, device)
        best = int(loss.argmin())
        chosen.append(int(cand[best]))
        losses.append(float(loss[best]))
    return chosen, losses


def last_query_attention(attn, x: torch.Tensor, rope) -> torch.Tensor:
    """(B, H, T) softmax weights of the last query of one attention module (GPT-NeoX's or
    OLMo's: both have ``qkv``) on input ``x``, from the module's own queries and keys (its
    forward uses fused SDPA, which never materialises the weights)."""
    q, k, _ = attn.qkv(x, rope)
    return torch.softmax((q[:, :, -1:] @ k.transpose(-1, -2))[:, :, 0] / math.sqrt(attn.head_size), dim=-1)


@torch.no_grad()
def attention_scores(model: GPTNeoX, contexts: torch.Tensor, batch_size: int, device) -> torch.Tensor:
    """(n, L) mean over layers and heads of the last position's attention on each token."""
    inputs = []
    hooks = [attn.register_forward_pre_hook(lambda mod, args: inputs.append((mod, args[0], args[1])))
             for attn in model.attention_modules()]
    out = []
    try:
        for i in range(0, len(contexts), batch_size):
            ids = contexts[i:i + batch_size].to(device)
            inputs.clear()
            with autocast(device):
                model.hidden_states(ids, torch.arange(ids.shape[1], device=device).expand_as(ids), last_only=True)
                w = torch.stack([last_query_attention(mod, x, rope).mean(1) for mod, x, rope in inputs])
            out.append(w.float().mean(0).cpu())
    finally:
        for h in hooks:
            h.remove()
    return torch.cat(out)


@contextlib.contextmanager
def frozen(model: torch.nn.Module):
    """The model with no parameter requiring gradients; each one's setting restored after."""
    flags = [(p, p.requires_grad) for p in model.parameters()]
    try:
        for p, _ in flags:
            p.requires_grad_(False)
        yield model
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)


def saliency_scores(model: GPTNeoX, contexts: torch.Tensor, targets: torch.Tensor, batch_size: int,
                    device) -> torch.Tensor:
    """(n, L) |<d loss / d embedding, embedding>| of each context token for the target's loss."""
    store = {}

    def leaf(mod, inp, out):  # the embedding output as the one tensor that requires grad
        store["e"] = out.detach().requires_grad_(True)
        return store["e"]

    hook = model.input_embeddings().register_forward_hook(leaf)
    out = []
    try:
        with frozen(model), torch.enable_grad():
            for i in range(0, len(contexts), batch_size):
                ids, tgt = contexts[i:i + batch_size].to(device), targets[i:i + batch_size].to(device)
                with autocast(device):
                    h = model.hidden_states(ids, torch.arange(ids.shape[1], device=device).expand_as(ids),
                                            last_only=True)[:, -1]
                    logits = model.lm_head(h)
                loss = F.cross_entropy(logits.float(), tgt, reduction="sum")
                (grad,) = torch.autograd.grad(loss, store["e"])
                out.append((grad.float() * store["e"].detach().float()).sum(-1).abs().cpu())
                store.clear()
    finally:
        hook.remove()
    return torch.cat(out)


def selector_ranking(name: str, model: GPTNeoX, contexts: torch.Tensor, targets: torch.Tensor, short: int,
                     batch_size: int, device, seed: int) -> torch.Tensor:
    """(n, n_far) far-token indices, best first, by selector ``name``."""
    n, long = contexts.shape
    if name == "attention":
        scores = attention_scores(model, contexts, batch_size, device)
    elif name == "saliency":
        scores = saliency_scores(model, contexts, targets, batch_size, device)
    elif name == "random":
        scores = torch.rand(n, long, generator=generator("language-random-selector", seed))
    else:
        raise ValueError(f"language.analysis.selectors: unknown selector {name!r}; expected one of {SELECTORS}")
    return scores[:, :long - short].argsort(dim=1, descending=True)

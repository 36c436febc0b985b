"""S GPT-NeoX models of one architecture as one module whose parameters carry a leading stack
dimension, so one forward and backward pass serves all S.

The stack is a ``GPTNeoX`` whose linear, LayerNorm and embedding layers are swapped for grouped
versions holding (S, ...) parameters under the same names: the model's own forward code runs
unchanged on S x B rows (run s owns rows s*B..(s+1)*B-1), attention is one SDPA call over all
of them, and run s's weights are ``{name: p[s]}`` of the stack's ``state_dict()``, loadable
into a plain ``GPTNeoX``. Each grouped layer reshapes its input to (S, rows, features) and
multiplies batched (bmm), so no value of one run ever meets another run's weights.

Rows selected for unembedding (``sparselen.nn.batch.labelled_positions``) stay grouped by run only
when every run has as many of them: ``equal_share`` says when.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from sparselen.nn.model import GPTNeoX


class StackedLinear(nn.Module):
    """S linear layers: input (S * rows..., in) -> (S * rows..., out)."""

    def __init__(self, stack: int, layer: nn.Linear):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(stack, *layer.weight.shape))
        self.bias = None if layer.bias is None else nn.Parameter(torch.empty(stack, *layer.bias.shape))

    def forward(self, x):
        S, shape = self.weight.shape[0], x.shape
        grouped = x.reshape(S, -1, shape[-1])
        w = self.weight.transpose(1, 2)
        y = torch.bmm(grouped, w) if self.bias is None else torch.baddbmm(self.bias[:, None], grouped, w)
        return y.reshape(*shape[:-1], y.shape[-1])


class StackedLayerNorm(nn.Module):
    """S LayerNorms over the last dimension, each with its own gain and bias."""

    def __init__(self, stack: int, layer: nn.LayerNorm):
        super().__init__()
        self.normalized_shape, self.eps = tuple(layer.normalized_shape), layer.eps
        self.weight = nn.Parameter(torch.empty(stack, *layer.weight.shape))
        self.bias = nn.Parameter(torch.empty(stack, *layer.bias.shape))

    def forward(self, x):
        S, shape = self.weight.shape[0], x.shape
        y = F.layer_norm(x, self.normalized_shape, eps=self.eps).reshape(S, -1, shape[-1])
        return torch.addcmul(self.bias[:, None], y, self.weight[:, None]).reshape(shape)


class StackedEmbedding(nn.Module):
    """S embedding tables: ids (S * rows, ...) looked up in their run's table (one lookup into
    the tables laid end to end)."""

    def __init__(self, stack: int, layer: nn.Embedding):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(stack, *layer.weight.shape))

    def forward(self, ids):
        S, V, d = self.weight.shape
        offsets = torch.arange(S, device=ids.device)[:, None] * V
        flat = ids.reshape(S, -1) + offsets
        return F.embedding(flat, self.weight.reshape(S * V, d)).reshape(*ids.shape, d)


GROUPED = {nn.Linear: StackedLinear, nn.LayerNorm: StackedLayerNorm, nn.Embedding: StackedEmbedding}


def stack_models(models: list[GPTNeoX]) -> GPTNeoX:
    """One ``GPTNeoX`` whose parameters are ``models``' stacked along a new first dimension
    (same names, same order: an optimizer's parameter indices mean the same in both)."""
    first = models[0]
    if not isinstance(first, GPTNeoX) or any(m.cfg != first.cfg for m in models):
        raise ValueError("only GPT-NeoX models of one architecture stack")
    stacked = GPTNeoX(first.cfg)
    for name, module in list(stacked.named_modules()):
        grouped = GROUPED.get(type(module))
        if grouped is not None:
            parent, _, attr = name.rpartition(".")
            setattr(stacked.get_submodule(parent), attr, grouped(len(models), module))
    stacked.to(next(first.parameters()).device)
    stacked.load_state_dict(stack_state([m.state_dict() for m in models]))
    return stacked


def stack_state(states: list[dict]) -> dict:
    """Runs' state dicts as one stacked state dict."""
    return {k: torch.stack([s[k] for s in states]) for k in states[0]}


def run_state(stacked: dict, s: int) -> dict:
    """Run ``s``'s state dict out of a stacked one (copies, so saving one run stores its own)."""
    return {k: v[s].clone() for k, v in stacked.items()}


def stack_size(model: GPTNeoX) -> int:
    return model.gpt_neox.embed_in.weight.shape[0]


def equal_share(positions: torch.Tensor | None, rows: int, stack: int, seq_len: int) -> bool:
    """Whether ``positions`` (sorted flat indices into rows x seq_len) give every run (``rows``
    / ``stack`` consecutive rows each) as many positions, so the selected hidden states still
    group by run."""
    if positions is None:
        return True
    per_run = torch.bincount(positions // (rows // stack * seq_len), minlength=stack)
    return bool((per_run == per_run[0]).all())

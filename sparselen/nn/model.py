"""A GPT-NeoX decoder, small enough to read in one sitting.

Numerically it is the Hugging Face ``GPTNeoXForCausalLM`` architecture (parallel attention +
MLP residual, LayerNorm, exact GELU, rotary embeddings on the first ``rotary_pct`` of each
head, non-interleaved ``rotate_half`` layout), and its parameter names match that class (transformers 5 naming: ``lm_head``), so
``state_dict()`` loads into it unchanged (``tests/nn/test_model.py`` checks the logits).

Position schemes (``scheme``; docs/reconstruction.md, "Model"):
- ``nope``: no position signal at all (causal mask only);
- ``rope``: rotary embeddings on positions 0..T-1 (or given ids);
- ``pose``: ``rope`` whose *training* ids are PoSE-shifted (see ``sparselen.nn.positions``);
  the model itself is identical to ``rope``;
- ``coupled``: rotary embeddings driven by task-given (coupled) position ids;
- ``ppc``: ``coupled`` plus a head on the final hidden state predicting the next
  position id (Predictive Position Coupling).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

POSITION_SCHEMES = ("nope", "rope", "pose", "coupled", "ppc")
POSITION_TARGETS = ("absolute", "offset")  # what a PPC head predicts of the next id (ModelConfig.position_target)


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 128
    d_ff: int = 512
    rotary_pct: float = 1.0
    rotary_base: float = 10000.0
    layer_norm_eps: float = 1e-5
    scheme: str = "rope"
    max_position_id: int = 0  # size of the PPC position-id head's output (ppc only)
    # coupled/ppc only: a learned embedding of the position id, readable but never matchable.
    # A PPC head cannot name an absolute id from shift-invariant RoPE alone, but ids fed to
    # queries/keys would not length-generalize; so the embedding of each token's id is added
    # to the *values* of the last layer (a head there copies the id of the token it attends
    # to) and to the final hidden state (its own id), never to anything a query or key sees.
    id_embedding: bool = False
    # ppc only: what the position head predicts of the next token's id. "absolute": the id
    # itself, one of max_position_id + 1 classes; "offset": the id minus the current token's,
    # one of 2 max_position_id + 1 classes (docs/reconstruction.md, "PPC's id readings").
    position_target: str = "absolute"

    def __post_init__(self):
        if self.scheme not in POSITION_SCHEMES:
            raise ValueError(f"scheme = {self.scheme!r}: expected one of {POSITION_SCHEMES}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model = {self.d_model} is not divisible by n_head = {self.n_head}")
        if self.scheme == "ppc" and self.max_position_id < 1:
            raise ValueError("max_position_id must be >= 1 for the ppc scheme")
        if self.id_embedding and (self.scheme not in ("coupled", "ppc") or self.max_position_id < 1):
            raise ValueError("id_embedding needs scheme coupled or ppc and max_position_id >= 1")
        if self.position_target not in POSITION_TARGETS:
            raise ValueError(f"position_target = {self.position_target!r}: expected one of {POSITION_TARGETS}")

    @property
    def position_classes(self) -> int:
        """Outputs of the PPC position head: every id, or every offset from -max to +max."""
        return self.max_position_id + 1 if self.position_target == "absolute" else 2 * self.max_position_id + 1

    @property
    def head_size(self) -> int:
        return self.d_model // self.n_head

    @property
    def rotary_ndims(self) -> int:
        return 0 if self.scheme == "nope" else int(self.head_size * self.rotary_pct)

    def to_dict(self) -> dict:
        return asdict(self)


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype autocast computes ``x``'s products in (bf16 on a GPU), else ``x``'s own."""
    t = x.device.type
    return torch.get_autocast_dtype(t) if torch.is_autocast_enabled(t) else x.dtype


class Rotary(nn.Module):
    """cos/sin tables for arbitrary (possibly shifted or coupled) integer position ids: angles
    in fp32, the tables in the dtype asked for (the decoders ask for ``compute_dtype``)."""

    def __init__(self, ndims: int, base: float):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, ndims, 2, dtype=torch.float32) / ndims))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, position_ids: torch.Tensor, dtype: torch.dtype):
        freqs = position_ids[..., None].float() * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)[:, None]  # (B, 1, T, ndims)
        return emb.cos().to(dtype), emb.sin().to(dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    nd = cos.shape[-1]
    x_rot, x_pass = x[..., :nd], x[..., nd:]
    half = nd // 2
    rotated = torch.cat((-x_rot[..., half:], x_rot[..., :half]), dim=-1)
    out = x_rot * cos + rotated * sin
    return out if x_pass.shape[-1] == 0 else torch.cat((out, x_pass), dim=-1)  # no copy at rotary_pct 1


def attend(q, k, v, cache=None, last_only=False):
    """Causal SDPA over (B, H, T, head_size) tensors; with a ``cache`` ([k, v] of earlier
    steps, extended in place) one new query sees every cached key. ``last_only``: only the
    last query is computed (it sees every key, so it needs no mask): what a metric read at the
    last position costs, instead of T queries."""
    if last_only:
        q = q[:, :, -1:]
    causal = not last_only
    if cache is not None:
        if cache[0] is not None:
            if q.shape[2] > 1:
                raise ValueError("multi-token steps are only supported on an empty cache")
            k, v = torch.cat((cache[0], k), dim=2), torch.cat((cache[1], v), dim=2)
            causal = False
        cache[0], cache[1] = k, v
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_head, self.head_size = cfg.n_head, cfg.head_size
        self.query_key_value = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.dense = nn.Linear(cfg.d_model, cfg.d_model)

    def qkv(self, x, rope):
        """Rotated queries and keys, and values, each (B, H, T, head_size); also used by the
        language analysis to read attention weights, which the fused SDPA never materialises."""
        B, T, _ = x.shape
        # GPT-NeoX packs q, k, v per head: (B, T, H, 3 * head_size).
        q, k, v = self.query_key_value(x).view(B, T, self.n_head, 3 * self.head_size).transpose(1, 2).chunk(3, dim=-1)
        if rope is not None:
            q, k = _rotate(q, *rope), _rotate(k, *rope)
        return q, k, v

    def forward(self, x, rope, cache=None, id_values=None, last_only=False):
        B, T, _ = x.shape
        q, k, v = self.qkv(x, rope)
        if id_values is not None:  # (B, T, d_model): per-token id embedding, split across heads
            v = v + id_values.view(B, T, self.n_head, self.head_size).transpose(1, 2)
        y = attend(q, k, v, cache, last_only)
        return self.dense(y.transpose(1, 2).reshape(B, y.shape[2], -1))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(cfg.d_model, cfg.d_ff)
        self.dense_4h_to_h = nn.Linear(cfg.d_ff, cfg.d_model)

    def forward(self, x):
        return self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(x)))


class Layer(nn.Module):
    """Parallel residual: x + attn(ln1(x)) + mlp(ln2(x)), as in GPT-NeoX."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.post_attention_layernorm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.attention = Attention(cfg)
        self.mlp = MLP(cfg)

    def forward(self, x, rope, cache=None, id_values=None, last_only=False):
        attn = self.attention(self.input_layernorm(x), rope, cache, id_values, last_only)
        if last_only:  # keys and values need every position; the rest only the last
            x = x[:, -1:]
        return x + attn + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embed_in = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.n_layer))
        self.final_layer_norm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        if cfg.id_embedding:
            self.embed_position_ids = nn.Embedding(cfg.max_position_id + 1, cfg.d_model)


class Decoder(nn.Module):
    """What the trainer, the KV cache and the throughput reports use of any decoder here
    (GPT-NeoX, OLMo): a subclass names its ``blocks()``."""

    loss_in_forward = False  # whether ``forward(..., labels=)`` returns the summed token loss

    def new_cache(self):
        return [[None, None] for _ in self.blocks()]

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self, seq_len: float) -> float:
        """Training FLOPs per token of sequences of ``seq_len`` tokens, counted as
        ``sparselen.nn.flops`` counts them (MFU, the pilot): 3 x a forward pass (backward
        = 2 x forward) of every matrix product (2 FLOPs per weight of each linear layer, output
        heads included; embeddings are lookups) and causal attention over (seq_len + 1) / 2
        keys on average (4 d_model FLOPs per key and layer)."""
        matmul = sum(m.weight.numel() for m in self.modules() if isinstance(m, nn.Linear))
        return 3 * (2 * matmul + self.cfg.n_layer * 4 * self.cfg.d_model * (seq_len + 1) / 2)

    @staticmethod
    def select(h: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
        """Hidden states (B, T, d) at ``positions`` (flat indices into B x T), or all of them."""
        return h if positions is None else h.flatten(0, 1).index_select(0, positions)


class GPTNeoX(Decoder):
    """Decoder-only transformer; ``forward`` returns token logits (and PPC position logits)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.gpt_neox = Backbone(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.rotary = Rotary(cfg.rotary_ndims, cfg.rotary_base) if cfg.rotary_ndims else None
        self.position_head = nn.Linear(cfg.d_model, cfg.position_classes) if cfg.scheme == "ppc" else None
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        # GPT-NeoX / HF default: N(0, 0.02) weights, zero biases, unit LayerNorm.
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def hidden_states(self, input_ids, position_ids=None, cache=None, last_only=False):
        """Final-layer hidden states. ``cache``: list of per-layer [k, v] for generation;
        ``last_only``: the last position's alone, (B, 1, d_model), its last layer computed
        for that position only."""
        B, T = input_ids.shape
        x = self.gpt_neox.embed_in(input_ids)
        rope = None
        if self.rotary is not None:
            if position_ids is None:
                start = 0 if cache is None or cache[0][0] is None else cache[0][0].shape[2]
                position_ids = torch.arange(start, start + T, device=input_ids.device)[None]  # shared by the batch
            # in the products' dtype: under autocast, q and k (bf16 out of query_key_value) stay
            # bf16 into SDPA instead of meeting fp32 tables; in fp32, x's dtype, as ever
            rope = self.rotary(position_ids, compute_dtype(x))
        last = len(self.gpt_neox.layers) - 1
        for i, layer in enumerate(self.gpt_neox.layers):
            ids = self._id_embedding(position_ids) if i == last else None
            x = layer(x, rope, None if cache is None else cache[i], ids, last_only and i == last)
        return self.gpt_neox.final_layer_norm(x)

    def _id_embedding(self, position_ids):
        """Embedding of each token's id (``id_embedding`` models only, else None)."""
        if not self.cfg.id_embedding:
            return None
        if position_ids is None:
            raise ValueError("a model with id_embedding needs position_ids")
        return self.gpt_neox.embed_position_ids(position_ids)

    def forward(self, input_ids, position_ids=None, cache=None, last_only=False, positions=None):
        """(token logits, PPC position logits or None), (B, T, .); ``positions``: flat indices
        (rows x positions) of the only positions to unembed (``sparselen.nn.batch.labelled_positions``),
        giving (len(positions), .)."""
        h = self.hidden_states(input_ids, position_ids, cache, last_only)
        logits = self.lm_head(self.select(h, positions))
        if self.position_head is None:
            return logits, None
        own = self._id_embedding(position_ids)
        if own is not None and last_only:
            own = own[:, -1:]
        if own is not None:
            h = h + own.expand_as(h)
        return logits, self.position_head(self.select(h, positions))

    def input_embeddings(self) -> nn.Embedding:
        return self.gpt_neox.embed_in

    def attention_modules(self) -> list[Attention]:
        """Each layer's attention (``qkv``), for analyses that read attention weights."""
        return [layer.attention for layer in self.gpt_neox.layers]

    def blocks(self) -> list[Layer]:
        return list(self.gpt_neox.layers)


def hf_config(cfg: ModelConfig):
    """The ``transformers.GPTNeoXConfig`` with the same architecture (tests, benchmarks)."""
    from transformers import GPTNeoXConfig

    return GPTNeoXConfig(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.d_model,
        num_hidden_layers=cfg.n_layer,
        num_attention_heads=cfg.n_head,
        intermediate_size=cfg.d_ff,
        hidden_act="gelu",
        rotary_pct=cfg.rotary_pct if cfg.scheme != "nope" else 0.0,
        rotary_emb_base=cfg.rotary_base,
        layer_norm_eps=cfg.layer_norm_eps,
        use_parallel_residual=True,
        tie_word_embeddings=False,
        max_position_embeddings=4096,
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )

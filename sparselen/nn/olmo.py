"""OLMo decoders (the OLMo codebase's architecture), small enough to read in one sitting.

The paper "trained our models using the OLMo codebase (Groeneveld et al., 2024) on the C4
dataset" [paper]; it names no architecture. The OLMo codebase's block is one sequential
design with switches, and this module keeps the switches that the published OLMo models and
configs set differently, under the codebase's own meaning:

- ``norm``: ``layernorm`` or ``rmsnorm``; ``norm_affine``: a learned gain (never a bias);
- ``norm_after``: OLMo-2's ``x + norm(attn(x))`` instead of the usual ``x + attn(norm(x))``;
- ``qk_norm``: normalise the projected queries and keys (over the whole width, before the
  heads are split, as the codebase's ``attention_layer_norm`` does);
- ``activation``: ``swiglu`` (``down(silu(gate(x)) * up(x))``) or a plain ``gelu`` MLP.

``variant`` fills them in (a reconstruction; docs/reconstruction.md, "Natural language"):
- ``olmo1``: OLMo-1 (Groeneveld et al. 2024, the paper's citation): parameter-free LayerNorm
  before each sublayer, SwiGLU, RoPE base 10^4, no biases. Numerically
  ``transformers.OlmoForCausalLM``.
- ``olmo2``: OLMo-2 (OLMo team 2024): RMSNorm with gain after each sublayer, QK-RMSNorm,
  SwiGLU, RoPE base 5e5. Numerically ``transformers.Olmo2ForCausalLM``.
- ``kempner_c4``: the OLMo-codebase configuration that co-authors of the paper published for
  their own C4 models in 2024 (CoLoR-Filter; critical batch size): LayerNorm with gain and no
  bias before each sublayer, QK-LayerNorm, GELU MLP, no biases, RoPE base 10^4. No
  transformers class has it; ``olmo_codebase_config`` gives the codebase's settings.

Every parameter is named as in transformers' Olmo/Olmo2 classes (``model.embed_tokens``,
``model.layers.N.self_attn.q_proj``, ..., ``lm_head``), so a ``state_dict`` of ``olmo1`` /
``olmo2`` loads into them unchanged (``tests/nn/test_olmo.py`` checks the logits). The interface
is ``sparselen.nn.model.GPTNeoX``'s: ``forward(input_ids, position_ids=None, cache=None) ->
(logits, None)``, ``hidden_states``, ``new_cache``, ``attention_modules()`` (each with
``qkv(x, rope)``) and ``input_embeddings()``, so the trainer, the language evaluation and the
analysis take either model. Position schemes: ``nope``, ``rope``, ``pose`` (coupling and PPC
belong to the synthetic tasks' GPT-NeoX).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from sparselen.nn.batch import IGNORE
from sparselen.nn.model import Decoder, Rotary, _rotate, attend, compute_dtype

VARIANTS = {
    "olmo1": dict(norm="layernorm", norm_affine=False, norm_after=False, qk_norm=False, activation="swiglu",
                  rotary_base=10000.0, norm_eps=1e-5),
    "olmo2": dict(norm="rmsnorm", norm_affine=True, norm_after=True, qk_norm=True, activation="swiglu",
                  rotary_base=500000.0, norm_eps=1e-6),
    "kempner_c4": dict(norm="layernorm", norm_affine=True, norm_after=False, qk_norm=True, activation="gelu",
                       rotary_base=10000.0, norm_eps=1e-5),
}
POSITION_SCHEMES = ("nope", "rope", "pose")


def fast_path(x: torch.Tensor) -> bool:
    """Whether ``x`` runs on the GPU's path (a CUDA tensor, or under autocast): one fused QKV
    product and RoPE in the autocast dtype. A CPU in float32 computes as ever, bit for bit."""
    return x.is_cuda or torch.is_autocast_enabled(x.device.type)


@dataclass(frozen=True)
class OlmoConfig:
    vocab_size: int
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 128
    d_ff: int = 512  # MLP hidden width (SwiGLU: width of gate and of up, transformers' intermediate_size)
    variant: str = "olmo1"
    # None: the variant's value
    norm: str | None = None
    norm_affine: bool | None = None
    norm_after: bool | None = None
    qk_norm: bool | None = None
    activation: str | None = None
    rotary_base: float | None = None
    norm_eps: float | None = None
    tie_embeddings: bool = False  # OLMo-1 1B ties; OLMo-1 7B, OLMo-2 and kempner_c4 do not
    rotary_pct: float = 1.0  # OLMo rotates whole heads; accepted (as 1.0) so a GPT-NeoX model dict ports
    scheme: str = "rope"
    architecture: str = "olmo"

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise ValueError(f"model.variant={self.variant!r}; expected one of {tuple(VARIANTS)}")
        for key, value in VARIANTS[self.variant].items():
            if getattr(self, key) is None:
                object.__setattr__(self, key, value)
        if self.architecture != "olmo":
            raise ValueError(f"OlmoConfig with architecture={self.architecture!r}")
        if self.norm not in ("layernorm", "rmsnorm"):
            raise ValueError(f"model.norm={self.norm!r}; expected layernorm or rmsnorm")
        if self.activation not in ("swiglu", "gelu"):
            raise ValueError(f"model.activation={self.activation!r}; expected swiglu or gelu")
        if self.scheme not in POSITION_SCHEMES:
            raise ValueError(f"scheme={self.scheme!r}; the OLMo model supports {POSITION_SCHEMES}")
        if self.d_model % self.n_head or (self.d_model // self.n_head) % 2:
            raise ValueError(f"model.d_model={self.d_model} must be n_head={self.n_head} times an even head size")
        if self.rotary_pct != 1.0:
            raise ValueError(f"model.rotary_pct={self.rotary_pct}: OLMo rotates whole heads (1.0)")

    @property
    def head_size(self) -> int:
        return self.d_model // self.n_head

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "OlmoConfig":
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown OLMo model keys {sorted(unknown)}; known: {sorted(names)}")
        return cls(**d)


class Norm(nn.Module):
    """LayerNorm or RMSNorm over the last dim, with a gain or none (never a bias)."""

    def __init__(self, size: int, cfg: OlmoConfig):
        super().__init__()
        self.shape, self.eps, self.rms = (size,), cfg.norm_eps, cfg.norm == "rmsnorm"
        self.weight = nn.Parameter(torch.ones(size)) if cfg.norm_affine else None

    def forward(self, x):
        if self.rms:
            return F.rms_norm(x, self.shape, self.weight, self.eps)
        return F.layer_norm(x, self.shape, self.weight, None, self.eps)


class Attention(nn.Module):
    def __init__(self, cfg: OlmoConfig):
        super().__init__()
        d = cfg.d_model
        self.n_head, self.head_size = cfg.n_head, cfg.head_size
        self.q_proj, self.k_proj = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.v_proj, self.o_proj = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.q_norm = Norm(d, cfg) if cfg.qk_norm else None
        self.k_norm = Norm(d, cfg) if cfg.qk_norm else None

    def _heads(self, t):
        B, T, _ = t.shape
        return t.view(B, T, self.n_head, self.head_size).transpose(1, 2)

    def projections(self, x):
        """q, k, v (B, T, d_model): on the fast path one product with the three weights
        stacked (OLMo's ``att_proj``; the parameters stay transformers' three, so model files,
        checkpoints and exports keep their names), else the three products."""
        if not fast_path(x):
            return self.q_proj(x), self.k_proj(x), self.v_proj(x)
        w = torch.cat((self.q_proj.weight, self.k_proj.weight, self.v_proj.weight))
        return F.linear(x, w).split(x.shape[-1], dim=-1)

    def qkv(self, x, rope):
        """Rotated queries and keys, and values, each (B, H, T, head_size), exactly as
        ``forward`` computes them (the language analysis reads attention weights from them).
        q and k are rotated in the tables' dtype (autocast's, ``Olmo.hidden_states``): a
        QK-norm's fp32 output is cast down first, as SDPA would cast it anyway."""
        q, k, v = self.projections(x)
        if self.q_norm is not None:  # over the whole width, before the heads are split
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = self._heads(q), self._heads(k), self._heads(v)
        if rope is not None:
            q, k = _rotate(q.to(rope[0].dtype), *rope), _rotate(k.to(rope[0].dtype), *rope)
        return q, k, v

    def forward(self, x, rope, cache=None, last_only=False):
        q, k, v = self.qkv(x, rope)
        y = attend(q, k, v, cache, last_only)
        return self.o_proj(y.transpose(1, 2).reshape(x.shape[0], y.shape[2], -1))


class MLP(nn.Module):
    def __init__(self, cfg: OlmoConfig):
        super().__init__()
        self.swiglu = cfg.activation == "swiglu"
        if self.swiglu:
            self.gate_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.up_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.down_proj = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def forward(self, x):
        if self.swiglu:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return self.down_proj(F.gelu(self.up_proj(x)))


class Layer(nn.Module):
    """Sequential block: x + attn(norm(x)), then + mlp(norm(.)); OLMo-2 normalises after instead."""

    def __init__(self, cfg: OlmoConfig):
        super().__init__()
        self.norm_after = cfg.norm_after
        self.self_attn, self.mlp = Attention(cfg), MLP(cfg)
        if cfg.norm_after:  # transformers' Olmo2 names
            self.post_attention_layernorm = Norm(cfg.d_model, cfg)
            self.post_feedforward_layernorm = Norm(cfg.d_model, cfg)
        else:  # transformers' Olmo names (pre-norm: post_attention_layernorm is the MLP's input norm)
            self.input_layernorm, self.post_attention_layernorm = Norm(cfg.d_model, cfg), Norm(cfg.d_model, cfg)

    def forward(self, x, rope, cache=None, last_only=False):
        """``last_only``: keys and values from every position, the rest for the last alone."""
        residual = x[:, -1:] if last_only else x
        if self.norm_after:
            x = residual + self.post_attention_layernorm(self.self_attn(x, rope, cache, last_only))
            return x + self.post_feedforward_layernorm(self.mlp(x))
        x = residual + self.self_attn(self.input_layernorm(x), rope, cache, last_only)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    def __init__(self, cfg: OlmoConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.n_layer))
        self.norm = Norm(cfg.d_model, cfg)


class Olmo(Decoder):
    """Decoder-only OLMo; ``forward`` returns (token logits, None), or the summed loss."""

    loss_in_forward = True

    def __init__(self, cfg: OlmoConfig):
        super().__init__()
        self.cfg = cfg
        self.model = Backbone(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.rotary = Rotary(cfg.head_size, cfg.rotary_base) if cfg.scheme != "nope" else None
        self.position_head = None
        self.apply(self._init_weights)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    @staticmethod
    def _init_weights(module):
        # transformers' Olmo default: N(0, 0.02) weights, unit norm gains (the OLMo codebase's
        # `init_fn: normal`; its `mitchell` init is a fan-in scaled variant)
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        elif isinstance(module, Norm) and module.weight is not None:
            nn.init.ones_(module.weight)

    def hidden_states(self, input_ids, position_ids=None, cache=None, last_only=False):
        """Final hidden states (after the final norm). ``cache``: per-layer [k, v] lists;
        ``last_only``: the last position's alone, (B, 1, d_model)."""
        B, T = input_ids.shape
        x = self.model.embed_tokens(input_ids)
        rope = None
        if self.rotary is not None:
            if position_ids is None:
                start = 0 if cache is None or cache[0][0] is None else cache[0][0].shape[2]
                position_ids = torch.arange(start, start + T, device=input_ids.device)[None]
            rope = self.rotary(position_ids, compute_dtype(x))
        last = len(self.model.layers) - 1
        for i, layer in enumerate(self.model.layers):
            x = layer(x, rope, None if cache is None else cache[i], last_only and i == last)
        return self.model.norm(x)

    def forward(self, input_ids, position_ids=None, cache=None, last_only=False, positions=None, labels=None):
        """``positions``: flat indices (rows x positions) of the only positions to unembed
        (``sparselen.nn.batch.labelled_positions``): logits (len(positions), vocabulary).
        ``labels``: one per unembedded position (flat); returns (the token cross-entropy summed
        over the labelled ones, None) instead, so that a compiled model compiles the loss with
        the head (``sparselen.nn.batch.summed_token_loss``): the fp32 logits are never stored."""
        logits = self.lm_head(self.select(self.hidden_states(input_ids, position_ids, cache, last_only), positions))
        if labels is None:
            return logits, None
        return F.cross_entropy(logits.flatten(0, -2), labels, ignore_index=IGNORE, reduction="sum"), None

    def input_embeddings(self) -> nn.Embedding:
        return self.model.embed_tokens

    def attention_modules(self) -> list[Attention]:
        return [layer.self_attn for layer in self.model.layers]

    def blocks(self) -> list[Layer]:
        return list(self.model.layers)


def hf_config(cfg: OlmoConfig):
    """The ``transformers`` config (Olmo or Olmo2) of the same architecture (tests, benchmarks)."""
    import transformers

    common = dict(vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.d_ff,
                  num_hidden_layers=cfg.n_layer, num_attention_heads=cfg.n_head, num_key_value_heads=cfg.n_head,
                  hidden_act="silu", max_position_embeddings=4096, attention_bias=False, attention_dropout=0.0,
                  pad_token_id=None, bos_token_id=None, eos_token_id=None,
                  tie_word_embeddings=cfg.tie_embeddings, rope_parameters={"rope_type": "default",
                                                                           "rope_theta": cfg.rotary_base})
    knobs = {k: getattr(cfg, k) for k in VARIANTS["olmo1"] if k not in ("rotary_base", "norm_eps")}
    if knobs == {k: VARIANTS["olmo1"][k] for k in knobs} and cfg.norm_eps == 1e-5:
        return transformers.OlmoConfig(**common, clip_qkv=None)
    if knobs == {k: VARIANTS["olmo2"][k] for k in knobs}:
        return transformers.Olmo2Config(**common, rms_norm_eps=cfg.norm_eps)
    raise ValueError(f"no transformers class has this OLMo architecture ({knobs}); "
                     "olmo_codebase_config gives the OLMo codebase's settings instead")


def hf_model(cfg: OlmoConfig):
    import transformers

    hc = hf_config(cfg)
    cls = transformers.OlmoForCausalLM if isinstance(hc, transformers.OlmoConfig) else transformers.Olmo2ForCausalLM
    return cls(hc)


def olmo_codebase_config(cfg: OlmoConfig) -> dict:
    """The ``model:`` section of an OLMo-codebase (allenai/OLMo) config with this architecture."""
    return dict(d_model=cfg.d_model, n_heads=cfg.n_head, n_layers=cfg.n_layer,
                mlp_hidden_size=2 * cfg.d_ff if cfg.activation == "swiglu" else cfg.d_ff,
                activation_type=cfg.activation, block_type="sequential", rope=True, rope_theta=cfg.rotary_base,
                include_bias=False, bias_for_layer_norm=False,
                layer_norm_type="rms" if cfg.norm == "rmsnorm" else "default",
                layer_norm_with_affine=cfg.norm_affine, layer_norm_eps=cfg.norm_eps, norm_after=cfg.norm_after,
                attention_layer_norm=cfg.qk_norm, attention_layer_norm_with_affine=cfg.norm_affine,
                weight_tying=cfg.tie_embeddings, vocab_size=cfg.vocab_size, embedding_size=cfg.vocab_size,
                alibi=False, flash_attention=False, attention_dropout=0.0, residual_dropout=0.0,
                embedding_dropout=0.0, multi_query_attention=False, clip_qkv=None)


def from_olmo_codebase(state: dict, cfg: OlmoConfig) -> dict:
    """A state dict of the OLMo codebase's ``OLMo`` model (``transformer.blocks.N.att_proj``...)
    renamed and split into this module's names (an OLMo-codebase checkpoint, e.g. one trained
    as the paper did, can then be analysed here). Its SwiGLU ``ff_proj`` rows are [up; gate]."""
    state = {k.removeprefix("model."): v for k, v in state.items()}  # the codebase's FSDP/HF wrappers
    out = {"model.embed_tokens.weight": state["transformer.wte.weight"]}
    pre, post = (("post_attention_layernorm", "post_feedforward_layernorm") if cfg.norm_after
                 else ("input_layernorm", "post_attention_layernorm"))
    for i in range(cfg.n_layer):
        b, o = f"transformer.blocks.{i}.", f"model.layers.{i}."
        q, k, v = state[b + "att_proj.weight"].split(cfg.d_model, dim=0)
        out |= {o + "self_attn.q_proj.weight": q, o + "self_attn.k_proj.weight": k, o + "self_attn.v_proj.weight": v,
                o + "self_attn.o_proj.weight": state[b + "attn_out.weight"],
                o + "mlp.down_proj.weight": state[b + "ff_out.weight"]}
        if cfg.activation == "swiglu":
            up, gate = state[b + "ff_proj.weight"].chunk(2, dim=0)
            out |= {o + "mlp.up_proj.weight": up, o + "mlp.gate_proj.weight": gate}
        else:
            out[o + "mlp.up_proj.weight"] = state[b + "ff_proj.weight"]
        if cfg.norm_affine:
            out |= {o + pre + ".weight": state[b + "attn_norm.weight"],
                    o + post + ".weight": state[b + "ff_norm.weight"]}
            if cfg.qk_norm:
                out |= {o + "self_attn.q_norm.weight": state[b + "q_norm.weight"],
                        o + "self_attn.k_norm.weight": state[b + "k_norm.weight"]}
    if cfg.norm_affine:
        out["model.norm.weight"] = state["transformer.ln_f.weight"]
    out["lm_head.weight"] = state["transformer.wte.weight" if cfg.tie_embeddings else "transformer.ff_out.weight"]
    return out

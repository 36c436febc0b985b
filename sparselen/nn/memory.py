"""Peak accelerator memory of a job's passes, predicted from its shapes (``sparselen estimate``).

A pass's peak is the most bytes its tensors hold at once: what ``torch.cuda.max_memory_allocated``
reports (the CUDA context and the allocator's cache come on top: ``profiles.USABLE``). Terms:

- on a GPU, cuBLAS's workspaces (``CUDA_WORKSPACE``);
- **training state**: fp32 weights, gradients and AdamW's two moments, 4 + 4 + 8 bytes per
  parameter (the optimizer step adds 4 more for its temporaries, once activations are gone);
- **activations** a block keeps for its backward pass, per token, counted op by op
  (``layer_terms``): matrix-product outputs at the compute precision (2 bytes under bf16
  autocast on CUDA, 4 in fp32 on the CPU); the residual stream and the norms in fp32 (autocast
  runs norms in fp32 and casts each matrix product's input on its own, so a norm feeding q, k
  and v is kept three times). Without parameter gradients only the tensors that input
  gradients need are kept;
- the **loss head**, per unembedded position: the logits, their fp32 copy (``logits.float()``;
  none in fp32) and log-softmax's fp32 output, which training keeps for backward; backward adds
  two fp32 tensors of that size (``loss_fn`` in sparselen/training/train.py). Evaluation's per-position
  losses (``logits.float().transpose(1, 2)``) copy the transposed logits on CUDA;
- a **backward working set**: the gradients of a block's MLP hidden tensors;
- **no-grad passes** (evaluation, analysis) keep nothing: a block's live tensors at once
  (``layer_live``), and generation its KV cache.
- a **stack** of S runs trained as one model (``sparselen.training.stacked``) holds S times a run's
  training step, at the stack's padded length (``stacked``).

Checked against measured peaks on the CPU (benchmarks/memory.py, ``tracker.PeakTensorMemory``)
and on an H200 (docs/gpu.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

GiB = 2**30
DEVICES = ("gpu", "cpu")
NORM_STATS = 8  # fp32 mean and 1/std (LayerNorm) per token and norm
# cuBLAS's workspaces, which PyTorch allocates through its caching allocator at the first matrix
# products (measured: 64 MiB on an H200, torch 2.11+cu130; docs/gpu.md)
CUDA_WORKSPACE = 64 * 2**20


@dataclass(frozen=True)
class Peak:
    """A job's largest pass: its bytes, what it is, and the config key that shrinks it."""

    bytes: float
    what: str
    key: str


def workspace(device: str) -> float:
    return CUDA_WORKSPACE if device == "gpu" else 0.0


def compute_bytes(device: str, autocast: bool) -> int:
    """Bytes of a matrix product's output: 2 where the code autocasts to bf16 on a GPU, else 4."""
    if device not in DEVICES:
        raise ValueError(f"device {device!r}; expected one of {DEVICES}")
    return 2 if device == "gpu" and autocast else 4


def meta_model(cfg):
    """The model of ``cfg`` on the meta device, its initialisation skipped (meta tensors hold no
    values; drawing them costs ~0.4 s a model): shapes and FLOP counts, nothing allocated."""
    import contextlib
    from unittest import mock

    import torch

    from sparselen.nn.architectures import build_model

    keep = lambda tensor, *args, **kwargs: tensor  # noqa: E731
    inits = ("normal_", "zeros_", "ones_", "uniform_", "kaiming_uniform_", "trunc_normal_")
    with torch.device("meta"), contextlib.ExitStack() as stack:
        for name in inits:
            stack.enter_context(mock.patch.object(torch.nn.init, name, keep))
        return build_model(cfg)


@lru_cache(maxsize=None)
def parameters(cfg) -> int:
    """The model's parameters (tied ones once), counted on the meta device (``meta_model``)."""
    return meta_model(cfg).num_parameters()


def _is_olmo(cfg) -> bool:
    return getattr(cfg, "architecture", "gpt_neox") == "olmo"


def layer_terms(cfg, a: int) -> list[tuple[float, bool, bool]]:
    """What one block keeps for backward, per token: (bytes, needed for input gradients (else
    only for weight gradients), computed at every position under ``last_only``), at compute
    precision ``a`` bytes (2: bf16 autocast, 4: fp32)."""
    d, ff, heads = cfg.d_model, cfg.d_ff, cfg.n_head

    def casts(n: int) -> float:  # an fp32 input of n matrix products: a bf16 copy each, or itself
        return n * a * d if a < 4 else 4 * d

    attention_out = (a * d + 4 * heads, True, False)  # SDPA's output and log-sum-exp; the projection reads it
    if not _is_olmo(cfg):  # GPT-NeoX: x + attn(ln1(x)) + mlp(ln2(x)), packed qkv, biases
        rotary = cfg.scheme != "nope" and cfg.rotary_ndims > 0
        return [
            (4 * d + 2 * NORM_STATS, True, True),  # the residual, input of both norms
            (casts(1), False, True),  # ln1 -> query_key_value
            (3 * a * d, True, True),  # q, k, v: one tensor, which the SDPA's v (a view) keeps whole
            (2 * a * d if rotary else 0, True, True),  # rotated q, k (in the compute dtype: bf16 under autocast)
            attention_out,
            # partial rotary concatenates q into head-major order: the projection reads a copy
            (a * d if rotary and cfg.rotary_ndims < cfg.head_size else 0, False, False),
            (casts(1), False, False),  # ln2 -> dense_h_to_4h
            (a * ff, True, False),  # GELU input
            (a * ff, False, False),  # GELU output -> dense_4h_to_h
        ]
    swiglu, rms = cfg.activation == "swiglu", cfg.norm == "rmsnorm"
    # RMSNorm with a gain keeps its normalised input for the gain's gradient
    norm_extra = [(4 * d, False, True)] if rms and cfg.norm_affine else []
    mlp = [(3 * a * ff, True, False), (a * ff, False, False)] if swiglu else [(a * ff, True, False),
                                                                               (a * ff, False, False)]
    qk = [(8 * d + 2 * NORM_STATS, True, True)] + 2 * norm_extra if cfg.qk_norm else []
    attention = qk + [(2 * a * d, True, True), (a * d, True, True), attention_out]  # q, k, v into SDPA
    if cfg.norm_after:  # OLMo-2: x + norm(attn(x)), then + norm(mlp(.))
        return [(casts(3), False, True), *attention,
                (4 * d + NORM_STATS, True, False), *norm_extra,  # attention output -> its norm (fp32)
                (casts(2 if swiglu else 1), False, False), *mlp,
                (4 * d + NORM_STATS, True, False), *norm_extra]  # MLP output -> its norm
    return [(4 * d + NORM_STATS, True, True), *norm_extra, (casts(3), False, True), *attention,
            (4 * d + NORM_STATS, True, False), *norm_extra, (casts(2 if swiglu else 1), False, False), *mlp]


def layer_saved(cfg, a: int, param_grads: bool = True, last_only: bool = False) -> float:
    """Bytes per token one block keeps for backward; ``last_only``: the last block of a
    ``last_only`` pass, which keeps only what every position computes (keys, values)."""
    return sum(b for b, for_input, every in layer_terms(cfg, a)
               if (param_grads or for_input) and (every or not last_only))


def layer_live(cfg, a: int) -> float:
    """Bytes per token a block holds at once in a no-grad pass: the residual, a norm's output
    and its bf16 copy, the attention output (GPT-NeoX adds it after the MLP) and the MLP's
    hidden tensors (GELU: input and output; SwiGLU: gate, its SiLU and up)."""
    d, ff = cfg.d_model, cfg.d_ff
    hidden = 3 if _is_olmo(cfg) and cfg.activation == "swiglu" else 2
    return 12 * d + (a * d if a < 4 else 0) + (0 if _is_olmo(cfg) else a * d) + hidden * a * ff


def extra_head(cfg) -> int:
    """Outputs of the PPC position head (0 without one)."""
    return cfg.position_classes if getattr(cfg, "scheme", "") == "ppc" else 0


def outside_layers(cfg, a: int, param_grads: bool = True) -> float:
    """Per token, what backward keeps outside the blocks: token ids, rotary tables (per-row ids),
    the final norm's input and the heads' (cast) inputs."""
    d = cfg.d_model
    heads = 1 + (extra_head(cfg) > 0)
    rotary = 0 if cfg.scheme == "nope" else 8 * (cfg.head_size if _is_olmo(cfg) else cfg.rotary_ndims)
    inputs = heads * (a * d if a < 4 else 4 * d) if param_grads else 0
    return 8 + rotary + 4 * d + NORM_STATS + inputs


def loss_head(cfg) -> tuple[float, float]:
    """Per unembedded position of a training step: (the log-softmax outputs backward keeps, its
    largest transient: backward's two fp32 tensors of the larger head; the forward's logits and
    fp32 copy beside the kept output are no larger)."""
    sizes = [cfg.vocab_size] + ([extra_head(cfg)] if extra_head(cfg) else [])
    return 4 * sum(sizes), 8 * max(sizes)


def training_state(cfg) -> float:
    return 16 * parameters(cfg)


def backward_working_set(cfg, a: int) -> float:
    """Per token, the largest gradients a block's backward pass holds at once: those of the
    MLP's hidden tensors (the gradient of its output projection's input, and of the activation's)."""
    return 2 * a * cfg.d_ff


def train_step(cfg, rows: int, seq_len: float, device: str, stack: int = 1) -> float:
    """Peak of one training step of ``rows`` x ``seq_len`` tokens in one pass (the trainer autocasts
    on a GPU): the training state, every block's activations and the loss head's, and the larger
    of the loss head's transient and a block's backward working set; after backward, the
    optimizer's temporaries instead. ``stack``: S runs trained as one model
    (``sparselen.training.stacked``), each with these rows at the stack's padded ``seq_len``: S x all of it."""
    a, tokens = compute_bytes(device, True), rows * seq_len
    kept, transient = loss_head(cfg)
    activations = tokens * (cfg.n_layer * layer_saved(cfg, a) + outside_layers(cfg, a) + kept
                            + max(transient, backward_working_set(cfg, a)))
    return stacked(workspace(device) + training_state(cfg) + max(activations, 4 * parameters(cfg)), stack, device)


def stacked(peak: float, stack: int, device: str) -> float:
    """Peak of a pass that a stack of ``stack`` runs takes at once (its training step), from
    one run's ``peak``: every tensor S times (weights, gradients, AdamW's moments, activations of
    S x the rows), the device's workspaces once. Measured within 5% of ``train_stack`` on the CPU
    at S = 1, 4 and 16 (benchmarks/stacked_memory.py; docs/gpu.md)."""
    return workspace(device) + stack * (peak - workspace(device))


def input_gradient_pass(cfg, rows: int, seq_len: int, device: str, autocast: bool, param_grads: bool) -> float:
    """Peak of a ``last_only`` forward pass and the gradient of the last position's loss with
    respect to the input embeddings (the saliency selector): weights, every block's activations
    (the last block's at every position only for keys and values; without parameter gradients
    only what input gradients need) and a block's backward working set."""
    a, tokens = compute_bytes(device, autocast), rows * seq_len
    per_token = ((cfg.n_layer - 1) * layer_saved(cfg, a, param_grads) + layer_saved(cfg, a, param_grads, True)
                 + outside_layers(cfg, a, param_grads) + backward_working_set(cfg, a))
    return workspace(device) + 4 * parameters(cfg) + tokens * per_token


def no_grad_pass(cfg, rows: int, seq_len: int, device: str, autocast: bool, unembed: str = "last",
                 per_position_loss: bool = False, kept_inputs: float = 0.0) -> float:
    """Peak of a no-grad forward pass: weights and the larger of one block's live tensors and
    the loss head's. ``unembed``: ``last`` (``last_only``) or ``all`` positions;
    ``per_position_loss``: the cross-entropy of every position read from transposed logits;
    ``kept_inputs``: bytes per token and layer held for the whole pass (the attention
    selector's hooked block inputs)."""
    a, tokens = compute_bytes(device, autocast), rows * seq_len
    positions = tokens if unembed == "all" else rows
    # logits, their fp32 copy, log-softmax's output; CUDA's log-softmax copies transposed logits
    # contiguous first (the CPU's reads them in place: measured, benchmarks/memory.py)
    logits = a + (4 if a < 4 else 0) + 4 + (4 if per_position_loss and device == "gpu" else 0)
    head = positions * logits * (cfg.vocab_size + extra_head(cfg)) + tokens * 4 * cfg.d_model
    kept = tokens * cfg.n_layer * kept_inputs
    return workspace(device) + 4 * parameters(cfg) + kept + max(tokens * layer_live(cfg, a), head)


def generation(cfg, rows: int, prompt: int, new_tokens: int, device: str, autocast: bool) -> float:
    """Peak of greedy generation with a KV cache: the prompt's pass, whose cache holds each
    block's rotated keys and its packed q, k, v (the values are a view of it), then one token
    per step, each block's keys and values (keys counted as fp32: an upper bound under autocast,
    where the rotary output is bf16) copied into a longer cache, the old one alive during the
    copy."""
    a, d = compute_bytes(device, autocast), cfg.d_model
    first = rows * prompt * cfg.n_layer * (4 * d + 3 * a * d) + no_grad_pass(cfg, rows, prompt, device, autocast)
    total = prompt + new_tokens
    cache = rows * total * (4 * d + a * d) * (cfg.n_layer + 1)
    return max(first, workspace(device) + 4 * parameters(cfg) + cache + rows * layer_live(cfg, a))

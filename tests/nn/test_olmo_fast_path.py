"""The OLMo model's GPU path (``sparselen.nn.olmo.fast_path``: one fused QKV product, RoPE in the
autocast dtype, the loss inside the forward) computes the plain path's step (three products,
RoPE in fp32, the loss outside the model): within bf16 rounding under autocast, within fp32
rounding on the simulated GPU; a CPU in fp32 takes the plain path itself."""

import pytest
import torch

from sparselen.nn import olmo
from sparselen.nn.batch import IGNORE, Batch, labelled_positions
from sparselen.nn.olmo import VARIANTS, Olmo, OlmoConfig
from sparselen.runtime.simulated_cuda import simulate
from sparselen.training.distributed import loss_share
from sparselen.training.train import loss_fn

VOCAB = 53


def tiny(variant: str, seed: int = 0) -> Olmo:
    torch.manual_seed(seed)
    model = Olmo(OlmoConfig(vocab_size=VOCAB, n_layer=2, n_head=4, d_model=64, d_ff=96, variant=variant))
    with torch.no_grad():  # weights large enough that every product and norm gain matters
        for name, p in model.named_parameters():
            p.normal_(1.0 if "norm" in name else 0.0, 0.3 if "norm" in name else 0.15)
    return model


def batch(rows=3, T=24, seed=1, sparse_labels=False) -> Batch:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (rows, T + 1), generator=g)
    labels = ids[:, 1:].clone()
    if sparse_labels:  # a few labelled positions: the loss unembeds those alone
        labels[:, :-3] = IGNORE
    return Batch(ids[:, :-1].contiguous(), labels)


def plain_path(monkeypatch):
    """The model without its GPU path: three products, RoPE in x's dtype."""
    monkeypatch.setattr(olmo, "fast_path", lambda x: False)
    monkeypatch.setattr(olmo, "compute_dtype", lambda x: x.dtype)


def step(model, b, **kw):
    """(loss, gradients) of one forward and backward pass of ``loss_fn``."""
    model.zero_grad(set_to_none=True)
    loss, _ = loss_fn(model, b, **kw)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def rel(a, b) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm())


def test_a_cpu_in_float32_takes_none_of_the_gpu_path():
    model = tiny("olmo2")
    x = torch.randn(2, 5, 64)
    attn = model.attention_modules()[0]
    assert not olmo.fast_path(x) and olmo.compute_dtype(x) == torch.float32
    q, k, v = attn.projections(x)
    assert torch.equal(q, attn.q_proj(x)) and torch.equal(k, attn.k_proj(x)) and torch.equal(v, attn.v_proj(x))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert olmo.fast_path(x) and olmo.compute_dtype(x) == torch.bfloat16


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_fused_qkv_product_is_the_three_products(variant):
    """Forced on a CPU in fp32, the fused product gives the three products' logits to fp32 rounding."""
    model, b = tiny(variant), batch()
    with torch.no_grad():
        ref, _ = model(b.input_ids)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(olmo, "fast_path", lambda x: True)
            fused, _ = model(b.input_ids)
    torch.testing.assert_close(fused, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_bf16_step_equals_the_plain_paths_within_bf16_rounding(variant, monkeypatch):
    """Under bf16 autocast the GPU path's loss and gradients are as close to the fp32 step as
    the plain path's bf16 step is (both within bf16 rounding of it), and close to it."""
    model, b = tiny(variant), batch()
    exact_loss, exact = step(model, b)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        new_loss, new = step(model, b)
        with monkeypatch.context() as mp:
            plain_path(mp)
            old_loss, old = step(model, b)
    assert abs(float(new_loss - exact_loss)) < 2e-2 and abs(float(old_loss - exact_loss)) < 2e-2
    for name in exact:
        err_new, err_old = rel(new[name], exact[name]), rel(old[name], exact[name])
        assert err_new < max(2 * err_old, 1e-2), (name, err_new, err_old)
        assert rel(new[name], old[name]) < 5e-2, name


def test_rope_runs_in_the_autocast_dtype():
    model, b = tiny("kempner_c4"), batch()  # QK-LayerNorm: q and k leave it in fp32 under autocast
    seen = []
    hooks = [a.register_forward_hook(lambda m, args, out: seen.append(m.qkv(*args[:2]))) for a in
             model.attention_modules()]
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        model(b.input_ids)
    for h in hooks:
        h.remove()
    assert seen and all(t.dtype == torch.bfloat16 for qkv in seen for t in qkv)


@pytest.mark.parametrize("sparse_labels", [False, True])
def test_the_loss_in_the_forward_equals_the_loss_outside(sparse_labels):
    """``in_forward``: the summed loss from the model's forward over the label count is the
    mean cross-entropy, with and without the labelled-positions selection, and its share."""
    model, b = tiny("olmo1"), batch(sparse_labels=sparse_labels)
    positions = labelled_positions(b)
    assert (positions is not None) == sparse_labels
    ref_loss, ref = step(model, b, positions=positions)
    loss, grads = step(model, b, positions=positions, in_forward=True)
    torch.testing.assert_close(loss, ref_loss, atol=1e-6, rtol=1e-6)
    for name in ref:
        torch.testing.assert_close(grads[name], ref[name], atol=1e-6, rtol=1e-5)
    n = int((b.labels != IGNORE).sum())
    shares = [loss_share(model, b, n, 0, 1.0, positions, in_forward=flag)[0] for flag in (False, True)]
    torch.testing.assert_close(shares[1], shares[0], atol=1e-6, rtol=1e-6)


def test_the_loss_in_the_forward_compiles_into_one_graph():
    model, b = tiny("olmo2"), batch()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    ref, _ = loss_fn(model, b)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, _ = loss_fn(compiled, b, in_forward=True)
        eager, _ = loss_fn(model, b, in_forward=True)
    loss.backward()
    assert abs(float(loss.detach() - ref)) < 2e-2
    torch.testing.assert_close(loss, eager, atol=1e-6, rtol=0)
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("micro_batch", [0, 1])
def test_a_training_step_on_the_simulated_gpu_equals_the_cpu_step(micro_batch):
    """On the (fp32) simulated GPU the step (in one pass or micro-steps) takes the fused product
    and the in-forward loss, and its gradients are the CPU step's to fp32 rounding; the CPU
    step takes neither."""
    from sparselen.training.train import TrainConfig, backward

    b = batch(sparse_labels=True)
    cfg = TrainConfig(steps=1, batch_size=3, micro_batch=micro_batch)
    grads = {}
    for name in ("cpu", "cuda"):
        with simulate(1):
            device = torch.device(name)
            model = tiny("olmo2").to(device)
            fused = []
            model.attention_modules()[0].register_forward_hook(lambda m, a, o: fused.append(olmo.fast_path(a[0])))
            backward(model, model, b, cfg, device, in_forward=name == "cuda" and model.loss_in_forward)
            assert fused == [name == "cuda"] * (3 if micro_batch else 1)
            grads[name] = {n: p.grad.cpu() for n, p in model.named_parameters()}
    for n in grads["cpu"]:
        torch.testing.assert_close(grads["cuda"][n], grads["cpu"][n], atol=1e-6, rtol=1e-5)


def test_the_compiled_analysis_forward_gives_the_eager_losses():
    """``compile_analysis``: the analysis' last-token losses through one compiled graph (dynamic
    lengths and batches) equal the eager ones; the eager ones do
    not depend on the batch size (the runtime knob ``language.analysis_batch_size``)."""
    from sparselen.language.evaluate import compile_analysis, last_token_loss

    model, cpu = tiny("olmo2").eval(), torch.device("cpu")
    g = torch.Generator().manual_seed(2)
    cases = [(torch.randint(0, VOCAB, (n, T), generator=g), torch.randint(0, VOCAB, (n,), generator=g))
             for n, T in ((5, 9), (7, 13), (3, 4))]
    eager = [last_token_loss(model, ids, torch.arange(ids.shape[1]).expand_as(ids), t, 2, cpu) for ids, t in cases]
    for (ids, t), ref in zip(cases, eager):
        torch.testing.assert_close(last_token_loss(model, ids, torch.arange(ids.shape[1]).expand_as(ids), t, 64, cpu),
                                   ref, atol=1e-5, rtol=1e-5)
    compile_analysis(model, backend="aot_eager", fullgraph=True)
    compiled, calls = model.compiled_last_position_logits, []
    model.compiled_last_position_logits = lambda *args: calls.append(1) or compiled(*args)
    for (ids, t), ref in zip(cases, eager):
        torch.testing.assert_close(last_token_loss(model, ids, torch.arange(ids.shape[1]).expand_as(ids), t, 2, cpu),
                                   ref, atol=1e-5, rtol=1e-5)
    assert len(calls) == 3 + 4 + 2  # every chunk's forward pass ran compiled


def test_the_analysis_batch_is_a_runtime_knob():
    from sparselen.language.analysis import last_token_batch

    assert last_token_batch({"language": {}}, 64) == 64
    assert last_token_batch({"language": {"analysis_batch_size": 0}}, 64) == 64
    assert last_token_batch({"language": {"analysis_batch_size": 512}}, 64) == 512


def test_the_selectors_keep_their_own_batch(monkeypatch):
    """A larger ``analysis_batch_size`` reaches the L_k passes, never the saliency selector's
    forward and backward pass (``selector_batch_size``)."""
    from sparselen.language import analysis

    seen = {}
    monkeypatch.setattr(analysis, "selector_ranking",
                        lambda name, model, ctx, tgt, short, bs, device, seed: seen.setdefault("selector", bs)
                        and torch.arange(ctx.shape[1] - short).expand(len(ctx), -1))
    monkeypatch.setattr(analysis, "subset_loss", lambda *args: seen.setdefault("L_k", args[-2])
                        and torch.zeros(len(args[1])))
    ctx, tgt = torch.randint(0, VOCAB, (2, 12)), torch.randint(0, VOCAB, (2,))
    cfg = {"k": [1], "selectors": ["saliency"], "seed": 0, "batch_size": 512, "selector_batch_size": 8}
    analysis.selector_rows(None, ctx, tgt, 4, cfg, [[0], [1]], torch.device("cpu"))
    assert seen == {"selector": 8, "L_k": 512}


def test_the_analysis_parts_take_the_same_tokens_whatever_the_knob():
    """An analysis part's tokens follow the selectors' batch (a param), never the runtime
    knob's: parts run with different values of ``language.analysis_batch_size`` still cover
    every analysed token once."""
    from sparselen.language.analysis import analysed_span

    n, parts = 1000, 4
    for knob in (32, 100, 256, 512):
        cfg = {"batch_size": knob, "selector_batch_size": 32}
        spans = [analysed_span(n, (p, parts), cfg) for p in range(parts)]
        assert spans == [analysed_span(n, (p, parts), {"batch_size": 32}) for p in range(parts)]
        assert spans[0][0] == 0 and spans[-1][1] == n and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
        assert all(lo % 32 == 0 for lo, _ in spans)

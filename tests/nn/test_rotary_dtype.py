"""GPT-NeoX's rotary tables take the products' dtype (``sparselen.nn.model.compute_dtype``): under
bf16 autocast q and k reach SDPA in bf16 (with fp32 tables they left bf16 for fp32), and in fp32
the model computes bit for bit what it computed with the tables in x's dtype."""

import pytest
import torch

from sparselen.nn import model as model_mod
from sparselen.nn.model import GPTNeoX, ModelConfig


def tiny(scheme: str, rotary_pct: float) -> GPTNeoX:
    torch.manual_seed(0)
    m = GPTNeoX(ModelConfig(vocab_size=29, n_layer=2, n_head=4, d_model=64, d_ff=96, rotary_pct=rotary_pct,
                            scheme=scheme, max_position_id=400 if scheme == "ppc" else 0))
    with torch.no_grad():  # weights large enough that every part matters
        for p in m.parameters():
            p.normal_(0, 0.3)
    return m


def ids_and_positions(rows=3, T=21):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 29, (rows, T), generator=g)
    positions = torch.sort(torch.randint(0, 400, (rows, T), generator=g), dim=1).values  # shifted, PoSE-like
    return ids, positions


def old_tables(monkeypatch):
    """The tables as they were: in x's dtype (fp32 under autocast, whose embedding stays fp32)."""
    monkeypatch.setattr(model_mod, "compute_dtype", lambda x: x.dtype)


def sdpa_dtypes(monkeypatch) -> list:
    """Records the dtypes of (q, k, v) reaching SDPA."""
    seen, attend = [], model_mod.attend

    def spy(q, k, v, *args, **kw):
        seen.append((q.dtype, k.dtype, v.dtype))
        return attend(q, k, v, *args, **kw)

    monkeypatch.setattr(model_mod, "attend", spy)
    return seen


@pytest.mark.parametrize("rotary_pct", [1.0, 0.25])
def test_q_and_k_reach_sdpa_in_bf16_under_autocast(rotary_pct, monkeypatch):
    m, (ids, positions) = tiny("rope", rotary_pct), ids_and_positions()
    seen = sdpa_dtypes(monkeypatch)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        logits, _ = m(ids, positions)
    assert len(seen) == 2 and all(d == (torch.bfloat16,) * 3 for d in seen), seen
    with torch.no_grad():
        exact, _ = m(ids, positions)
    assert float((logits.float() - exact).norm() / exact.norm()) < 5e-2  # bf16 rounding, no more
    seen.clear()
    old_tables(monkeypatch)  # what it replaces: fp32 tables turn q and k to fp32
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        m(ids, positions)
    assert all(d[:2] == (torch.float32,) * 2 for d in seen), seen


@pytest.mark.parametrize("scheme,rotary_pct", [("rope", 1.0), ("pose", 0.25), ("ppc", 0.25)])
def test_float32_is_bit_identical_to_tables_in_xs_dtype(scheme, rotary_pct, monkeypatch):
    ids, positions = ids_and_positions()

    def step(m):
        m.zero_grad(set_to_none=True)
        logits, extra = m(ids, positions)
        loss = logits.square().mean() + (0 if extra is None else extra.square().mean())
        loss.backward()
        return logits.detach(), {n: p.grad.clone() for n, p in m.named_parameters()}

    new_logits, new_grads = step(tiny(scheme, rotary_pct))
    old_tables(monkeypatch)
    old_logits, old_grads = step(tiny(scheme, rotary_pct))
    assert torch.equal(new_logits, old_logits)
    assert new_grads.keys() == old_grads.keys() and all(torch.equal(new_grads[n], old_grads[n]) for n in new_grads)

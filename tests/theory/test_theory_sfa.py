"""Sparse functional attention (sparselen/theory/sfa.py): k = 1 is softmax attention; tuples."""

import itertools

import pytest
import torch
import torch.nn.functional as F

from sparselen.theory.sfa import SFAModel, SparseFunctionalAttention, tuples


@pytest.mark.parametrize("shuffle_ids", [False, True])
def test_k1_is_ordinary_causal_softmax_attention(shuffle_ids):
    torch.manual_seed(0)
    head = SparseFunctionalAttention(d_in=8, d_out=5, k=1, window=3, d_head=6, mlp=False)
    x = torch.randn(3, 11, 8)
    ids = torch.randperm(11) if shuffle_ids else torch.arange(11)  # k = 1: positions play no role
    out = head(x, ids)
    ref = F.scaled_dot_product_attention(head.query(x), head.key(x), head.value(x), is_causal=True)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("k,window", [(2, 0), (2, 3), (3, 2), (3, 5)])
def test_tuples_are_exactly_those_within_the_window(k, window):
    ids = torch.tensor([0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 9, 9])  # coupled-style: repeated ids
    index, off = tuples(ids, k, window)
    got = {tuple(sorted(t)) for t in index.tolist()}
    want = {c for c in itertools.combinations(range(len(ids)), k)
            if int(ids[list(c)].max() - ids[list(c)].min()) <= window}
    assert got == want and len(index) == len(got)
    first = ids[index[:, 0]]
    assert torch.equal(off, ids[index[:, 1:]] - first[:, None])
    assert (off >= 0).all() and (off <= window).all()


def test_relativity_shifting_all_ids_changes_nothing():
    torch.manual_seed(1)
    head = SparseFunctionalAttention(d_in=4, d_out=3, k=2, window=3, d_head=8)
    x = torch.randn(2, 9, 4)
    ids = torch.arange(9)
    torch.testing.assert_close(head(x, ids), head(x, ids + 17))


def test_outputs_are_causal():
    torch.manual_seed(2)
    head = SparseFunctionalAttention(d_in=4, d_out=3, k=3, window=4, d_head=8)
    x = torch.randn(1, 10, 4)
    y = x.clone()
    y[:, 6:] = torch.randn(1, 4, 4)
    torch.testing.assert_close(head(x, torch.arange(10))[:, :6], head(y, torch.arange(10))[:, :6])


def test_tuples_beyond_the_window_are_invisible():
    torch.manual_seed(3)
    model = SFAModel(vocab_size=5, n_labels=2, k=2, window=2)
    tokens = torch.randint(0, 4, (2, 8))
    ids = torch.arange(8)
    base = model(tokens, ids)
    changed = tokens.clone()
    changed[:, 0] = (changed[:, 0] + 1) % 4  # token 0 only pairs with tokens 1, 2; the query (7) cannot see it
    # ... but it does enter tuples (0,1), (0,2), so the output moves: the window is not empty
    assert not torch.allclose(base, model(changed, ids))
    far = SFAModel(vocab_size=5, n_labels=2, k=2, window=2)
    far.load_state_dict(model.state_dict())
    ids_far = torch.cat((torch.tensor([-10]), torch.arange(1, 8)))  # token 0 is now out of every window
    torch.testing.assert_close(far(tokens, ids_far), far(changed, ids_far))


def gather_then_project(head: SparseFunctionalAttention, x, position_ids, queries=None):
    """The head's output in its defining form: each tuple's k token vectors gathered and
    concatenated (a one-hot selection), then the key and value matrices applied to them."""
    B, T, _ = x.shape
    index, off = tuples(position_ids, head.k, head.window)
    queries = torch.arange(T) if queries is None else queries
    u = torch.einsum("jnt,btd->bnjd", F.one_hot(index.T, T).to(x.dtype), x).flatten(2)  # (B, N, k d_in)
    key = head.key(u) + head._embed_offsets(head.key_offsets, off)
    value = head.value(u) + head._embed_offsets(head.value_offsets, off)
    if head.mlp:
        key, value = head.key_mlp(F.gelu(key)), head.value_mlp(F.gelu(value))
    scores = head.query(x[:, queries]) @ key.transpose(1, 2) / head.d_head**0.5
    visible = index.max(dim=1).values[None, :] <= queries[:, None]
    has = visible.any(dim=1, keepdim=True)
    scores = scores.masked_fill(~visible, float("-inf")).masked_fill(~has, 0.0)
    return (torch.softmax(scores, dim=-1) * has) @ value


@pytest.mark.parametrize("k,window,mlp", [(1, 0, False), (2, 3, True), (3, 2, True), (4, 6, True), (2, 0, True), (3, 0, True)])
def test_projecting_before_gathering_gives_the_gathered_products(k, window, mlp):
    """The head projects each token once per member slot and sums over the tuple's members: the
    output and every gradient equal those of gathering the tuples first, up to float summation
    order (coupled-style repeated ids: at window 0 the pairs end at the second 0, so earlier queries
    have no tuple, and there are no triples at all)."""
    torch.manual_seed(4)
    head = SparseFunctionalAttention(d_in=6, d_out=3, k=k, window=window, d_head=8, mlp=mlp)
    x = torch.randn(3, 12, 6, requires_grad=True)
    ids = torch.tensor([0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5])
    outs, grads = [], []
    for forward in (head.forward, lambda *a: gather_then_project(head, *a)):
        head.zero_grad()
        x.grad = None
        out = forward(x, ids)
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        outs.append(out)
        grads.append([x.grad.clone()] + [p.grad.clone() for p in head.parameters() if p.grad is not None])
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-5, atol=1e-6)
    assert len(grads[0]) == len(grads[1])
    for new, old in zip(*grads):
        torch.testing.assert_close(new, old, rtol=1e-4, atol=1e-6)

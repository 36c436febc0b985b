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

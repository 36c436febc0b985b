"""The sparse parity sampler: labels, sparsity, uniform support, configured ranges."""

import itertools
import math

import pytest
import torch
from scipy.stats import chisquare

from sparselen.parity import task as parity
from sparselen.parity.task import MINUS, ONE, PAD, PLUS, QUERY, ZERO

G = lambda s: torch.Generator().manual_seed(s)  # noqa: E731


def reference_label(row: list[int]) -> int:
    """Independent reading of one sample: parity of the bits whose marker is '+'."""
    end = row.index(QUERY)
    bits, marks = row[0:end:2], row[1:end:2]
    assert set(bits) <= {ZERO, ONE} and set(marks) <= {PLUS, MINUS}
    return sum(b == ONE for b, m in zip(bits, marks) if m == PLUS) % 2


def test_format_and_label_is_parity_over_S():
    s = parity.sample_training_mix(500, (20, 50), 6, G(0), one_length=False)
    for i in range(500):
        row = s.tokens[i].tolist()
        l = int(s.l[i])
        assert row[2 * l] == QUERY and all(t == PAD for t in row[2 * l + 1:])
        assert sum(m == PLUS for m in row[1:2 * l:2]) == int(s.k[i])
        assert s.support[i].nonzero().flatten().tolist() == [j for j in range(l) if row[2 * j + 1] == PLUS]
        assert int(s.target[i]) - ZERO == reference_label(row)


def test_tokens_outside_S_never_change_the_label():
    s = parity.sample(torch.full((400,), 15), torch.randint(1, 8, (400,), generator=G(1)), G(2))
    for trial in range(5):
        tokens = s.tokens.clone()
        noise = torch.randint(0, 2, s.support.shape, generator=G(10 + trial))
        bits = tokens[:, 0:30:2]
        tokens[:, 0:30:2] = torch.where(s.support, bits, noise + ZERO)  # rewrite every bit outside S
        assert (tokens != s.tokens).any()
        for i in range(400):
            assert reference_label(tokens[i].tolist()) == int(s.target[i]) - ZERO
    # and flipping one bit inside S always flips it
    tokens = s.tokens.clone()
    first = s.support.float().argmax(dim=1)
    idx = torch.arange(400)
    tokens[idx, 2 * first] = ZERO + ONE - tokens[idx, 2 * first]
    assert all(reference_label(tokens[i].tolist()) != int(s.target[i]) - ZERO for i in range(400))


def test_S_is_a_uniform_k_subset():
    l, k, n = 6, 2, 30000
    s = parity.sample(torch.full((n,), l), torch.full((n,), k), G(3))
    subsets = list(itertools.combinations(range(l), k))
    index = {sub: j for j, sub in enumerate(subsets)}
    counts = torch.zeros(len(subsets))
    for row in s.support.tolist():
        counts[index[tuple(j for j, v in enumerate(row) if v)]] += 1
    assert len(subsets) == math.comb(l, k)
    assert chisquare(counts.numpy()).pvalue > 1e-3
    # labels are balanced too
    assert abs(float((s.target == ONE).float().mean()) - 0.5) < 0.02


@pytest.mark.parametrize("one_length", [True, False])
def test_lengths_and_k_follow_the_configured_ranges(one_length):
    batches = [parity.sample_training_mix(100, (20, 50), 12, G(4 + i), one_length) for i in range(200)]
    l, k = torch.cat([b.l for b in batches]), torch.cat([b.k for b in batches])
    assert set((2 * l).unique().tolist()) == set(range(20, 51, 2))
    assert set(k.unique().tolist()) == set(range(1, 13))
    assert (k <= l).all()
    assert all(len(b.l.unique()) == 1 for b in batches) == one_length


def test_impossible_k_is_an_error():
    with pytest.raises(ValueError, match="k=5, l=4"):
        parity.sample(torch.tensor([4]), torch.tensor([5]), G(0))


def test_evaluation_set_is_shared_and_leaves_out_impossible_cells():
    a = parity.evaluation_set(9, [1, 4, 16], [20, 30, 40], 50)
    b = parity.evaluation_set(9, [4, 16], [20, 40, 100], 50)  # a different grid
    assert (16, 20) not in a and (16, 30) not in a and (16, 40) in a
    for cell in [(4, 20), (16, 40)]:
        assert torch.equal(a[cell]["tokens"], b[cell]["tokens"])  # same samples whatever the grid
    assert all(v["tokens"].shape == (50, cell[1] + 1) for cell, v in a.items())


def test_training_batches_are_a_function_of_seed_and_step():
    f = parity.training_batches(3, 8, (20, 50), 4)
    assert torch.equal(f(5).input_ids, f(5).input_ids)
    assert not torch.equal(f(5).input_ids, f(6).input_ids)
    b = f(0)
    assert ((b.labels != -100).sum(dim=1) == 1).all()

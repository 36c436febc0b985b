"""The defining properties of k-sparse planted correlation distributions (sparselen/theory/planted.py)."""

import collections

import pytest
import torch

from sparselen.runtime.rng import generator
from sparselen.theory.task import PlantedConfig, label_of, sample, spread_in_ids


def non_planted(s):
    mask = torch.ones_like(s.tokens[:, :-1], dtype=torch.bool)
    mask.scatter_(1, s.support, False)
    return s.tokens[:, :-1], mask


@pytest.mark.parametrize("law", ["local", "nonlocal", "coupled"])
def test_non_planted_tokens_are_iid_background(law):
    cfg = PlantedConfig(k=2, positions=law, background=(0.8, 0.2))
    s = sample(cfg, 24, 4000, generator("bg", law))
    tokens, mask = non_planted(s)
    bg = tokens[mask]
    assert set(bg.unique().tolist()) <= {0, 1}  # plain values only: never marked, never the query
    p1 = bg.float().mean().item()
    assert abs(p1 - 0.2) < 4 * (0.2 * 0.8 / bg.numel()) ** 0.5
    # independence of neighbours that are both non-planted: P(1, 1) = P(1)^2
    both = mask[:, :-1] & mask[:, 1:]
    pairs = (tokens[:, :-1] == 1) & (tokens[:, 1:] == 1)
    p11 = pairs[both].float().mean().item()
    assert abs(p11 - 0.04) < 4 * (0.04 * 0.96 / both.sum().item()) ** 0.5


@pytest.mark.parametrize("mark", ["first", "all"])
def test_label_is_a_function_of_the_planted_tokens_only(mark):
    cfg = PlantedConfig(k=3, positions="local", n_values=3, mark=mark, label="sum_mod",
                        offsets="random" if mark == "all" else "fixed", locality=5)
    s = sample(cfg, 30, 2000, generator("label", mark))
    planted_tokens = s.tokens.gather(1, s.support)
    assert torch.equal(label_of(cfg, planted_tokens % cfg.n_values), s.label)
    marked = (s.tokens[:, :-1] >= cfg.n_values).sum(dim=1)
    assert (marked == (1 if mark == "first" else 3)).all()
    # the label carries no information about a non-planted token: it is independent of it
    tokens, mask = non_planted(s)
    col = 15
    keep = mask[:, col]
    joint = collections.Counter(zip(tokens[keep, col].tolist(), s.label[keep].tolist()))
    n = int(keep.sum())
    for (x, y), c in joint.items():
        expected = n * (tokens[keep, col] == x).float().mean() * (s.label[keep] == y).float().mean()
        assert abs(c - expected) < 5 * expected.sqrt() + 5


def test_changing_the_background_leaves_the_label():
    cfg = PlantedConfig(k=2, positions="local")
    s = sample(cfg, 20, 500, generator("resample"))
    tokens, mask = non_planted(s)
    fresh = torch.randint(0, 2, tokens.shape, generator=generator("fresh"))
    mixed = torch.where(mask, fresh, tokens)
    assert torch.equal(label_of(cfg, mixed.gather(1, s.support) % 2), s.label)


@pytest.mark.parametrize("law,k", [("local", 3), ("coupled", 3), ("local", 1)])
def test_spread_respects_the_locality_bound_at_every_length(law, k):
    cfg = PlantedConfig(k=k, positions=law, gap=2)
    for length in (12, 48, 96):
        s = sample(cfg, length, 500, generator("spread", length))
        assert int(spread_in_ids(s).max()) <= cfg.spread


def test_nonlocal_spread_grows_with_length_and_coupling_makes_it_local():
    cfg = PlantedConfig(k=2, positions="nonlocal")
    spreads = [int(spread_in_ids(sample(cfg, n, 200, generator("nl", n))).min()) for n in (12, 48, 96)]
    assert spreads == [6, 24, 48]  # exactly one block apart
    same = sample(PlantedConfig(k=2, positions="coupled"), 48, 200, generator("nl", 48))
    other = sample(cfg, 48, 200, generator("nl", 48))
    assert torch.equal(same.tokens, other.tokens)  # the same data, only the position ids differ
    assert int(spread_in_ids(same).max()) == 0


def offset_law(cfg, length, n=6000):
    s = sample(cfg, length, n, generator("offsets", length))
    ids = s.position_ids[s.support]
    rel = (ids - ids[:, :1]).tolist()
    c = collections.Counter(map(tuple, rel))
    return {key: v / n for key, v in c.items()}


@pytest.mark.parametrize("law", ["local", "coupled"])
def test_law_of_relative_offsets_does_not_change_with_length(law):
    cfg = PlantedConfig(k=3, positions=law, mark="all", offsets="random", locality=5)
    short, long = offset_law(cfg, 15, 6000), offset_law(cfg, 150, 6000)
    assert len(short) == 6  # C(4, 2) offset pairs, each possible
    tv = 0.5 * sum(abs(short.get(key, 0) - long.get(key, 0)) for key in short.keys() | long.keys())
    assert tv < 0.05


def test_nonlocal_law_of_offsets_changes_with_length():
    cfg = PlantedConfig(k=3, positions="nonlocal", mark="all", offsets="random", locality=5)
    short, long = offset_law(cfg, 15, 2000), offset_law(cfg, 150, 2000)
    assert not set(short) & set(long)  # disjoint supports: total variation 1


@pytest.mark.parametrize("bad,key", [({"positions": "far"}, "positions"), ({"background": (0.5, 0.6)}, "background"),
                                     ({"offsets": "random"}, "offsets"), ({"n_values": 1}, "n_values")])
def test_bad_config_names_the_key(bad, key):
    with pytest.raises(ValueError, match=f"planted.{key}"):
        PlantedConfig(k=2, **bad)


def test_invalid_length_is_refused():
    with pytest.raises(ValueError, match="multiple of 3"):
        sample(PlantedConfig(k=3, positions="coupled"), 13, 4, generator(0))

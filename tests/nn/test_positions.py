import torch

from sparselen.nn.positions import pose_position_ids


def test_pose_ids_are_shifted_contiguous_chunks():
    B, T, target, chunks = 200, 40, 500, 3
    base = torch.arange(T).expand(B, T)
    ids = pose_position_ids(base, chunks, target, torch.Generator().manual_seed(0))
    assert (ids[:, 0] == 0).all()  # the first chunk starts at 0
    steps = ids[:, 1:] - ids[:, :-1]
    assert (steps >= 1).all()  # strictly increasing: order preserved
    assert ((steps > 1).sum(dim=1) <= chunks - 1).all()  # at most chunks - 1 jumps
    assert (ids < target).all() and int(ids.max()) > T  # stays below target, and does reach far
    assert (ids.max(dim=1).values - ids.min(dim=1).values).float().mean() > 2 * T


def test_pose_is_identity_when_there_is_no_room():
    base = torch.arange(10).expand(3, 10)
    assert torch.equal(pose_position_ids(base, 2, 10, torch.Generator()), base)
    assert torch.equal(pose_position_ids(base, 1, 1000, torch.Generator()), base)

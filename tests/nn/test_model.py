"""The model is numerically GPT-NeoX: same logits as transformers.GPTNeoXForCausalLM."""

import pytest
import torch

from sparselen.nn.batch import Batch
from sparselen.nn.model import GPTNeoX, ModelConfig, hf_config
from sparselen.training.train import TrainConfig, apply_position_scheme

transformers = pytest.importorskip("transformers")


def random_model(scheme="rope", rotary_pct=1.0, seed=0):
    cfg = ModelConfig(vocab_size=37, n_layer=3, n_head=4, d_model=64, d_ff=96, rotary_pct=rotary_pct,
                      scheme=scheme)
    torch.manual_seed(seed)
    model = GPTNeoX(cfg)
    with torch.no_grad():  # random, not-small weights so that every part matters
        for p in model.parameters():
            p.normal_(0, 0.3)
    return model.eval()


def hf_copy(model):
    hf = transformers.GPTNeoXForCausalLM(hf_config(model.cfg))
    hf.config._attn_implementation = "eager"
    missing, unexpected = hf.load_state_dict(model.state_dict(), strict=False)
    assert not unexpected, unexpected
    # only non-persistent buffers may be absent from our state dict
    assert all("rotary" in k or "inv_freq" in k for k in missing), missing
    return hf.eval()


@pytest.mark.parametrize("rotary_pct", [1.0, 0.25])
def test_logits_match_transformers(rotary_pct):
    model = random_model(rotary_pct=rotary_pct)
    hf = hf_copy(model)
    ids = torch.randint(0, 37, (3, 29), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours, _ = model(ids)
        theirs = hf(ids).logits
    assert ours.shape == theirs.shape
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)
    assert ours.abs().max() > 1.0  # the comparison is not between two near-zero tensors


def test_coupled_position_ids_match_transformers():
    """Given (non-contiguous, repeated) position ids drive RoPE exactly as in transformers."""
    model = random_model(scheme="coupled", rotary_pct=0.5)
    hf = hf_copy(model)
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, 37, (2, 17), generator=g)
    pos = torch.randint(0, 300, (2, 17), generator=g)
    with torch.no_grad():
        ours, _ = model(ids, pos)
        theirs = hf(ids, position_ids=pos).logits
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)
    plain, _ = model(ids)
    assert not torch.allclose(ours, plain)  # the ids are really used


def test_kv_cache_matches_full_recomputation():
    model = random_model()
    ids = torch.randint(0, 37, (2, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full, _ = model(ids)
        cache = model.new_cache()
        first, _ = model(ids[:, :5], cache=cache)
        steps = [model(ids[:, t:t + 1], cache=cache)[0] for t in range(5, 12)]
    torch.testing.assert_close(torch.cat([first] + steps, dim=1), full, atol=1e-5, rtol=0)


@pytest.mark.parametrize("scheme", ["nope", "rope", "ppc"])
def test_last_only_gives_the_last_position_of_the_full_pass(scheme):
    """The evaluations' fast path: the last layer computed for the last position alone, also
    with ids, the id embedding and PPC's position head, and when it fills a KV cache."""
    cfg = ModelConfig(vocab_size=37, n_layer=3, n_head=4, d_model=64, d_ff=96, scheme=scheme,
                      max_position_id=40 if scheme == "ppc" else 0, id_embedding=scheme == "ppc")
    torch.manual_seed(0)
    model = GPTNeoX(cfg).eval()
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 37, (2, 12), generator=g)
    pos = torch.randint(0, 41, (2, 12), generator=g) if scheme == "ppc" else None
    with torch.no_grad():
        full = model(ids, pos)
        last = model(ids, pos, last_only=True)
        cache = model.new_cache()
        model(ids[:, :5], None if pos is None else pos[:, :5], cache, last_only=True)
        step = model(ids[:, 5:6], None if pos is None else pos[:, 5:6], cache)
        ref = model(ids[:, :6], None if pos is None else pos[:, :6])
    for a, b in zip(last, full):
        if b is not None:
            assert a.shape[1] == 1
            torch.testing.assert_close(a[:, 0], b[:, -1], atol=1e-5, rtol=0)
    torch.testing.assert_close(step[0][:, 0], ref[0][:, -1], atol=1e-5, rtol=0)


def test_nope_ignores_positions():
    model = random_model(scheme="nope")
    assert model.rotary is None
    ids = torch.randint(0, 37, (1, 10))
    with torch.no_grad():
        a, _ = model(ids)
        b, _ = model(ids, torch.arange(100, 110)[None])
    torch.testing.assert_close(a, b)


def test_pose_changes_only_training_position_ids():
    """Same weights: pose == rope at evaluation; in training only position_ids differ."""
    rope, pose = random_model("rope", seed=4), random_model("pose", seed=4)
    ids = torch.randint(0, 37, (4, 20))
    with torch.no_grad():
        torch.testing.assert_close(rope(ids)[0], pose(ids)[0])
    labels = torch.randint(0, 37, (4, 20))
    tc = TrainConfig(steps=1, batch_size=4, pose_chunks=2, pose_target_length=200)
    b_rope = apply_position_scheme(Batch(ids.clone(), labels.clone()), rope.cfg, tc, step=0)
    b_pose = apply_position_scheme(Batch(ids.clone(), labels.clone()), pose.cfg, tc, step=0)
    assert b_rope.position_ids is None
    assert torch.equal(b_pose.input_ids, ids) and torch.equal(b_pose.labels, labels)
    assert b_pose.position_ids.shape == ids.shape
    assert (b_pose.position_ids != torch.arange(20)).any()
    assert int(b_pose.position_ids.max()) < 200


def test_bad_model_config_is_named():
    with pytest.raises(ValueError, match="scheme = .alibi."):
        ModelConfig(vocab_size=5, scheme="alibi")
    with pytest.raises(ValueError, match="d_model = 30"):
        ModelConfig(vocab_size=5, d_model=30, n_head=4)

"""The OLMo model is numerically transformers' Olmo (OLMo-1) / Olmo2 (OLMo-2), with plain and
shifted (PoSE-like) position ids; its KV cache equals full recomputation; it plugs into the
trainer, the language evaluation and the analysis selectors unchanged."""

import pytest
import torch

from sparselen.nn.architectures import config_from_dict, model_config
from sparselen.nn.olmo import VARIANTS, Olmo, OlmoConfig, hf_model

transformers = pytest.importorskip("transformers")

VOCAB = 37


def random_model(variant="olmo1", seed=0, **kw):
    cfg = OlmoConfig(vocab_size=VOCAB, n_layer=3, n_head=4, d_model=64, d_ff=96, variant=variant, **kw)
    torch.manual_seed(seed)
    model = Olmo(cfg)
    with torch.no_grad():  # random, not-small weights so that every part matters (norm gains too)
        for p in model.parameters():
            p.normal_(0, 0.3)
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(1.0)
    return model.eval()


def hf_copy(model):
    hf = hf_model(model.cfg)
    hf.config._attn_implementation = "eager"
    missing, unexpected = hf.load_state_dict(model.state_dict(), strict=False)
    assert not unexpected, unexpected
    assert all("rotary" in k or "inv_freq" in k for k in missing), missing
    return hf.eval()


def max_diff(a, b) -> float:
    return float((a - b).abs().max())


@pytest.mark.parametrize("variant", ["olmo1", "olmo2"])
@pytest.mark.parametrize("shifted", [False, True])
def test_logits_match_transformers(variant, shifted):
    model = random_model(variant)
    hf = hf_copy(model)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (3, 29), generator=g)
    pos = None
    if shifted:  # PoSE-like: two chunks, the second shifted by a per-row skip
        skip = torch.tensor([[0], [40], [300]])
        pos = torch.arange(29).expand(3, 29) + torch.where(torch.arange(29) >= 13, skip, 0)
    with torch.no_grad():
        ours, aux = model(ids, pos)
        theirs = hf(ids, position_ids=pos).logits
    assert aux is None and ours.shape == theirs.shape
    diff = max_diff(ours, theirs)
    print(f"\n{variant} shifted={shifted}: max |logit diff| = {diff:.2e} (logits up to {ours.abs().max():.1f})")
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)
    assert ours.abs().max() > 1.0
    if shifted:
        assert not torch.allclose(ours, model(ids)[0])  # the ids are really used


def test_tied_embeddings_match_transformers():
    model = random_model("olmo1", tie_embeddings=True)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    hf = hf_copy(model)
    ids = torch.randint(0, VOCAB, (2, 11))
    with torch.no_grad():
        torch.testing.assert_close(model(ids)[0], hf(ids).logits, atol=1e-4, rtol=0)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_kv_cache_matches_full_recomputation(variant):
    model = random_model(variant)
    ids = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full, _ = model(ids)
        cache = model.new_cache()
        first, _ = model(ids[:, :5], cache=cache)
        steps = [model(ids[:, t:t + 1], cache=cache)[0] for t in range(5, 12)]
    cached = torch.cat([first] + steps, dim=1)
    scale = float(full.abs().max())
    print(f"\n{variant}: cache vs full max diff {max_diff(cached, full):.2e} (logits up to {scale:.0f})")
    torch.testing.assert_close(cached, full, atol=5e-5, rtol=0)  # float32 reassociation (the GPT-NeoX test: 1e-5)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_last_only_gives_the_last_position_of_the_full_pass(variant):
    model = random_model(variant)
    ids = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full, _ = model(ids)
        last, _ = model(ids, last_only=True)
    assert last.shape[1] == 1
    torch.testing.assert_close(last[:, 0], full[:, -1], atol=5e-5, rtol=0)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_qkv_reproduces_attention(variant):
    """The analysis' attention selector recomputes softmax weights from ``qkv``: they must be
    the weights the forward pass used (checked by redoing attention with them)."""
    model = random_model(variant)
    ids = torch.randint(0, VOCAB, (2, 10))
    seen = []
    hooks = [a.register_forward_hook(lambda m, args, out: seen.append((m, args[0], args[1], out)))
             for a in model.attention_modules()]
    with torch.no_grad():
        model(ids)
        for attn, x, rope, out in seen:
            q, k, v = attn.qkv(x, rope)
            w = torch.softmax(q @ k.transpose(-1, -2) / attn.head_size ** 0.5
                              + torch.full((10, 10), float("-inf")).triu(1), dim=-1)
            redo = attn.o_proj((w @ v).transpose(1, 2).reshape(2, 10, -1))
            torch.testing.assert_close(redo, out, atol=1e-5, rtol=0)
    for h in hooks:
        h.remove()
    assert len(seen) == 3


@pytest.mark.parametrize("arch", ["gpt_neox", "olmo"])
def test_language_analysis_selectors_run_on_both_architectures(arch):
    from sparselen.language.dependency import selector_ranking
    from sparselen.nn.architectures import build_model

    if arch == "olmo":
        model = random_model("olmo2")
    else:
        model = build_model(model_config({"n_layer": 2, "n_head": 4, "d_model": 64, "d_ff": 96}, VOCAB)).eval()
    ctx = torch.randint(0, VOCAB, (3, 24))
    tgt = torch.randint(0, VOCAB, (3,))
    for name in ("attention", "saliency"):
        r = selector_ranking(name, model, ctx, tgt, 8, 2, torch.device("cpu"), 0)
        assert r.shape == (3, 16) and all(sorted(row.tolist()) == list(range(16)) for row in r)


def test_config_dispatch_and_round_trip():
    cfg = model_config({"architecture": "olmo", "variant": "olmo2", "n_layer": 1, "rotary_pct": 1.0}, 50)
    assert isinstance(cfg, OlmoConfig) and cfg.norm == "rmsnorm" and cfg.rotary_base == 500000.0
    assert config_from_dict(cfg.to_dict()) == cfg
    neox = model_config({"n_layer": 1}, 50)
    assert "architecture" not in neox.to_dict() and config_from_dict(neox.to_dict()) == neox


def test_bad_config_is_named():
    with pytest.raises(ValueError, match="variant='olmo3'"):
        OlmoConfig(vocab_size=5, variant="olmo3")
    with pytest.raises(ValueError, match="rotary_pct=0.25"):
        OlmoConfig(vocab_size=5, rotary_pct=0.25)
    with pytest.raises(ValueError, match="scheme='ppc'"):
        OlmoConfig(vocab_size=5, scheme="ppc")
    with pytest.raises(ValueError, match="unknown OLMo model keys"):
        model_config({"architecture": "olmo", "layer_norm_eps": 1e-5}, 5)
    with pytest.raises(ValueError, match="architecture='llama'"):
        model_config({"architecture": "llama"}, 5)
    with pytest.raises(ValueError, match="no transformers class"):
        hf_model(OlmoConfig(vocab_size=5, variant="kempner_c4"))


def test_language_steps_run_on_olmo_from_olmo_token_files(tmp_path):
    """The language slice's train, loss-by-position and analysis steps, unchanged, on an OLMo
    model trained from OLMo-format token files (tokens.json instead of tokens.pt)."""
    import numpy as np
    import pandas as pd

    from sparselen.interface.config import load
    from sparselen.interface.job import Job
    from sparselen.jobs.dispatch import run
    from sparselen.language.token_files import write_tokens

    g = np.random.default_rng(0)
    docs = [g.integers(1, 60, g.integers(100, 200)).tolist() for _ in range(30)]
    write_tokens(tmp_path, {"train": docs[:25], "eval": docs[25:]}, eos_id=0, vocab_size=64)
    tokens = str(tmp_path / "tokens.json")
    lang = load()["language"]
    model = {"architecture": "olmo", "variant": "olmo2", "n_layer": 1, "n_head": 2, "d_model": 32, "d_ff": 64}
    train = {**lang["train"], "steps": 20, "batch_tokens": 256, "checkpoint_every": 10, "log_every": 10}
    run(Job.of("language_train", input={"tokens": tokens}, wildcards={"context": 24, "run": "pose", "seed": 0},
               output={"model": str(tmp_path / "m.pt"), "log_csv": str(tmp_path / "l.csv"),
                       "summary": str(tmp_path / "s.json")},
               params={"model": model, "scheme": "pose", "pose": {"chunks": 2, "target_length": 64}, "train": train,
                       "checkpoint": str(tmp_path / "ck.pt")}))
    assert (tmp_path / "m.pt").exists()
    run(Job.of("language_loss_by_position", input={"model": str(tmp_path / "m.pt"), "tokens": tokens},
               output={"losses": str(tmp_path / "pos.csv")}, wildcards={"context": 24, "run": "pose", "seed": 0},
               params={"eval": {"length": 48, "windows": 4, "seed": 0, "batch_size": 2}}))
    assert pd.read_csv(tmp_path / "pos.csv")["mean"].notna().all()
    analysis = {**lang["analysis"], "candidates": 6, "tokens": 3, "min_benefit": -100.0, "k": [1, 2],
                "batch_size": 64, "planted": {"tokens": 3, "span": 4, "distances": [12]}}
    run(Job.of("language_analyze", input={"model": str(tmp_path / "m.pt"), "tokens": tokens},
               output={"screen": str(tmp_path / "screen.csv"), "deps": str(tmp_path / "deps.csv"),
                       "planted": str(tmp_path / "planted.csv")},
               params={"analysis": analysis, "contexts": {"short": 8, "long": 24}}))
    deps = pd.read_csv(tmp_path / "deps.csv")
    assert set(deps["method"]) == {"greedy", "attention", "saliency", "random", "greedy_null", "greedy_planted"}
    assert deps["L_k"].notna().all()

"""Model files: safetensors + JSON, exact round trips, refusal of anything but tensors, and
export to transformers.GPTNeoXForCausalLM with identical logits."""

import json
import pickle

import pytest
import torch

from sparselen.nn.model import GPTNeoX, ModelConfig
from sparselen.training import modelfile as mf
from sparselen.training.hf_export import export_hf
from sparselen.training.train import OptimConfig, lr_lambda, make_optimizer


def trained(scheme="rope", **kw):
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=11, n_layer=2, n_head=2, d_model=16, d_ff=24, scheme=scheme, **kw)
    model = GPTNeoX(cfg)
    opt = make_optimizer(model, OptimConfig(lr=1e-2, warmup_steps=2))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(OptimConfig(warmup_steps=2), 10))
    x = torch.randint(0, 11, (4, 9))
    pos = torch.randint(0, 20, (4, 9)) if scheme in ("coupled", "ppc") else None
    for _ in range(3):
        logits, _ = model(x, pos)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), x.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return model.eval(), opt, sched


def test_checkpoint_round_trip_is_exact(tmp_path):
    model, opt, sched = trained()
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
             "step": 3, "log": [{"step": 3, "loss": 0.1 + 0.2, "lr": float("nan")}], "config_hash": "abc",
             "cells": {(1, 20): torch.arange(3)}}
    mf.save_state(tmp_path / "c.pt", state)
    back = mf.load_state(tmp_path / "c.pt")
    assert back["optimizer"]["param_groups"] == opt.state_dict()["param_groups"]  # tuples (betas) included
    for k, v in opt.state_dict()["state"].items():
        assert all(torch.equal(v[n], back["optimizer"]["state"][k][n]) for n in v)
    assert back["scheduler"] == sched.state_dict()
    assert back["log"][0]["loss"] == 0.1 + 0.2 and back["log"][0]["lr"] != back["log"][0]["lr"]
    assert torch.equal(back["cells"][(1, 20)], torch.arange(3))
    assert all(torch.equal(model.state_dict()[k], back["model"][k]) for k in model.state_dict())
    # the restored optimizer continues exactly as the original would
    m2, o2, _ = trained()
    m2.load_state_dict(back["model"])
    o2.load_state_dict(back["optimizer"])
    for m, o in ((model, opt), (m2, o2)):
        m.train()
        logits, _ = m(torch.arange(9)[None] % 11)
        o.zero_grad()
        logits.sum().backward()
        o.step()
    assert all(torch.equal(model.state_dict()[k], m2.state_dict()[k]) for k in model.state_dict())


def test_model_file_metadata_is_json(tmp_path):
    model, _, _ = trained()
    mf.save_model(tmp_path / "m.safetensors", model.state_dict(), model.cfg, {"seed": 0}, [{"step": 1}])
    meta = mf.read_metadata(tmp_path / "m.safetensors")
    assert meta["model_config"]["scheme"] == "rope" and meta["provenance"] == {"seed": 0}
    from safetensors.torch import load_file

    plain = load_file(tmp_path / "m.safetensors")  # any safetensors reader gets the weights
    assert any(k.endswith("gpt_neox.embed_in.weight") for k in plain)
    loaded, prov = mf.load_model(tmp_path / "m.safetensors")
    x = torch.randint(0, 11, (2, 7))
    assert torch.equal(loaded(x)[0], model(x)[0]) and prov == {"seed": 0}


def test_a_header_is_the_state_without_its_tensors(tmp_path):
    """``read_header``: a checkpoint's step, hashes and tagged tuples as ``load_state`` gives
    them, None for each tensor; a torch.save file's whole state (``load_state`` reads those)."""
    state = {"model": {"w": torch.ones(2)}, "step": 7, "code": "abc", "shape": (1, 2), "ids": {3: "x"}}
    mf.save_state(tmp_path / "ckpt.pt", state)
    assert mf.read_header(tmp_path / "ckpt.pt") == {**state, "model": {"w": None}}
    torch.save({"step": 3, "w": torch.ones(2)}, tmp_path / "old.pt")
    header = mf.read_header(tmp_path / "old.pt")
    assert header["step"] == 3 and torch.equal(header["w"], torch.ones(2))
    (tmp_path / "junk.pt").write_text("not a model")
    with pytest.raises(mf.NotAModelFile):
        mf.read_header(tmp_path / "junk.pt")


class Payload:
    """Unpickling this runs code: it must never be loaded."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("kind", ["pickle", "torch.save"])
def test_file_with_more_than_tensors_is_refused(tmp_path, kind):
    marker, path = tmp_path / "code-ran", tmp_path / "model.pt"
    obj = {"model": {"w": torch.zeros(2)}, "evil": Payload(marker)}
    if kind == "pickle":
        path.write_bytes(pickle.dumps(obj))
    else:
        torch.save(obj, path)
    with pytest.raises(mf.NotAModelFile, match="refused|not a sparselen model file"):
        mf.load_state(path)
    with pytest.raises(mf.NotAModelFile):
        mf.load_model(path)
    assert not marker.exists()  # nothing was executed


def test_legacy_torch_file_of_tensors_still_loads(tmp_path):
    torch.save({"model": {"w": torch.ones(2)}, "step": 4, "betas": (0.9, 0.99)}, tmp_path / "old.pt")
    back = mf.load_state(tmp_path / "old.pt")
    assert back["step"] == 4 and torch.equal(back["model"]["w"], torch.ones(2))


def test_refuses_to_store_objects(tmp_path):
    with pytest.raises(TypeError, match="Payload"):
        mf.save_state(tmp_path / "x", {"a": Payload("x")})


@pytest.mark.parametrize("scheme,kw", [("rope", {}), ("pose", {"rotary_pct": 0.25}), ("nope", {}),
                                         ("coupled", {"max_position_id": 30})])
def test_export_hf_same_logits(tmp_path, scheme, kw):
    transformers = pytest.importorskip("transformers")
    model, _, _ = trained(scheme, **kw)
    with torch.no_grad():
        for p in model.parameters():  # weights large enough that every part matters
            p.add_(torch.randn_like(p) * 0.3)
    prov = {"seed": 0, "run": {"K_train": 2}}
    mf.save_model(tmp_path / "model.pt", model.state_dict(), model.cfg, prov, [])
    out = export_hf(tmp_path / "model.pt", tmp_path / "hf")
    hf = transformers.GPTNeoXForCausalLM.from_pretrained(out).eval()
    x = torch.randint(0, 11, (3, 13), generator=torch.Generator().manual_seed(1))
    pos = torch.randint(0, 30, (3, 13)) if scheme == "coupled" else None
    with torch.no_grad():
        ours = model(x, pos)[0]
        theirs = hf(x, position_ids=pos).logits
    torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=0)
    assert ours.abs().max() > 1
    config = json.loads((out / "config.json").read_text())
    assert config["sparselen_position_scheme"] == scheme
    readme = (out / "README.md").read_text()
    if scheme == "coupled":
        assert "needs the task's coupled position ids" in readme and "position_ids" in config["sparselen_position_ids"]


@pytest.mark.parametrize("scheme,kw", [("ppc", {"max_position_id": 30}),
                                         ("coupled", {"max_position_id": 30, "id_embedding": True})])
def test_export_hf_refuses_parts_transformers_lacks(tmp_path, scheme, kw):
    pytest.importorskip("transformers")
    model, _, _ = trained(scheme, **kw)
    mf.save_model(tmp_path / "model.pt", model.state_dict(), model.cfg, {"seed": 0}, [])
    with pytest.raises(ValueError, match="GPTNeoXForCausalLM does not have"):
        export_hf(tmp_path / "model.pt", tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


def test_export_hf_command(tmp_path):
    pytest.importorskip("transformers")
    from sparselen.cli import main

    model, _, _ = trained()
    mf.save_model(tmp_path / "model.pt", model.state_dict(), model.cfg, {"seed": 0}, [])
    main(["export-hf", str(tmp_path / "model.pt"), str(tmp_path / "out")])
    assert (tmp_path / "out" / "model.safetensors").exists() and (tmp_path / "out" / "config.json").exists()

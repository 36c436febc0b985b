"""Cross-check against the OLMo codebase itself (allenai/OLMo, the code the paper trained with).

The codebase is not a dependency (ai2-olmo 0.6.0 pins numpy<2 and pulls boto3, GCS,
datasets...): the test command caches its wheel, unpacked, and ``omegaconf`` in a folder of its
own (``tests/extras.py``; ``make test`` runs it). ``SPARSELEN_OLMO_SRC`` points at another
unpacked ``ai2-olmo==0.6.0`` wheel (with ``omegaconf`` importable).

Only ``olmo/model.py`` and ``olmo/config.py`` are imported (``olmo/util.py``, which needs the
cloud clients, is replaced by the one class ``config.py`` takes from it).
"""

import enum
import os
import sys
import types

import pytest
import torch
from extras import olmo_source

from sparselen.nn.olmo import VARIANTS, Olmo, OlmoConfig, from_olmo_codebase, olmo_codebase_config

SRC, DEPS, UNAVAILABLE = olmo_source()
pytestmark = pytest.mark.skipif(SRC is None, reason=UNAVAILABLE)


def import_codebase():
    if DEPS is not None and str(DEPS) not in sys.path:
        sys.path.append(str(DEPS))
    pytest.importorskip("omegaconf")
    if "olmo.model" not in sys.modules:
        pkg = types.ModuleType("olmo")
        pkg.__path__ = [os.path.join(SRC, "olmo")]
        util = types.ModuleType("olmo.util")

        class StrEnum(str, enum.Enum):
            def __str__(self):
                return self.value

        util.StrEnum = StrEnum
        sys.modules.update({"olmo": pkg, "olmo.util": util})
    import olmo.config
    import olmo.model

    return olmo.config, olmo.model


@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_logits_match_the_olmo_codebase(variant, tie):
    config, model = import_codebase()
    cfg = OlmoConfig(vocab_size=40, n_layer=3, n_head=4, d_model=64, d_ff=96, variant=variant, tie_embeddings=tie)
    theirs_cfg = config.ModelConfig(**olmo_codebase_config(cfg), max_sequence_length=64, init_device="cpu",
                                    init_fn="normal", init_std=0.02)
    torch.manual_seed(0)
    theirs = model.OLMo(theirs_cfg).eval()
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            p.normal_(1.0 if "norm" in name or "ln_f" in name else 0.0, 0.3)
    ours = Olmo(cfg).eval()
    ours.load_state_dict(from_olmo_codebase(theirs.state_dict(), cfg), strict=True)
    ids = torch.randint(0, 40, (3, 23), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = ours(ids)[0], theirs(ids).logits
    print(f"\n{variant} tie={tie}: max |logit diff| vs OLMo codebase = {float((a - b).abs().max()):.2e} "
          f"(logits up to {float(b.abs().max()):.1f})")
    torch.testing.assert_close(a, b, atol=1e-4, rtol=0)

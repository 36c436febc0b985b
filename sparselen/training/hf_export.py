"""``sparselen export-hf MODEL DIR``: a trained model as a ``transformers`` directory.

Our parameter names are ``GPTNeoXForCausalLM``'s, so a model can be opened without this
package: ``GPTNeoXForCausalLM.from_pretrained(DIR)`` gives the same logits
(tests/training/test_modelfile.py). Which position ids the model needs is written into ``config.json``
and the README, since a coupled model given plain ids computes meaningless outputs. Models
with parts that class lacks (the PPC position head, the id embedding) are refused rather than
exported as something that computes other outputs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sparselen.runtime import io
from sparselen.training.modelfile import load_model

IDS = {
    "nope": "no position signal (rotary_pct 0): position_ids are ignored",
    "rope": "pass no position_ids (0..T-1, the default)",
    "pose": "trained with PoSE-shifted ids; evaluate with plain ids 0..T-1: pass no position_ids",
    "coupled": "needs the task's coupled position ids: pass position_ids (shape (B, T)) as the {slice} "
               "slice builds them (sparselen/{slice}/); without them the outputs are meaningless",
}
README = """# {name}

A GPT-NeoX decoder trained by sparselen (a reproduction of "The Role of Sparsity for Length
Generalization in Transformers", Golowich et al., ICML 2025), for
`transformers.GPTNeoXForCausalLM.from_pretrained(this_directory)`: same weights, same logits.

- position scheme: `{scheme}`
- position ids: {ids}
- vocabulary: {vocab}
- provenance (config hash, seed, versions, git commit, hardware): `sparselen_provenance.json`
"""


def slice_of(run: dict) -> str | None:
    """Which slice trained a model, from its provenance's run identity."""
    for key, name in (("K_train", "parity"), ("context", "language"), ("task", "ppc"),
                      ("distribution", "theory")):
        if key in run:
            return name
    return None


def export_hf(model_path, out_dir, tokenizer=None) -> Path:
    from transformers import GPTNeoXForCausalLM

    from sparselen.nn.model import hf_config

    model, prov = load_model(model_path)
    cfg = model.cfg
    lacking = [p for p, on in (("a position-id head (ppc)", cfg.scheme == "ppc"),
                               ("a position-id embedding (id_embedding)", cfg.id_embedding)) if on]
    if lacking:
        raise ValueError(f"{model_path}: this {cfg.scheme} model has {' and '.join(lacking)}, which "
                         "GPTNeoXForCausalLM does not have; an export would compute other outputs, so it is "
                         "refused. Load it with sparselen.training.modelfile.load_model instead.")
    hf = GPTNeoXForCausalLM(hf_config(cfg))
    missing, unexpected = hf.load_state_dict(model.state_dict(), strict=False)
    if unexpected or any("rotary" not in k and "inv_freq" not in k for k in missing):
        raise RuntimeError(f"parameter names do not map onto GPTNeoXForCausalLM: missing {missing}, "
                           f"unexpected {unexpected}")
    slice_ = slice_of(prov.get("run") or {})
    ids = IDS[cfg.scheme].format(slice=slice_ or "training")
    hf.config.sparselen_position_scheme = cfg.scheme
    hf.config.sparselen_position_ids = ids
    hf.config.sparselen_slice = slice_
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(out, safe_serialization=True)
    (out / "sparselen_provenance.json").write_text(io.json_dumps(prov) + "\n")
    if tokenizer:
        shutil.copy(tokenizer, out / "tokenizer.json")
    vocab = ("`tokenizer.json` (byte-level BPE)" if tokenizer else
             "the language slice's tokenizer (not included; pass --tokenizer)" if slice_ == "language" else
             "the task's token ids (VOCAB in the slice's task module)")
    (out / "README.md").write_text(README.format(name=out.name, scheme=cfg.scheme, ids=ids, vocab=vocab))
    return out

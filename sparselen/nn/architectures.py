"""Which decoder a ``model`` section builds: GPT-NeoX (no ``architecture`` key) or OLMo
(``architecture: olmo``, language slice only).

A model section or a saved model's ``model_config`` without ``architecture`` is GPT-NeoX, so
every existing config and model file keeps its meaning; the trainer, ``load_model`` and the
config checks all go through these functions.
"""

from __future__ import annotations

from torch import nn

from sparselen.nn.model import GPTNeoX, ModelConfig
from sparselen.nn.olmo import Olmo, OlmoConfig

ARCHITECTURES = ("gpt_neox", "olmo")


def model_config(model: dict, vocab_size: int, **overrides) -> ModelConfig | OlmoConfig:
    """The config dataclass of a ``model`` section (``overrides``: e.g. the run's scheme)."""
    d = {**model, **overrides}
    arch = d.pop("architecture", "gpt_neox")
    if arch == "olmo":
        return OlmoConfig.from_dict({"vocab_size": vocab_size, **d})
    if arch != "gpt_neox":
        raise ValueError(f"model.architecture={arch!r}; expected one of {ARCHITECTURES}")
    return ModelConfig(vocab_size=vocab_size, **d)


def config_from_dict(d: dict) -> ModelConfig | OlmoConfig:
    """Inverse of ``cfg.to_dict()`` (what a model file stores)."""
    d = dict(d)
    return model_config(d, d.pop("vocab_size"))


def build_model(cfg: ModelConfig | OlmoConfig) -> nn.Module:
    return Olmo(cfg) if isinstance(cfg, OlmoConfig) else GPTNeoX(cfg)

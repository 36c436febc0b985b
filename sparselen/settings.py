"""From the validated config tree to the trainer's and model's dataclasses.

The Snakefile hands each job only the config subtree it depends on (so that Snakemake's
params trigger reruns exactly the jobs a change affects); these helpers turn that subtree
into ``ModelConfig`` / ``TrainConfig``.
"""

from __future__ import annotations

import json

from sparselen.model import ModelConfig
from sparselen.train import OptimConfig, TrainConfig


def model_config(model: dict, vocab_size: int, **overrides) -> ModelConfig:
    return ModelConfig(vocab_size=vocab_size, **{**model, **overrides})


def train_config(train: dict, seed: int, pose: dict | None = None, **overrides) -> TrainConfig:
    """``train`` holds steps, batch_size, checkpoint_every, log_every and ``optimizer``;
    keys the trainer does not know (task settings such as ``lengths``) are ignored."""
    optim = OptimConfig(**train.get("optimizer", {}))
    known = {k: train[k] for k in ("steps", "batch_size", "checkpoint_every", "log_every") if k in train}
    pose = pose or {}
    return TrainConfig(seed=seed, optim=optim, pose_chunks=pose.get("chunks", 2),
                       pose_target_length=pose.get("target_length", 0), **known, **overrides)


def parse_json_arg(text: str) -> dict:
    """``--config`` values are JSON (the rule's params); say what is wrong if they are not."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SystemExit(f"--config is not valid JSON ({e}): {text[:200]!r}") from None

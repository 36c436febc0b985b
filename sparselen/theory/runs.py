"""What one GPT run of the theory slice is made of: ``theory.gpt`` as its law sees it."""

from __future__ import annotations


def law_gpt(gpt: dict, dist: str) -> dict:
    """``theory.gpt`` as one law's runs see it: ``law_train[dist]`` (steps, lr) replaces train's
    values; the sparsities and the per-law table are left out, so a change to one law's
    training leaves the params of the other laws' runs unchanged."""
    over = gpt.get("law_train", {}).get(dist, {})
    train = dict(gpt["train"])
    if "steps" in over:
        train["steps"] = over["steps"]
    if "lr" in over:
        train["optimizer"] = {**train.get("optimizer", {}), "lr": over["lr"]}
    return {**{key: v for key, v in gpt.items() if key not in ("k", "law_train")}, "train": train}

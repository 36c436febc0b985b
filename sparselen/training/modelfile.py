"""Model and checkpoint files that are safe to open: tensors in safetensors, the rest JSON.

A pickle (``torch.save``) runs code when it is loaded, so a model file from someone else would
be a program. Here any nested state (a model file: weights, model config, provenance, log; a
checkpoint: model, optimizer and scheduler state, step, log) is split into its tensors, stored
under their path in the structure (``optimizer/state/0/exp_avg``), and a JSON skeleton in the
safetensors header (key ``"sparselen"``). Tuples and non-string dict keys are tagged so the
state comes back exactly as saved (bit-identical tensors, exact floats), which exact resume
needs; any safetensors reader gets the weights. Files of plain tensors written by
``torch.save`` still load, through ``torch.load(weights_only=True)``, which refuses anything
else.
"""

from __future__ import annotations

import collections
import json
import zipfile
from pathlib import Path

import torch

from sparselen.nn.architectures import build_model, config_from_dict
from sparselen.runtime import io

FORMAT = "sparselen-safetensors/1"
META_KEY = "sparselen"


class NotAModelFile(ValueError):
    pass


def _flatten(obj, path: str, tensors: dict):
    if isinstance(obj, torch.Tensor):
        key = path or "tensor"
        tensors[key] = obj.detach().contiguous().cpu()
        return {"__tensor__": key}
    if isinstance(obj, tuple):
        return {"__tuple__": [_flatten(v, f"{path}/{i}", tensors) for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_flatten(v, f"{path}/{i}", tensors) for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not (k.startswith("__") and k.endswith("__")) for k in obj):
            return {k: _flatten(v, f"{path}/{k}" if path else k, tensors) for k, v in obj.items()}
        return {"__items__": [[k, _flatten(v, f"{path}/{k}", tensors)] for k, v in obj.items()]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot store {type(obj).__name__} at {path or '<root>'} in a model file "
                    "(tensors, numbers, strings, None, lists, tuples and dicts only)")


def _unflatten(obj, tensors: dict):
    if isinstance(obj, list):
        return [_unflatten(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if set(obj) == {"__tensor__"}:
            return tensors[obj["__tensor__"]]
        if set(obj) == {"__tuple__"}:
            return tuple(_unflatten(v, tensors) for v in obj["__tuple__"])
        if set(obj) == {"__items__"}:
            return {(tuple(k) if isinstance(k, list) else k): _unflatten(v, tensors) for k, v in obj["__items__"]}
        return {k: _unflatten(v, tensors) for k, v in obj.items()}
    return obj


def save_state(path, state) -> None:
    """Write a nested state atomically (a killed job leaves no half file under ``path``)."""
    from safetensors.torch import save_file

    tensors = {}
    skeleton = _flatten(state, "", tensors)
    meta = json.dumps({"format": FORMAT, "state": skeleton}, sort_keys=True, allow_nan=True)
    # safetensors refuses tensors that share memory (views): store those as copies
    tensors = {k: v.clone() if v.untyped_storage().nbytes() != v.numel() * v.element_size() else v
               for k, v in tensors.items()}
    with io.atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata={META_KEY: meta})


def load_state(path, device="cpu"):
    """A state written by ``save_state``, or a ``torch.save`` file of tensors and plain data;
    anything else raises ``NotAModelFile``. Nothing is unpickled."""
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    try:
        with safe_open(str(path), framework="pt", device=str(device)) as f:
            meta = (f.metadata() or {}).get(META_KEY)
            if meta is None:
                raise NotAModelFile(f"{path}: a safetensors file without sparselen metadata")
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except SafetensorError as e:
        if zipfile.is_zipfile(path):
            try:
                return torch.load(path, map_location=device, weights_only=True)
            except Exception as e2:  # noqa: BLE001 - the UnpicklingError names the refused global
                raise NotAModelFile(f"{path}: refused: a torch.save file holding more than tensors and plain "
                                    f"data ({type(e2).__name__}: {str(e2).splitlines()[0]})") from None
        raise NotAModelFile(f"{path}: not a sparselen model file (safetensors: {e})") from None
    doc = json.loads(meta)
    if doc.get("format") != FORMAT:
        raise NotAModelFile(f"{path}: unknown format {doc.get('format')!r}; expected {FORMAT!r}")
    return _unflatten(doc["state"], tensors)


def read_metadata(path) -> dict:
    """Everything but the tensors, without reading any tensor."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return json.loads(f.metadata()[META_KEY])["state"]


def read_header(path) -> dict:
    """``load_state``'s state with None for every tensor, from a sparselen safetensors file's
    header alone (no tensor is read); any other file through ``load_state`` on the CPU (a
    ``torch.save`` file's state, or the error that says what the file is)."""
    from safetensors import SafetensorError

    try:
        skeleton = read_metadata(path)
    except (SafetensorError, KeyError, TypeError):
        return load_state(path)
    return _unflatten(skeleton, collections.defaultdict(lambda: None))


def save_model(path, weights: dict, model_cfg, provenance: dict, log_rows: list) -> None:
    """A trained model: weights, its model config (GPT-NeoX or OLMo), provenance and the
    training log."""
    save_state(path, {"model": weights, "model_config": model_cfg.to_dict(), "provenance": provenance,
                      "log": log_rows})


def load_model(path, device=torch.device("cpu")):
    """(model in eval mode, provenance) from a model file."""
    state = load_state(path, device)
    if not isinstance(state, dict) or "model_config" not in state:
        raise NotAModelFile(f"{path}: no model_config: not a trained model file")
    model = build_model(config_from_dict(state["model_config"])).to(device)
    model.load_state_dict(state["model"])
    model.eval()
    return model, state["provenance"]

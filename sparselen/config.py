"""The configuration: loading, schema errors that name the key, and cross-key checks.

One validated tree (``workflow/schemas/config.schema.yaml``) holds every default; Snakemake's
``validate`` fills them in before any rule reads the config. A config file is complete: the
workflow loads ``config.yaml`` only when no ``--configfile`` is given, and further files
listed after the first are overlays merged over it key by key (``load`` does the same for
commands run outside Snakemake). ``semantic_errors`` adds the rules one schema cannot express;
each slice owns the checks of its section (``sparselen/<slice>/checks.py``).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import jsonschema
import yaml

SLICES = ("parity", "ppc", "language", "theory")
ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT_CONFIG = ROOT / "config.yaml"


def key_path(path) -> str:
    return ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in path).replace(".[", "[") or "<root>"


def schema_errors(config: dict, schema_path=SCHEMA) -> list[str]:
    """Every schema violation as ``key.path = value: reason``."""
    schema = yaml.safe_load(Path(schema_path).read_text())
    validator = jsonschema.Draft202012Validator(schema)
    out = []
    for err in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        where = key_path(err.absolute_path)
        if err.validator == "additionalProperties":
            out.append(f"{where}: {err.message} (unknown key; see {Path(schema_path).name})")
        else:
            out.append(f"{where} = {err.instance!r}: {err.message}")
    return out


def semantic_errors(config: dict) -> list[str]:
    """Cross-key checks of every slice section present in ``config``, and of packing."""
    out = []
    packing, gpus = config.get("packing", {}).get("jobs_per_gpu", 0), config.get("gpus_per_job", 0)
    if packing > 1 and gpus > 1:
        out.append(f"packing.jobs_per_gpu = {packing}: jobs share one GPU, but gpus_per_job = {gpus} gives each "
                   "job several; set gpus_per_job: 1 or packing.jobs_per_gpu: 0")
    for name in SLICES:
        if name in config:
            out.extend(importlib.import_module(f"sparselen.{name}.checks").config_errors(config[name]))
    return out


def check(config: dict, source: str) -> None:
    """Raise ``ValueError`` listing all semantic errors, naming where the config came from."""
    errors = semantic_errors(config)
    if errors:
        raise ValueError(f"invalid configuration (from {source}):\n  " + "\n  ".join(errors))


def model_errors(where: str, model: dict) -> list[str]:
    """A model section's own consistency, by building its ``ModelConfig`` (the one place
    those rules live); ``where`` names the section in the message."""
    from sparselen.architectures import model_config

    try:
        model_config(model, 2)
    except (TypeError, ValueError) as e:
        return [f"{where}: {e}"]
    return []


def merge(base: dict, overlay: dict) -> dict:
    """``overlay`` merged over ``base`` key by key (what Snakemake does with several configfiles)."""
    out = dict(base)
    for k, v in overlay.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load(files=()) -> dict:
    """The config a workflow run with ``--configfile files...`` sees (``config.yaml`` when
    none), validated with defaults filled in."""
    from snakemake.utils import validate

    config: dict = {}
    for f in list(files) or [DEFAULT_CONFIG]:
        config = merge(config, yaml.safe_load(Path(f).read_text()) or {})
    validate(config, str(SCHEMA))
    return config

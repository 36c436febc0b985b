"""The configuration: loading, schema errors that name the key, and cross-key checks.

One validated tree (``workflow/schemas/config.schema.yaml``) holds every default; Snakemake's
``validate`` fills them in before any rule reads the config. A config file is complete: the
workflow loads ``config.yaml`` only when no ``--configfile`` is given, and further files
listed after the first are overlays merged over it key by key (``load`` does the same for
commands run outside Snakemake). The rules one schema cannot express are each slice's own
(``sparselen/<slice>/checks.py``), run together by ``sparselen.jobs.checks``.
"""

from __future__ import annotations

from pathlib import Path

import yaml

SLICES = ("parity", "ppc", "language", "theory")
ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
DEFAULT_CONFIG = ROOT / "config.yaml"


def key_path(path) -> str:
    return ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in path).replace(".[", "[") or "<root>"


def schema_errors(config: dict, schema_path=SCHEMA) -> list[str]:
    """Every schema violation as ``key.path = value: reason``."""
    import jsonschema  # here: a GPU check run from its plan (sparselen.estimate.gpu_check) loads no config

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


def model_errors(where: str, model: dict) -> list[str]:
    """A model section's own consistency, by building its ``ModelConfig`` (the one place
    those rules live); ``where`` names the section in the message."""
    from sparselen.nn.architectures import model_config

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

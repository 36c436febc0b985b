"""Configuration checks that run before any job: readable schema errors and cross-key rules.

Snakemake's ``validate`` enforces the schema (and fills defaults); when it fails, the
workflow re-raises with ``schema_errors``' messages, which name the key path and the bad
value (``parity.train.steps = -5: ...``). ``semantic_errors`` adds the rules one schema
cannot express (ranges in order, PoSE covering the evaluated lengths, ...); each experiment
module owns the checks of its config section.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import jsonschema
import yaml


def key_path(path) -> str:
    return ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in path).replace(".[", "[") or "<root>"


def schema_errors(config: dict, schema_path) -> list[str]:
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
    """Cross-key checks: each experiment module's ``config_errors(config)``, for the sections
    present in the config."""
    from sparselen.cli import COMMANDS

    out = []
    for name in dict.fromkeys(COMMANDS.values()):
        module = importlib.import_module(name)
        if hasattr(module, "config_errors"):
            out.extend(module.config_errors(config))
    return out


def check(config: dict, source: str) -> None:
    """Raise ``ValueError`` listing all semantic errors, naming where the config came from."""
    errors = semantic_errors(config)
    if errors:
        raise ValueError(f"invalid configuration (from {source}):\n  " + "\n  ".join(errors))

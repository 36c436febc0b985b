"""Configuration checks that run before any job: readable schema errors and cross-key rules.

Snakemake's ``validate`` enforces the schema (and fills defaults); when it fails, the
workflow re-raises with ``schema_errors``' messages, which name the key path and the bad
value (``parity.train.steps = -5: ...``). ``semantic_errors`` adds the rules one schema
cannot express (ranges in order, PoSE covering the evaluated lengths, ...).
"""

from __future__ import annotations

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
    """Cross-key checks for the parity slice (other slices add theirs)."""
    out = []
    p = config.get("parity")
    if p:
        lo, hi = p["train"]["lengths"]
        if lo > hi:
            out.append(f"parity.train.lengths = {[lo, hi]}: the first (shortest) length exceeds the second")
        if hi // 2 < 1 or (hi // 2) < (lo + 1) // 2:
            out.append(f"parity.train.lengths = {[lo, hi]}: contains no even length")
        if min(p["K_train"]) > hi // 2:
            out.append(f"parity.K_train = {p['K_train']}: K_train cannot exceed the longest training l = {hi // 2}")
        m = p["model"]
        if m.get("d_model", 128) % m.get("n_head", 4):
            out.append(f"parity.model.d_model = {m.get('d_model')}: not divisible by n_head = {m.get('n_head')}")
        if m.get("position") in ("coupled", "ppc"):
            out.append(f"parity.model.position = {m['position']!r}: parity has no coupled ids; use nope, rope or pose")
        longest = max(p["eval"]["lengths"]) + 1
        target = p["pose"].get("target_length")
        if m.get("position") == "pose" and (target is None or target < longest):
            out.append(f"parity.pose.target_length = {target}: must be at least the longest evaluated sequence "
                       f"({longest} tokens = max(parity.eval.lengths) + 1) for the pose scheme")
        if all(k > length // 2 for k in p["eval"]["k_test"] for length in p["eval"]["lengths"]):
            out.append("parity.eval: every (k_test, length) cell is impossible (k_test > length / 2)")
    return out


def check(config: dict, source: str) -> None:
    """Raise ``ValueError`` listing all semantic errors, naming where the config came from."""
    errors = semantic_errors(config)
    if errors:
        raise ValueError(f"invalid configuration (from {source}):\n  " + "\n  ".join(errors))

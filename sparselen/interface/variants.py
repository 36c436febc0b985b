"""Named runs of a slice: a position scheme with other model values (``<slice>.variants``), so
one slice compares a scheme at two settings (RoPE at two bases, a model at two sizes). A
variant's name stands in the slice's scheme list and in its runs' paths like a scheme's."""

from __future__ import annotations

from sparselen.interface.config import model_errors


def run_scheme(section: dict, name: str) -> str:
    """The position scheme of the run ``name``: a scheme, or the one a variant names."""
    return section.get("variants", {}).get(name, {}).get("scheme", name)


def run_model(model: dict, section: dict, name: str) -> dict:
    """``model`` with the variant's model values on top (unchanged for a plain scheme)."""
    return {**model, **section.get("variants", {}).get(name, {}).get("model", {})}


def variant_errors(where: str, section: dict, names, schemes, model: dict) -> list[str]:
    """Every run name is a scheme of ``schemes`` or a variant; no variant takes a scheme's name;
    each variant's model is valid (``model``: the section's, already overridden where it applies)."""
    variants, out = section.get("variants", {}), []
    for name in names:
        if name not in schemes and name not in variants:
            out.append(f"{where}.schemes lists {name!r}, which is neither a position scheme {list(schemes)} "
                       f"nor a key of {where}.variants {sorted(variants)}")
    for name in variants:
        if name in schemes:
            out.append(f"{where}.variants.{name}: a variant cannot take the name of a position scheme")
        for msg in model_errors(f"{where}.variants.{name}.model", run_model(model, section, name)):
            out += [] if msg in out else [msg]
    return out

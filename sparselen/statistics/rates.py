"""The error rates a verdict line carries: how often the claim's own code said "holds" where it
was false, counted by ``benchmarks/calibration.py --no-effect --write`` at each shipped config's
sizes (``FILE``, package data), and the power at the measured effect (``power.claim_power``).

The file is the calibration's output (``sparselen.calibration.false_holds`` writes it); this
module only reads it. A run's config is matched to the file by the sizes the claim's tables depend on: its slice's
seeds and evaluation samples per cell, or the analysed tokens (language). A claim with several
scenarios where it is false (no effect, at chance, did not fit, a failure mode) gives the worst
of them, so the line never cites a rate better than one the criterion was measured at."""

from __future__ import annotations

import json
from pathlib import Path

FILE = Path(__file__).resolve().parents[1] / "calibration" / "false_holds.json"
REGENERATE = ".venv/bin/python benchmarks/calibration.py --no-effect --replicates 100 --write " \
             "sparselen/calibration/false_holds.json"


def slice_sizes(slice_name: str, section: dict) -> dict:
    """What a claim's calibration depends on in its slice's config section."""
    if slice_name == "language":
        return {"tokens": int(section["analysis"]["tokens"])}
    return {"seeds": len(section["seeds"]), "samples": int(section["eval"]["n"])}


def config_sizes(cfg: dict, slices=("parity", "ppc", "theory", "language")) -> dict:
    """Each slice's sizes of a loaded config (slices it has)."""
    return {s: slice_sizes(s, cfg[s]) for s in slices if s in cfg}


def load(path: Path = FILE) -> dict:
    """The calibration's file (shipped with the package: a missing one is an error, not "not calibrated")."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"the calibration's false holds ({path}) are missing; make them: {REGENERATE}")
    return json.loads(path.read_text())


def worst(table: dict, claim: str, sizes: dict) -> dict | None:
    """The claim's false-claim scenario with the most false "holds" at ``sizes`` (None: not
    calibrated there), with the number of such scenarios as ``scenarios``."""
    hits = [e for e in table["entries"] if e["claim"] == claim and e["sizes"] == sizes]
    if not hits:
        return None
    top = max(hits, key=lambda e: (e["holds"] / e["replicates"], e["holds"]))
    return top | {"scenarios": len({e["scenario"] for e in hits})}


def false_holds(table: dict, claim: str, sizes: dict) -> str:
    """"false holds under no effect k/n (...)", or why there is no such count."""
    if not any(e["claim"] == claim for e in table["entries"]):
        return "false holds under no effect: not calibrated (no generated tables for this claim)"
    w = worst(table, claim, sizes)
    if w is None:
        return "false holds under no effect: not calibrated at these sizes"
    of = f", worst of {w['scenarios']} scenarios" if w["scenarios"] > 1 else ""
    return f"false holds under no effect {w['holds']}/{w['replicates']} (calibration at this config's sizes{of})"


def power_text(p: float | None, basis: str = "measured") -> str:
    """The power as the report words it, at the ``basis`` ("measured" or "assumed") effect."""
    return "no power is computed (no spread measured)" if p is None else f"power at the {basis} effect {p:.0%}"

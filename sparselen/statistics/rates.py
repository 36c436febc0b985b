"""The error rates a verdict line carries: how often the claim's own code said "holds" where it
was false, counted by ``benchmarks/calibration.py --no-effect --write`` at each shipped config's
sizes (``FILE``, package data), and the power at the effect and spread the claim is sized at
(``power.claim_power``; measured or assumed, ``power.basis``).

The file is the calibration's output (``sparselen.calibration.false_holds`` writes it); this
module only reads it. A run's config is matched to the file by the sizes the claim's tables depend on: its slice's
seeds and evaluation samples per cell, or the analysed tokens (language). The line cites the
worst of the claim's certifying nulls (each tested condition at its threshold:
``sparselen.calibration.thresholds``), with the one-sided 95% upper bound of its rate and what
it is; where the file has none for the claim, the worst of the scenarios the criteria were
developed on (no effect, at chance, did not fit, a failure mode), so the line never cites a
rate better than one the criterion was measured at."""

from __future__ import annotations

import json
from pathlib import Path

from sparselen.statistics.power import SPREADS, basis

FILE = Path(__file__).resolve().parents[1] / "calibration" / "false_holds.json"
REGENERATE = ".venv/bin/python benchmarks/calibration.py --no-effect --replicates 100 --write " \
             "sparselen/calibration/false_holds.json"
CERTIFYING = "certifying"  # an entry's kind: a null at a tested condition's threshold (calibration.CERTIFYING)
LEVEL = 0.95  # the one-sided level of a rate's upper bound


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


def upper_bound(holds: int, replicates: int, level: float = LEVEL) -> float:
    """Clopper and Pearson's one-sided ``level`` upper bound of a rate seen ``holds`` times in
    ``replicates`` draws."""
    from scipy.stats import beta  # imported on first use: seconds of start-up per job

    return 1.0 if holds >= replicates else float(beta.ppf(level, holds + 1, replicates - holds))


def worst(table: dict, claim: str, sizes: dict) -> dict | None:
    """The claim's false-claim entry with the most false "holds" at ``sizes`` (None: not
    calibrated there): of its certifying nulls where the file has any, else of all, with the
    number of entries it is the worst of as ``scenarios``."""
    hits = [e for e in table["entries"] if e["claim"] == claim and e["sizes"] == sizes]
    hits = [e for e in hits if e.get("kind") == CERTIFYING] or hits
    if not hits:
        return None
    top = max(hits, key=lambda e: (e["holds"] / e["replicates"], e["holds"]))
    return top | {"scenarios": len({e["scenario"] for e in hits})}


def false_holds(table: dict, claim: str, sizes: dict) -> str:
    """"worst null at the threshold (its condition, form): k/n, upper bound u% (...)", or the
    worst developed-on scenario's count where the claim has no certifying null, or why there is
    no such count."""
    if not any(e["claim"] == claim for e in table["entries"]):
        return "false holds under no effect: not calibrated (no generated tables for this claim)"
    w = worst(table, claim, sizes)
    if w is None:
        return "false holds under no effect: not calibrated at these sizes"
    of = f", worst of {w['scenarios']} scenarios" if w["scenarios"] > 1 else ""
    if w.get("kind") != CERTIFYING:
        return f"false holds under no effect {w['holds']}/{w['replicates']} (calibration at this config's sizes{of})"
    bound = upper_bound(w["holds"], w["replicates"])
    return (f"false holds at the worst null at the threshold ({w['condition']}, {w['form']}): {w['holds']}/"
            f"{w['replicates']}, upper bound {bound:.0%} (one-sided {LEVEL:.0%}; calibration at this config's "
            f"sizes{of})")


def power_text(p: float | None, claim: str = "") -> str:
    """The power line: its value and what it is computed at (``power.basis``: measured or assumed)."""
    if p is None:
        return "no power is computed (no effect or spread measured or assumed)"
    return f"power {p:.0%} at {basis(claim)}" if claim in SPREADS else f"power {p:.0%}"

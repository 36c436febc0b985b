"""The analysis plan of configs/paper.yaml, frozen before it runs: each claim's criterion (its
words, the numbers in its module, its unit and statistic), the code that computes the verdicts,
the design (seeds and samples per slice; the rounds seeds train in and the rule that stops them), the power it was sized
at and the calibration's false holds at its sizes. ``FILE`` is committed; the report compares
this run's criteria with it and says in its first lines where they differ.

``python -m sparselen.report.registration --write`` rewrites the file: a revision of the plan,
made in its own commit and recorded in docs/reconstruction.md, "History of the criteria".
``--check`` (and ``tests/report/test_registration.py``) fails where the code no longer matches
what is registered, so no criterion changes without that commit."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sparselen.interface.config import ROOT, SLICES
from sparselen.interface.config import load as load_config
from sparselen.report import claims as cl
from sparselen.statistics import betting, power, rates, verdicts
from sparselen.training.resumable import source_fingerprint

FILE = ROOT / "configs" / "registration" / "paper.json"
CONFIG = "configs/paper.yaml"
COMMAND = ".venv/bin/python -m sparselen.report.registration --write"
# What computes a verdict: the criteria, the verdict machinery and statistics, token sparsity.
CRITERIA_CODE = ("statistics/verdicts.py", "statistics/stats.py", "statistics/betting.py", "report/claims.py",
                 "report/rounds.py", "language/sparsity.py",
                 *(f"{name}/claims.py" for name in SLICES))
# The stopping rule of a slice whose seeds train in rounds (``rounds`` in the design: its size and cap).
STOPPING = ("a slice with rounds trains its seeds rounds.size at a time, at most rounds.max rounds, in the order "
            "listed; after each round every claim that reads it is decided on the seeds so far by its own test and "
            "stops at its first \"holds\" or \"does not hold\" (at once where no seed count lets the design decide "
            "it); the next round trains only the runs an undecided claim reads. No alpha is spent per round: the "
            "bounds by betting hold at every number of seeds at once. A slice without rounds trains every seed, "
            "then decides each claim once")


def _constants(module) -> dict:
    """A module's numeric constants (its thresholds, gates, draws): upper-case ints and floats."""
    return {k: v for k, v in sorted(vars(module).items())
            if k.isupper() and isinstance(v, (int, float)) and not isinstance(v, bool)}


def criteria() -> dict:
    """What decides each claim, whatever the config: its words, unit, statistic and the numbers of
    its module and of the verdict machinery, and the fingerprint of the code that computes it."""
    out = {"code": source_fingerprint(*CRITERIA_CODE), "verdicts": _constants(verdicts),
           "betting": _constants(betting), "claims": {}}
    for c in cl.CLAIMS:
        spread = power.SPREADS.get(c.id)
        out["claims"][c.id] = {"statement": c.statement, "criterion": c.criterion, "unit": c.unit,
                               "stability_rule": c.stability_rule, "statistic": spread.statistic if spread else "",
                               "constants": _constants(cl.slice_claims(c.slice))}
    return out


def design(cfg: dict) -> dict:
    """Per slice of the config, what its claims' verdicts depend on: seeds (and the idealized
    model's), samples per cell, analysed tokens; the stopping rule; the power each claim has at
    these sizes (and what it assumes) and the calibration's worst false holds at them (of its
    nulls at the thresholds, with their one-sided 95% upper bound)."""
    sections = {s: cfg[s] for s in SLICES if s in cfg}
    sizes = {s: rates.slice_sizes(s, section) for s, section in sections.items()}
    if "theory" in sections:  # T2's idealized-model groups count their own seeds
        sizes["theory"]["sfa_seeds"] = sections["theory"].get("sfa_seeds") or len(sections["theory"]["seeds"])
    table, per_claim = rates.load(), {}
    for c in cl.CLAIMS:
        if c.slice not in sections:
            continue
        p = c.power(sections[c.slice]) if c.power else None
        worst = rates.worst(table, c.id, rates.slice_sizes(c.slice, sections[c.slice]))
        per_claim[c.id] = {"power": None if p is None else round(p, 3),
                           "sized_at": power.basis(c.id) if c.id in power.SPREADS else "",
                           "false_holds": None if worst is None else
                           {k: worst[k] for k in ("scenario", "holds", "replicates", "upper_bound") if k in worst}}
    rounds = {s: dict(section["rounds"]) for s, section in sections.items() if section.get("rounds")}
    return {"sizes": sizes, "stopping": STOPPING, "rounds": rounds, "claims": per_claim}


def current() -> dict:
    return {"config": CONFIG, "criteria": criteria(), "design": design(load_config([ROOT / CONFIG]))}


def load(path: Path = FILE) -> dict:
    return json.loads(Path(path).read_text())


def _changed(before: dict, after: dict) -> list[str]:
    """"NAME old -> new" for every constant that differs between two tables of them."""
    return [f"{k} {before.get(k)} -> {after.get(k)}" for k in sorted(set(before) | set(after))
            if before.get(k) != after.get(k)]


def differences(registered: dict, now: dict) -> list[str]:
    """Where ``now`` departs from ``registered``, one phrase each (empty: as registered)."""
    out = []
    reg, cur = registered["criteria"], now["criteria"]
    for cid in sorted(set(reg["claims"]) | set(cur["claims"])):
        a, b = reg["claims"].get(cid), cur["claims"].get(cid)
        if a is None or b is None:
            out.append(f"{cid} {'added' if a is None else 'removed'}")
            continue
        changed = [k for k in ("statement", "criterion", "unit", "statistic", "stability_rule") if a.get(k) != b.get(k)]
        changed += _changed(a["constants"], b["constants"])
        if changed:
            out.append(f"{cid}: {', '.join(changed)}")
    for name, part in (("verdict machinery", "verdicts"), ("bounds by betting", "betting")):
        if changed := _changed(reg.get(part, {}), cur.get(part, {})):
            out.append(f"{name}: " + ", ".join(changed))
    if reg["code"] != cur["code"] and not out:
        out.append("the code that computes the verdicts (same words and numbers)")
    return out


def design_differences(registered: dict, now: dict) -> list[str]:
    """Where paper.yaml's design (sizes, stopping, power, calibration) departs from the registered one."""
    reg, cur = registered["design"], now["design"]
    return [f"{key}: {json.dumps(reg.get(key), sort_keys=True)} -> {json.dumps(cur.get(key), sort_keys=True)}"
            for key in ("sizes", "stopping", "rounds", "claims") if reg.get(key) != cur.get(key)]


def report_line(path: Path = FILE) -> str:
    """The report's line on its criteria against the registration."""
    if not Path(path).exists():
        return f"No analysis plan is registered ({Path(path).name} is missing): the criteria are this code's."
    diff = differences(load(path), {"criteria": criteria()})
    where = f"`{Path(path).relative_to(ROOT)}`" if Path(path).is_relative_to(ROOT) else f"`{path}`"
    if not diff:
        return f"The criteria are those registered for {CONFIG} ({where}), frozen before its run."
    return (f"**The criteria differ from those registered for {CONFIG}** ({where}): " + "; ".join(diff)
            + ". Read these verdicts as a revised, not a pre-registered, test.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sparselen.report.registration", description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help=f"rewrite {FILE.relative_to(ROOT)} (a revision of the plan)")
    mode.add_argument("--check", action="store_true", help="exit 1 where the code departs from the registration")
    args = ap.parse_args(argv)
    now = current()
    if args.write:
        FILE.parent.mkdir(parents=True, exist_ok=True)
        FILE.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"wrote {FILE.relative_to(ROOT)}")
        return 0
    if not FILE.exists():
        print(f"{FILE.relative_to(ROOT)} is missing: {COMMAND}", file=sys.stderr)
        return 1
    registered = load()
    diff = differences(registered, now) + design_differences(registered, now)
    for line in diff:
        print(line, file=sys.stderr)
    if diff:
        print(f"the criteria or paper.yaml's design differ from {FILE.relative_to(ROOT)}; a revision is its own "
              f"commit ({COMMAND}) recorded in docs/reconstruction.md, \"History of the criteria\"", file=sys.stderr)
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())

"""What each shipped config decides: one table, built from the claims' own ``design`` and
``power`` checks (``sparselen/<slice>/claims.py``), written into every document that states it.

A config's design decides a claim (``yes``: it has the seeds, sizes and tasks for the power the
claim needs), decides it on some seed sets only (``by seed set``: under-powered, yet with power
enough that a verdict is not rare, so a run holds on one seed set and is not decidable on the
next), or does not (``no``: the report says "not decidable on this config"). The words are
``sparselen.report.answer.reach``'s, the same the report's answer table and the terminal use.

README.md and the report show the table of all shipped configs (``matrix``), configs/README.md
each config's with the reason per claim (``per_config``), each between ``BEGIN`` and ``END``.
``python -m sparselen.report.decides --write`` rewrites them; ``--check`` exits 1 naming the
documents that differ from the code (``tests/report/test_decides.py`` runs it), so no document
can state a stale table.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from sparselen.interface.config import ROOT, load
from sparselen.report.answer import BY_SEED_SET, NO, SOME_POWER, YES, reach, short_design
from sparselen.report.claims import CLAIMS
from sparselen.statistics.power import SHORT_BASES, SPREADS, TARGET

# The shipped configs, by the name the documents give them, and their paths in the repository.
SHIPPED = {"config.yaml": "config.yaml", "cpu-extended.yaml": "configs/cpu-extended.yaml",
           "paper.yaml": "configs/paper.yaml"}
BEGIN, END = "<!-- decides:begin -->", "<!-- decides:end -->"
COMMAND = "python -m sparselen.report.decides --write"


@dataclass(frozen=True)
class Reach:
    """What one config's design can do for one claim."""

    claim: str
    config: str
    decides: str  # YES, BY_SEED_SET or NO
    power: float | None  # at the effect and spread the claim is sized at; None where it has none
    why: str  # what the design lacks ("" when nothing), or that the slice is not run


def shipped(root: Path = ROOT) -> dict:
    """The shipped configs, loaded and validated, by name."""
    return {name: load([Path(root) / path]) for name, path in SHIPPED.items()}


def reaches(configs: dict, claims=CLAIMS) -> list[Reach]:
    """Per config (name -> loaded config) and claim, what its design can do for the claim."""
    out = []
    for name, cfg in configs.items():
        for c in claims:
            if c.slice not in cfg:
                out.append(Reach(c.id, name, NO, None, f"the {c.slice} slice is not run"))
                continue
            section = cfg[c.slice]
            design, power = c.design(section), (c.power(section) if c.power else None)
            out.append(Reach(c.id, name, reach(design, power), power, design))
    return out


def deciders(found: list[Reach]) -> dict:
    """Per claim, the configs whose design decides it with their power, as the report's line
    names them ("paper.yaml (power 85%)"); what each config decides is this module's table."""
    out: dict[str, list[str]] = {}
    for r in found:
        out.setdefault(r.claim, [])
        if r.decides == YES:
            out[r.claim].append(r.config + (f" (power {r.power:.0%})" if r.power is not None else ""))
    return out


def _power(r: Reach) -> str:
    """The power and, where it is not measured on this statistic, what it assumes."""
    if r.power is None:
        return ""
    label = SHORT_BASES[SPREADS[r.claim].basis] if r.claim in SPREADS else ""
    return f"{r.power:.0%}" + (f" ({label})" if label else "")


def _cell(r: Reach) -> str:
    return r.decides + (f" ({r.power:.0%})" if r.power is not None else "")


def legend() -> list[str]:
    """What the table's words mean, and how it is made."""
    return [f"**{YES}**: the design has what the claim needs (at least {TARGET:.0%} power at the effect "
            "and spread it is sized at, where it has one); the evidence decides, and can still leave it inconclusive (the "
            f"language claims on CPU: no model copies from far context). **{BY_SEED_SET}**: under-powered, at "
            f"{SOME_POWER:.0%} power or more: the claim holds on some seed sets and is not decidable on others. "
            f"**{NO}**: the report says \"not decidable on this config\". A percentage is the power at the effect "
            "and spread the claim is sized at (`sparselen/statistics/power.py`): measured on this project's runs "
            "of another model or task unless marked: *assumed effect* (the paper's, e.g. ppc = coupled), *other "
            "statistic* (measured on a statistic the claim no longer uses), *assumed* (a generator's); none for "
            f"L1; L2's is assumed, never measured. Generated from each claim's `design` and `power` by `{COMMAND}`; "
            "`tests/report/test_decides.py` fails when a document differs."]


def matrix(found: list[Reach]) -> list[str]:
    """One row per claim, one column per shipped config: what its design decides, with its power."""
    configs = list(dict.fromkeys(r.config for r in found))
    cell = {(r.claim, r.config): _cell(r) for r in found}
    lines = ["| claim | " + " | ".join(f"`{c}`" for c in configs) + " |", "| --- |" + " --- |" * len(configs)]
    lines += [f"| {claim} | " + " | ".join(cell[claim, c] for c in configs) + " |"
              for claim in dict.fromkeys(r.claim for r in found)]
    return lines + ["", *legend()]


def _why(r: Reach) -> str:
    if r.decides != YES:
        return short_design(r.why)
    return (f"at least {TARGET:.0%} power at the effect and spread it is sized at" if r.power is not None
            else "decided by the evidence alone: no spread measured, so no power")


def per_config(found: list[Reach]) -> list[str]:
    """Per shipped config, one row per claim: whether it decides it, its power and why."""
    lines = []
    for config in dict.fromkeys(r.config for r in found):
        lines += [f"**`{config}`**", "", "| claim | decides | power | why |", "| --- | --- | --- | --- |"]
        lines += [f"| {r.claim} | {r.decides} | {_power(r)} | {_why(r)} |" for r in found if r.config == config]
        lines.append("")
    return lines + legend()


# The documents that state the table, each with how it lays it out (paths from the repository root).
DOCUMENTS = {"README.md": matrix, "configs/README.md": per_config}


def with_block(text: str, lines: list[str], where: str = "") -> str:
    """``text`` with what lies between ``BEGIN`` and ``END`` replaced by ``lines``."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ValueError(f"{where or 'the document'}: needs one {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN)
    return head + "\n".join([BEGIN, *lines, END]) + rest.split(END, 1)[1]


def stale(root: Path = ROOT, found: list[Reach] | None = None) -> list[str]:
    """The documents whose table differs from the code's."""
    found = reaches(shipped(root)) if found is None else found
    return [doc for doc, lay_out in DOCUMENTS.items()
            if (text := (Path(root) / doc).read_text()) != with_block(text, lay_out(found), doc)]


def write(root: Path = ROOT, found: list[Reach] | None = None) -> list[str]:
    """Rewrite the table in every document; the ones that changed."""
    found = reaches(shipped(root)) if found is None else found
    changed = []
    for doc, lay_out in DOCUMENTS.items():
        path = Path(root) / doc
        text = path.read_text()
        if (new := with_block(text, lay_out(found), doc)) != text:
            path.write_text(new)
            changed.append(doc)
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparselen.report.decides", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite the table in {', '.join(DOCUMENTS)}")
    parser.add_argument("--check", action="store_true", help="exit 1 when a document's table differs from the code")
    args = parser.parse_args(argv)
    found = reaches(shipped())
    if args.write:
        print("rewrote: " + (", ".join(write(found=found)) or "nothing (every table was current)"))
    elif args.check:
        if bad := stale(found=found):
            print(f"stale: {', '.join(bad)}; run {COMMAND}", file=sys.stderr)
            return 1
    else:
        print("\n".join(per_config(found)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

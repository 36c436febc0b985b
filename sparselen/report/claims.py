"""The claims of every slice, collected, checked on the measured tables and laid out as the
claims table of the report.

Each slice declares its claims in ``sparselen/<slice>/claims.py`` (``CLAIMS``, the per-run
tables they read, ``READS``, and the facts of the config run they need, ``facts``); the
verdict machinery is ``sparselen.statistics.verdicts`` and the statistics ``sparselen.statistics.stats``. Adding a
claim touches its slice's claims module and docs/reconstruction.md only.
"""

from __future__ import annotations

import importlib
from dataclasses import fields
from types import SimpleNamespace

import numpy as np
import pandas as pd

from sparselen.interface.config import SLICES
from sparselen.report.answer import NOT_DECIDABLE, answer, brief, deciding, number, state, to_decide, verdict_words
from sparselen.report.framing import tag
from sparselen.report.headline import headline
from sparselen.statistics.stats import Resampling
from sparselen.statistics.verdicts import (FAILS, HOLDS, INCONCLUSIVE, NOT_RUN, Result, Settings, combine, stability,
                                           units_of)


def slice_claims(name: str):
    """The claims module of slice ``name``."""
    return importlib.import_module(f"sparselen.{name}.claims")


CLAIMS = tuple(c for name in SLICES for c in slice_claims(name).CLAIMS)


class _Facts(dict):
    """A slice's facts for a criterion's placeholders; a slice that did not run has none, and
    its criterion keeps the placeholder's name."""

    def __missing__(self, key: str) -> str:
        return f"<{key}>"


def check(data: dict, resampling: Resampling, facts: dict, claims=CLAIMS, designs: dict | None = None,
          gaps: dict | None = None, rates: dict | None = None) -> pd.DataFrame:
    """One row per (claim, group) plus one ``group == "all"`` row per claim with its verdict,
    reason, groups tested, stability and the figure that shows the evidence. ``data`` maps a
    slice to its tables by name (its claims module's ``READS``); absent: the slice was not run.
    ``facts`` maps a slice to its claims module's ``facts`` of the config run (a criterion's
    placeholders are filled in from them). ``designs`` maps a claim to the shipped configs whose
    design can decide it (``decidable_on``: their names, or as ``report.decides.deciders``
    words them); ``gaps`` maps a claim to what the config run lacks to decide it
    (``design_gaps``; "" or absent: nothing). The ``all`` rows also carry the claim's ``state``,
    its ``power`` at this config's sizes (``rates``, per claim its ``error_rates``), the cells of
    the report's answer table (``said``, ``number``, ``to_decide``), its ``answer`` in plain
    words (``sparselen.report.answer``; the error rates end it), the terminal's ``brief``,
    ``units``, the seeds (documents) behind its intervals, and ``decided``, its verdict before
    the stability check."""
    rows = []
    for c in claims:
        table = data.get(c.slice)
        settings = Settings(resampling.n_boot, resampling.seed, resampling.level, facts.get(c.slice, {}))
        base = {"claim": c.id, "slice": c.slice, "statement": c.statement, "quote": c.quote,
                "criterion": c.criterion.format_map(_Facts(settings.facts)), "figure": c.figure,
                "decidable_on": " | ".join((designs or {}).get(c.id, [])), "design": (gaps or {}).get(c.id, "")}
        if table is None:
            reason = f"the {c.slice} slice was not run"
            rows.append({**base, "group": "all", "verdict": NOT_RUN, "reason": reason, "stability": np.nan,
                         "resampled": "", "state": NOT_RUN, "answer": reason, "brief": reason, "said": NOT_RUN,
                         "number": "", "to_decide": "a config that runs this slice (every shipped one does)",
                         "tag": tag(c.slice, pd.DataFrame(columns=["group", "tested", "control"]))})
            continue
        results = c.test(table, settings)
        d = combine(results)
        verdict, reason = d.verdict, d.reason
        st = stability(c, table, settings, verdict)
        if unstable := st.reason(verdict):
            verdict, reason = INCONCLUSIVE, f"{unstable}; {reason}"
        resolve = "; ".join(dict.fromkeys(r.resolve for r in results if r.resolve and r.verdict != HOLDS
                                          and not r.control))
        if reason.startswith("unstable"):
            resolve = "; ".join(filter(None, ["more seeds (a second seed set: seed_offset)", resolve]))
        head = [r for r in results if not r.control]
        head = head[0] if len(head) == 1 else None
        n = len(units_of(table, c.unit))
        power = ((rates or {}).get(c.id) or {}).get("power_value")
        row = {**base, "group": "all", "verdict": verdict, "reason": reason, "resolve": resolve,
               "groups_tested": f"{d.tested} of {d.groups}", "stability": st.share, "resampled": st.how,
               "value": head.value if head else np.nan, "ci_low": head.ci_low if head else np.nan,
               "ci_high": head.ci_high if head else np.nan, "units": _units(n, c.unit),
               "decided": d.verdict, "unit": c.unit, "state": state(verdict, base["design"]),
               "power": np.nan if power is None else power}
        groups = pd.DataFrame([r.__dict__ for r in results], columns=[f.name for f in fields(Result)])
        said = SimpleNamespace(**row)
        row |= {"said": verdict_words(said, groups), "number": number(said, groups), "to_decide": to_decide(said),
                "answer": answer(said, groups, row["units"])}
        numbers = _headline(c.id, table, settings, groups, row)
        row["brief"] = brief(said, groups, numbers)
        if numbers:
            row["answer"] = f"{numbers}: {row['answer']}"
        named = row["state"] == NOT_DECIDABLE and "power" in row["design"]  # the reason gives the power
        row["answer"] = with_rates(row["answer"], (rates or {}).get(c.id), power=not named)
        row["tag"] = tag(c.slice, groups)
        rows.append(row)
        rows.extend({**base, **r.__dict__} for r in results)
    return pd.DataFrame(rows)


def _headline(claim: str, table: dict, settings: Settings, groups: pd.DataFrame, row: dict) -> str | None:
    """The absolute numbers of a claim decided on a tested group (``sparselen.report.headline``)."""
    r = deciding(groups, row["decided"])
    if r is None or not r.tested or row["state"] not in (HOLDS, FAILS, INCONCLUSIVE):
        return None
    return headline(claim, table, settings, r.group)


def _units(n: int, unit: str) -> str:
    """"8 seeds run": the seeds trained, of which the fitted ones count (each group's reason
    says how many); documents are all analysed."""
    return f"{n} {unit}{'s' * (n != 1)}" + (" run" if unit == "seed" else "")


def design_gaps(sections: dict, claims=CLAIMS) -> dict:
    """Per claim of a slice in ``sections`` (slice -> its validated config section), what this
    config's design lacks to decide it ("" when nothing)."""
    return {c.id: c.design(sections[c.slice]) for c in claims if c.slice in sections}


def error_rates(sections: dict, claims=CLAIMS, table: dict | None = None) -> dict:
    """Per claim of a slice in ``sections`` (slice -> its validated config section), its error
    rates at this config's sizes, worded: the calibration's false "holds" (``calibration.rates``)
    and the power at the measured effect (none where no spread was measured), and that power as
    a number (``power_value``, None without a spread: what the answer table and the terminal
    read)."""
    from sparselen.statistics import rates as cr

    table = cr.load() if table is None else table
    out = {}
    for c in claims:
        if c.slice in sections:
            section = sections[c.slice]
            p = c.power(section) if c.power else None
            out[c.id] = {"false_holds": cr.false_holds(table, c.id, cr.slice_sizes(c.slice, section)),
                         "power": cr.power_text(p, _basis(c.id)), "power_value": p}
    return out


def _basis(claim: str) -> str:
    from sparselen.statistics.power import SPREADS

    return "assumed" if claim in SPREADS and SPREADS[claim].assumed else "measured"


def with_rates(answer: str, rates: dict | None, power: bool = True) -> str:
    """The answer line, then its error rates as a sentence (without the power where the line
    already gives it)."""
    if not rates:
        return answer
    parts = [rates["false_holds"]] + ([rates["power"]] if power else [])
    return f"{str(answer).rstrip('.')}. Error rates: {'; '.join(parts)}"


def fmt_value(r) -> str:
    """A group's value with its interval: ``-0.90 [-1.00, -0.70]`` (empty when not measured)."""
    if pd.isna(r.value):
        return ""
    ci = "" if pd.isna(r.ci_low) else f" [{r.ci_low:.2f}, {r.ci_high:.2f}]"
    return f"{r.value:.2f}{ci}"

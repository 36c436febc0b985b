"""paper.yaml's registered analysis plan: the code matches it, and a report whose criteria
differ from it says so in its first lines."""

from __future__ import annotations

import json

import pandas as pd

from sparselen.report import registration as reg
from sparselen.report.render import scope_lines


def test_the_code_decides_as_registered():
    """A criterion, gate or verdict code that departs from configs/registration/paper.json fails
    here: a revision is its own commit (--write) recorded in "History of the criteria"."""
    registered, now = reg.load(), reg.current()
    assert reg.differences(registered, now) == [] and reg.design_differences(registered, now) == [], (
        reg.differences(registered, now) + reg.design_differences(registered, now))
    assert set(registered["criteria"]["claims"]) == {"P1", "P2", "P3", "C1", "C2", "L1", "L2", "T1", "T2"}
    sizes = registered["design"]["sizes"]
    assert sizes["parity"]["seeds"] == 277 and sizes["theory"]["sfa_seeds"] == 32
    assert registered["design"]["stopping"] == reg.STOPPING
    assert registered["design"]["rounds"] == {"parity": {"size": 56, "max": 5}, "ppc": {"size": 36, "max": 4}}


def test_a_report_on_revised_criteria_opens_with_the_difference(tmp_path):
    plan = reg.load()
    plan["criteria"]["claims"]["P2"]["constants"]["RETAINED"] = 0.4  # a threshold moved
    plan["criteria"]["claims"]["T2"]["criterion"] = "another test"  # its words
    plan["criteria"]["verdicts"]["FIT"] = 0.95  # a gate of every claim
    (tmp_path / "p.json").write_text(json.dumps(plan))
    line = reg.report_line(tmp_path / "p.json")
    assert line.startswith("**The criteria differ from those registered for configs/paper.yaml**")
    assert "P2: RETAINED 0.4 -> 0.5" in line and "T2: criterion" in line and "FIT 0.95 -> 0.9" in line
    claims = pd.DataFrame([{"claim": "P1", "group": "all", "state": "inconclusive", "registration": line}])
    assert scope_lines(claims)[0] == line
    # code alone (same words and numbers) is a difference too
    plan = reg.load()
    plan["criteria"]["code"] = "0" * 16
    (tmp_path / "q.json").write_text(json.dumps(plan))
    assert "the code that computes the verdicts" in reg.report_line(tmp_path / "q.json")
    # as registered: said after the note on which criteria came after results, not first
    same = reg.report_line()
    assert same.startswith("The criteria are those registered")
    lines = scope_lines(claims.assign(registration=same))
    assert lines[0].startswith("This run decided") and any(same in x for x in lines)
    assert reg.main(["--check"]) == 0

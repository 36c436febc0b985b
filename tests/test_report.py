"""The reproduction report: claims on hand-made tables with known verdicts, hyperparameter
tags, the ledger from hand-made benchmark files and the rendered report."""

import json

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT
from sparselen.jobs import Job, run
from sparselen.report import claims as cl
from sparselen.report import hyperparams, ledger, render
from sparselen.stats import Resampling, spearman
from sparselen.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_RUN, STABILITY_REPLICATES, UNSTABLE

RES = Resampling(n_boot=400, seed=1)
FACTS = {"parity": {"train_lengths": (20, 20)},
         "ppc": {"train_sizes": {"copy_repeat": [2, 4], "variable_assignment": [2, 4]},
                 "input_dependent": ("variable_assignment",)},
         "language": {"sparse_share": 0.9}, "theory": {"floor": 1e-6}}


def check(data: dict) -> pd.DataFrame:
    """The claims on hand-made tables: a slice's per-run table as its ``evals`` (the language
    slice's dict of per-token tables as it is)."""
    return cl.check({name: t if isinstance(t, dict) else {"evals": t} for name, t in data.items()}, RES, FACTS)


def parity_runs(acc, seeds=(0, 1, 2), n=400, lengths=(20, 100), K_train=(4,)):
    """Per-run eval rows; ``acc(K, k, length, seed)`` is the exact accuracy of a cell."""
    rows = []
    for K in K_train:
        for seed in seeds:
            for length in lengths:
                for k in (1, 2, 3, 4, 6):
                    a = acc(K, k, length, seed)
                    rows.append({"K_train": K, "seed": seed, "scheme": "pose", "k_test": k, "length": length,
                                 "n": n, "correct": round(a * n), "accuracy": round(a * n) / n})
    return pd.DataFrame(rows)


def sparse_wins(K, k, length, seed):
    """In distribution everything k <= K is learned; beyond it, accuracy falls with k."""
    if k > K:
        return 0.5
    return 0.99 if length <= 20 else max(0.5, 0.99 - 0.04 * k)


def head(table, claim):
    return table[(table["claim"] == claim) & (table["group"] == "all")].iloc[0]


def verdict(table, claim):
    return head(table, claim)["verdict"]


def group(table, claim, name):
    return table[(table["claim"] == claim) & (table["group"] == name)].iloc[0]


def test_parity_claims_hold_on_a_table_where_they_hold():
    t = check({"parity": parity_runs(sparse_wins)})
    assert [verdict(t, c) for c in ("P1", "P2", "P3")] == [HOLDS] * 3
    p1 = group(t, "P1", "K_train=4")
    assert p1["value"] < -0.9 and p1["ci_low"] <= p1["value"] <= p1["ci_high"] < 0
    assert "k_test [1, 2, 3, 4]" in p1["reason"]  # k_test = 6 > K_train is not ranked
    assert head(t, "P1")["stability"] == 0 and head(t, "P1")["resamples"] == 3 + STABILITY_REPLICATES
    assert head(t, "P1")["figure"] == "parity"


def test_parity_claims_fail_on_a_table_where_they_fail():
    """Accuracy at the longest length rises with k_test: every ordering claim fails, and a
    trained sparsity that falls to chance fails P2."""
    reversed_ = parity_runs(lambda K, k, L, s: 0.5 if k > K else (0.99 if L <= 20 else 0.55 + 0.1 * k))
    t = check({"parity": reversed_})
    assert verdict(t, "P1") == FAILS and verdict(t, "P3") == FAILS
    assert "K_train=4 does not hold" in head(t, "P1")["reason"]
    at_chance = parity_runs(lambda K, k, L, s: 0.5 if k > K else (0.99 if L <= 20 else 0.52))
    assert verdict(check({"parity": at_chance}), "P2") == FAILS


def test_only_k1_cells_are_inconclusive_not_a_verdict():
    """K_train = 1: a single trained sparsity cannot be ranked."""
    t = check({"parity": parity_runs(sparse_wins, K_train=(1,))})
    for claim in ("P1", "P3"):
        assert verdict(t, claim) == INCONCLUSIVE
        assert "1 fitted k_test <= K_train (a rank needs 3)" in head(t, claim)["reason"]
        assert "K_train >= 3" in head(t, claim)["resolve"]


def test_a_sparsity_not_learned_in_distribution_is_left_out_and_named():
    """k_test = 4 stays at 0.8 in distribution in every seed: no evidence about its length
    generalization; P2 (which tests k_test = K_train) is inconclusive, P1 ranks the rest."""
    def weak_k4(K, k, L, s):
        return 0.8 if k == 4 and L <= 20 else sparse_wins(K, k, L, s)

    t = check({"parity": parity_runs(weak_k4)})
    assert verdict(t, "P2") == INCONCLUSIVE
    assert "not learned in distribution" in head(t, "P2")["reason"] and "0 of 3 seeds fit" in head(t, "P2")["reason"]
    assert verdict(t, "P1") == HOLDS and "k_test [1, 2, 3]" in group(t, "P1", "K_train=4")["reason"]


def test_a_flip_prone_claim_is_reported_unstable():
    """k_test = 3 = K_train is learned by two seeds of three: the full data ranks three fitted
    cells and P1 holds, but leaving either of those seeds out leaves k_test = 3 with one fitted
    run and the rank with two cells; so the verdict changes in most resamples."""
    def two_seeds_learn_k3(K, k, L, s):
        return 0.8 if k == 3 and s == 2 and L <= 20 else sparse_wins(K, k, L, s)

    t = check({"parity": parity_runs(two_seeds_learn_k3, K_train=(3,))})
    h = head(t, "P1")
    assert h["verdict"] == INCONCLUSIVE and h["reason"].startswith("unstable: the verdict (holds) changes in")
    assert h["stability"] > UNSTABLE and "seed_offset" in h["resolve"]
    assert group(t, "P1", "K_train=3")["verdict"] == HOLDS  # the full data alone would have said holds


def test_one_failing_group_fails_the_claim_and_missing_slices_are_not_run():
    def mixed(K, k, L, s):  # K_train=4 holds; for K_train=6 the longest length is at chance
        return sparse_wins(K, k, L, s) if K == 4 else (0.99 if L <= 20 else 0.5)

    t = check({"parity": parity_runs(mixed, K_train=(4, 6))})
    assert group(t, "P2", "K_train=4")["verdict"] == HOLDS
    assert group(t, "P2", "K_train=6")["verdict"] == FAILS and verdict(t, "P2") == FAILS
    t = check({})
    assert set(t["verdict"]) == {NOT_RUN}


def test_bootstrap_interval_reflects_seed_spread():
    """Seeds that disagree widen the interval: one seed at chance, one perfect."""
    noisy = parity_runs(lambda K, k, L, s: 0.6 if s == 0 and L > 20 and k <= K else sparse_wins(K, k, L, s),
                        seeds=(0, 1))
    steady = parity_runs(sparse_wins, seeds=(0, 1))
    width = {}
    for name, runs in (("noisy", noisy), ("steady", steady)):
        row = group(check({"parity": runs}), "P2", "K_train=4")
        width[name] = row["ci_high"] - row["ci_low"]
    assert width["noisy"] > 3 * width["steady"]


def test_same_seed_same_intervals():
    runs = parity_runs(sparse_wins)
    a, b = check({"parity": runs}), check({"parity": runs})
    pd.testing.assert_frame_equal(a, b)


def ppc_runs(acc, tasks=("variable_assignment", "copy_repeat"), schemes=("nope", "rope", "coupled", "ppc")):
    """``acc(task, scheme, size)``: training sizes 2 and 4, test size 16."""
    rows = []
    for task in tasks:
        for scheme in schemes:
            for seed in (0, 1, 2):
                for size in (2, 4, 16):
                    a = acc(task, scheme, size)
                    rows.append({"task": task, "scheme": scheme, "seed": seed, "size": size, "n": 200,
                                 "correct": round(a * 200), "accuracy": round(a * 200) / 200})
    return pd.DataFrame(rows)


def coupling_helps(task, scheme, size):
    if size <= 4:
        return 0.99
    return {"nope": 0.0, "rope": 0.1, "coupled": 0.95, "ppc": 0.9}[scheme]


def test_ppc_claims_hold_where_coupling_and_prediction_help():
    t = check({"ppc": ppc_runs(coupling_helps)})
    assert verdict(t, "C1") == HOLDS and verdict(t, "C2") == HOLDS
    assert set(t[t["claim"] == "C2"]["group"]) == {"all", "variable_assignment"}  # ids fixed by length elsewhere


def test_a_baseline_that_never_learned_makes_the_claim_inconclusive_not_true():
    """Baselines at 0 even on the training sizes say nothing about length: C1 is not 'holds'."""
    never = ppc_runs(lambda task, scheme, size: coupling_helps(task, scheme, 16 if scheme in ("nope", "rope")
                                                                  else size))
    t = check({"ppc": never})
    assert verdict(t, "C1") == INCONCLUSIVE
    row = group(t, "C1", "copy_repeat")
    assert "no baseline fit its training sizes (nope 0/3, rope 0/3)" in row["reason"]
    assert "baselines until they fit" in row["resolve"]


def test_ppc_below_the_best_baseline_fails_and_a_task_without_coupling_benefit_is_a_control():
    worse = ppc_runs(lambda task, scheme, size: 0.99 if size <= 4 else {"nope": 0.0, "rope": 0.6, "coupled": 0.95,
                                                                         "ppc": 0.3}[scheme])
    t = check({"ppc": worse})
    assert verdict(t, "C2") == FAILS
    content = ppc_runs(lambda task, scheme, size: 0.99 if size <= 4 else {"nope": 0.2, "rope": 0.9, "coupled": 0.9,
                                                                           "ppc": 0.5}[scheme])
    row = group(check({"ppc": content}), "C2", "variable_assignment")
    assert row["verdict"] == INCONCLUSIVE and "a control" in row["reason"]


def test_spearman():
    x = np.array([1.0, 2, 3, 4])
    assert spearman(x, np.array([4.0, 3, 2, 1])) == pytest.approx(-1)
    assert spearman(x, np.array([1.0, 1, 1, 1])) == 0
    both = spearman(x, np.array([[1.0, 4], [2, 3], [3, 2], [4, 1]]))
    assert both == pytest.approx([1, -1])
    assert np.isnan(spearman(x, np.array([1.0, np.nan, 2, 3])))


def test_every_claim_quotes_the_paper_and_states_a_criterion():
    ids = [c.id for c in cl.CLAIMS]
    assert len(ids) == len(set(ids))
    doc = (ROOT / "docs/reconstruction.md").read_text().replace("\n> ", " ").replace("\n", " ")
    for c in cl.CLAIMS:
        assert c.criterion and c.slice in render.SECTIONS
        assert c.quote in doc, f"{c.id}: its quote is not in docs/reconstruction.md"
        assert f"### {c.id}:" in doc


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


def fake_run(results, slice_, tok_s, params):
    run = results / slice_ / "run0"
    run.mkdir(parents=True)
    pd.DataFrame({"step": [1, 2, 3], "tokens_per_s": [1.0, tok_s, tok_s]}).to_csv(run / "train_log.csv", index=False)
    (run / "train_summary.json").write_text(json.dumps({"parameters": params}))



# ----------------------------------------------------------------------------- the report


def test_rendered_report(tmp_path):
    out = tmp_path / "results/report"
    claims = check({"parity": parity_runs(sparse_wins)})
    out.mkdir(parents=True)
    claims.to_csv(out / "claims.csv", index=False)
    hyperparams.write({"parity": {"K_train": [4]}}, "parity", out / "hp.csv", out / "hp.md")
    write_bench(tmp_path / "results/benchmarks/parity/table.tsv", 2.0, 100.0, 1.5)
    ledger.write(ledger.read_benchmarks(tmp_path / "results/benchmarks"), out / "r.csv", out / "f.csv")
    fig = tmp_path / "results/figures/parity.png"
    fig.parent.mkdir(parents=True)
    fig.write_bytes(b"\x89PNG fake")
    fake_run(tmp_path / "results", "parity", 10.0, 100)
    run(Job.of("report_render", input={
        "claims": str(out / "claims.csv"), "hyperparams": [str(out / "hp.md")], "ledger_rules": str(out / "r.csv"),
        "ledger_figures": str(out / "f.csv"), "slices": [str(fig), str(tmp_path / "results/parity/table.md")],
        "runs": [str(tmp_path / "results/parity/run0/eval.csv")]},
        output={"md": out / "report.md", "html": out / "report.html"}))
    md = (out / "report.md").read_text()
    assert "| P1 " in md and "**holds**" in md and "](../figures/parity.png)" in md
    assert "| parity  |      1 |" in md  # provenance: the one training run beside the given eval file
    ppc = md.split("## Position coupling")[1].split("##")[0]
    assert "not run" in ppc
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html and "<table>" in html and "<h2>Claims</h2>" in html


# ----------------------------------------------------------------------------- language and theory


def language_tables(benefit=0.5, recovered=0.9, null=0.2, sparse_gain=0.8, dense_gain=0.2, docs=30, per_doc=4,
                    planted=0.95):
    """Per-token tables of one analysed model: half the tokens sparse (greedy k = 1 recovers
    ``recovered``), half dense (recovered only at k = 16); a small document-level spread; one
    planted repeat per token whose copy greedy k <= 2 recovers ``planted`` of (None: no repeat
    had a benefit)."""
    rng = np.random.default_rng(0)
    screen, deps, transfer = [], [], []
    for d in range(docs):
        shift = rng.normal(0, 0.05)
        for t in range(per_doc):
            sparse = t % 2 == 0
            b = benefit + shift
            screen.append({"doc": d, "t": t, "benefit": b})
            for method, top in (("greedy", recovered), ("greedy_null", null)):
                for k in (1, 2, 16):
                    r = top if (sparse and method == "greedy") or k == 16 else top * 0.3
                    deps.append({"doc": d, "t": t, "seed": 0, "method": method, "k": k, "recovered": r + shift,
                                 "L_short": 3.0, "L_long": 3.0 - b})
            if planted is not None:
                deps += [{"doc": d, "t": 100 + t, "seed": 0, "method": "greedy_planted", "k": k,
                          "recovered": planted + shift, "L_short": 3.0, "L_long": 2.0} for k in (1, 2)]
            for scheme in ("rope", "pose"):
                g = (sparse_gain if sparse else dense_gain) * b + shift
                transfer.append({"doc": d, "t": t, "seed": 0, "context": 32, "scheme": scheme, "gain": g})
    return {"language": {"screen": pd.DataFrame(screen), "deps": pd.DataFrame(deps),
                         "transfer": pd.DataFrame(transfer)}}


def test_language_claims_on_per_token_tables():
    t = check(language_tables())
    assert verdict(t, "L1") == HOLDS and verdict(t, "L2") == HOLDS
    assert "minus the null control" in head(t, "L1")["reason"] and head(t, "L1")["resamples"] == STABILITY_REPLICATES
    t = check(language_tables(recovered=0.3, null=0.1))
    assert verdict(t, "L1") == FAILS  # recovered well below half of the benefit
    t = check(language_tables(recovered=0.9, null=0.9))
    assert verdict(t, "L1") == INCONCLUSIVE  # no better than the null control


def test_a_failed_positive_control_leaves_greedy_unread():
    for planted, why in ((0.4, "(needs >= 0.9)"), (None, "0 planted repeats with a long-context benefit")):
        t = check(language_tables(planted=planted))
        for claim in ("L1", "L2"):
            assert verdict(t, claim) == INCONCLUSIVE
            assert "positive control" in head(t, claim)["reason"] and why in head(t, claim)["reason"]
            assert "copies from beyond the short window" in head(t, claim)["resolve"]


def test_no_long_context_benefit_makes_the_language_claims_inconclusive():
    t = check(language_tables(benefit=0.0))
    for claim in ("L1", "L2"):
        assert verdict(t, claim) == INCONCLUSIVE
        assert "no long-context benefit to explain" in head(t, claim)["reason"]
        assert "uses its long context" in head(t, claim)["resolve"]
    few = check(language_tables(docs=6))
    assert verdict(few, "L2") == INCONCLUSIVE and "needs 20 each" in head(few, "L2")["reason"]


def theory_runs(acc, loss=lambda dist, ratio: 1e-3 * ratio, ks=(2,)):
    rows = []
    for k in ks:
        for dist in ("local", "nonlocal", "coupled"):
            for seed in (0, 1, 2):
                for ratio in (1, 2, 4, 8):
                    rows.append({"ratio": ratio, "length": 12 * ratio, "n": 256, "log_loss": loss(dist, ratio),
                                 "error": 1 - acc(dist, ratio), "model": "sfa", "distribution": dist, "k": k,
                                 "seed": seed, "n_values": 2})
    return pd.DataFrame(rows)


def test_theory_claims():
    paper_like = theory_runs(lambda d, r: 0.5 if d == "nonlocal" and r > 1 else 0.98)
    t = check({"theory": paper_like})
    assert verdict(t, "T1") == HOLDS and verdict(t, "T2") == HOLDS
    steep = theory_runs(lambda d, r: 0.98, loss=lambda d, r: 1e-4 * r ** 3)
    assert verdict(check({"theory": steep}), "T2") == FAILS  # error grows faster than (Lbar/L)^2
    unfit = theory_runs(lambda d, r: 0.6 if d == "nonlocal" else 0.98)
    row = group(check({"theory": unfit}), "T1", "sfa k=2")
    assert row["verdict"] == INCONCLUSIVE and "nonlocal runs did not fit at Lbar = L (0 of 3)" in row["reason"]
    k1 = check({"theory": theory_runs(lambda d, r: 0.98, ks=(1,))})
    assert verdict(k1, "T1") == INCONCLUSIVE and "k >= 2" in head(k1, "T1")["reason"]
    one_seed = paper_like[paper_like["seed"] == 0]
    row = group(check({"theory": one_seed}), "T2", "sfa k=2")
    assert row["verdict"] == INCONCLUSIVE and "1 local run (a verdict needs 2 fitted)" in row["reason"]
    assert "theory.seeds" in row["resolve"]

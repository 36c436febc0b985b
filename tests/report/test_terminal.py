"""What a run prints: Snakemake's records filtered to one line per finished training (and long
job), a note per failed job, the closing verdict table; training logs without progress bars."""

import logging
import time
from types import SimpleNamespace

import pandas as pd
from snakemake.settings.enums import Quietness
from snakemake_interface_logger_plugins.common import LogEvent
from specs import PARAMS

from sparselen.interface.job import Job
from sparselen.jobs.dispatch import run
from sparselen.report import terminal
from sparselen.report.answer import NOT_DECIDABLE


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def workflow(quiet=(Quietness.RULES,), dryrun=False):
    """A stand-in for Snakemake's workflow object (``quiet`` None: no --quiet given)."""
    rules = {"parity_train": ["results/parity/K{K_train}/seed{seed}/train_summary.json", "model.pt"],
             "parity_table": ["results/parity/table.csv"], "language_analyze": ["results/language/deps.csv"]}
    return SimpleNamespace(is_main_process=True, dryrun=dryrun,
                           output_settings=SimpleNamespace(quiet=None if quiet is None else set(quiet)),
                           get_rule=lambda name: SimpleNamespace(output=rules[name]))


def record(msg, **extra):
    r = logging.LogRecord("snakemake.logging", logging.INFO, __file__, 1, msg, None, None)
    r.__dict__.update(extra)
    return r


def feed(t: terminal.Terminal, clock: Clock, capsys):
    """A run of three jobs: a training of 83 s, a table of 2 s, an analysis of 5 min."""
    kept = [t.filter(record("Assuming unrestricted shared filesystem usage.")),
            t.filter(record("Building DAG of jobs...")),
            t.filter(record("Job stats: ...", event=LogEvent.RUN_INFO,
                            stats={"parity_train": 1, "parity_table": 1, "language_analyze": 1, "total": 3})),
            t.filter(record("Select jobs to execute...")),
            t.filter(record("Execute 1 jobs...", event=LogEvent.JOB_STARTED, jobs=[1]))]
    for jobid, rule, wildcards, took in ((1, "parity_train", {"K_train": "2", "seed": "0"}, 83),
                                         (2, "parity_table", {}, 2), (3, "language_analyze", {}, 300)):
        kept.append(t.filter(record(" Rule: x", event=LogEvent.JOB_INFO, jobid=jobid, rule_name=rule,
                                    wildcards=wildcards)))
        clock.now += took
        kept += [t.filter(record(f"Finished jobid: {jobid}", event=LogEvent.JOB_FINISHED, job_id=jobid)),
                 t.filter(record(None, event=LogEvent.PROGRESS, done=jobid, total=3))]
    return kept, capsys.readouterr().err.splitlines()


def test_one_line_per_training_and_long_job_and_nothing_of_the_scheduler(capsys):
    clock = Clock()
    t = terminal.Terminal(workflow(), clock)
    kept, lines = feed(t, clock, capsys)
    assert lines == ["sparselen: 3 jobs to run, 1 of them trainings; a line for each finished training and each "
                     "job of 60 s or more, and one at least every 2 minutes. Each job's log is under logs/.",
                     "[1/3, 0:01:23 elapsed, about 0:02:46 left] trained parity_train K_train=2, seed=0 in 0:01:23",
                     "[3/3, 0:06:25 elapsed] finished language_analyze in 0:05:00"]
    # only "Building DAG of jobs..." and the job blocks (which Snakemake's --quiet rules drops) pass on
    assert kept == [False, True, False, False, False, True, False, False, True, False, False, True, False, False]


def test_a_failed_job_names_its_log(capsys):
    t = terminal.Terminal(workflow(), Clock())
    t.filter(record(" Rule: x", event=LogEvent.JOB_INFO, jobid=4, rule_name="parity_train",
                    wildcards={"K_train": "2", "seed": "1"}))
    assert t.filter(record("Error in rule parity_train", event=LogEvent.JOB_ERROR, jobid=4,
                           rule_name="parity_train", log=["logs/parity/train/K2_seed1.log"]))
    assert capsys.readouterr().err == "FAILED parity_train K_train=2, seed=1: see logs/parity/train/K2_seed1.log\n"
    t.filter(record("Error in group model", event=LogEvent.GROUP_ERROR, groupid="model",
                    aux_logs=["logs/slurm/model/123.log"]))
    assert capsys.readouterr().err == "FAILED group model: see logs/slurm/model/123.log\n"


def test_dry_runs_and_loud_runs_are_left_to_snakemake(capsys):
    for wf in (workflow(dryrun=True), workflow(quiet=(Quietness.HOST,)), workflow(quiet=None)):
        kept, lines = feed(terminal.Terminal(wf, Clock()), Clock(), capsys)
        assert all(kept) and lines == []


L1_REASON = ("no group could be tested: benefit not tested: no long-context benefit to explain: mean L_short - "
             "L_long = 0.001 [-0.001, 0.004] nats; positive control not tested: 3 usable planted repeats (needs 20)")


def claims_table() -> pd.DataFrame:
    rows = [("P1", NOT_DECIDABLE, "Sparser tasks length-generalize better.", "paper's task",
             "2 seeds per group (a stable verdict needs 4): run configs/paper.yaml"),
            ("C1", "holds", "Position coupling generalizes where plain positions do not.", "our task",
             "coupled position ids score +100 points of exact match over the best baseline"),
            ("L1", "inconclusive", "A few distant tokens carry the long-context benefit.", "paper's task", L1_REASON)]
    heads = pd.DataFrame([{"claim": c, "group": "all", "state": s, "statement": st, "tag": tag, "answer": a}
                          for c, s, st, tag, a in rows])
    return pd.concat([heads, heads.assign(group="K_train=2")], ignore_index=True)


def test_the_run_ends_with_the_verdicts_the_wall_time_and_the_report(tmp_path):
    clock = Clock()
    t = terminal.Terminal(workflow(), clock)
    (tmp_path / "results/report").mkdir(parents=True)
    claims_table().to_csv(tmp_path / terminal.CLAIMS_CSV, index=False)
    (tmp_path / terminal.REPORT_HTML).write_text("<html>")
    clock.now = 1500.0
    lines = t.summary(tmp_path)
    assert lines[2:4] == ["  P1  not decidable on this config [paper's task]: Sparser tasks length-generalize better.",
                          "      2 seeds per group (a stable verdict needs 4): run configs/paper.yaml"]
    assert lines[4] == "  C1  holds [our task]: Position coupling generalizes where plain positions do not."
    assert lines[5].startswith("      coupled position ids")
    # a long reason is cut at a clause, under the width
    assert lines[7].startswith("      no group could be tested: benefit not tested") and lines[7].endswith(" ...")
    assert max(map(len, lines[:-2])) <= terminal.WIDTH  # the last: the report's full path
    assert lines[8].startswith("1 holds, 1 inconclusive, 1 not decidable on this config.")
    assert "How each claim was decided" in lines[9] and str(terminal.REPORT_HTML) in lines[9]
    assert lines[-2:] == ["Wall time 0:25:00.", f"Report: {(tmp_path / terminal.REPORT_HTML).resolve()} (also .md)"]
    # after the summary Snakemake's own closing lines are dropped
    assert not t.filter(record("Elapsed time: 0:25:00.1"))


def test_a_long_statement_wraps_under_the_width():
    from types import SimpleNamespace as Head

    head = Head(claim="T2", state=NOT_DECIDABLE, tag="our model of the theory", brief="x" * 100,
                statement="Local sparse planted correlations generalize with error growing at most like (Lbar/L)^2.")
    lines = terminal.verdict_lines(head)
    assert len(lines) == 3 and max(map(len, lines)) <= terminal.WIDTH and lines[1].startswith(terminal.INDENT)
    assert " ".join(" ".join(lines[:2]).split()).endswith(head.statement)


def test_a_claims_table_left_by_an_earlier_run_is_not_shown(tmp_path):
    t = terminal.Terminal(workflow(), time.monotonic)
    (tmp_path / "results/report").mkdir(parents=True)
    path = tmp_path / terminal.CLAIMS_CSV
    claims_table().to_csv(path, index=False)
    old = time.time() - 3600
    import os

    os.utime(path, (old, old))
    assert t.summary(tmp_path)[0].startswith("Wall time")


def test_training_logs_have_no_carriage_returns(tmp_path):
    log = tmp_path / "train.log"
    params = {**PARAMS, "train": {**PARAMS["train"], "steps": 20}, "checkpoint": str(tmp_path / "ckpt.pt")}
    job = Job.of("parity_train", wildcards={"K_train": 2, "seed": 0}, params=params,
                 output={"model": str(tmp_path / "model.pt"), "log_csv": str(tmp_path / "log.csv"),
                         "summary": str(tmp_path / "summary.json")})
    job.log = [str(log)]
    run(job)
    text = log.read_text()
    assert "\r" not in text and "step 20/20 loss" in text


def test_the_smoke_run_prints_a_line_per_training_and_ends_with_the_verdicts(smoke_run):
    from conftest import TERMINAL

    lines = (smoke_run / TERMINAL).read_text().splitlines()
    trainings = len(list((smoke_run / "results").rglob(terminal.RUN_FILE)))
    header = next(line for line in lines if line.startswith("sparselen: "))
    assert header.endswith("Each job's log is under logs/.") and f", {trainings} of them trainings;" in header
    trained = [line for line in lines if " trained " in line and line.startswith("[")]
    assert len(trained) == trainings and all(line.split(" in ")[-1].count(":") == 2 for line in trained)
    assert not [line for line in lines if line.startswith(("Select jobs", "Execute ", "rule ", "localrule "))
                or "steps (" in line]
    table = lines[lines.index("The paper's claims on this run:") + 1:]
    heads = [line.split()[0] for line in table if line.startswith("  ") and not line.startswith(terminal.INDENT)]
    assert heads == ["P1", "P2", "P3", "C1", "C2", "L1", "L2", "T1", "T2"]
    assert max(len(line) for line in table if not line.startswith("Report: ")) <= terminal.WIDTH
    assert lines[-2].startswith("Wall time ") and lines[-1].startswith("Report: ")
    assert len(lines) < 40 + trainings


def test_a_claim_nothing_could_test_names_what_binds_before_the_design():
    from sparselen.report.answer import BRIEF, answer, brief

    groups = pd.DataFrame({"group": ["K_train=2", "K_train=3"], "tested": [False, False], "control": [False, False],
                           "reason": ["2 fitted k_test <= K_train [1, 2] (a rank needs 3 cells)",
                                      "k_test=3: 1 of 3 seeds fit, " + "left out " * 20],
                           "verdict": ["inconclusive"] * 2})
    head = SimpleNamespace(claim="P1", state=NOT_DECIDABLE, design="3 seeds per group (a stable verdict needs 4)",
                           decidable_on="paper.yaml", reason="no group could be tested", decided="inconclusive")
    short = brief(head, groups)
    # the design first, whole; then the gates, cut to fit
    assert short.startswith("3 seeds per group (a stable verdict needs 4); not tested: K_train=2: 2 fitted k_test")
    assert len(short) <= BRIEF and short.endswith(" ...")
    full = answer(head, groups, "3 seeds run")
    assert full.startswith("nothing could be tested: K_train=2: 2 fitted") and "K_train=3: k_test=3: 1 of 3" in full
    assert full.endswith("by design, 3 seeds per group (a stable verdict needs 4): run configs/paper.yaml")
    head.design = "needs about 33 seeds per K_train " + "and more " * 6 + "for 80% power; this config runs 3 (0% power)"
    head.power = 0.0
    short = brief(head, groups)  # a reason longer than the brief is kept whole, its details left out
    assert short == head.design and len(short) > BRIEF


def test_time_left_prices_each_pending_job_at_its_rules_pace(capsys):
    clock = Clock()
    t = terminal.Terminal(workflow(), clock)
    t.filter(record("Job stats", event=LogEvent.RUN_INFO, stats={"parity_train": 3, "parity_table": 1, "total": 4}))
    for jobid, rule, took in ((1, "parity_table", 2), (2, "parity_train", 100)):
        t.filter(record(" Rule: x", event=LogEvent.JOB_INFO, jobid=jobid, rule_name=rule, wildcards={}))
        clock.now += took
        t.filter(record("", event=LogEvent.JOB_FINISHED, job_id=jobid))
    # two trainings left at 100 s each, one at a time so far: not (102 s / 2 jobs) x 2
    assert capsys.readouterr().err.splitlines()[-1] == ("[2/4, 0:01:42 elapsed, about 0:03:20 left] trained "
                                                       "parity_train in 0:01:40")
    # two at a time: the same work, half the wall time
    t.started = clock.now - 51
    assert t.progress() == "2/4, 0:00:51 elapsed, about 0:01:40 left"


def test_a_checkpoint_that_adds_jobs_is_counted(capsys):
    """A round's decision (a checkpoint) adds the next round's trainings: the count after
    Snakemake's "Updating checkpoint dependencies." is the DAG's, finished and still to run,
    and the time left prices the new ones."""
    clock = Clock()
    wf = workflow()
    t = terminal.Terminal(wf, clock)
    t.filter(record("Job stats", event=LogEvent.RUN_INFO, stats={"parity_train": 1, "parity_table": 1, "total": 2}))
    for jobid, rule in ((1, "parity_train"), (2, "parity_table")):
        t.filter(record(" Rule: x", event=LogEvent.JOB_INFO, jobid=jobid, rule_name=rule, wildcards={}))
        clock.now += 10
        t.filter(record("", event=LogEvent.JOB_FINISHED, job_id=jobid))

    def job(rule):
        return SimpleNamespace(rule=SimpleNamespace(name=rule))

    # the decision ran (finished) and added two trainings, one of them running
    wf.dag = SimpleNamespace(finished_jobs=[job("parity_train"), job("parity_table")],
                             needrun_jobs=lambda: [job("parity_train"), job("parity_train")])
    assert t.filter(record("Updating checkpoint dependencies.")) is True  # Snakemake's line stays
    t.filter(record(" Rule: x", event=LogEvent.JOB_INFO, jobid=3, rule_name="parity_train", wildcards={}))
    clock.now += 10
    wf.dag.finished_jobs.append(job("parity_train"))
    wf.dag.needrun_jobs = lambda: [job("parity_train")]
    t.filter(record("", event=LogEvent.JOB_FINISHED, job_id=3))
    assert capsys.readouterr().err.splitlines()[-1] == ("[3/4, 0:00:30 elapsed, about 0:00:10 left] trained "
                                                       "parity_train in 0:00:10")


def test_a_rule_with_no_finished_job_is_priced_by_the_estimate_at_the_runs_measured_pace(capsys):
    """Sixty evaluations of seconds each and one long training pending: the training is not
    priced at the evaluations' mean but at the estimate's prediction for it, scaled by how the
    finished evaluations compared with theirs (here twice as slow)."""
    clock = Clock()
    prices = {"parity_table": 1.0, "parity_train": 300.0}
    t = terminal.Terminal(workflow(), clock, price=lambda wf: prices)
    t.filter(record("Job stats", event=LogEvent.RUN_INFO, stats={"parity_table": 2, "parity_train": 1, "total": 3}))
    t.filter(record(" Rule: x", event=LogEvent.JOB_INFO, jobid=1, rule_name="parity_table", wildcards={}))
    clock.now += 2
    t.filter(record("", event=LogEvent.JOB_FINISHED, job_id=1))
    # one table at its measured 2 s, the training at 300 s x 2
    assert t.time_left(clock.now - t.started) == 2 + 600
    t.price = lambda wf: 1 / 0  # a price that fails: the finished jobs' mean, as without one
    assert t.prices() == {}


def test_a_line_at_least_every_quiet_interval_while_jobs_run(capsys):
    clock = Clock()
    t = terminal.Terminal(workflow(), clock)
    t.filter(record("Job stats", event=LogEvent.RUN_INFO, stats={"language_analyze": 2, "total": 2}))
    t.filter(record(" Rule: x", event=LogEvent.JOB_INFO, jobid=1, rule_name="language_analyze", wildcards={}))
    capsys.readouterr()
    clock.now += terminal.QUIET_S - 1
    t.beat()
    assert capsys.readouterr().err == ""
    clock.now += 1
    t.beat()
    assert capsys.readouterr().err.strip() == "[0/2, 0:02:00 elapsed] running: language_analyze"
    t.beat()  # just printed: quiet again
    assert capsys.readouterr().err == ""

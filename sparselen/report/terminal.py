"""What a run prints on the terminal: a line that says how many jobs and trainings it runs and
where their logs are, one line per finished training (and per other job of a minute or more)
with its time, the run's elapsed time and a rough time left (``time_left``), a line with the
jobs running when nothing was printed for ``QUIET_S``, a one-line note per failed job
naming its log, and at the end the verdicts of the paper's claims (each with its statement and
its reason in brief), the wall time and the report's path.

Snakemake's ``--quiet rules`` (the workflow's default profile, ``profiles/default``) hides its
job blocks; the scheduler's own lines ("Select jobs to execute...", progress counts, the job
table) have no ``--quiet`` option of their own, so ``install`` puts a filter on Snakemake's
logger that drops them and prints the lines above instead. The filter acts only in the main
process of a real run whose quiet settings include ``rules``: dry runs, ``--quiet`` without
``rules`` and the jobs' own Snakemake processes print what Snakemake prints.
"""

from __future__ import annotations

import logging
import os
import sys
import textwrap
import threading
import time
from collections import Counter
from itertools import chain
from pathlib import Path

import pandas as pd

from sparselen.presentation.layout import hms

LONG_JOB_S = 60.0  # a job that is not a training gets its line when it takes at least this long
QUIET_S = 120.0  # while jobs run, a progress line at least this often
RUN_FILE = "train_summary.json"  # every training writes one (sparselen.interface.run.RunFiles)
CLAIMS_CSV = Path("results/report/claims.csv")
REPORT_HTML = Path("results/report/reproduction_report.html")
DROPPED = ("Select jobs to execute...", "Assuming unrestricted shared filesystem usage", "Using shell:",
           "Conda environments:")
AFTER_SUMMARY = ("Complete log(s):", "Elapsed time:")  # the summary says where the report is and how long it took
# a checkpoint's output has added jobs (a round of seeds: workflow/rules/rounds.smk); Snakemake
# states its plan once, at the start
CHECKPOINT_UPDATE = "Updating checkpoint dependencies"


def _out(line: str = "") -> None:
    print(line, file=sys.stderr, flush=True)


class Terminal(logging.Filter):
    """A filter on Snakemake's logger: keeps its records or drops them, and prints this
    module's lines (``workflow``: Snakemake's workflow object; ``clock``: seconds since some
    origin, for tests)."""

    def __init__(self, workflow, clock=time.monotonic, price=None, heartbeat: bool = False):
        super().__init__()
        self.workflow, self.clock, self.price, self.beats = workflow, clock, price, heartbeat
        self.started = clock()
        self.jobs: dict[int, tuple[str, bool, float, str]] = {}  # jobid -> (what, is a training, start, rule)
        self.done = self.total = 0
        self.planned: dict[str, int] = {}  # rule -> jobs of it this run
        self.took: dict[str, list[float]] = {}  # rule -> the finished jobs' times
        self.predicted: dict[str, float] = {}  # rule -> the estimate's seconds per job (``price``)
        self.summarized = False
        self.stale = False  # a checkpoint has changed the DAG since the jobs were counted
        self.printed = clock()  # when this filter last printed a line
        self.heartbeat: threading.Thread | None = None  # started at the run's start where ``beats``

    def say(self, line: str = "") -> None:
        self.printed = self.clock()
        _out(line)

    def active(self) -> bool:
        from snakemake.settings.enums import Quietness

        w = self.workflow
        return w.is_main_process and not w.dryrun and Quietness.RULES in (w.output_settings.quiet or ())

    def training_rule(self, name: str) -> bool:
        try:
            rule = self.workflow.get_rule(name)
        except Exception:  # an unknown name: not one of ours
            return False
        return any(str(f).endswith(RUN_FILE) for f in rule.output)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.active():
            return True
        from snakemake_interface_logger_plugins.common import LogEvent

        event, message = getattr(record, "event", None), str(record.msg or "")
        if event == LogEvent.RUN_INFO:
            stats = getattr(record, "stats", {}) or {}
            self.total = int(stats.get("total", 0))
            self.planned = {rule: int(n) for rule, n in stats.items() if rule != "total"}
            trainings = sum(n for rule, n in stats.items() if rule != "total" and self.training_rule(rule))
            self.predicted = self.prices()
            self.say(f"sparselen: {self.total} jobs to run, {trainings} of them trainings; a line for each finished "
                     f"training and each job of {LONG_JOB_S:.0f} s or more, and one at least every "
                     f"{QUIET_S / 60:.0f} minutes. Each job's log is under logs/.")
            if self.beats:
                self.start_heartbeat()
            return False
        if event == LogEvent.JOB_INFO:
            wildcards = ", ".join(f"{k}={v}" for k, v in (getattr(record, "wildcards", None) or {}).items())
            rule = record.rule_name
            self.jobs[record.jobid] = (f"{rule} {wildcards}".strip(), self.training_rule(rule), self.clock(), rule)
            return True  # Snakemake's quiet settings drop it
        if event == LogEvent.JOB_FINISHED:
            self.done += 1
            what, training, start, rule = self.jobs.pop(record.job_id, (message, False, self.clock(), ""))
            took = self.clock() - start
            self.took.setdefault(rule, []).append(took)
            if training or took >= LONG_JOB_S:
                self.say(f"[{self.progress()}] {'trained' if training else 'finished'} {what} in {hms(took)}")
            return False
        if event == LogEvent.JOB_ERROR:
            logs = [str(f) for f in (getattr(record, "log", None) or [])]
            what = self.jobs.get(record.jobid, (record.rule_name,))[0]
            self.say(f"FAILED {what}" + (f": see {', '.join(logs)}" if logs else ""))
            return True
        if event == LogEvent.GROUP_ERROR:  # a submission of several jobs (SLURM): its own log, then each job's
            logs = [str(f) for f in (getattr(record, "aux_logs", None) or [])]
            self.say(f"FAILED group {getattr(record, 'groupid', '')}" + (f": see {', '.join(logs)}" if logs else ""))
            return True
        if event in (LogEvent.JOB_STARTED, LogEvent.PROGRESS, LogEvent.RESOURCES_INFO):
            return False
        if message.startswith(CHECKPOINT_UPDATE):
            self.stale = True  # counted at the next line: the DAG is updated after this record
        if message.startswith(DROPPED):
            return False
        return not (self.summarized and message.startswith(AFTER_SUMMARY))

    def progress(self) -> str:
        """"12/193, 0:05:10 elapsed, about 1:10:00 left" (no time left before a job has finished)."""
        if self.stale:
            self.recount()
        elapsed = self.clock() - self.started
        count = f"{self.done:>{len(str(self.total))}}/{self.total}, {hms(elapsed)} elapsed"
        left = self.time_left(elapsed)
        return count if left is None else f"{count}, about {hms(left)} left"

    def recount(self) -> None:
        """This run's jobs per rule counted again from Snakemake's DAG (those finished in this run
        and those still to run, as its plan at the start counts them), after a checkpoint has
        added some."""
        self.stale = False
        dag = getattr(self.workflow, "dag", None)
        if dag is None:
            return
        rules = Counter(job.rule.name for job in chain(dag.needrun_jobs(), dag.finished_jobs))
        self.planned, self.total = dict(rules), max(self.done, sum(rules.values()))

    def prices(self) -> dict[str, float]:
        """The estimate's seconds per job of each rule about to run (``price``, the Snakefile's);
        none where it has no price or fails (the time left then rests on finished jobs)."""
        if self.price is None:
            return {}
        try:
            return dict(self.price(self.workflow))
        except Exception as e:  # noqa: BLE001 - a display's input: the run goes on without it
            logging.getLogger(__name__).debug("no predicted job times: %s", e)
            return {}

    def time_left(self, elapsed: float) -> float | None:
        """The jobs still to run, each at the mean time of its rule's finished jobs; a rule none
        of whose jobs has finished at the estimate's prediction for it, scaled by how the
        finished jobs' times compare with their predictions (at the mean of all finished jobs
        where it has none); all at the run's pace so far: its elapsed time per second of
        finished jobs (jobs run side by side). Rough: a job running now counts whole."""
        done = [t for times in self.took.values() for t in times]
        if not done or self.done >= self.total or sum(done) <= 0:
            return None
        overall = sum(done) / len(done)
        priced = [rule for rule in self.took if rule in self.predicted]
        scale = (sum(sum(self.took[r]) for r in priced) / sum(len(self.took[r]) * self.predicted[r] for r in priced)
                 if priced and sum(self.predicted[r] for r in priced) > 0 else None)

        def per_job(rule: str) -> float:
            if self.took.get(rule):
                return sum(self.took[rule]) / len(self.took[rule])
            if rule in self.predicted and scale is not None:
                return self.predicted[rule] * scale
            return overall

        work = sum((n - len(self.took.get(rule, []))) * per_job(rule)
                   for rule, n in self.planned.items() if n > len(self.took.get(rule, [])))
        return work * elapsed / sum(done)

    def running(self) -> str:
        """The jobs started and not finished, by rule: "language_train x2, report_claims"."""
        rules = [rule for _, _, _, rule in self.jobs.values()]
        return ", ".join(f"{r} x{rules.count(r)}" if rules.count(r) > 1 else r for r in dict.fromkeys(rules))

    def beat(self) -> None:
        """The progress and the running jobs, when jobs run and nothing was printed for ``QUIET_S``."""
        if not self.summarized and self.jobs and self.clock() - self.printed >= QUIET_S:
            self.say(f"[{self.progress()}] running: {self.running()}")

    def start_heartbeat(self) -> None:
        """A daemon thread that calls ``beat`` every few seconds (a long training prints nothing
        until it ends)."""
        def loop():
            while not self.summarized:
                time.sleep(min(10.0, QUIET_S / 4))
                self.beat()

        if self.heartbeat is None:
            self.heartbeat = threading.Thread(target=loop, name="sparselen-terminal", daemon=True)
            self.heartbeat.start()

    def summary(self, workdir=".") -> list[str]:
        """The run's last lines: the verdicts (when this run wrote the claims table), the wall
        time and the report's path."""
        self.summarized = True
        workdir = Path(workdir)
        lines = []
        claims = workdir / CLAIMS_CSV
        wall = self.clock() - self.started
        if claims.exists() and time.time() - claims.stat().st_mtime <= wall + 1:
            lines += verdict_table(pd.read_csv(claims), REPORT_HTML)
        lines.append(f"Wall time {hms(wall)}.")
        report = workdir / REPORT_HTML
        if report.exists():
            lines.append(f"Report: {report.resolve()} (also .md)")
        return lines


WIDTH = 120  # no line of the verdict table is wider
INDENT = " " * 6


def verdict_lines(head) -> list[str]:
    """A claim's lines: its id, state, what it rests on and its statement (wrapped), then the
    reason in brief (``answer.brief``: the reason first, whole, then details cut to fit; a claims
    table without one: its answer, clipped), wrapped under the width."""
    from sparselen.report.answer import clip

    tag = f" [{head.tag}]" if isinstance(getattr(head, "tag", None), str) else ""
    first = f"  {head.claim:<3} {head.state}{tag}: {head.statement}"
    brief = getattr(head, "brief", None)
    reason = brief if isinstance(brief, str) else clip(head.answer)
    return [*textwrap.wrap(first, WIDTH, subsequent_indent=INDENT),
            *textwrap.wrap(reason, WIDTH, initial_indent=INDENT, subsequent_indent=INDENT)]


def verdict_table(claims: pd.DataFrame, report: Path = REPORT_HTML) -> list[str]:
    """Per claim its state, what it rests on, its statement and the reason in brief; then the
    counts, saying which claims this config cannot decide by its design, and where the full
    reasons are."""
    from sparselen.report.answer import counts_line

    heads = claims[claims["group"] == "all"]
    lines = ["", "The paper's claims on this run:"]
    for h in heads.itertuples():
        lines += verdict_lines(h)
    return lines + [*textwrap.wrap(counts_line(heads), WIDTH),
                    f"Each claim's evidence, criterion and groups: {report} (\"How each claim was decided\").", ""]


_TERMINAL: Terminal | None = None


def install(workflow, price=None) -> None:
    """Put the filter on Snakemake's logger (once per process; a workflow parsed again, as the
    estimate does, replaces the one it watches). ``price(workflow)``: each rule's predicted
    seconds per job for the jobs about to run (the Snakefile passes the estimate's)."""
    global _TERMINAL
    if _TERMINAL is None:
        from snakemake.logging import logger

        _TERMINAL = Terminal(workflow, price=price, heartbeat=True)
        logger.addFilter(_TERMINAL)
    _TERMINAL.workflow, _TERMINAL.price = workflow, price


def finish() -> None:
    """The run's last lines (the Snakefile's ``onsuccess``), when the filter is active."""
    if _TERMINAL is not None and _TERMINAL.active():
        for line in _TERMINAL.summary(os.getcwd()):
            _TERMINAL.say(line)

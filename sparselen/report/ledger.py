"""Compute ledger: the rules' ``benchmark:`` files (``results/benchmarks/<slice>/<step>[/<job>].tsv``,
one per job, written by Snakemake), summed as wall time, CPU time and peak memory (max_rss)
per rule and per figure (a figure = its slice's whole DAG), with each training's model FLOP
utilisation (``mfu``) where its summary reports one (``train_summary.json``, matched to its
benchmark file by the job name they share: ``sparselen.interface.run.log_name``). Wall time is a job's
full time; Snakemake samples CPU time every 30 s after a job's first 15 s and records the last
sample, so ``cpu_s`` can miss up to 30 s per job. The estimate before launch is
``sparselen.estimate``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sparselen.runtime import io

BENCH_COLUMNS = {"s": "wall_s", "cpu_time": "cpu_s", "max_rss": "max_rss_mb"}


def training_mfu(results) -> dict[str, float]:
    """Job name (``<slice>/<step>/<job>``) -> MFU of every training summary under ``results``
    that reports one (a device of known peak: the config's peak_tflops or a GPU's datasheet)."""
    out = {}
    for path in Path(results).rglob("train_summary.json"):
        summary = io.read_json(path)
        if summary.get("job_name") and summary.get("mfu") is not None:
            out[summary["job_name"]] = float(summary["mfu"])
    return out


def read_benchmarks(root, files=None) -> pd.DataFrame:
    """One row per benchmark file: slice, step (~ the rule), job, wall_s, cpu_s, max_rss_mb, and
    a training's mfu (NaN where none is reported): ``training_mfu`` of the results directory
    when ``root`` is its ``benchmarks`` directory, as the workflow lays them out. ``files``:
    only these (the jobs of the current DAG, so files left by a run of another configuration
    are not counted); missing ones are skipped. Default: every file under root."""
    root = Path(root)
    paths = sorted(root.rglob("*.tsv")) if files is None else sorted(p for p in map(Path, files) if p.exists())
    mfu = training_mfu(root.parent) if root.name == "benchmarks" else {}
    rows = []
    for path in paths:
        parts = path.relative_to(root).with_suffix("").parts
        if len(parts) < 2:
            continue
        bench = pd.read_csv(path, sep="\t").rename(columns=BENCH_COLUMNS)
        bench = bench.apply(pd.to_numeric, errors="coerce")  # "-" when a value was not measured
        step = parts[1]
        job = "/".join(parts[2:]) if len(parts) > 2 else ""
        for r in bench.itertuples():  # one row per repeat of the job
            rows.append({"slice": parts[0], "step": step, "job": job, "wall_s": r.wall_s,
                         "cpu_s": getattr(r, "cpu_s", np.nan), "max_rss_mb": getattr(r, "max_rss_mb", np.nan),
                         "mfu": mfu.get("/".join(parts), np.nan)})
    return pd.DataFrame(rows, columns=["slice", "step", "job", "wall_s", "cpu_s", "max_rss_mb", "mfu"])


def _sum(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    return df.groupby(by, sort=True).agg(jobs=("wall_s", "size"), wall_s=("wall_s", "sum"),
                                         max_job_wall_s=("wall_s", "max"), cpu_s=("cpu_s", "sum"),
                                         peak_rss_mb=("max_rss_mb", "max")).reset_index()


def per_rule(bench: pd.DataFrame) -> pd.DataFrame:
    """Totals per rule; ``mfu``: the mean MFU of its trainings that report one (else empty)."""
    out = _sum(bench, ["slice", "step"])
    mfu = bench.groupby(["slice", "step"])["mfu"].mean()
    out["mfu"] = [mfu.get((sl, st), np.nan) for sl, st in zip(out["slice"], out["step"])]
    return out


TRAIN_STEPS = ("train",)
EVAL_STEPS = ("evaluate", "loss_by_position", "transfer")  # model evaluations (not the analysis)


def per_figure(bench: pd.DataFrame) -> pd.DataFrame:
    """Totals per slice (every job of a figure's DAG), plus an ``all`` row; ``eval_share``:
    wall time of the slice's model evaluations over that of its trainings (NaN without either;
    the theory slice's runs train and evaluate in one job)."""
    out = pd.concat([_sum(bench, ["slice"]), _sum(bench.assign(slice="all"), ["slice"])], ignore_index=True)
    steps = pd.concat([bench, bench.assign(slice="all")])
    wall = {kind: steps[steps["step"].isin(names)].groupby("slice")["wall_s"].sum()
            for kind, names in (("train", TRAIN_STEPS), ("eval", EVAL_STEPS))}
    share = (wall["eval"] / wall["train"]).where(lambda s: (s > 0) & (s != float("inf")))
    out["eval_share"] = out["slice"].map(share)
    return out


def write(bench: pd.DataFrame, rules_csv, figures_csv) -> tuple[pd.DataFrame, pd.DataFrame]:
    r, f = per_rule(bench), per_figure(bench)
    io.write_csv(r, rules_csv)
    io.write_csv(f, figures_csv)
    return r, f

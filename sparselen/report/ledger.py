"""Compute ledger and run-time estimate.

The ledger reads the rules' ``benchmark:`` files (``results/benchmarks/<slice>/<step>[/<job>].tsv``,
one per job, written by Snakemake) and sums wall time, CPU time and peak memory (max_rss)
per rule and per figure (a figure = its slice's whole DAG).

The estimate predicts a config's training time before it is launched: measured throughput
from the training logs (tokens/s times the model's parameter count, i.e. a FLOP rate up to
the factor 6, so it transfers across model sizes) and the config's runs, steps, tokens per
step and parameter count. It ignores attention's quadratic cost, per-step overhead and job
start-up, so it is an order-of-magnitude guide, measured on whatever device produced the logs;
throughput measured on a much smaller model (where per-step overhead dominates) overestimates
a bigger model's time, so measure on a config of similar size (``--results``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sparselen import io

BENCH_COLUMNS = {"s": "wall_s", "cpu_time": "cpu_s", "max_rss": "max_rss_mb"}


def read_benchmarks(root) -> pd.DataFrame:
    """One row per benchmark file: slice, step (~ the rule), job, wall_s, cpu_s, max_rss_mb."""
    root = Path(root)
    rows = []
    for path in sorted(root.rglob("*.tsv")):
        parts = path.relative_to(root).with_suffix("").parts
        if len(parts) < 2:
            continue
        bench = pd.read_csv(path, sep="\t").rename(columns=BENCH_COLUMNS)
        bench = bench.apply(pd.to_numeric, errors="coerce")  # "-" when a value was not measured
        step = parts[1]
        job = "/".join(parts[2:]) if len(parts) > 2 else ""
        for r in bench.itertuples():  # one row per repeat of the job
            rows.append({"slice": parts[0], "step": step, "job": job, "wall_s": r.wall_s,
                         "cpu_s": getattr(r, "cpu_s", np.nan), "max_rss_mb": getattr(r, "max_rss_mb", np.nan)})
    return pd.DataFrame(rows, columns=["slice", "step", "job", "wall_s", "cpu_s", "max_rss_mb"])


def _sum(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    return df.groupby(by, sort=True).agg(jobs=("wall_s", "size"), wall_s=("wall_s", "sum"),
                                         max_job_wall_s=("wall_s", "max"), cpu_s=("cpu_s", "sum"),
                                         peak_rss_mb=("max_rss_mb", "max")).reset_index()


def per_rule(bench: pd.DataFrame) -> pd.DataFrame:
    return _sum(bench, ["slice", "step"])


def per_figure(bench: pd.DataFrame) -> pd.DataFrame:
    """Totals per slice (every job of a figure's DAG), plus an ``all`` row."""
    out = _sum(bench, ["slice"])
    total = _sum(bench.assign(slice="all"), ["slice"])
    return pd.concat([out, total], ignore_index=True)


def write(bench: pd.DataFrame, rules_csv, figures_csv) -> tuple[pd.DataFrame, pd.DataFrame]:
    r, f = per_rule(bench), per_figure(bench)
    io.write_csv(r, rules_csv)
    io.write_csv(f, figures_csv)
    return r, f


# ----------------------------------------------------------------------------- throughput


def throughput(results) -> pd.DataFrame:
    """Per training run found under ``results``: median tokens/s (after the first log row,
    which includes warm-up), parameters, and their product (parameter-tokens/s)."""
    rows = []
    for log_csv in sorted(Path(results).rglob("train_log.csv")):
        summary = log_csv.with_name("train_summary.json")
        if not summary.exists():
            continue
        log = pd.read_csv(log_csv)
        if "tokens_per_s" not in log or log.empty:
            continue
        tok = log["tokens_per_s"].iloc[1:] if len(log) > 1 else log["tokens_per_s"]
        params = io.read_json(summary).get("parameters")
        if not params:
            continue
        rows.append({"slice": log_csv.relative_to(results).parts[0], "run": str(log_csv.parent),
                     "tokens_per_s": float(tok.median()), "parameters": int(params),
                     "param_tokens_per_s": float(tok.median()) * int(params)})
    return pd.DataFrame(rows, columns=["slice", "run", "tokens_per_s", "parameters", "param_tokens_per_s"])


# ----------------------------------------------------------------------------- estimate


def parameters(model: dict, vocab: int) -> int:
    """Parameter count of the model a ``model`` section builds, GPT-NeoX or OLMo (without
    task-specific heads), built on the meta device: no memory, and no second formula to drift."""
    import torch

    from sparselen.architectures import build_model, model_config

    with torch.device("meta"):
        return build_model(model_config(model, vocab)).num_parameters()


def training_plan(config: dict) -> list[dict]:
    """Per slice of ``config`` we can size: runs, steps, tokens per step, parameters."""
    plan = []
    p = config.get("parity")
    if p:
        from sparselen.parity.task import VOCAB

        lo, hi = p["train"]["lengths"]
        plan.append({"slice": "parity", "runs": len(p["K_train"]) * len(p["seeds"]), "steps": p["train"]["steps"],
                     "tokens_per_step": p["train"]["batch_size"] * ((lo + hi) / 2 + 1),
                     "parameters": parameters(p["model"], len(VOCAB))})
    lang = config.get("language")
    if lang:
        runs = sum(len(v) for v in lang["schemes"].values()) * len(lang["seeds"])
        plan.append({"slice": "language", "runs": runs, "steps": lang["train"]["steps"],
                     "tokens_per_step": lang["train"]["batch_tokens"],
                     "parameters": parameters(lang["model"], lang["tokenizer"]["vocab_size"])})
    return plan


def estimate(config: dict, measured: pd.DataFrame) -> pd.DataFrame:
    """Estimated training time per slice: a slice's own measured throughput when there is
    one, else the median over all measured runs."""
    if measured.empty:
        raise ValueError("no measured throughput: run at least one training job first (train_log.csv + "
                         "train_summary.json under the results directory)")
    pooled = float(measured["param_tokens_per_s"].median())
    rows = []
    for r in training_plan(config):
        own = measured.loc[measured["slice"] == r["slice"], "param_tokens_per_s"]
        rate, source = (float(own.median()), r["slice"]) if len(own) else (pooled, "all slices")
        seconds = r["runs"] * r["steps"] * r["tokens_per_step"] * r["parameters"] / rate
        rows.append({**r, "param_tokens_per_s": rate, "throughput_from": source,
                     "train_seconds_one_job_at_a_time": seconds, "train_hours": seconds / 3600})
    return pd.DataFrame(rows)

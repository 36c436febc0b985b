"""The sparse parity experiment (SPEC.md section 3): evaluation set, training, evaluation,
table and figure, each a ``sparselen parity <step>`` command called by one Snakemake rule."""

from __future__ import annotations

import logging

import pandas as pd
import torch

from sparselen import io
from sparselen.aggregate import read_tables, summary_table, write_table
from sparselen.cliargs import add_evaluation_args, add_runtime_args, add_table_args, add_training_output_args
from sparselen.device import configure_cpu, resolve_device
from sparselen.evaluate import evaluate_grid
from sparselen.provenance import provenance
from sparselen.settings import model_config, parse_json_arg, train_config
from sparselen.tasks import parity
from sparselen.train import load_model, train

log = logging.getLogger(__name__)


def make_eval_set(cfg: dict, out) -> None:
    """``cfg`` = parity.eval: the shared samples every model is evaluated on."""
    cells = parity.evaluation_set(cfg["seed"], cfg["k_test"], cfg["lengths"], cfg["n"])
    io.torch_save({"cells": cells, "provenance": provenance(cfg, cfg["seed"])}, out)
    log.info("wrote %d cells (%d impossible cells left out) to %s", len(cells),
             len(cfg["k_test"]) * len(cfg["lengths"]) - len(cells), out)


def run_training(cfg: dict, K: int, seed: int, out_model, out_log, out_summary, checkpoint,
                 device: str = "auto") -> dict:
    """``cfg`` = {model, pose, train}: train one model on k ~ Unif{1..K}."""
    dev = resolve_device(device)
    mc = model_config(cfg["model"], len(parity.VOCAB))
    tc = train_config(cfg["train"], seed, cfg["pose"], compile=cfg.get("compile", False))
    run = {**cfg, "K_train": K, "seed": seed}
    batches = parity.training_batches(seed, tc.batch_size, cfg["train"]["lengths"], K,
                                      cfg["train"].get("one_length_per_batch", True))
    return train(mc, tc, batches, out_model, checkpoint, dev, run, out_log, out_summary,
                 {"K_train": K, "position": mc.position})


def run_evaluation(model_path, eval_set_path, out_csv, batch_size: int, device: str = "auto") -> pd.DataFrame:
    dev = resolve_device(device)
    model, prov = load_model(model_path, dev)
    cells = torch.load(eval_set_path, weights_only=False)["cells"]
    df = evaluate_grid(model, cells, batch_size, dev, K_train=prov["run"]["K_train"], seed=prov["seed"],
                       position=model.cfg.position)
    df["config_hash"] = prov["config_hash"]
    io.write_csv(df, out_csv)
    return df


def make_table(eval_csvs, out_csv, out_md) -> pd.DataFrame:
    df = read_tables(eval_csvs)
    table = summary_table(df, ["K_train", "position", "k_test", "length"])
    prov = provenance(None, sorted(df["seed"].unique().tolist()),
                      config_hashes=sorted(df["config_hash"].unique().tolist()))
    write_table(table, out_csv, out_md, "Sparse parity: accuracy by K_train, k_test and length "
                "(mean and 95% t-interval over seeds)", prov)
    return table


def make_figure(table_csv, train_max_length: int, out_png, out_pdf) -> None:
    from sparselen.plotting import plot_panels, save_figure  # matplotlib only where a figure is drawn

    table = pd.read_csv(table_csv)
    seeds = int(table["n_seeds"].max())
    fig = plot_panels(table, "K_train", "k_test", panel_label="K_train = {}", curve_label="k_test = {}",
                      xlabel="sample length 2l", chance=0.5,
                      vlines={K: train_max_length for K in table["K_train"].unique()},
                      title=f"Sparse parity: accuracy vs length (mean, 95% interval over {seeds} seeds; "
                            f"dashed: longest training length)")
    save_figure(fig, out_png, out_pdf, provenance(None, None, table=str(table_csv)))


def config_errors(config: dict) -> list[str]:
    """Cross-key checks of the ``parity`` section (the schema has checked each key alone)."""
    out = []
    p = config.get("parity")
    if p:
        lo, hi = p["train"]["lengths"]
        if lo > hi:
            out.append(f"parity.train.lengths = {[lo, hi]}: the first (shortest) length exceeds the second")
        if hi // 2 < 1 or (hi // 2) < (lo + 1) // 2:
            out.append(f"parity.train.lengths = {[lo, hi]}: contains no even length")
        if min(p["K_train"]) > hi // 2:
            out.append(f"parity.K_train = {p['K_train']}: K_train cannot exceed the longest training l = {hi // 2}")
        m = p["model"]
        if m.get("d_model", 128) % m.get("n_head", 4):
            out.append(f"parity.model.d_model = {m.get('d_model')}: not divisible by n_head = {m.get('n_head')}")
        if m.get("position") in ("coupled", "ppc"):
            out.append(f"parity.model.position = {m['position']!r}: parity has no coupled ids; use nope, rope or pose")
        longest = max(p["eval"]["lengths"]) + 1
        target = p["pose"].get("target_length")
        if m.get("position") == "pose" and (target is None or target < longest):
            out.append(f"parity.pose.target_length = {target}: must be at least the longest evaluated sequence "
                       f"({longest} tokens = max(parity.eval.lengths) + 1) for the pose scheme")
        if all(k > length // 2 for k in p["eval"]["k_test"] for length in p["eval"]["lengths"]):
            out.append("parity.eval: every (k_test, length) cell is impossible (k_test > length / 2)")
    return out


def add_commands(sub) -> None:
    p = sub.add_parser("parity", help="sparse parity experiment (SPEC.md section 3)")
    steps = p.add_subparsers(dest="step", required=True)

    s = steps.add_parser("eval-data", help="write the shared evaluation set")
    s.add_argument("--config", required=True, type=parse_json_arg, help="parity.eval as JSON")
    s.add_argument("--out", required=True)
    s.set_defaults(func=lambda a: make_eval_set(a.config, a.out))

    s = steps.add_parser("train", help="train one model (one K_train, one seed)")
    s.add_argument("--config", required=True, type=parse_json_arg, help="{model, pose, train} as JSON")
    s.add_argument("--K", type=int, required=True)
    s.add_argument("--seed", type=int, required=True)
    add_training_output_args(s)
    add_runtime_args(s)
    s.set_defaults(func=lambda a: (configure_cpu(a.threads), run_training(
        a.config, a.K, a.seed, a.model, a.log_csv, a.summary, a.checkpoint, a.device)))

    s = steps.add_parser("evaluate", help="evaluate one model on the shared evaluation set")
    add_evaluation_args(s, batch_size=500)
    s.set_defaults(func=lambda a: (configure_cpu(a.threads), run_evaluation(
        a.model, a.eval_set, a.out, a.batch_size, a.device)))

    s = steps.add_parser("table", help="aggregate evaluation tables (CSV and Markdown)")
    add_table_args(s)
    s.set_defaults(func=lambda a: make_table(a.inputs, a.csv, a.md))

    s = steps.add_parser("figure", help="draw accuracy vs length (PNG and PDF)")
    s.add_argument("--table", required=True)
    s.add_argument("--train-max-length", type=int, required=True)
    s.add_argument("--png", required=True)
    s.add_argument("--pdf", required=True)
    s.set_defaults(func=lambda a: make_figure(a.table, a.train_max_length, a.png, a.pdf))

"""The theory made runnable (SPEC.md section 6; docs/theory.md): one training-and-evaluation
run per (model, distribution, k, seed), then a table of errors and slopes and a figure, each a
``sparselen theory <step>`` command called by one Snakemake rule.

A run trains and evaluates in one job: the evaluation takes seconds, while a separate job
would pay another interpreter start (a few CPU seconds each, for every run of the grid).
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd
import torch

from sparselen import io
from sparselen.cliargs import add_runtime_args
from sparselen.device import configure_cpu, resolve_device
from sparselen.provenance import config_hash, provenance
from sparselen.settings import model_config, parse_json_arg, train_config
from sparselen.theory import experiment as ex

log = logging.getLogger(__name__)
MODELS = ("sfa", "gpt")


def run(cfg: dict, model: str, distribution: str, k: int, seed: int, out_model, out_log, out_eval,
        out_summary, checkpoint=None, device: str = "auto") -> pd.DataFrame:
    """``cfg`` = {task, train, eval, sfa} or {task, train, eval, gpt, compile}."""
    pc = ex.planted_config(cfg["task"], distribution, k)
    lo, L = cfg["train"]["lengths"]
    lengths = ex.valid_lengths(pc, lo, L)
    targets = ex.eval_lengths(L, cfg["eval"]["ratios"])
    run_id = {"model": model, "distribution": distribution, "k": k, "seed": seed}
    extra = {}
    if model == "sfa":
        window = ex.sfa_window(pc, cfg["sfa"]["window"], lengths)
        net, rows = ex.train_sfa(pc, cfg["sfa"], lengths, seed, window)
        prov = provenance(cfg, seed, torch.device("cpu"), run=run_id)
        io.torch_save({"model": net.state_dict(), "planted": pc.to_dict(), "window": window, "sfa": cfg["sfa"],
                       "provenance": prov}, out_model)
        io.write_csv(pd.DataFrame(rows), out_log)
        io.write_json(out_summary, {**run_id, "final_loss": rows[-1]["loss"] if rows else None,
                                    "parameters": sum(p.numel() for p in net.parameters()), **prov})
        predict, extra = ex.sfa_predict(net), {"window": window, "position": "relative"}
    else:
        from sparselen.train import load_model, train

        dev = resolve_device(device)
        g = cfg["gpt"]
        scheme = g["positions"][distribution]
        mc = model_config(g["model"], pc.vocab_size, position=scheme)
        longest = max(targets.values()) + 1
        tc = train_config(g["train"], seed, {"chunks": g["pose"]["chunks"], "target_length": longest},
                          compile=cfg.get("compile", False))
        batches = ex.gpt_batches(pc, lengths, tc.batch_size, seed, scheme == "coupled", longest)
        train(mc, tc, batches, out_model, checkpoint, dev, {**cfg, **run_id}, out_log, out_summary, run_id)
        net, _ = load_model(out_model, dev)
        predict, extra = ex.gpt_predict(net, pc, scheme == "coupled"), {"window": None, "position": scheme}
    df = ex.evaluate(predict, pc, targets, cfg["eval"]["n"], cfg["eval"]["seed"], cfg["eval"]["batch_size"])
    for key, value in {**run_id, **extra, "n_values": pc.n_values, "config_hash": config_hash(cfg)}.items():
        df[key] = value
    io.write_csv(df, out_eval)
    log.info("%s", df[["ratio", "length", "log_loss", "error"]].to_string(index=False))
    return df


def make_table(eval_csvs, out_csv, out_md, slopes_csv, slopes_md, floor: float) -> pd.DataFrame:
    from sparselen.aggregate import read_tables
    from sparselen.stats import summarize

    df = read_tables(eval_csvs)
    by = ["model", "distribution", "k", "ratio", "length", "n_values"]
    table = summarize(df, by, "log_loss", clip=None).merge(
        summarize(df, by, "error").rename(columns={"mean": "error_mean", "ci_low": "error_ci_low",
                                                   "ci_high": "error_ci_high"}).drop(columns="n_seeds"), on=by)
    slopes = ex.fit_slopes(table, floor)
    prov = provenance(None, sorted(df["seed"].unique().tolist()),
                      config_hashes=sorted(df["config_hash"].unique().tolist()))
    io.write_csv(table, out_csv)
    io.write_csv(slopes, slopes_csv)
    _write_md(table, out_md, "Theory: log loss (mean, 95% t-interval over seeds) and 0-1 error at Lbar = ratio * L", prov)
    _write_md(slopes, slopes_md, f"Theory: slope of log(log loss) on log(Lbar/L), and error ratios "
              f"(the bound's shape is (Lbar/L)^2; losses floored at {floor:g})", prov)
    return table


def _write_md(table: pd.DataFrame, path, title: str, prov: dict) -> None:
    md = [f"# {title}", "", table.to_markdown(index=False, floatfmt=".3g"), "", "Provenance:", "",
          "```json", io.json_dumps(prov), "```", ""]
    io.write_text(path, "\n".join(md))


def make_figure(table_csv, train_max_length: int, floor: float, out_png, out_pdf) -> None:
    from sparselen.plotting import plt, save_figure

    table = pd.read_csv(table_csv)
    dists = [d for d in ("local", "nonlocal", "coupled") if d in set(table["distribution"])]
    ks = sorted(table["k"].unique())
    colors = dict(zip(ks, plt.cm.viridis(np.linspace(0.0, 0.85, len(ks)))))
    styles = {"sfa": ("o", "-", "SFA (idealized)"), "gpt": ("s", "--", "GPT-NeoX")}
    fig, axes = plt.subplots(1, len(dists), figsize=(3.8 * len(dists) + 1.6, 3.6), sharey=True, squeeze=False)
    for ax, dist in zip(axes[0], dists):
        sub = table[table["distribution"] == dist]
        for (model, k), line in sub.groupby(["model", "k"], sort=True):
            line = line.sort_values("ratio")
            marker, ls, name = styles[model]
            y = line["mean"].clip(lower=floor)
            ax.plot(line["ratio"], y, marker=marker, ls=ls, color=colors[k], ms=4, lw=1.5, label=f"{name}, k={k}")
            if line["ci_low"].notna().any():
                ax.fill_between(line["ratio"], line["ci_low"].clip(lower=floor), line["ci_high"].clip(lower=floor),
                                color=colors[k], alpha=0.15, lw=0)
            at_L = line.loc[line["ratio"] == 1, "mean"]
            if len(at_L):  # the bound's shape, anchored at the measured error at Lbar = L
                ax.plot(line["ratio"], max(float(at_L.iloc[0]), floor) * line["ratio"] ** 2, ls=":", lw=1,
                        color=colors[k], alpha=0.6)
        ax.axhline(math.log(int(sub["n_values"].iloc[0])), color="0.5", ls="-.", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ratios = sorted(sub["ratio"].unique())
        ax.set_xticks(ratios, [f"{r:g}" for r in ratios])
        ax.minorticks_off()
        ax.set_title(f"{dist} planted positions")
        ax.set_xlabel(f"Lbar / L  (L = {train_max_length})")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("log loss at Lbar (nats)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    from matplotlib.lines import Line2D

    handles += [Line2D([], [], color="0.3", ls=":"), Line2D([], [], color="0.5", ls="-.")]
    labels += ["(Lbar/L)^2 x error at L (bound shape)", "chance (log q)"]
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False, fontsize=8)
    fig.suptitle("k-sparse planted correlations: error at Lbar vs Lbar/L (mean over seeds; band: 95% interval)",
                 fontsize=10)
    fig.tight_layout()
    save_figure(fig, out_png, out_pdf, provenance(None, None, table=str(table_csv)))


def config_errors(config: dict) -> list[str]:
    """Cross-key checks of the ``theory`` section (the schema has checked each key alone)."""
    t = config.get("theory")
    if not t:
        return []
    out = []
    lo, L = t["train"]["lengths"]
    if lo > L:
        return [f"theory.train.lengths = {[lo, L]}: the first (shortest) length exceeds the second"]
    if 1 not in t["eval"]["ratios"]:
        out.append(f"theory.eval.ratios = {t['eval']['ratios']}: must contain 1 (the error at Lbar = L anchors "
                   "the error ratios and the bound's shape)")
    gpt = t.get("gpt", {})
    runs = {(d, k) for d in t["distributions"] for k in t["k"]}
    runs |= {(d, k) for d in t["distributions"] for k in gpt.get("k", [])}
    for dist, k in sorted(runs):
        try:
            pc = ex.planted_config(t["task"], dist, k)
        except ValueError as e:
            out.append(f"theory.task (k={k}, {dist}): {e}")
            continue
        if not ex.valid_lengths(pc, lo, L):
            out.append(f"theory.train.lengths = {[lo, L]}: no valid training length for the {dist} law with k={k} "
                       f"(need a multiple of {pc.blocks()}, at least {pc.min_length()})")
        for r, n in ex.eval_lengths(L, t["eval"]["ratios"]).items():
            try:
                pc.check_length(n)
            except ValueError as e:
                out.append(f"theory.eval.ratios: Lbar = {r:g} * L = {n}: {e}")
    if gpt.get("k"):
        m = gpt["model"]
        if m.get("d_model", 128) % m.get("n_head", 4):
            out.append(f"theory.gpt.model.d_model = {m.get('d_model')}: not divisible by n_head = {m.get('n_head')}")
        for dist in t["distributions"]:
            if dist not in gpt["positions"]:
                out.append(f"theory.gpt.positions: no scheme for the {dist!r} distribution")
    return out


def add_commands(sub) -> None:
    p = sub.add_parser("theory", help="k-sparse planted correlations and sparse functional attention (SPEC.md 6)")
    steps = p.add_subparsers(dest="step", required=True)

    s = steps.add_parser("run", help="train one model on one planted distribution and evaluate it up to Lbar")
    s.add_argument("--config", required=True, type=parse_json_arg,
                   help="{task, train, eval, sfa} or {task, train, eval, gpt, compile} as JSON")
    s.add_argument("--model", required=True, choices=MODELS)
    s.add_argument("--distribution", required=True, choices=("local", "nonlocal", "coupled"))
    s.add_argument("--k", type=int, required=True)
    s.add_argument("--seed", type=int, required=True)
    s.add_argument("--out-model", required=True)
    s.add_argument("--log-csv", required=True)
    s.add_argument("--eval-csv", required=True)
    s.add_argument("--summary", required=True, help="train_summary.json: the run's provenance")
    s.add_argument("--checkpoint", default=None, help="GPT-NeoX resume file (kept until the run finishes)")
    add_runtime_args(s)
    s.set_defaults(func=lambda a: (configure_cpu(a.threads), run(
        a.config, a.model, a.distribution, a.k, a.seed, a.out_model, a.log_csv, a.eval_csv, a.summary, a.checkpoint,
        a.device)))

    s = steps.add_parser("table", help="errors per Lbar/L and fitted slopes (CSV and Markdown)")
    s.add_argument("--inputs", nargs="+", required=True)
    s.add_argument("--csv", required=True)
    s.add_argument("--md", required=True)
    s.add_argument("--slopes-csv", required=True)
    s.add_argument("--slopes-md", required=True)
    s.add_argument("--floor", type=float, default=1e-6)
    s.set_defaults(func=lambda a: make_table(a.inputs, a.csv, a.md, a.slopes_csv, a.slopes_md, a.floor))

    s = steps.add_parser("figure", help="error at Lbar vs Lbar/L, log-log, with the (Lbar/L)^2 shape")
    s.add_argument("--table", required=True)
    s.add_argument("--train-max-length", type=int, required=True)
    s.add_argument("--floor", type=float, default=1e-6)
    s.add_argument("--png", required=True)
    s.add_argument("--pdf", required=True)
    s.set_defaults(func=lambda a: make_figure(a.table, a.train_max_length, a.floor, a.png, a.pdf))

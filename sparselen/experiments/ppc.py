"""Position coupling and Predictive Position Coupling (SPEC.md section 4): evaluation sets,
training, generation-based evaluation, table and figure, each a ``sparselen ppc <step>``
command called by one Snakemake rule.

Every task is trained on short inputs with each scheme (``nope``, ``rope``, ``coupled``,
``ppc``) and evaluated by greedy generation on inputs up to several times longer; a response
counts as correct only if every token (and, for ``ppc``, every predicted position id) is right.
"""

from __future__ import annotations

import logging

import pandas as pd
import torch

from sparselen import io
from sparselen.aggregate import read_tables, write_table
from sparselen.cliargs import add_evaluation_args, add_runtime_args, add_table_args, add_training_output_args
from sparselen.device import configure_cpu, resolve_device
from sparselen.generate import generate
from sparselen.provenance import provenance
from sparselen.rng import generator
from sparselen.settings import model_config, parse_json_arg, train_config
from sparselen.stats import summarize
from sparselen.tasks import addition, copy_repeat, variable_assignment
from sparselen.tasks.seq2seq import Samples, random_offsets, to_batch
from sparselen.train import load_model, train

log = logging.getLogger(__name__)

TASKS = {"copy_repeat": copy_repeat, "variable_assignment": variable_assignment, "addition": addition}
SCHEMES = ("nope", "rope", "coupled", "ppc")
RUN_KEYS = ("train_sizes", "eval_sizes", "steps", "model")  # task-section keys that are not sampler arguments


def task_params(task_cfg: dict) -> dict:
    """The sampler's keyword arguments from a task's config section (e.g. alphabet, max_depth)."""
    return {k: v for k, v in task_cfg.items() if k not in RUN_KEYS}


def task_model(model: dict, task_cfg: dict) -> dict:
    """``ppc.model`` with the task's own ``model`` overrides (e.g. fewer rotary dims) on top."""
    return {**model, **task_cfg.get("model", {})}


def max_coupled_id(task: str, size: int, task_cfg: dict) -> int:
    """Largest coupled id of a sample of this size (before any training offset)."""
    if task == "variable_assignment":  # the prompt's last token, ">"
        return variable_assignment.max_prompt_len(size, task_cfg.get("value_digits", (1, 1))) - 1
    return {"copy_repeat": size + 1, "addition": size + 2}[task]


def make_eval_set(cfg: dict, task: str, out) -> None:
    """``cfg`` = {task: section, eval}: ``n`` samples per evaluated size, from a generator
    seeded by (eval seed, task, size), shared by every model."""
    module, tcfg, ecfg = TASKS[task], cfg["task"], cfg["eval"]
    cells = {}
    for size in tcfg["eval_sizes"]:
        s = module.sample(torch.full((ecfg["n"],), size), generator("ppc-eval", ecfg["seed"], task, size),
                          **task_params(tcfg))
        cells[size] = vars(s)
    io.torch_save({"task": task, "cells": cells, "provenance": provenance(cfg, ecfg["seed"])}, out)
    log.info("wrote %s evaluation cells %s to %s", task, list(cells), out)


def training_batches(task: str, task_cfg: dict, seed: int, batch_size: int, max_position_id: int,
                     offset: bool):
    """``step -> Batch``, a pure function of (task, seed, step): sizes uniform in the training
    range, coupled ids shifted by a random start offset when ``offset``."""
    module, (lo, hi), params = TASKS[task], task_cfg["train_sizes"], task_params(task_cfg)

    def batch_fn(step: int):
        g = generator("ppc-train", task, seed, step)
        s = module.sample(torch.randint(lo, hi + 1, (batch_size,), generator=g), g, **params)
        return to_batch(s, random_offsets(s, max_position_id, g) if offset else None)

    return batch_fn


def run_training(cfg: dict, task: str, scheme: str, seed: int, out_model, out_log, out_summary, checkpoint,
                 device: str = "auto") -> dict:
    """``cfg`` = {model, train, task, max_position_id, random_offset, id_embedding,
    position_loss_weight, compile}: train one model on one task with one position scheme."""
    dev = resolve_device(device)
    # the run's scheme wins over ppc.model.position (which the schema fills with its default)
    mc = model_config(task_model(cfg["model"], cfg["task"]), len(TASKS[task].VOCAB), position=scheme,
                      max_position_id=cfg["max_position_id"], id_embedding=scheme in cfg["id_embedding"])
    train_cfg = dict(cfg["train"], **({"steps": cfg["task"]["steps"]} if "steps" in cfg["task"] else {}))
    tc = train_config(train_cfg, seed, None, position_loss_weight=cfg["position_loss_weight"],
                      compile=cfg.get("compile", False))
    run = {**cfg, "task_name": task, "scheme": scheme, "seed": seed}
    batches = training_batches(task, cfg["task"], seed, tc.batch_size, cfg["max_position_id"],
                               cfg["random_offset"])
    return train(mc, tc, batches, out_model, checkpoint, dev, run, out_log, out_summary,
                 {"task": task, "scheme": scheme})


@torch.no_grad()
def cell_scores(model, s: Samples, batch_size: int, device) -> dict:
    """Exact-match counts for one cell (all prompts of one size): tokens, ids, both.

    Generation runs on batches of prompts of one length (no padding, so no attention mask);
    a task whose prompts vary in length within a size is run one prompt length at a time."""
    counts = {"tokens": 0, "ids": 0, "both": 0}
    for P in s.prompt_len.unique().tolist():
        group = s.select(torch.nonzero(s.prompt_len == P).flatten())
        R = int((group.length - P).max())
        for i in range(0, len(group), batch_size):
            b = group.select(slice(i, i + batch_size))
            truth, truth_ids = b.tokens[:, P:P + R], b.position_ids[:, P:P + R]
            mask = b.response_mask[:, P:P + R]
            tokens, ids = generate(model, b.tokens[:, :P].to(device), b.position_ids[:, :P].to(device), R,
                                   oracle_ids=truth_ids.to(device))
            ok_tokens = ((tokens.cpu() == truth) | ~mask).all(dim=1)
            ok_ids = ((ids.cpu() == truth_ids) | ~mask).all(dim=1) if ids is not None else torch.ones_like(ok_tokens)
            counts["tokens"] += int(ok_tokens.sum())
            counts["ids"] += int(ok_ids.sum())
            counts["both"] += int((ok_tokens & ok_ids).sum())
    return counts


def run_evaluation(model_path, eval_set_path, out_csv, batch_size: int, device: str = "auto") -> pd.DataFrame:
    """One row per evaluated size: ``accuracy`` (whole response right; for ppc the predicted
    ids too), ``token_accuracy`` and, for ppc, ``position_accuracy``."""
    dev = resolve_device(device)
    model, prov = load_model(model_path, dev)
    data = torch.load(eval_set_path, weights_only=False)
    scheme, rows = model.cfg.position, []
    for size, cell in sorted(data["cells"].items()):
        s = Samples(**cell)
        c, n = cell_scores(model, s, batch_size, dev), len(s)
        rows.append({"task": data["task"], "scheme": scheme, "seed": prov["seed"], "size": size,
                     "prompt_tokens": round(float(s.prompt_len.float().mean()), 1),  # the mean, if lengths vary
                     "n": n, "correct": c["both"], "accuracy": c["both"] / n,
                     "token_accuracy": c["tokens"] / n,
                     "position_accuracy": c["ids"] / n if scheme == "ppc" else float("nan")})
        log.info("%s %s size %d: accuracy %.3f", data["task"], scheme, size, c["both"] / n)
    df = pd.DataFrame(rows)
    df["config_hash"] = prov["config_hash"]
    io.write_csv(df, out_csv)
    return df


def make_table(eval_csvs, out_csv, out_md) -> pd.DataFrame:
    """Mean and 95% interval over seeds per (task, scheme, size), with a ``metric`` column:
    ``exact_match`` for every scheme, and ``position_ids`` (predicted ids all right) for ppc."""
    # read hashes as text: a hex hash such as "12e4..." would otherwise parse as a float
    df = read_tables(eval_csvs)
    by = ["task", "scheme", "size"]
    parts = [summarize(df, by, "accuracy").assign(metric="exact_match")]
    ppc = df[df["scheme"] == "ppc"]
    if not ppc.empty:
        parts.append(summarize(ppc, by, "position_accuracy").assign(metric="position_ids"))
    counts = df.groupby(by)[["n", "prompt_tokens"]].agg({"n": "sum", "prompt_tokens": "first"}).reset_index()
    table = pd.concat(parts, ignore_index=True).merge(counts.rename(columns={"n": "n_samples"}), on=by)
    table = table[["task", "scheme", "metric", "size", "prompt_tokens", "mean", "ci_low", "ci_high",
                   "n_seeds", "n_samples"]].sort_values(["task", "metric", "scheme", "size"])
    prov = provenance(None, sorted(df["seed"].unique().tolist()),
                      config_hashes=sorted(df["config_hash"].unique().tolist()))
    write_table(table, out_csv, out_md, "Position coupling and PPC: exact-match accuracy by task, scheme and "
                "input size (mean and 95% t-interval over seeds)", prov)
    return table


SCHEME_STYLES = {"nope": {"color": "tab:gray"}, "rope": {"color": "tab:orange"},
                 "coupled": {"color": "tab:blue"}, "ppc": {"color": "tab:green"}}
IDS_ONLY = " (position ids only)"


def make_figure(table_csv, train_max_sizes: dict, out_png, out_pdf) -> None:
    """One panel per task, one curve per scheme (and the ppc position-id accuracy, dashed);
    dashed grey line = longest training size."""
    from sparselen.plotting import plot_panels, save_figure  # matplotlib only where a figure is drawn

    table = pd.read_csv(table_csv)
    table["curve"] = table["scheme"].where(table["metric"] == "exact_match", table["scheme"] + IDS_ONLY)
    styles = {}
    for scheme, style in SCHEME_STYLES.items():
        styles |= {scheme: style, scheme + IDS_ONLY: {**style, "ls": "--"}}
    seeds = int(table["n_seeds"].max())
    fig = plot_panels(table, "task", "curve", x="size", xlabel="input size", ylabel="exact-match accuracy",
                      styles=styles, xlabels={t: TASKS[t].SIZE for t in TASKS},
                      vlines={t: train_max_sizes[t] for t in table["task"].unique() if t in train_max_sizes},
                      title=f"Position coupling and PPC: accuracy vs input size (mean, 95% interval over "
                            f"{seeds} seeds; dashed: longest training size)")
    save_figure(fig, out_png, out_pdf, provenance(None, None, table=str(table_csv)))


def config_errors(config: dict) -> list[str]:
    """Cross-key checks of the ``ppc`` section (the schema has checked each key alone)."""
    out = []
    p = config.get("ppc")
    if not p:
        return out
    for task in p["tasks"]:
        t = p.get(task)
        if t is None:
            out.append(f"ppc.tasks lists {task!r} but the section ppc.{task} is missing")
            continue
        m = task_model(p["model"], t)
        if m.get("d_model", 128) % m.get("n_head", 4):
            where = f"ppc.{task}.model" if "model" in t else "ppc.model"
            msg = f"{where}: d_model = {m.get('d_model')} is not divisible by n_head = {m.get('n_head')}"
            out += [] if msg in out else [msg]  # a bad ppc.model is named once, not per task
        lo, hi = t["train_sizes"]
        if lo > hi:
            out.append(f"ppc.{task}.train_sizes = {[lo, hi]}: the first (smallest) size exceeds the second")
        largest = max(hi, max(t["eval_sizes"]))
        if task == "variable_assignment" and largest > t.get("num_variables", 32):
            out.append(f"ppc.variable_assignment.num_variables = {t.get('num_variables', 32)}: programs of "
                       f"{largest} lines need at least {largest} distinct variables")
        if task == "variable_assignment" and "value_digits" in t and t["value_digits"][0] > t["value_digits"][1]:
            out.append(f"ppc.variable_assignment.value_digits = {t['value_digits']}: the first (fewest digits) "
                       f"exceeds the second")
        top = max_coupled_id(task, largest, t)
        if top > p["max_position_id"]:
            out.append(f"ppc.max_position_id = {p['max_position_id']}: ppc.{task} reaches coupled id {top} "
                       f"(size {largest}); raise it to at least {top}")
    return out


def add_commands(sub) -> None:
    p = sub.add_parser("ppc", help="position coupling and PPC experiment (SPEC.md section 4)")
    steps = p.add_subparsers(dest="step", required=True)

    s = steps.add_parser("eval-data", help="write one task's shared evaluation set")
    s.add_argument("--config", required=True, type=parse_json_arg, help="{task: ppc.<task>, eval: ppc.eval} as JSON")
    s.add_argument("--task", required=True, choices=sorted(TASKS))
    s.add_argument("--out", required=True)
    s.set_defaults(func=lambda a: make_eval_set(a.config, a.task, a.out))

    s = steps.add_parser("train", help="train one model (one task, scheme and seed)")
    s.add_argument("--config", required=True, type=parse_json_arg,
                   help="{model, train, task, max_position_id, random_offset, id_embedding, position_loss_weight}")
    s.add_argument("--task", required=True, choices=sorted(TASKS))
    s.add_argument("--scheme", required=True, choices=SCHEMES)
    s.add_argument("--seed", type=int, required=True)
    add_training_output_args(s)
    add_runtime_args(s)
    s.set_defaults(func=lambda a: (configure_cpu(a.threads), run_training(
        a.config, a.task, a.scheme, a.seed, a.model, a.log_csv, a.summary, a.checkpoint, a.device)))

    s = steps.add_parser("evaluate", help="evaluate one model by generation on its task's evaluation set")
    add_evaluation_args(s, batch_size=250)
    s.set_defaults(func=lambda a: (configure_cpu(a.threads), run_evaluation(
        a.model, a.eval_set, a.out, a.batch_size, a.device)))

    s = steps.add_parser("table", help="aggregate evaluation tables (CSV and Markdown)")
    add_table_args(s)
    s.set_defaults(func=lambda a: make_table(a.inputs, a.csv, a.md))

    s = steps.add_parser("figure", help="draw accuracy vs input size (PNG and PDF)")
    s.add_argument("--table", required=True)
    s.add_argument("--train-max-sizes", required=True, type=parse_json_arg, help="{task: longest training size}")
    s.add_argument("--png", required=True)
    s.add_argument("--pdf", required=True)
    s.set_defaults(func=lambda a: make_figure(a.table, a.train_max_sizes, a.png, a.pdf))

"""Parity's evaluation stack: its runs as one stacked model, one pass per batch for all of
them, each run's table what its own evaluation writes."""

import pandas as pd
import torch

import sparselen.parity.evaluate as parity_evaluate
from sparselen.interface.job import Job
from sparselen.jobs.stacks import run_stack, train_jobs
from sparselen.parity.jobs import eval_data, evaluate

SEEDS = (0, 1, 2)
CONFIG = {"device": "cpu", "compile": False, "threads": 1, "checkpoint_minutes": 0}
BATCH_TOKENS = 200  # several passes per cell: 9 samples a pass alone at 2l = 20, 3 of each run in a stack's


def trained(tmp_path) -> list:
    """Three parity runs trained for 40 steps (a stack of 3), their model files."""
    optimizer = {"lr": 3e-3, "weight_decay": 0.1, "betas": [0.9, 0.999], "eps": 1e-8, "warmup_steps": 2,
                 "schedule": "linear", "grad_clip": 1.0}
    jobs = [Job.of("parity_train", params={
        "model": {"n_layer": 1, "n_head": 2, "d_model": 32, "d_ff": 64}, "scheme": "pose",
        "pose": {"chunks": 2, "target_length": 61},
        "train": {"lengths": [10, 20], "one_length_per_batch": True, "steps": 40, "batch_size": 16,
                  "checkpoint_every": 40, "log_every": 20, "optimizer": optimizer},
        "checkpoint": str(tmp_path / f"seed{s}/ckpt.pt")},
        output={"model": str(tmp_path / f"seed{s}/model.pt"), "log_csv": str(tmp_path / f"seed{s}/log.csv"),
                "summary": str(tmp_path / f"seed{s}/summary.json")},
        wildcards={"K_train": 2, "seed": s}, config=CONFIG) for s in SEEDS]
    train_jobs(jobs)
    return [tmp_path / f"seed{s}/model.pt" for s in SEEDS]


def test_an_evaluation_stack_evaluates_its_runs_as_one_model_to_each_runs_own_table(tmp_path, monkeypatch):
    """``parity_evaluate_stack0`` (``sparselen.jobs.stacks.run_stack``) loads its runs' model
    files into one stacked model and evaluates every batch in one pass for all three (never the
    per-run path); each run's eval.csv equals, frame for frame, the per-run step's evaluation of
    its model file (the same correct counts: the runs' answers differ from each other)."""
    models, eval_set = trained(tmp_path), tmp_path / "eval_set.pt"
    eval_data(Job.of("parity_eval_data", output={"eval_set": eval_set},
                     params={"eval": {"seed": 5, "k_test": [1, 2, 3], "lengths": [10, 20, 30], "n": 50}}))
    alone = [tmp_path / f"alone{s}.csv" for s in SEEDS]
    for s, model, out in zip(SEEDS, models, alone):
        evaluate(Job.of("parity_evaluate", input={"model": model, "eval_set": eval_set}, output={"eval": out},
                        params={"batch_tokens": BATCH_TOKENS}, wildcards={"K_train": 2, "seed": s}, config=CONFIG))

    passes, forward = [], parity_evaluate.cell_accuracies

    def counted(model, runs, *args):
        passes.append(runs)
        return forward(model, runs, *args)

    def refused(*_, **__):
        raise AssertionError("an evaluation stack ran a run's own evaluation")

    monkeypatch.setattr(parity_evaluate, "cell_accuracies", counted)
    monkeypatch.setattr(parity_evaluate, "cell_accuracy", refused)
    stacked = [tmp_path / f"stack{s}.csv" for s in SEEDS]
    run_stack(Job.of("parity_evaluate_stack0", input={"model": [str(m) for m in models], "eval_set": str(eval_set)},
                     output={"eval": [str(p) for p in stacked]},
                     params={"batch_tokens": BATCH_TOKENS, "stack_seeds": list(SEEDS)}, wildcards={"K_train": 2},
                     config=CONFIG))
    cells = len(torch.load(eval_set, weights_only=True)["cells"])
    assert passes == [3] * cells  # every cell's batches through the stack of three
    tables = [pd.read_csv(p) for p in stacked]
    for s, a, b in zip(SEEDS, alone, tables):
        pd.testing.assert_frame_equal(pd.read_csv(a), b)
        assert (b["seed"] == s).all()
    assert tables[0]["correct"].tolist() != tables[1]["correct"].tolist()  # three models, not one read thrice


def test_a_stacked_pass_holds_the_tokens_of_one_runs_pass():
    """A stack of S runs shares ``batch_tokens``: S x the rows of each run fit one run's pass."""
    assert parity_evaluate.rows_per_pass(131072, 501) == 261
    assert parity_evaluate.rows_per_pass(131072, 501, 58) == 4 and parity_evaluate.rows_per_pass(100, 51, 3) == 1

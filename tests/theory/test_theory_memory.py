"""What an idealized-model (SFA) run asks SLURM for covers what its passes take."""

import json
import subprocess
import sys

from conftest import ROOT, subprocess_env

from sparselen.interface.config import load
from sparselen.theory.memory import BASE_MB, MARGIN, pass_bytes, sfa_mem_mb

PAPER = load([ROOT / "configs/paper.yaml"])["theory"]
PARAMS = {key: PAPER[key] for key in ("task", "train", "eval", "sfa")}

PASS = """
import json, sys, torch
from sparselen.runtime.io import peak_rss_mb
from sparselen.theory.sfa import SFAModel, sfa_window
from sparselen.theory.task import planted_config, position_ids, valid_lengths
params, distribution, k, rows, n = json.loads(sys.argv[1])
pc, s = planted_config(params["task"], distribution, k), params["sfa"]
window = sfa_window(pc, s["window"], valid_lengths(pc, *params["train"]["lengths"]))
model = SFAModel(pc.vocab_size, pc.n_values, k, window, s["d_embed"], s["d_head"]).eval()
ids = position_ids(pc, n)
with torch.no_grad():
    model(torch.randint(0, pc.vocab_size, (rows, len(ids))), ids)
print(json.dumps({"peak_mb": peak_rss_mb(), "window": window}))  # its own peak, not the pytest worker's
"""


def measured_pass(distribution: str, k: int, rows: int, n: int) -> dict:
    out = subprocess.run([sys.executable, "-c", PASS, json.dumps([PARAMS, distribution, k, rows, n])],
                         capture_output=True, text=True, check=True, env=subprocess_env())
    return json.loads(out.stdout)


def test_an_evaluation_pass_takes_what_the_prediction_says():
    """configs/paper.yaml's nonlocal law at k = 3, 24 sequences of its longest evaluated length:
    the peak is the tuples' activations, within the request's margin of the prediction."""
    from sparselen.theory.cost import sfa_tuples
    from sparselen.theory.task import planted_config

    n, rows, s = 16 * PAPER["train"]["lengths"][1], 24, PAPER["sfa"]
    run = measured_pass("nonlocal", 3, rows, n)
    tuples = sfa_tuples(planted_config(PAPER["task"], "nonlocal", 3), n, run["window"])
    predicted = BASE_MB + pass_bytes(3, s["d_head"], tuples, rows, train=False) / 1e6
    assert predicted > 2 * BASE_MB  # the tuples, not the interpreter, dominate
    assert 0.8 * predicted < run["peak_mb"] < MARGIN * predicted, (run, predicted)


def test_runs_ask_for_their_own_memory():
    """From the default 1000 MB to tens of GB: the longest pass of each (law, k) decides."""
    asked = {(d, k): sfa_mem_mb(PARAMS, d, k) for d in ("local", "nonlocal") for k in (2, 3, 4)}
    assert all(mb % 1000 == 0 and mb >= 1000 for mb in asked.values())
    assert asked[("local", 4)] < asked[("nonlocal", 3)] < asked[("nonlocal", 4)]
    eval_heavier = {**PARAMS, "eval": {**PARAMS["eval"], "batch_size": 2 * PARAMS["eval"]["batch_size"]}}
    assert sfa_mem_mb(eval_heavier, "nonlocal", 4) > 1.8 * asked[("nonlocal", 4)] - BASE_MB

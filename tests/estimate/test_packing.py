"""Small trainings sharing a GPU (sparselen/estimate/packing.py, workflow/rules/common.smk): how many, the
resources their jobs ask for, and the local-gpus profile running several on one (simulated) GPU,
each in a GPU slot of its own (sparselen/runtime/gpu_slots.py)."""

import re
from datetime import datetime

import yaml
from conftest import ROOT, SMOKE, smoke_config, snakemake

from sparselen.estimate import packing
from sparselen.interface.config import load
from sparselen.runtime import simulated_cuda

PAPER = ROOT / "configs/paper.yaml"


def overlay(tmp_path, name: str, cfg: dict):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_how_many_share_a_gpu_comes_from_the_memory_model():
    """paper.yaml: the largest peak of a packed slice's jobs (PPC's generation on the scratchpad
    parity task, 5.6 GiB) fits the usable 90% of an 80 GB GPU 12 times, capped at 8; of 16 GB
    twice; the config key overrides; no packing without GPUs or with several per job."""
    cfg = load([PAPER])
    peaks = packing.gpu_peaks(cfg)
    assert set(peaks) == {"parity", "ppc", "theory"} and 5 * 2**30 < max(peaks.values()) < 6 * 2**30
    assert packing.jobs_per_gpu(cfg) == 8
    cfg["packing"]["gpu_memory_gib"] = 16
    assert packing.jobs_per_gpu(cfg) == int(0.9 * 16 * 2**30 // max(peaks.values())) == 2
    cfg["packing"]["jobs_per_gpu"] = 5
    assert packing.jobs_per_gpu(cfg) == 5
    cfg["gpus_per_job"] = 2
    assert packing.jobs_per_gpu(cfg) == 1
    assert packing.jobs_per_gpu(smoke_config()) == 1  # gpus_per_job 0


def test_a_theory_slice_without_gpt_runs_sizes_nothing():
    """config.yaml on GPUs: its theory slice runs only idealized models (on the CPU), so the
    packing is sized by parity's and PPC's peaks alone."""
    cfg = load(())
    cfg["gpus_per_job"] = 1
    assert cfg["theory"]["gpt"]["k"] == [] and cfg["packing"]["jobs_per_gpu"] == 0
    peaks = packing.gpu_peaks(cfg)
    assert set(peaks) == {"parity", "ppc"}
    assert packing.jobs_per_gpu(cfg) == min(cfg["packing"]["max_jobs_per_gpu"], int(
        0.9 * cfg["packing"]["gpu_memory_gib"] * 2**30 // max(peaks.values())))


def resources(dry_run: str) -> dict[str, dict[str, str]]:
    """rule -> its jobs' resources in a dry run."""
    out, rule = {}, None
    for line in dry_run.splitlines():
        if m := re.match(r"\s*(?:local)?rule (\w+):", line):
            rule = m.group(1)
        elif (m := re.match(r"\s*resources: (.*)", line)) and rule:
            out[rule] = dict(item.split("=", 1) for item in m.group(1).split(", "))
    return out


def test_packed_jobs_ask_for_a_slot_of_a_gpu(tmp_path):
    """With GPUs, a small model's jobs ask for one GPU slot (and the gres of one GPU, which
    Snakemake does not add up over a submission's jobs) instead of a GPU; a language job keeps
    its whole GPU; every GPU job learns how many share one. jobs_per_gpu 1 asks as before."""
    for n, packed in ((0, True), (1, False)):
        cfg = overlay(tmp_path, f"n{n}", {"gpus_per_job": 1, "packing": {"jobs_per_gpu": n}})
        res = resources(snakemake(tmp_path / f"w{n}", "-n", "all", configfile=[*SMOKE, cfg]).stdout)
        slot = {"gres": "gpu:1", "gpu_slots": "1", "jobs_per_gpu": "8"}
        for rule in ("parity_train", "parity_evaluate", "ppc_train", "ppc_evaluate", "theory_run_gpt"):
            r = res[rule]
            assert (slot.items() <= r.items() and "gpu" not in r) if packed else (r["gpu"] == "1" and not
                                                                                    slot.keys() & r.keys()), (n, rule, r)
        assert res["language_train"]["gpu"] == "1" and ("jobs_per_gpu" in res["language_train"]) == packed
        assert not {"gpu", "gres", "gpu_slots"} & res["theory_run_sfa_stack0"].keys()  # config.yaml's sfa_stack


def test_the_local_profile_runs_packed_jobs_side_by_side_on_one_gpu(tmp_path):
    """The local-gpus profile on a machine of one (simulated) GPU shared by 2 jobs: the parity
    trainings run two at a time, each holding a slot of GPU 0 (lock files name their holders),
    and two of them on different slots overlap in time."""
    locks = tmp_path / "locks"
    cfg = overlay(tmp_path, "packed", {"device": "auto", "packing": {"jobs_per_gpu": 2}})
    p = smoke_config()["parity"]
    models = [f"results/parity/K{k}/seed{s}/model.pt" for k in p["K_train"] for s in p["seeds"]]
    snakemake(tmp_path / "w", *models, "--profile", str(ROOT / "workflow/profiles/local-gpus"), "--resources",
              "gpu=1", "--cores", "2", configfile=[*SMOKE, cfg],
              env={simulated_cuda.ENV: "1", "SPARSELEN_GPU_LOCKS": str(locks)})
    assert sorted(f.name for f in locks.iterdir()) == ["gpu-0-slot0.lock", "gpu-0-slot1.lock"]
    for f in locks.iterdir():
        assert re.fullmatch(r"\d+ parity_train K_train=\d seed=\d\n", f.read_text()), f.read_text()
    spans = {}
    for log in (tmp_path / "w/logs/parity/train").glob("*.log"):
        text = log.read_text()
        slot = re.search(r"using GPU 0 \(CUDA id 0\), slot (\d) of 2", text)
        assert slot, text[-2000:]
        stamps = [datetime.strptime(t, "%Y-%m-%d %H:%M:%S,%f") for t in  # from the claim to the last step
                  re.findall(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+) INFO", text)]
        spans[log.stem] = (int(slot.group(1)), stamps[0], stamps[-1])
    assert len(spans) == len(models) and {s for s, _, _ in spans.values()} == {0, 1}
    assert any(a[0] != b[0] and a[1] < b[2] and b[1] < a[2] for a in spans.values() for b in spans.values()), spans

"""The estimate's closing line: what to run next, from where the estimate stands. A campaign
goes pilot (one GPU, the config's shapes) -> the estimate with the pilot's profile -> the SLURM
profile; a CPU run goes straight to ``make run``."""

from __future__ import annotations

from pathlib import Path

from sparselen.estimate.display import hm

SLURM = "snakemake --profile workflow/profiles/slurm"


def next_step(configfiles, gpu: str | None, config: dict, result: dict) -> str:
    """``next: ...`` for the estimate of ``config`` (``configfiles`` as given) with the GPU
    argument ``gpu`` (a name, a profile file or None) and its ``tables.report`` ``result``."""
    files = " ".join(map(str, configfiles))
    opt = f" --configfile {files}" if files else ""
    if result["errors"]:
        return "next: fix what the ERROR lines say, then run this estimate again"
    if result["local"]:
        if config.get("gpus_per_job", 0) > 0:
            return (f"next: sparselen estimate{opt} --gpu GPU (this config's model jobs ask for GPUs: name the "
                    f"cluster's, e.g. h100)")
        (cores, hours), = result["clock"]["wall_h"].items()
        run = f'make run SNAKEMAKE_ARGS="{opt.strip()}"' if opt else "make run"
        return f"next: {run} (about {hm(hours)} on this machine's {cores} cores)"
    if gpu is not None and Path(gpu).exists():
        return f"next: {SLURM}{opt} (docs/cluster.md), with this estimate's profile {gpu} measured on the cluster's GPU"
    return (f"next: on one GPU of the cluster, sparselen pilot{opt} (writes pilot_profile.json; docs/gpu.md); then "
            f"sparselen estimate{opt} --gpu pilot_profile.json; then {SLURM}{opt} (docs/cluster.md)")

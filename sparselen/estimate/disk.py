"""A campaign's disk for its trained models: model files and checkpoints, from each training's
parameter count (``Work.parameters``, ``sparselen.nn.memory.parameters``).

Per run, in bytes per parameter: while it trains, its checkpoint holds fp32 weights and
AdamW's two moments (``TRAINING``); from its last step on, the checkpoint holds its weights
alone (``sparselen.training.train``: nothing trains after it) and the model file its fp32
weights (``FINISHED``, both files). The workflow removes the checkpoints once it has recorded
every job (``sparselen.training.resumable``), so at the end of a campaign, before that, every
run holds ``FINISHED``; the peak adds, for the runs training at once, what a training run holds
beyond a finished one. Evaluation outputs, logs and the language corpus are not counted.
"""

from __future__ import annotations

MODEL_FILE = 4  # fp32 weights
TRAINING = 12  # a training run's checkpoint: fp32 weights and AdamW's two fp32 moments
FINISHED = MODEL_FILE + 4  # the model file and the checkpoint of its last step (weights only)


def disk_table(df, gpus: int) -> "pd.DataFrame":
    """Per slice with trainings (rows of ``tables.estimate``'s ``df`` with ``parameters``): runs,
    parameters of its largest run, GiB of its model files, of its finished runs (model files
    and checkpoints), and its peak with its ``gpus`` largest training jobs in flight; a last
    row ``all``, whose peak has the ``gpus`` largest of all slices' in flight."""
    import pandas as pd

    from sparselen.nn.memory import GiB

    train = df[df["parameters"] > 0].assign(run_parameters=lambda d: d["runs"] * d["parameters"])
    rows = []
    for slice_, g in [*train.groupby("slice", sort=False), ("all", train)]:
        params = g["run_parameters"]  # per job: the parameters of all its runs
        in_flight = params.nlargest(gpus).sum() * (TRAINING - FINISHED)
        rows.append({"slice": slice_, "runs": int(g["runs"].sum()), "parameters": int(g["parameters"].max()),
                     "model_files_gib": MODEL_FILE * params.sum() / GiB,
                     "finished_gib": FINISHED * params.sum() / GiB,
                     "peak_gib": (FINISHED * params.sum() + in_flight) / GiB})
    return pd.DataFrame(rows)

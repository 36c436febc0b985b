"""What a config costs before it is launched: every job's compute from FLOP counts and a device
profile (``sparselen estimate``).

``dag`` reads the workflow's jobs and SLURM submissions from Snakemake's own DAG, ``plan``
prices each with its slice's cost function (``sparselen/<slice>/cost.py``), ``flops`` counts
the work, ``profiles`` turns it into seconds on a named GPU (datasheet bf16 peak x an assumed
utilization) or a measured profile (``calibrate``; benchmarks/calibrate.py), and ``tables``
prints hours per slice and per job type, warns where a SLURM submission would exceed its time
limit (with the resubmissions resuming from checkpoints would take) and sets the prediction
against a finished run's benchmark files.
"""

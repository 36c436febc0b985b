"""What a config costs before it is launched: every job's compute from FLOP counts and a device
profile, and its peak memory from its shapes (``sparselen estimate``).

``dag`` reads the workflow's jobs and SLURM submissions from Snakemake's own DAG, ``plan``
prices each with its slice's cost function (``sparselen/<slice>/cost.py``, built from
``sparselen.nn.flops`` and ``sparselen.nn.memory``), ``profiles`` turns the work into seconds on
a named GPU (datasheet bf16 peak x an assumed utilization, and its memory) or a measured profile
(``calibrate``; benchmarks/calibrate.py; ``pilot``, ``sparselen pilot``; ``gpu_check``, ``sparselen
gpu-check``, whose blocks ``gpu_blocks`` runs, each in a process of its own), ``tracker`` measures
peak tensor memory on the CPU (benchmarks/memory.py), and ``tables`` prints hours and memory per
slice and per job type, GPU-hours and submissions with and without packing (small models sharing
a GPU: ``packing``), the assumptions behind them, warns where a SLURM submission would exceed its
time limit (with the resubmissions resuming from checkpoints would take), names the jobs that
cannot succeed (over their device's memory, never finishing, or starting over after a time-out)
and sets the prediction against a finished run's benchmark files. ``stacks`` prices a stack
rule's job (a slice's ``stack``: a cell's seeds trained as one model) as one job, and
``stack_size`` finds the largest stack that fits a GPU. ``limits`` gives a stack job its SLURM
time limit from its prediction when the workflow is read, ``disk`` the trained models' model
files and checkpoints. ``timeline`` turns the jobs into
``schedule``'s tasks (SLURM submissions, or a local run's jobs) for the critical chain and a
wall clock that follows the DAG; ``display`` prints durations as h:mm without empty columns;
``next_step`` writes the closing line; ``rounds`` prices a config whose slices train their seeds in
rounds: each round's hours, the chance it runs from the claims' power, the expected and the most.

The estimate layer. May import: ``report``, ``jobs``, the four slices (their ``cost.py``) and
every layer below them; never ``calibration`` or ``cli``.
"""
